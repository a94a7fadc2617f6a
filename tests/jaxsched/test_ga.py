import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsched import pad_problem, simulate, validate
from jaxsched.ga import Draws, GAConfig, breed, evolve_padded, fitness_of, ga, population_fitness
from jaxsched.generate import random_dag

ga_module = importlib.import_module("jaxsched.ga")  # the package attribute `ga` is the function
PROBLEM = random_dag(24, 3, integer=True, seed=4)
CONFIG = GAConfig(population=12, generations=5)  # shared, so the scanned GA compiles once


def test_breed_by_hand():
    """Population of 4, 3 genes, one elite, two children; every draw fixed."""
    proc = np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3]])
    priority = np.array([[0.0, 0.0, 0.0], [0.1, 0.1, 0.1], [0.2, 0.2, 0.2], [0.3, 0.3, 0.3]])
    fitness = np.array([3.0, 1.0, 2.0, 4.0])  # elite: chromosome 1
    draws = Draws(
        contestants=np.array([[[0, 2], [3, 0]], [[1, 3], [2, 3]]]),  # winners: 2, 0 and 1, 2
        crossover=np.array([True, False]),
        cut=np.array([1, 2]),
        mutate_proc=np.array([[False, False, True], [False, False, False]]),
        new_proc=np.array([[9, 9, 9], [9, 9, 9]]),
        mutate_priority=np.array([[False, False, False], [True, False, False]]),
        new_priority=np.array([[0.5, 0.5, 0.5], [0.7, 0.7, 0.7]]),
    )
    expected_proc = [[1, 1, 1], [2, 0, 9], [1, 1, 1]]
    expected_priority = [[0.1, 0.1, 0.1], [0.2, 0.0, 0.0], [0.7, 0.1, 0.1]]
    for xp in (np, jnp):
        new_proc, new_priority = breed(xp, *(xp.asarray(a) for a in (proc, priority, fitness)),
                                       jax.tree.map(xp.asarray, draws), elite=1)
        np.testing.assert_array_equal(np.asarray(new_proc), expected_proc)
        np.testing.assert_allclose(np.asarray(new_priority), expected_priority)


def test_jax_fitness_equals_numpy_fitness():
    rng = np.random.default_rng(0)
    proc = rng.integers(0, PROBLEM.num_procs, (16, PROBLEM.num_tasks))
    priority = rng.random((16, PROBLEM.num_tasks)).astype(np.float32)
    padded = jax.tree.map(jnp.asarray, pad_problem(PROBLEM))
    for objective in ("waiting", "makespan"):
        expected = [fitness_of(PROBLEM, simulate(PROBLEM, p, q), objective) for p, q in zip(proc, priority)]
        fitness, overflow = population_fitness(padded, jnp.asarray(proc), jnp.asarray(priority), objective)
        assert not bool(overflow)
        np.testing.assert_allclose(np.asarray(fitness), expected, rtol=1e-6)


def test_elitism_never_loses_the_best():
    padded = jax.tree.map(jnp.asarray, pad_problem(PROBLEM))
    state, history = evolve_padded(padded, jax.random.key(0), CONFIG)
    history = np.asarray(history)
    assert history.shape == (6,)
    assert np.all(np.diff(history) <= 0)
    assert history[-1] == pytest.approx(float(state.fitness.min()))


def test_numpy_ga_improves_and_validates():
    first = ga(PROBLEM, population=12, generations=0, seed=1)
    later = ga(PROBLEM, population=12, generations=8, seed=1)
    validate(PROBLEM, later)
    waiting = [fitness_of(PROBLEM, s, "waiting") for s in (first, later)]
    assert waiting[1] <= waiting[0]


def test_jax_ga_loop_equals_the_scanned_ga(monkeypatch):
    """The Python-loop driver (capacity sized from the population, retried on overflow) must find
    exactly what the scanned GA at full capacity finds; the first guess (8 slots for 24 tasks on 3
    processors) is too small for a random population, so the retry path runs."""
    padded = jax.tree.map(jnp.asarray, pad_problem(PROBLEM))
    state, _ = evolve_padded(padded, jax.random.key(3), CONFIG)
    best = int(jnp.argmin(state.fitness))
    expected = simulate(PROBLEM, np.asarray(state.proc[best]), np.asarray(state.priority[best], np.float64))
    monkeypatch.setattr(ga_module, "_initial_capacity", lambda problem: 8)  # 24 tasks on 3 processors
    schedule = ga(PROBLEM, population=12, generations=5, seed=3, backend="jax")
    validate(PROBLEM, schedule)
    np.testing.assert_array_equal(schedule.start, expected.start)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(population=1), "population"),
        (dict(elite=100), "elite"),
        (dict(objective="energy"), "objective"),
        (dict(mutation_rate=2.0), "mutation_rate"),
        (dict(backend="torch"), "backend"),
        (dict(population=10.5), "population must be an integer"),
        (dict(elite=True), "elite must be an integer"),
        (dict(crossover_rate=float("nan")), "crossover_rate"),
        (dict(seed=-1), "seed must be an integer >= 0"),
        (dict(shape=(24, 3, 64, 8)), "needs backend='jax'"),
    ],
)
def test_bad_ga_options(options, message):
    with pytest.raises(ValueError, match=message):
        ga(PROBLEM, **{"generations": 1, **options})


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_the_documented_minimum_population_of_two_works(backend):
    """population=2 used to fail against the default elite=2; the default elite is now min(2, N - 1)."""
    assert GAConfig(population=2).elite == 1 and GAConfig().elite == 2
    problem = random_dag(6, 2, integer=True, seed=0)
    validate(problem, ga(problem, population=2, generations=2, seed=0, backend=backend))


def test_a_population_batch_fails_at_the_fitness_boundary():
    padded = jax.tree.map(jnp.asarray, pad_problem(PROBLEM))
    with pytest.raises(AssertionError, match="rank"):
        population_fitness(padded, jnp.zeros(24, jnp.int32), jnp.zeros(24), "waiting")
