"""The compiled CPU twins (numba) against the NumPy references, to the last bit: HEFT on one problem and
on a padded batch (also against the JAX `heft_batch`), `simulate` over a population, the GA's fitness."""

import numpy as np
import pytest

import jaxsched
from jaxsched import (
    Problem,
    heft,
    heft_batch,
    heft_batch_numba,
    heft_numba,
    pad_problems,
    population_fitness_numba,
    simulate,
    simulate_population_numba,
)
from jaxsched.ga import fitness_of, ga
from jaxsched.generate import cloudsim, gaussian_elimination, random_dag
from tests.jaxsched.problems import random_problem, topcuoglu_example
from tests.jaxsched.test_jax_simulate import SHAPE


def _assert_same(schedule, proc, start, finish):
    np.testing.assert_array_equal(proc, schedule.proc)
    np.testing.assert_array_equal(start, schedule.start)
    np.testing.assert_array_equal(finish, schedule.finish)


def _crowded_problem():
    """40 independent tasks released at scattered times, one processor far faster than the other seven:
    every task goes there (rows grow past their initial width) and the early ones fill idle gaps."""
    rng = np.random.default_rng(0)
    comp = np.full((40, 8), 100.0)
    comp[:, 0] = rng.integers(1, 5, 40)
    empty = np.zeros(0, int)
    return Problem(comp, empty, empty, np.zeros(0), task_arrival=rng.integers(0, 60, 40).astype(float))


def _problems():
    yield topcuoglu_example()
    yield _crowded_problem()
    for seed in range(120):
        yield random_problem(seed, bandwidth=seed % 2 == 0, arrival=seed % 3 == 0)
    for num_tasks, num_procs in ((30, 3), (100, 16), (300, 40)):
        for ccr in (0.1, 1.0, 10.0):
            for beta in (0.1, 1.0):
                yield random_dag(num_tasks, num_procs, ccr=ccr, beta=beta, seed=num_tasks + int(10 * ccr))
    yield random_dag(200, 8, integer=True, seed=1)
    yield cloudsim(60, 6, seed=2)
    yield gaussian_elimination(8, 4, ccr=5.0, seed=3)


def test_published_example():
    """Topcuoglu, Hariri and Wu (2002), Fig. 3(a): makespan 80."""
    schedule = heft_numba(topcuoglu_example())
    np.testing.assert_array_equal(schedule.proc, [2, 0, 2, 1, 2, 1, 2, 0, 1, 1])
    np.testing.assert_array_equal(schedule.finish, [9, 40, 28, 26, 38, 42, 49, 62, 68, 80])


def test_heft_numba_equals_numpy_heft():
    for problem in _problems():
        reference = heft(problem)
        _assert_same(reference, *(getattr(heft_numba(problem), f) for f in ("proc", "start", "finish")))


def test_heft_batch_numba_equals_numpy_heft_and_jax_heft_batch():
    problems = [random_problem(s, bandwidth=s % 4 == 0, arrival=s % 3 == 0) for s in range(64)]
    out = heft_batch_numba(pad_problems(problems, SHAPE, dtype=np.float64))
    jax_out = heft_batch(pad_problems(problems, SHAPE))  # float32: exact on integer times
    assert out.proc.shape == (64, SHAPE.num_tasks)
    for i, problem in enumerate(problems):
        t = problem.num_tasks
        _assert_same(heft(problem), out.proc[i, :t], out.start[i, :t], out.finish[i, :t])
        if problem.bandwidth is None:  # integer times
            np.testing.assert_array_equal(out.proc[i, :t], np.asarray(jax_out.proc[i, :t]))
            np.testing.assert_array_equal(out.start[i, :t], np.asarray(jax_out.start[i, :t]))
        assert not out.start[i, t:].any()


def test_heft_batch_numba_on_topcuoglu_dags_equals_numpy_and_jax():
    """Mixed sizes, CCR and heterogeneity in one padded batch, with the published example; integer costs,
    so the float32 JAX `heft_batch` is exact too."""
    settings = ((20, 4, 0.1, 0.1), (60, 8, 5.0, 1.0), (100, 16, 1.0, 0.5), (80, 3, 10.0, 2.0))
    problems = [topcuoglu_example()] + [
        random_dag(n, p, ccr=ccr, beta=beta, integer=True, seed=n) for n, p, ccr, beta in settings
    ]
    shape = jaxsched.Shape.of(problems)
    out = heft_batch_numba(pad_problems(problems, shape, dtype=np.float64))
    jax_out = heft_batch(pad_problems(problems, shape))
    for i, problem in enumerate(problems):
        t = problem.num_tasks
        _assert_same(heft(problem), out.proc[i, :t], out.start[i, :t], out.finish[i, :t])
        _assert_same(heft(problem), np.asarray(jax_out.proc[i, :t]), np.asarray(jax_out.start[i, :t]),
                     np.asarray(jax_out.finish[i, :t]))


def test_simulate_population_equals_numpy_simulate():
    rng = np.random.default_rng(0)
    for problem in _problems():
        proc = rng.integers(0, problem.num_procs, (3, problem.num_tasks))
        priority = rng.integers(0, 4, proc.shape).astype(float)  # ties exercise the tie-breaking
        start, finish = simulate_population_numba(problem, proc, priority)
        for k in range(3):
            reference = simulate(problem, proc[k], priority[k])
            np.testing.assert_array_equal(start[k], reference.start)
            np.testing.assert_array_equal(finish[k], reference.finish)


@pytest.mark.parametrize("objective", ["waiting", "makespan"])
def test_population_fitness_equals_the_numpy_ga_evaluation(objective):
    problem = cloudsim(120, 12, seed=5)  # release times: waiting differs from start
    assert problem.arrival.any()
    rng = np.random.default_rng(1)
    proc = rng.integers(0, 12, (16, 120))
    priority = rng.random((16, 120))
    expected = [fitness_of(problem, simulate(problem, p, q), objective) for p, q in zip(proc, priority)]
    np.testing.assert_array_equal(population_fitness_numba(problem, proc, priority, objective), expected)


def test_numba_ga_equals_numpy_ga():
    problem = random_dag(30, 4, seed=7)
    expected = ga(problem, population=10, generations=4, seed=2)
    schedule = ga(problem, population=10, generations=4, seed=2, backend="numba")
    _assert_same(expected, schedule.proc, schedule.start, schedule.finish)


def test_bad_input_is_named():
    problem = random_problem(1)
    with pytest.raises(ValueError, match="needs a batch"):
        heft_batch_numba(jaxsched.pad_problem(problem))
    with pytest.raises(ValueError, match="expected a jaxsched.Problem"):
        heft_numba("dag")
    proc = np.zeros((2, problem.num_tasks), int)
    with pytest.raises(ValueError, match="objective"):
        population_fitness_numba(problem, proc, np.zeros(proc.shape), "energy")
    with pytest.raises(ValueError, match="out of range"):
        population_fitness_numba(problem, proc + problem.num_procs, np.zeros(proc.shape))
    with pytest.raises(ValueError, match="must have shape"):
        simulate_population_numba(problem, proc[:, :1], np.zeros((2, 1)))
