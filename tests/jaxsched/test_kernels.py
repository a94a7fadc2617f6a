"""The jitted kernels against the NumPy references, on one shared padded shape (one compilation)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsched import heft, heft_batch, heft_padded, pad_problem, pad_problems, simulate, simulate_batch, simulate_padded
from tests.jaxsched.problems import random_problem

SHAPE = dict(num_tasks=12, num_procs=4, max_in_degree=11, num_edges=66)


def _batch(seeds, **kwargs):
    problems = [random_problem(s, **kwargs) for s in seeds]
    return problems, pad_problems(problems, **SHAPE)


def _assert_matches(problem, out, i, reference):
    t = problem.num_tasks
    np.testing.assert_array_equal(np.asarray(out.proc[i, :t]), reference.proc)
    np.testing.assert_allclose(np.asarray(out.start[i, :t]), reference.start, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out.finish[i, :t]), reference.finish, rtol=1e-6)


def test_heft_batch_equals_numpy_heft():
    problems, batch = _batch(range(64))
    out = heft_batch(batch)
    assert not np.asarray(out.overflow).any()
    for i, problem in enumerate(problems):
        _assert_matches(problem, out, i, heft(problem))


def test_simulate_batch_equals_numpy_simulate():
    problems, batch = _batch(range(100, 164))
    rng = np.random.default_rng(0)
    proc = np.stack([rng.integers(0, p.num_procs, SHAPE["num_tasks"]) for p in problems])
    priority = rng.integers(0, 5, proc.shape).astype(np.float32)  # ties exercise the tie-breaking
    out = simulate_batch(batch, proc, priority)
    for i, problem in enumerate(problems):
        t = problem.num_tasks
        _assert_matches(problem, out, i, simulate(problem, proc[i, :t], priority[i, :t]))


def test_bandwidths_and_release_times_under_x64():
    with jax.enable_x64(True):
        problems, batch = _batch(range(200, 232), bandwidth=True, arrival=True)
        batch = pad_problems(problems, **SHAPE, dtype=np.float64)
        out = heft_batch(batch)
        for i, problem in enumerate(problems):
            _assert_matches(problem, out, i, heft(problem))


def test_padding_does_not_change_the_schedule():
    problem = random_problem(3)
    tight = heft_batch(pad_problems([problem]))
    loose = heft_batch(pad_problems([problem], num_tasks=20, num_procs=7, max_in_degree=15, num_edges=90))
    t = problem.num_tasks
    np.testing.assert_array_equal(tight.proc[0, :t], loose.proc[0, :t])
    np.testing.assert_array_equal(tight.start[0, :t], loose.start[0, :t])


def test_second_call_with_same_shapes_does_not_retrace():
    traced = jax.jit(jax.vmap(chex.assert_max_traces(heft_padded, n=1)))
    for seeds in (range(0, 8), range(8, 16)):
        _, batch = _batch(seeds)
        jax.block_until_ready(traced(batch))


def test_capacity_overflow_is_reported():
    """Five busy tasks on a single processor need five slots."""
    problem = type(random_problem(0))(np.ones((5, 1)), [], [], [])
    padded = jax.tree.map(jnp.asarray, pad_problem(problem))
    proc, priority = jnp.zeros(5, jnp.int32), jnp.zeros(5)
    assert bool(simulate_padded(padded, proc, priority, capacity=4).overflow)
    assert bool(heft_padded(padded, capacity=4).overflow)
    exact = simulate_padded(padded, proc, priority, capacity=5)
    assert not bool(exact.overflow)
    np.testing.assert_array_equal(np.sort(np.asarray(exact.start)), [0, 1, 2, 3, 4])


def test_small_capacity_gives_the_same_schedule_when_it_suffices():
    problems, batch = _batch(range(300, 316))
    rng = np.random.default_rng(1)
    proc = np.stack([rng.integers(0, p.num_procs, SHAPE["num_tasks"]) for p in problems])
    priority = rng.random(proc.shape).astype(np.float32)
    full = simulate_batch(batch, proc, priority)
    small = simulate_batch(batch, proc, priority, capacity=SHAPE["num_tasks"] // 2)
    ok = ~np.asarray(small.overflow)
    assert ok.any()
    np.testing.assert_array_equal(np.asarray(full.start)[ok], np.asarray(small.start)[ok])


def test_pad_problem_rejects_too_small_capacity():
    with pytest.raises(ValueError, match="more than the padded capacity"):
        pad_problem(random_problem(5, max_tasks=12), num_tasks=1)
