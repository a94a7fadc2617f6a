"""The compiled `simulate` (numba) against the NumPy reference, to the last bit: over a population, as the
GA's fitness, and the GA run with it."""

import numpy as np
import pytest

from jaxsched import simulate
from jaxsched.ga import fitness_of, ga
from jaxsched.generate import cloudsim, random_dag
from jaxsched.numba import population_fitness as population_fitness_numba
from jaxsched.numba import simulate_population as simulate_population_numba
from tests.jaxsched.problems import random_problem, varied_problems


def test_simulate_population_equals_numpy_simulate():
    rng = np.random.default_rng(0)
    for problem in varied_problems():
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
    for field in ("proc", "start", "finish"):
        np.testing.assert_array_equal(getattr(schedule, field), getattr(expected, field))


def test_bad_input_is_named():
    problem = random_problem(1)
    proc = np.zeros((2, problem.num_tasks), int)
    with pytest.raises(ValueError, match="objective"):
        population_fitness_numba(problem, proc, np.zeros(proc.shape), "energy")
    with pytest.raises(ValueError, match="out of range"):
        population_fitness_numba(problem, proc + problem.num_procs, np.zeros(proc.shape))
    with pytest.raises(ValueError, match="must have shape"):
        simulate_population_numba(problem, proc[:, :1], np.zeros((2, 1)))
