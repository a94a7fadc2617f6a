import numpy as np
import pytest

from jaxsched import heft, validate
from jaxsched.generate import chains, cloudsim, fft, fork_join, gaussian_elimination, in_tree, out_tree, random_dag


@pytest.mark.parametrize("m", [2, 3, 5, 8])
def test_gaussian_elimination_shape(m):
    problem = gaussian_elimination(m, 3, seed=m)
    assert problem.num_tasks == (m * m + m - 2) // 2
    assert problem.levels.max() + 1 == 2 * m - 2  # pivot and update levels alternate
    assert np.sum(~np.isin(np.arange(problem.num_tasks), problem.dst)) == 1  # one entry task


@pytest.mark.parametrize("points", [2, 4, 8, 16])
def test_fft_shape(points):
    problem = fft(points, 2, seed=0)
    stages = int(np.log2(points))
    assert problem.num_tasks == 2 * points - 1 + points * stages
    assert problem.levels.max() + 1 == stages + 1 + stages  # call tree depth, then butterflies


def test_fork_join_shape():
    problem = fork_join(width=4, stages=3, num_procs=2, seed=0)
    assert problem.num_tasks == 1 + 3 * 5
    assert np.bincount(problem.dst).max() == 4  # each join waits for the whole fork


def _reachable_from(problem, root: int, forward: bool) -> set[int]:
    """Tasks reached from `root` along edges (forward) or against them, by a plain walk."""
    step = {}
    for a, b in zip(problem.src.tolist(), problem.dst.tolist()):
        if not forward:
            a, b = b, a
        step.setdefault(a, []).append(b)
    seen, stack = {root}, [root]
    while stack:
        for nxt in step.get(stack.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


@pytest.mark.parametrize("branching", [None, 1, 2, 3])
@pytest.mark.parametrize("num_tasks", [1, 2, 15, 40])
def test_trees_have_tree_shapes(num_tasks, branching):
    out, into = out_tree(num_tasks, 3, branching=branching, seed=4), in_tree(num_tasks, 3, branching=branching, seed=4)
    for problem, forward in ((out, True), (into, False)):
        assert problem.num_tasks == num_tasks and problem.num_edges == num_tasks - 1
        # one edge into each non-root task (out-tree) / out of it (in-tree): a tree spanning every task
        head = problem.dst if forward else problem.src
        np.testing.assert_array_equal(np.bincount(head, minlength=num_tasks), [0] + [1] * (num_tasks - 1))
        assert _reachable_from(problem, 0, forward) == set(range(num_tasks))
        tail = problem.src if forward else problem.dst
        if branching is not None:
            assert np.bincount(tail, minlength=1).max() <= branching
    if branching == 2 and num_tasks == 15:  # the complete binary tree of 4 levels
        assert out.levels.max() == 3 and np.sum(~np.isin(np.arange(15), out.src)) == 8
        assert into.levels.max() == 3 and np.sum(~np.isin(np.arange(15), into.dst)) == 8
    np.testing.assert_array_equal(out.src, into.dst)  # the same tree, reversed


def test_random_trees_are_seeded():
    a, b, c = (out_tree(60, 2, branching=None, seed=s) for s in (1, 1, 2))
    np.testing.assert_array_equal(a.src, b.src)
    np.testing.assert_array_equal(a.comp, b.comp)
    assert not np.array_equal(a.src, c.src)


@pytest.mark.parametrize("num_chains, length", [(1, 1), (1, 5), (4, 1), (3, 7)])
def test_chains_shape(num_chains, length):
    problem = chains(num_chains, length, 2, seed=0)
    assert problem.num_tasks == num_chains * length and problem.num_edges == num_chains * (length - 1)
    # at most one predecessor and one successor each; one entry per chain; depth length
    assert np.bincount(problem.src, minlength=1).max() <= 1 and np.bincount(problem.dst, minlength=1).max() <= 1
    assert np.sum(~np.isin(np.arange(problem.num_tasks), problem.dst)) == num_chains
    assert problem.levels.max() + 1 == length
    for c in range(num_chains):
        assert _reachable_from(problem, c * length, True) == set(range(c * length, (c + 1) * length))


def test_random_dag_follows_its_parameters():
    v, alpha, beta, ccr = 2000, 1.0, 0.5, 2.0
    problem = random_dag(v, 4, alpha=alpha, out_degree=3, ccr=ccr, beta=beta, seed=0)
    assert problem.num_tasks == v
    assert problem.levels.max() + 1 == round(np.sqrt(v) / alpha)
    spread = problem.comp.max(axis=1) / problem.comp.min(axis=1)
    assert spread.max() <= (1 + beta / 2) / (1 - beta / 2) + 1e-9
    assert problem.data.mean() / problem.comp.mean() == pytest.approx(ccr, rel=0.1)
    assert 2.0 < problem.num_edges / v < 3.5  # mean out-degree about 3, minus duplicates and exit tasks


def test_generators_are_seeded():
    a, b, c = (random_dag(60, 3, seed=s) for s in (7, 7, 8))
    np.testing.assert_array_equal(a.comp, b.comp)
    np.testing.assert_array_equal(a.src, b.src)
    assert not np.array_equal(a.comp, c.comp)


def test_cloudsim_has_the_paper_features():
    problem = cloudsim(100, 8, seed=0)
    for name in ("task_arrival", "task_priority", "task_memory", "proc_cores", "proc_frequency", "proc_memory"):
        assert getattr(problem, name) is not None
    assert problem.arrival.min() == 0 and set(problem.task_priority) <= {1, 2, 3, 4, 5}
    fastest = np.argmax(problem.proc_frequency * problem.proc_cores)
    slowest = np.argmin(problem.proc_frequency * problem.proc_cores)
    no_penalty = (problem.task_memory <= problem.proc_memory[[fastest, slowest]].min())
    assert np.all(problem.comp[no_penalty, fastest] <= problem.comp[no_penalty, slowest])
    validate(problem, heft(problem))


@pytest.mark.parametrize("integer", [False, True])
def test_integer_costs(integer):
    problem = random_dag(50, 3, integer=integer, seed=1)
    assert np.all(problem.comp == np.round(problem.comp)) == integer


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: gaussian_elimination(1, 2), "matrix_size"),
        (lambda: fft(6, 2), "power of two"),
        (lambda: fork_join(0, 1, 2), "width must be an integer >= 1"),
        (lambda: random_dag(10, 2, beta=3.0), "beta"),
        (lambda: random_dag(0, 2), "num_tasks"),
        (lambda: random_dag(10, 3, ccr=float("nan")), "ccr must be finite"),  # was OverflowError
        (lambda: random_dag(10, 3, alpha=float("nan")), "alpha must be finite"),
        (lambda: random_dag(10, 3, mean_comp=float("inf")), "mean_comp must be finite"),
        (lambda: random_dag(10.5, 3), "num_tasks must be an integer"),
        (lambda: random_dag(10, True), "num_procs must be an integer"),
        (lambda: cloudsim(10, 3, out_degree=float("nan")), "out_degree must be finite"),
        (lambda: cloudsim(10, 3, arrival_rate=0.0), "arrival_rate must be positive"),
        (lambda: fft(4.0, 2), "points must be an integer"),
        (lambda: fork_join(2, 2, 0), "num_procs must be an integer >= 1"),
        (lambda: gaussian_elimination(4, 2, beta=float("nan")), "beta must be finite"),
        (lambda: out_tree(0, 2), "num_tasks must be an integer >= 1"),
        (lambda: in_tree(5, 2, branching=0), "branching must be an integer >= 1"),
        (lambda: out_tree(5, 0), "num_procs must be an integer >= 1"),
        (lambda: chains(2, 0, 2), "length must be an integer >= 1"),
        (lambda: chains(0, 3, 2), "num_chains must be an integer >= 1"),
    ],
)
def test_bad_generator_arguments(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_wfcommons_recipes():
    pytest.importorskip("wfcommons")  # extra `workflows`
    from jaxsched.workflows import wfcommons_problem

    problem = wfcommons_problem("epigenomics", 100, 4, seed=0)
    assert 90 <= problem.num_tasks <= 110 and problem.num_edges > 0
    again = wfcommons_problem("epigenomics", 100, 4, seed=0)
    np.testing.assert_array_equal(problem.comp, again.comp)
    validate(problem, heft(problem))
    with pytest.raises(ValueError, match="unknown recipe"):
        wfcommons_problem("rnaseq", 100, 4)
    with pytest.raises(ValueError, match="cannot build recipe 'montage' with 10 tasks"):
        wfcommons_problem("montage", 10, 4)

