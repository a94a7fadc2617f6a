import copy as copy_module
import gc
import pickle
import re

import numpy as np
import pytest

from jaxsched import Problem, Schedule, load_problem, load_schedule, save_problem, save_schedule
from jaxsched.batch_graph import PackedBatch
from jaxsched.jax import schedule_batch
from tests.jaxsched.problems import random_problem

GOOD = dict(comp=np.ones((3, 2)), src=[0, 1], dst=[1, 2], data=[1.0, 2.0])


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(comp=np.ones(3)), r"comp must have shape \[T, P\]"),
        (dict(comp=-np.ones((3, 2))), r"comp must be non-negative, got -1.0 at index \(0, 0\)"),
        (dict(comp=np.array([[1, 1], [np.nan, 1], [1, 1]])), r"comp must be finite, got nan at index \(1, 0\)"),
        (dict(data=[1.0, np.inf]), r"data must be finite"),
        (dict(data=[1.0]), r"data must have shape \(2,\)"),
        (dict(dst=[1]), r"src and dst must have the same shape"),
        (dict(dst=[1, 3]), r"dst\[1\] = 3 is out of range for 3 tasks"),
        (dict(src=[-1, 1]), r"src\[0\] = -1 is out of range"),
        (dict(src=[0, 2]), r"edge 1 is a self loop on task 2"),
        (dict(src=[0, 0, 1], dst=[1, 1, 2], data=[1.0, 1.0, 1.0]), r"duplicate edge 0 -> 1"),
        (dict(src=[0.5, 1], dst=[1, 2]), r"src must hold integer task indices"),
        (dict(bandwidth=np.ones((3, 3))), r"bandwidth must have shape \(2, 2\)"),
        (dict(bandwidth=np.array([[1.0, 0.0], [1.0, 1.0]])), r"bandwidth must be positive"),
        (dict(task_arrival=[0.0, 1.0]), r"task_arrival must have shape \(3,\)"),
        (dict(proc_cores=[1.0, -2.0]), r"proc_cores must be non-negative"),
    ],
)
def test_bad_input_raises_a_clear_error(change, message):
    with pytest.raises(ValueError, match=message):
        Problem(**{**GOOD, **change})


def test_a_cycle_is_named():
    with pytest.raises(ValueError, match="cycle") as error:
        Problem(np.ones((5, 1)), src=[0, 1, 2, 3, 2], dst=[1, 2, 3, 1, 4], data=np.ones(5))
    cycle = [int(t) for t in re.findall(r"\d+", str(error.value).split(":")[-1])]
    edges = {(1, 2), (2, 3), (3, 1)}
    assert cycle[0] == cycle[-1] and len(cycle) == 4
    assert {(a, b) for a, b in zip(cycle, cycle[1:])} == edges


@pytest.mark.parametrize("seed", range(20))
def test_topological_order_and_levels_respect_every_edge(seed):
    problem = random_problem(seed, max_tasks=30)
    position = np.empty(problem.num_tasks, int)
    position[problem.topological_order] = np.arange(problem.num_tasks)
    assert sorted(problem.topological_order) == list(range(problem.num_tasks))
    assert np.all(position[problem.src] < position[problem.dst])
    assert np.all(problem.levels[problem.src] < problem.levels[problem.dst])
    entry = np.setdiff1d(np.arange(problem.num_tasks), problem.dst)
    assert np.all(problem.levels[entry] == 0)


