"""The compiled glue of batch planning against the NumPy operations it replaces (a stable argsort, `mean`, the
per-problem priority order, per-problem padding), and the batched schedulers on edge cases against the NumPy
reference: one task, no edges, disconnected DAGs, ties, zero costs, mixed sizes in one batch."""

import numpy as np
import pytest

from jaxsched import Problem, Shape
from jaxsched.batch import fitted_graph, pad_costs
from jaxsched.batch_graph import BatchGraph, padded
from jaxsched.jax_listsched import schedule_batch
from jaxsched.listsched import schedule
from jaxsched.numba_batch_graph import mean_costs
from jaxsched.order import priority_order
from tests.jaxsched.problems import random_problem


def test_batch_graph_holds_each_problems_arrays_and_edge_groups():
    """Mixed sizes and processor counts: padded costs, each problem's `in_edges` / `out_edges` order, its
    topological order, and the sizes the padding checks, against each problem's own arrays."""
    problems = [random_problem(seed, max_tasks=12, max_procs=4) for seed in range(25)]
    shape = Shape.of(problems)
    graph = BatchGraph.of(problems, shape.num_tasks, shape.num_procs)
    for b, problem in enumerate(problems):
        (t, p), base = problem.comp.shape, b * shape.num_tasks
        expected = np.zeros(shape[:2])
        expected[:t, :p] = problem.comp
        np.testing.assert_array_equal(graph.comp[b], expected)
        np.testing.assert_array_equal(graph.topo_order[b, :t], problem.topological_order)
        np.testing.assert_array_equal(graph.topo_order[b, t:], np.arange(t, shape.num_tasks))
        np.testing.assert_array_equal(graph.position[b, graph.topo_order[b]], np.arange(shape.num_tasks))
        for ptr, other, data, (own_ptr, own_order), own_other in (
            (graph.in_ptr, graph.in_src, graph.in_data, problem.in_edges, problem.src),
            (graph.out_ptr, graph.out_dst, graph.out_data, problem.out_edges, problem.dst),
        ):
            rows = ptr[base : base + shape.num_tasks + 1]
            np.testing.assert_array_equal(rows[: t + 1] - rows[0], own_ptr)
            assert (rows[t:] == rows[t]).all()  # padded tasks have no edges
            np.testing.assert_array_equal(other[rows[0] : rows[t]] - base, own_other[own_order])
            np.testing.assert_array_equal(data[rows[0] : rows[t]], problem.data[own_order])
        positive = problem.data[problem.data > 0]
        np.testing.assert_array_equal(graph.sizes[b], [
            problem.max_in_degree, problem.comp.max(axis=1).sum(), problem.data.sum(),
            problem.comp[problem.comp > 0].min(initial=np.inf), positive.min(initial=np.inf),
        ])


@pytest.mark.parametrize("procs", [1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 64, 128, 129, 200])
def test_mean_costs_equal_numpys_mean_to_the_bit(procs):
    """Costs spread over six orders of magnitude, so that the summation order shows in the last bits."""
    rng = np.random.default_rng(procs)
    comp = rng.random((3, 5, procs)) * 10.0 ** rng.integers(-3, 4, (3, 5, procs))
    tasks, used = np.array([5, 2, 0]), np.array([procs, max(1, procs - 1), procs])
    got = mean_costs(comp, tasks, used).reshape(3, 5)
    for b in range(3):
        np.testing.assert_array_equal(got[b, : tasks[b]], comp[b, : tasks[b], : used[b]].mean(axis=1))
        assert (got[b, tasks[b] :] == 0).all()


def _assert_positions_of_priority_order(problems, priority, position):
    """Each problem's positions equal the inverse of the reference's priority order."""
    for b, problem in enumerate(problems):
        t = problem.num_tasks
        expected = np.empty(t, np.int64)
        expected[priority_order(problem, priority[b, :t])] = np.arange(t)
        np.testing.assert_array_equal(position[b, :t], expected)


def test_priority_positions_follow_the_per_problem_order_with_ties():
    """Integer priorities in a small range: many ties, broken by topological position."""
    problems = [random_problem(seed, max_tasks=12) for seed in range(20)]
    shape = Shape.of(problems)
    graph = BatchGraph.of(problems, shape.num_tasks, shape.num_procs)
    rng = np.random.default_rng(1)
    priority = rng.integers(0, 3, graph.task_mask.shape).astype(float)
    position = graph.priority_position(priority)
    _assert_positions_of_priority_order(problems, priority, position)
    for b, problem in enumerate(problems):  # padding keeps its own positions
        np.testing.assert_array_equal(position[b, problem.num_tasks:], np.arange(problem.num_tasks, shape.num_tasks))


