"""`wavefront_simulate` equals the NumPy `simulate` exactly (float64), on many random instances."""

import functools

import jax
import numpy as np
import pytest

import jaxsched
from jaxsched.batch import pad_problem
from jaxsched.deepsched.wavefront import placement_order, row_capacity, wavefront_simulate
from jaxsched.generate import cloudsim, random_dag
from tests.jaxsched.problems import random_problem, topcuoglu_example


@functools.partial(jax.jit, static_argnames="capacity")
def simulate_jit(problem, proc, priority, capacity):
    return wavefront_simulate(problem, proc, placement_order(problem, priority), capacity)


SHAPE = (40, 6, 24, 512)  # tasks, processors, predecessors per task, edges


def _padded_inputs(problem, proc, priority):
    padded = pad_problem(problem, SHAPE[0], SHAPE[1], SHAPE[2], SHAPE[3], dtype=np.float64)
    extra = SHAPE[0] - problem.num_tasks
    return (
        padded,
        np.concatenate([proc, np.zeros(extra, int)]).astype(np.int32),
        np.concatenate([priority, np.zeros(extra)]),
    )


def _problems():
    for seed in range(30):
        yield random_problem(seed, max_tasks=20, max_procs=5, bandwidth=seed % 3 == 0, arrival=seed % 2 == 0)
    for seed in range(6):
        yield cloudsim(int(5 + 6 * seed), 1 + seed % 5, seed=seed)
        yield random_dag(int(5 + 6 * seed), 1 + seed % 5, ccr=5.0, seed=seed)


def test_equals_numpy_simulate_on_random_instances():
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        for problem in _problems():
            proc = rng.integers(0, problem.num_procs, problem.num_tasks)
            priority = rng.integers(0, 4, problem.num_tasks).astype(float)  # many ties
            expected = jaxsched.simulate(problem, proc, priority)
            padded, proc_p, priority_p = _padded_inputs(problem, proc, priority)
            result = simulate_jit(padded, proc_p, priority_p, capacity=SHAPE[0])  # always enough; one compilation
            t = problem.num_tasks
            np.testing.assert_array_equal(np.asarray(result.start[:t]), expected.start)
            np.testing.assert_array_equal(np.asarray(result.finish[:t]), expected.finish)


def test_heft_assignment_in_rank_order_reproduces_heft():
    problem = topcuoglu_example()
    heft = jaxsched.heft(problem)
    with jax.enable_x64(True):
        padded, proc, priority = _padded_inputs(problem, heft.proc, jaxsched.upward_rank(problem))
        result = simulate_jit(padded, proc, priority, capacity=SHAPE[0])
    finish = np.asarray(result.finish)[:10]
    np.testing.assert_array_equal(finish, heft.finish)
    assert float(finish.max()) == 80.0  # the published HEFT makespan


def test_vmapped_over_assignments_and_fewer_waves_than_tasks():
    problem = random_dag(36, 4, seed=3)
    rng = np.random.default_rng(1)
    procs = rng.integers(0, 4, (5, problem.num_tasks))
    priorities = rng.random((5, problem.num_tasks))
    with jax.enable_x64(True):
        inputs = [_padded_inputs(problem, p, q) for p, q in zip(procs, priorities)]
        padded = inputs[0][0]
        proc_b = np.stack([i[1] for i in inputs])
        priority_b = np.stack([i[2] for i in inputs])
        batched = jax.jit(jax.vmap(simulate_jit.__wrapped__, in_axes=(None, 0, 0, None)), static_argnums=3)
        result = batched(padded, proc_b, priority_b, row_capacity(padded, proc_b))
    for k in range(5):
        expected = jaxsched.simulate(problem, procs[k], priorities[k])
        np.testing.assert_array_equal(np.asarray(result.finish[k, :36]), expected.finish)
    assert int(result.waves.max()) < problem.num_tasks


@pytest.mark.parametrize("counts, expected", [([1, 0, 0], 1), ([3, 2, 0], 4), ([5, 5, 5], 8)])
def test_row_capacity_is_the_next_power_of_two_of_busy_tasks(counts, expected):
    proc = np.repeat(np.arange(3), counts)
    problem = jaxsched.Problem(np.ones((len(proc), 3)), np.zeros(0, int), np.zeros(0, int), np.zeros(0))
    padded = pad_problem(problem, 16, 3, 1, 1)
    assert row_capacity(padded, np.concatenate([proc, np.zeros(16 - len(proc), int)])) == expected