def test_problem_and_schedule_round_trip(tmp_path):
    problem = Problem(
        **GOOD,
        bandwidth=np.array([[1.0, 2.0], [3.0, 1.0]]),
        task_arrival=[0.0, 1.0, 2.0],
        task_priority=[1.0, 2.0, 3.0],
        proc_memory=[4.0, 8.0],
    )
    save_problem(tmp_path / "p.npz", problem)
    loaded = load_problem(tmp_path / "p.npz")
    for name in ("comp", "src", "dst", "data", "bandwidth", "task_arrival", "task_priority", "proc_memory"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(problem, name))
    assert loaded.task_memory is None and loaded.proc_cores is None
    schedule = Schedule(np.array([0, 1, 0]), np.array([0.0, 2.0, 5.0]), np.array([1.0, 3.0, 6.0]))
    save_schedule(tmp_path / "s.npz", schedule)
    back = load_schedule(tmp_path / "s.npz")
    np.testing.assert_array_equal(back.start, schedule.start)
    assert back.makespan == 6.0


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(src=[True, True], dst=[False, False]), "src must hold integer task indices, got dtype bool"),
        (dict(src=[0, np.nan]), "src must hold integer task indices"),
        (dict(comp=np.ones((3, 2)) + 1j), "comp must hold real numbers, got dtype complex128"),
        (dict(data=[1.0 + 2j, 1.0]), "data must hold real numbers"),
        (dict(comp=np.ones((3, 2), bool)), "comp must hold real numbers, got dtype bool"),
        (dict(bandwidth=np.array([[1, 1j], [1, 1]])), "bandwidth must hold real numbers"),
        (dict(task_arrival=["a", "b", "c"]), "task_arrival must hold real numbers"),
        (dict(bandwidth=np.array([[1, 1e-320], [1e-320, 1]])), "bandwidth 1e-320 is too small"),
        (dict(comp=np.full((3, 2), 1e308)), "overflow float64"),
    ],
)
def test_booleans_complex_numbers_and_overflowing_times_are_refused(change, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Problem(**{**GOOD, **change})


def _files(tmp_path):
    problem_file, schedule_file = tmp_path / "p.npz", tmp_path / "s.npz"
    save_problem(problem_file, random_problem(1, max_tasks=30))
    save_schedule(schedule_file, Schedule(np.array([0, 1]), np.array([0.0, 1.0]), np.array([1.0, 2.0])))
    return problem_file, schedule_file


@pytest.mark.parametrize("damage", ["empty", "truncated", "corrupted", "npy", "text"])
@pytest.mark.parametrize("loader", [load_problem, load_schedule])
def test_damaged_files_raise_value_error_naming_the_file(tmp_path, damage, loader):
    problem_file, schedule_file = _files(tmp_path)
    good = problem_file if loader is load_problem else schedule_file
    raw = good.read_bytes()
    bad = tmp_path / "bad.npz"
    if damage == "empty":
        bad.write_bytes(b"")
    elif damage == "truncated":
        bad.write_bytes(raw[: len(raw) // 2])
    elif damage == "corrupted":  # flip bytes inside the compressed data, keep the zip directory
        middle = len(raw) // 3
        bad.write_bytes(raw[:middle] + bytes(b ^ 0xFF for b in raw[middle : middle + 64]) + raw[middle + 64 :])
    elif damage == "npy":
        np.save(tmp_path / "bad.npy", np.ones(3))
        bad = tmp_path / "bad.npy"
    else:
        bad.write_text("proc,start,finish\n0,0,1\n")
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        loader(bad)


def test_a_problem_file_is_not_a_schedule_and_the_reverse(tmp_path):
    problem_file, schedule_file = _files(tmp_path)
    with pytest.raises(ValueError, match=re.escape(str(problem_file)) + ".*not a schedule file"):
        load_schedule(problem_file)
    with pytest.raises(ValueError, match=re.escape(str(schedule_file)) + ".*not a problem file"):
        load_problem(schedule_file)
    with pytest.raises(FileNotFoundError):
        load_problem(tmp_path / "missing.npz")


def test_packed_block_holds_every_array_the_batch_reads():
    """`Problem.packed` against the arrays given, worked out by hand: the sizes, then comp raveled and data as
    float64 bits, then src, dst and the canonical topological order (by level, then index); the fields are
    read-only views of it."""
    problem = Problem(comp=[[1.5, 2.0], [3.0, 0.25], [4.0, 5.0]], src=[2, 0], dst=[1, 1], data=[7.0, 0.5])
    block = problem.packed
    assert block.dtype == np.int64 and not block.flags.writeable
    np.testing.assert_array_equal(block[:3], [3, 2, 2])
    np.testing.assert_array_equal(block[3:9].view(np.float64), [1.5, 2.0, 3.0, 0.25, 4.0, 5.0])
    np.testing.assert_array_equal(block[9:11].view(np.float64), [7.0, 0.5])
    np.testing.assert_array_equal(block[11:], [2, 0, 1, 1, 0, 2, 1])  # src, dst, topological order
    for name in ("comp", "src", "dst", "data", "topological_order"):
        array = getattr(problem, name)
        assert np.shares_memory(array, block) and not array.flags.writeable


def test_the_compiled_reader_reads_each_block_in_place():
    """`PackedBatch.read` hands the blocks to compiled code by address: the sizes and the arrays it reads back
    are the hand-worked problem's and a second one's, in batch order."""
    first = Problem(comp=[[1.5, 2.0], [3.0, 0.25], [4.0, 5.0]], src=[2, 0], dst=[1, 1], data=[7.0, 0.5])
    second = Problem(comp=[[9.0]], src=[], dst=[], data=[])
    packed = PackedBatch.read([first, second])
    np.testing.assert_array_equal(packed.addresses, [first.packed.ctypes.data, second.packed.ctypes.data])
    np.testing.assert_array_equal(packed.sizes, [[3, 2, 2], [1, 1, 0]])
    flat = packed.flat()
    np.testing.assert_array_equal(flat.comp, [1.5, 2.0, 3.0, 0.25, 4.0, 5.0, 9.0])
    np.testing.assert_array_equal(flat.data, [7.0, 0.5])
    np.testing.assert_array_equal(flat.src, [2, 0])
    np.testing.assert_array_equal(flat.dst, [1, 1])
    np.testing.assert_array_equal(flat.topo, [0, 2, 1, 0])
    np.testing.assert_array_equal(flat.task_offsets, [0, 3, 4])
    np.testing.assert_array_equal(flat.edge_offsets, [0, 2, 2])


def test_a_pickled_problem_schedules_as_the_original():
    """A pickled or copied problem's arrays come back as copies beside its block, and its block's address is
    its own: the copies schedule as the originals did once those are gone (a stale address would read freed
    memory)."""
    problems = [random_problem(s, 9, 3, bandwidth=s % 2 == 0) for s in range(4)]
    copies = pickle.loads(pickle.dumps(problems))
    for problem, copy in zip(problems, copies):
        np.testing.assert_array_equal(problem.packed, copy.packed)
        np.testing.assert_array_equal(problem.comp, copy.comp)
        assert copy.packed_address == copy.packed.ctypes.data != problem.packed_address
    deep = copy_module.deepcopy(problems[0])
    assert deep.packed_address == deep.packed.ctypes.data
    want = {name: [np.asarray(a) for a in schedule_batch(problems, name)] for name in ("HEFT", "CPOP")}
    del problems, deep
    gc.collect()
    for name in ("HEFT", "CPOP"):
        for a, b in zip(want[name], schedule_batch(copies, name)):
            np.testing.assert_array_equal(a, np.asarray(b))
