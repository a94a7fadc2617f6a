"""The jitted kernels against the NumPy references, on one shared padded shape (one compilation);
both `simulate_padded` methods (the per-task walk and the wavefront) against `simulate`."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsched
from jaxsched import Problem, Shape, heft, pad_problem, pad_problems, simulate
from jaxsched.generate import cloudsim, random_dag
from jaxsched.jax import heft as heft_padded
from jaxsched.jax import heft_batch, row_capacity, simulate_batch
from jaxsched.jax import simulate as simulate_padded
from tests.jaxsched.problems import random_problem, topcuoglu_example

SHAPE = Shape(num_tasks=12, num_procs=4, num_edges=66, max_in_degree=11)


def _batch(seeds, **kwargs):
    problems = [random_problem(s, **kwargs) for s in seeds]
    return problems, pad_problems(problems, SHAPE)


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
    proc = np.stack([rng.integers(0, p.num_procs, SHAPE.num_tasks) for p in problems])
    priority = rng.integers(0, 5, proc.shape).astype(np.float32)  # ties exercise the tie-breaking
    out = simulate_batch(batch, proc, priority)
    for i, problem in enumerate(problems):
        t = problem.num_tasks
        _assert_matches(problem, out, i, simulate(problem, proc[i, :t], priority[i, :t]))


@pytest.mark.parametrize("instant", [False, True])
def test_bandwidths_and_release_times_under_x64(instant):
    """Finite bandwidths, and instant links (bandwidth inf: zero transfer time, never inf x 0 = NaN)."""
    with jax.enable_x64(True):
        problems = [random_problem(s, bandwidth=True, arrival=True, instant=instant) for s in range(200, 232)]
        assert not instant or sum(np.isinf(p.bandwidth).sum() for p in problems) > 10
        batch = pad_problems(problems, SHAPE, dtype=np.float64)
        assert all(np.isfinite(np.asarray(array)).all() for array in batch if np.asarray(array).dtype.kind == "f")
        out = heft_batch(batch)
        for i, problem in enumerate(problems):
            _assert_matches(problem, out, i, heft(problem))
    rng = np.random.default_rng(0)
    proc = np.stack([rng.integers(0, p.num_procs, SHAPE.num_tasks) for p in problems])
    priority = rng.integers(0, 5, proc.shape).astype(np.float32)
    out = simulate_batch(pad_problems(problems, SHAPE), proc, priority)
    for i, problem in enumerate(problems):
        t = problem.num_tasks
        _assert_matches(problem, out, i, simulate(problem, proc[i, :t], priority[i, :t]))


def test_padding_does_not_change_the_schedule():
    problem = random_problem(3)
    tight = heft_batch(pad_problems([problem]))
    loose = heft_batch(pad_problems([problem], Shape(20, 7, 90, 15)))
    t = problem.num_tasks
    np.testing.assert_array_equal(tight.proc[0, :t], loose.proc[0, :t])
    np.testing.assert_array_equal(tight.start[0, :t], loose.start[0, :t])


def test_second_call_with_same_shapes_does_not_retrace():
    traced = jax.jit(jax.vmap(chex.assert_max_traces(heft_padded, n=1)))
    for seeds in (range(0, 8), range(8, 16)):
        _, batch = _batch(seeds)
        jax.block_until_ready(traced(batch))


def test_capacity_overflow_is_reported():
    """`simulate` keeps busy tasks: five on a single processor need five slots. HEFT keeps idle gaps: five
    unit tasks released 2 apart leave four."""
    problem = type(random_problem(0))(np.ones((5, 1)), [], [], [])
    padded = jax.tree.map(jnp.asarray, pad_problem(problem))
    proc, priority = jnp.zeros(5, jnp.int32), jnp.zeros(5)
    assert bool(simulate_padded(padded, proc, priority, capacity=4).overflow)
    exact = simulate_padded(padded, proc, priority, capacity=5)
    assert not bool(exact.overflow)
    np.testing.assert_array_equal(np.sort(np.asarray(exact.start)), [0, 1, 2, 3, 4])
    released = type(problem)(np.ones((5, 1)), [], [], [], task_arrival=2.0 * np.arange(5))
    padded = jax.tree.map(jnp.asarray, pad_problem(released))
    assert bool(heft_padded(padded, capacity=3).overflow)
    exact = heft_padded(padded, capacity=4)
    assert not bool(exact.overflow)
    np.testing.assert_array_equal(np.asarray(exact.start), [0, 2, 4, 6, 8])


def test_small_capacity_gives_the_same_schedule_when_it_suffices():
    problems, batch = _batch(range(300, 316))
    rng = np.random.default_rng(1)
    proc = np.stack([rng.integers(0, p.num_procs, SHAPE.num_tasks) for p in problems])
    priority = rng.random(proc.shape).astype(np.float32)
    full = simulate_batch(batch, proc, priority)
    small = simulate_batch(batch, proc, priority, capacity=SHAPE.num_tasks // 2)
    ok = ~np.asarray(small.overflow)
    assert ok.any()
    np.testing.assert_array_equal(np.asarray(full.start)[ok], np.asarray(small.start)[ok])


def test_pad_problem_rejects_too_small_capacity():
    with pytest.raises(ValueError, match="more than the padded capacity"):
        pad_problem(random_problem(5, max_tasks=12), Shape(1, 4, 66, 11))


# The wavefront method, in float64: equal to NumPy's `simulate` to the last bit.

WAVE_SHAPE = Shape(num_tasks=40, num_procs=6, num_edges=512, max_in_degree=24)


@functools.partial(jax.jit, static_argnames="capacity")
def wavefront_jit(problem, proc, priority, capacity):
    return simulate_padded(problem, proc, priority, capacity, method="wavefront")


def _padded_inputs(problem, proc, priority):
    padded = pad_problem(problem, WAVE_SHAPE, dtype=np.float64)
    extra = WAVE_SHAPE.num_tasks - problem.num_tasks
    return (
        padded,
        np.concatenate([proc, np.zeros(extra, int)]).astype(np.int32),
        np.concatenate([priority, np.zeros(extra)]),
    )


def _wave_problems():
    for seed in range(30):
        yield random_problem(seed, max_tasks=20, max_procs=5, bandwidth=seed % 3 == 0, arrival=seed % 2 == 0,
                             instant=seed % 5 == 0)
    for seed in range(6):
        yield cloudsim(int(5 + 6 * seed), 1 + seed % 5, seed=seed)
        yield random_dag(int(5 + 6 * seed), 1 + seed % 5, ccr=5.0, seed=seed)


def test_wavefront_equals_numpy_simulate_on_random_instances():
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        for problem in _wave_problems():
            proc = rng.integers(0, problem.num_procs, problem.num_tasks)
            priority = rng.integers(0, 4, problem.num_tasks).astype(float)  # many ties
            expected = simulate(problem, proc, priority)
            padded, proc_p, priority_p = _padded_inputs(problem, proc, priority)
            result = wavefront_jit(padded, proc_p, priority_p, capacity=WAVE_SHAPE.num_tasks)  # one compilation
            t = problem.num_tasks
            np.testing.assert_array_equal(np.asarray(result.start[:t]), expected.start)
            np.testing.assert_array_equal(np.asarray(result.finish[:t]), expected.finish)
            assert not bool(result.overflow)


def test_wavefront_heft_assignment_in_rank_order_reproduces_heft():
    problem = topcuoglu_example()
    reference = heft(problem)
    with jax.enable_x64(True):
        padded, proc, priority = _padded_inputs(problem, reference.proc, jaxsched.upward_rank(problem))
        result = wavefront_jit(padded, proc, priority, capacity=WAVE_SHAPE.num_tasks)
    finish = np.asarray(result.finish)[:10]
    np.testing.assert_array_equal(finish, reference.finish)
    assert float(finish.max()) == 80.0  # the published HEFT makespan


def test_wavefront_vmaps_over_assignments_in_fewer_waves_than_tasks():
    problem = random_dag(36, 4, seed=3)
    rng = np.random.default_rng(1)
    procs = rng.integers(0, 4, (5, problem.num_tasks))
    priorities = rng.random((5, problem.num_tasks))
    with jax.enable_x64(True):
        inputs = [_padded_inputs(problem, p, q) for p, q in zip(procs, priorities)]
        padded = inputs[0][0]
        proc_b = np.stack([i[1] for i in inputs])
        priority_b = np.stack([i[2] for i in inputs])
        batched = jax.jit(jax.vmap(wavefront_jit.__wrapped__, in_axes=(None, 0, 0, None)), static_argnums=3)
        result = batched(padded, proc_b, priority_b, row_capacity(padded, proc_b))
    for k in range(5):
        expected = simulate(problem, procs[k], priorities[k])
        np.testing.assert_array_equal(np.asarray(result.finish[k, :36]), expected.finish)
    assert int(result.steps.max()) < problem.num_tasks


def test_walk_and_wavefront_agree_and_report_overflow():
    problems, batch = _batch(range(400, 408))
    rng = np.random.default_rng(2)
    proc = np.stack([rng.integers(0, p.num_procs, SHAPE.num_tasks) for p in problems])
    priority = rng.integers(0, 3, proc.shape).astype(np.float32)
    walk = simulate_batch(batch, proc, priority)
    wave = simulate_batch(batch, proc, priority, method="wavefront")
    for i, problem in enumerate(problems):
        t = problem.num_tasks
        np.testing.assert_array_equal(np.asarray(walk.start[i, :t]), np.asarray(wave.start[i, :t]))
    one = Problem(np.ones((5, 1)), [], [], [])
    padded = jax.tree.map(jnp.asarray, pad_problem(one))
    assert bool(simulate_padded(padded, jnp.zeros(5, jnp.int32), jnp.zeros(5), capacity=4, method="wavefront").overflow)


@pytest.mark.parametrize("counts, expected", [([1, 0, 0], 1), ([3, 2, 0], 4), ([5, 5, 5], 8)])
def test_row_capacity_is_the_next_power_of_two_of_busy_tasks(counts, expected):
    proc = np.repeat(np.arange(3), counts)
    problem = Problem(np.ones((len(proc), 3)), np.zeros(0, int), np.zeros(0, int), np.zeros(0))
    padded = pad_problem(problem, Shape(16, 3, 1, 1))
    assert row_capacity(padded, np.concatenate([proc, np.zeros(16 - len(proc), int)])) == expected


def test_a_batch_where_one_problem_belongs_fails_at_the_boundary():
    _, batch = _batch(range(2))
    with pytest.raises(AssertionError, match="rank"):
        heft_padded(batch)
    with pytest.raises(AssertionError, match="rank"):
        simulate_padded(jax.tree.map(lambda x: x[0], batch), jnp.zeros((2, 12), jnp.int32), jnp.zeros((2, 12)))
    with pytest.raises(ValueError, match="method"):
        simulate_padded(jax.tree.map(lambda x: x[0], batch), jnp.zeros(12, jnp.int32), jnp.zeros(12), method="bfs")
