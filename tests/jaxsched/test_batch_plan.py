"""The one-pass planner (`jaxsched._batch_plan`) against the batch-graph path it replaces for its presets (itself
checked against the per-problem NumPy forms in test_batch_graph.py), array for array, on mixed sizes, processor
counts, bandwidths and release times; and its reused host buffers against fresh arrays."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from jaxsched import Problem, Shape, jax_listsched
from jaxsched import _batch_plan as batch_plan
from jaxsched._batch_plan import fused, in_chunks, plan_flat
from jaxsched.batch import fitted_graph, pad_costs, pad_edges
from jaxsched.batch_graph import HostBuffers
from jaxsched.jax_listsched import plan_batch, schedule_batch, stream_batch
from jaxsched.listsched import PRESETS, ListConfig, schedule
from tests.jaxsched.problems import random_problem

FUSED = [name for name, config in PRESETS.items() if fused(config, 4)]


def _problems(seed=0, count=30):
    return [
        random_problem(seed + s, 12, 4, bandwidth=s % 2 == 0, arrival=s % 3 == 0, instant=s % 5 == 0)
        for s in range(count)
    ]


def test_the_presets_planned_in_one_pass():
    assert set(FUSED) == set(PRESETS) - {"CPOP", "PEFT"}
    assert not fused(ListConfig("upward", "eft", ranks="saga"), 4) and not fused(PRESETS["HEFT"], 129)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", FUSED)
def test_one_pass_equals_the_batch_graph_path(name, dtype):
    problems, config = _problems(), PRESETS[name]
    shape, costs, plans, streams, edges = plan_flat(problems, config, None, dtype, HostBuffers())
    problems, expected_shape, graph = fitted_graph(problems, None, None, "test", dtype)
    assert shape == expected_shape == Shape.of(problems)
    expected_plans = plan_batch(problems, config, shape, dtype, graph)
    expected = [
        (costs, pad_costs(problems, shape, dtype, graph)),
        (plans, expected_plans),
        (streams, stream_batch(graph, expected_plans, config, dtype)),
        (edges, pad_edges(problems, shape, dtype, graph) if config.dynamic else None),
    ]
    for got, want in expected:
        assert (got is None) == (want is None)
        for got_array, want_array in zip(got or (), want or ()):
            np.testing.assert_array_equal(got_array, want_array)
            assert got_array.dtype == want_array.dtype


@pytest.mark.parametrize("name", ["HEFT", "MinMin", "MST"])
def test_planning_in_threads_equals_one_thread(name, monkeypatch):
    """Threads planning chunks of the batch at once write what one thread writes, array for array (one
    thread's arrays are checked against the batch graph's above)."""
    problems = _problems(seed=50, count=13)
    alone = plan_flat(problems, PRESETS[name], None, np.float32, None, threads=1)
    monkeypatch.setattr(batch_plan, "CHUNK", 2)  # 7 chunks for 4 threads
    parts = plan_flat(problems, PRESETS[name], None, np.float32, HostBuffers(), threads=4)
    assert alone[0] == parts[0]
    for got, want in zip(parts[1:], alone[1:]):
        assert (got is None) == (want is None)
        for got_array, want_array in zip(got or (), want or ()):
            np.testing.assert_array_equal(got_array, want_array)


def test_schedules_planned_in_threads_equal_the_reference(monkeypatch):
    problems = [random_problem(s, 12, 4, arrival=s % 2 == 0) for s in range(9)]  # integer times: exact in float32
    monkeypatch.setattr(batch_plan, "CHUNK", 2)
    got = schedule_batch(problems, "ETF", threads=3)
    for b, problem in enumerate(problems):
        reference, t = schedule(problem, "ETF"), problem.num_tasks
        np.testing.assert_array_equal(np.asarray(got.proc[b, :t]), reference.proc)
        np.testing.assert_array_equal(np.asarray(got.finish[b, :t]), reference.finish)
    with pytest.raises(ValueError, match="threads must be an integer >= 1"):
        schedule_batch(problems, "CPOP", threads=0)


def test_an_error_after_a_kernel_is_dispatched_leaves_its_buffers_to_it(monkeypatch):
    """A kernel may read the host buffers in place after the call has raised: the next call takes new ones."""
    problems = [random_problem(s, 12, 4) for s in range(6)]
    schedule_batch(problems, "Duplex", devices=1)
    held = jax_listsched._HOST.buffers

    def fail(*args):
        raise RuntimeError("after dispatch")

    monkeypatch.setattr(jax_listsched, "padded_makespan", fail)  # Duplex compares its halves after both run
    with pytest.raises(RuntimeError, match="after dispatch"):
        schedule_batch(problems, "Duplex", devices=1)
    monkeypatch.undo()
    schedule_batch(problems, "Duplex", devices=1)
    assert jax_listsched._HOST.buffers is not held


def test_chunks_cover_the_range_once_and_errors_reach_the_caller():
    seen = []
    assert in_chunks(lambda first, last: seen.append((first, last)), 10, 3, 4, lambda: "meanwhile") == "meanwhile"
    assert sorted(seen) == [(0, 4), (4, 8), (8, 10)]

    def fail_late(first, last):
        if last == 10:
            raise RuntimeError("chunk failed")

    with pytest.raises(RuntimeError, match="chunk failed"):
        in_chunks(fail_late, 10, 3, 2)


def test_a_caller_does_not_wait_for_workers_busy_with_another_callers_chunks(monkeypatch):
    """The only worker is held by another task: the calling thread plans every chunk itself and returns."""
    pool, release = ThreadPoolExecutor(1), threading.Event()
    monkeypatch.setattr(batch_plan, "_POOL", [pool])
    blocker = pool.submit(release.wait)
    seen, caller = [], threading.Thread(target=lambda: in_chunks(lambda a, b: seen.append((a, b)), 6, 2, 2))
    caller.start()
    caller.join(timeout=10)
    finished = not caller.is_alive()
    release.set()
    caller.join()
    blocker.result()
    pool.shutdown()
    assert finished and sorted(seen) == [(0, 2), (2, 4), (4, 6)]


def test_a_shape_given_is_kept_and_checked():
    problems = _problems(count=8)
    shape = Shape.of(problems)._replace(num_tasks=16, num_edges=80)
    assert plan_flat(problems, PRESETS["HEFT"], shape)[0] == shape
    with pytest.raises(ValueError, match="incoming edges of a task, more than the padded capacity 1"):
        plan_flat(problems, PRESETS["HEFT"], shape._replace(max_in_degree=1))
    with pytest.raises(ValueError, match="more than the padded capacity 3"):
        plan_flat(problems, PRESETS["MinMin"], shape._replace(num_tasks=3))
    with pytest.raises(ValueError, match="plan_flat needs at least one problem"):
        plan_flat([], PRESETS["HEFT"], None)


def test_a_cost_float32_cannot_hold_is_named_with_its_problem():
    """The message reads the costs again (the chunks' arrays are gone by then): the value given, in its problem."""
    comp = np.ones((3, 2))
    comp[2, 1] = 1e-50
    chain = dict(src=[0, 1], dst=[1, 2], data=[1.0, 1.0])
    problems = [Problem(np.ones((3, 2)), **chain), Problem(comp, **chain), Problem(np.ones((2, 2)), [0], [1], [1.0])]
    with pytest.raises(ValueError, match=r"problem 1: comp holds 1e-50, below float32's smallest normal"):
        plan_flat(problems, PRESETS["HEFT"], None, np.float32, HostBuffers())


def test_buffers_are_reused_and_grow():
    buffers = HostBuffers()
    first = buffers.take("x", (2, 3), np.int32, fill=7)
    assert first.ctypes.data % HostBuffers.ALIGN == 0
    again = buffers.take("x", (3, 2), np.int32)
    assert np.shares_memory(first, again) and (again == 7).all()
    larger = buffers.take("x", (4, 4), np.float64, fill=0)
    assert larger.shape == (4, 4) and not np.shares_memory(first, larger)


@pytest.mark.parametrize("name", ["HEFT", "MCT"])  # gap insertion reads its overflow flags; MCT reads nothing
def test_schedules_outlive_the_buffers_of_the_next_batch(name):
    """Two batches of different problems one after the other through the same buffers (which the CPU device
    reads in place): the first batch's schedules still equal the NumPy reference after the second batch
    overwrote the buffers."""
    first = [random_problem(s, 12, 4, arrival=s % 2 == 0) for s in range(12)]  # integer times: exact in float32
    second = [random_problem(100 + s, 8, 4) for s in range(12)]  # smaller: the same buffers, overwritten
    got = schedule_batch(first, name)
    schedule_batch(second, name)
    for b, problem in enumerate(first):
        reference, t = schedule(problem, name), problem.num_tasks
        np.testing.assert_array_equal(np.asarray(got.proc[b, :t]), reference.proc)
        np.testing.assert_array_equal(np.asarray(got.finish[b, :t]), reference.finish)