def test_priority_positions_of_reversed_priorities():
    """Priorities rising along the topological order (no edges: index order), ties in pairs: far from sorted,
    past the insertion sort's budget, so the merge sort orders them."""
    none = np.zeros(0, np.int64)
    problems = [Problem(np.ones((64, 2)), none, none, np.zeros(0)), Problem(np.ones((40, 2)), none, none, np.zeros(0))]
    graph = BatchGraph.of(problems, 64, 2)
    priority = np.tile(np.arange(64) // 2, (2, 1)).astype(float)
    position = graph.priority_position(priority)
    _assert_positions_of_priority_order(problems, priority, position)


def test_padded_scatters_mixed_shapes_like_a_loop():
    rng = np.random.default_rng(2)
    arrays = [rng.random((int(rng.integers(1, 6)), int(rng.integers(1, 4)))) for _ in range(9)]
    got = padded(arrays, (5, 3), fill=-1.0)
    for slot, array in zip(got, arrays):
        expected = np.full((5, 3), -1.0)
        expected[: array.shape[0], : array.shape[1]] = array
        np.testing.assert_array_equal(slot, expected)
    rows = [np.arange(n) for n in (3, 1, 4)]
    expected = [[0, 1, 2, 9], [0, 9, 9, 9], [0, 1, 2, 3]]
    np.testing.assert_array_equal(padded(rows, (4,), fill=9, dtype=np.int64), expected)


def _edge_cases() -> list[Problem]:
    none = np.zeros(0, np.int64)
    return [
        Problem(np.array([[3.0, 5.0]]), none, none, np.zeros(0)),  # one task
        Problem(np.array([[4.0, 2.0, 7.0], [1.0, 1.0, 1.0], [5.0, 5.0, 5.0], [2.0, 6.0, 3.0]]), none, none,
                np.zeros(0)),  # no edges
        Problem(np.full((6, 2), 2.0), [0, 1, 3], [1, 2, 4], [1.0, 1.0, 1.0]),  # two chains and a lone task, ties
        Problem(np.full((4, 3), 3.0), [0, 0, 1, 2], [1, 2, 3, 3], [2.0, 2.0, 2.0, 2.0]),  # a diamond of equal costs
        Problem(np.array([[0.0, 0.0], [4.0, 1.0], [0.0, 0.0]]), [0, 1], [1, 2], [3.0, 0.0]),  # zero costs
        Problem(np.array([[2.0], [3.0], [1.0]]), [0], [2], [5.0], task_arrival=[0.0, 4.0, 1.0]),  # one processor
    ] + [random_problem(seed, max_tasks=9, max_procs=3, arrival=seed % 2 == 0) for seed in range(4)]


@pytest.mark.parametrize("name", ["HEFT", "CPOP", "PEFT", "MinMin", pytest.param("MCT", marks=pytest.mark.slow)])
def test_edge_cases_equal_the_reference(name):
    problems = _edge_cases()
    got = schedule_batch(problems, name)  # integer costs: exact in float32
    for b, problem in enumerate(problems):
        reference, t = schedule(problem, name), problem.num_tasks
        np.testing.assert_array_equal(np.asarray(got.proc[b, :t]), reference.proc, err_msg=f"{name} #{b}")
        np.testing.assert_array_equal(np.asarray(got.start[b, :t]), reference.start, err_msg=f"{name} #{b}")
        np.testing.assert_array_equal(np.asarray(got.finish[b, :t]), reference.finish, err_msg=f"{name} #{b}")


def test_a_graph_built_for_other_problems_or_a_smaller_shape_is_refused():
    problems = _edge_cases()
    shape = Shape.of(problems)
    graph = BatchGraph.of(problems, shape.num_tasks, shape.num_procs)
    with pytest.raises(ValueError, match="pad_costs: the graph holds 10 problems"):
        pad_costs(problems[:3], shape, graph=graph)
    with pytest.raises(ValueError, match="problem 3 has 4 edges, more than the padded capacity 3"):
        fitted_graph(problems, shape._replace(num_edges=3), graph, "test")
    with pytest.raises(ValueError, match="incoming edges of a task, more than the padded capacity 1"):
        fitted_graph(problems, shape._replace(max_in_degree=1), graph, "test")
