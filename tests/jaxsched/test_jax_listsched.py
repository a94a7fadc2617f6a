import chex
import jax
import numpy as np
import pytest

from jaxsched import Problem, Shape, jax_listsched, pad_problems
from jaxsched.batch import pad_costs
from jaxsched.jax_listsched import list_schedule_batch, list_schedule_padded, plan_batch, schedule_batch
from jaxsched.listsched import NAMES, preset, schedule
from tests.jaxsched.problems import (
    TOPCUOGLU_CPOP_FINISH,
    TOPCUOGLU_CPOP_PROC,
    TOPCUOGLU_CPOP_START,
    random_problem,
    topcuoglu_example,
)

BATCHED = [n for n in NAMES if n != "GA"]
# The fast suite covers every selection, pinning and placement path once (Duplex runs MinMin and MaxMin).
COVERED_ELSEWHERE = ("MCT", "MinMin", "MaxMin", "MST", "FastestNode")
FAST = [pytest.param(n, marks=pytest.mark.slow) if n in COVERED_ELSEWHERE else n for n in BATCHED]


def _random_problems(count, offset=0):
    """Integer costs without bandwidths: every time is an integer, exact in float32."""
    return [random_problem(offset + seed, max_tasks=10, max_procs=3, arrival=seed % 3 == 0) for seed in range(count)]


def assert_equal_to_reference(problems, name, shape, dtype=np.float32):
    got = schedule_batch(problems, name, shape=shape, dtype=dtype)
    assert not np.asarray(got.overflow).any()
    for b, problem in enumerate(problems):
        reference = schedule(problem, name)
        t = problem.num_tasks
        np.testing.assert_array_equal(np.asarray(got.proc[b, :t]), reference.proc, err_msg=f"{name} #{b}")
        np.testing.assert_array_equal(np.asarray(got.start[b, :t]), reference.start, err_msg=f"{name} #{b}")
        np.testing.assert_array_equal(np.asarray(got.finish[b, :t]), reference.finish, err_msg=f"{name} #{b}")


@pytest.mark.parametrize("name", FAST)
def test_jax_twin_equals_numpy_reference(name):
    problems = _random_problems(50)
    assert_equal_to_reference(problems, name, Shape(10, 3, 45, 9))


@pytest.mark.slow
@pytest.mark.parametrize("name", BATCHED)
def test_jax_twin_equals_numpy_reference_500(name):
    """Bandwidths make fractional times: float64 padding under x64 keeps the comparison exact."""
    problems = [
        random_problem(10_000 + s, max_tasks=16, max_procs=5, bandwidth=s % 2 == 0, arrival=s % 3 == 0)
        for s in range(500)
    ]
    with jax.enable_x64(True):
        assert_equal_to_reference(problems, name, Shape(16, 5, 120, 15), np.float64)


def test_problems_that_overflow_the_default_room_run_again(monkeypatch):
    """Gap insertion keeps 8 idle gaps per processor by default at 16 tasks on 4 processors: a problem of
    16 independent tasks released 10 apart, each fastest on processor 0, leaves 15 gaps there, overflows
    and is run again with twice the room, while the others keep their first schedules; all equal the
    NumPy reference."""
    spaced = Problem(comp=np.tile([[1.0, 50.0, 50.0, 50.0]], (16, 1)), src=np.zeros(0, int), dst=np.zeros(0, int),
                     data=np.zeros(0), task_arrival=10.0 * np.arange(16))
    problems = [random_problem(seed, max_tasks=16, max_procs=4) for seed in range(5)] + [spaced]
    sizes = []

    def spy(batch, plans, config, capacity=None, streams=None, edges=None):
        sizes.append((len(batch.comp), capacity))
        return list_schedule_batch(batch, plans, config, capacity, streams, edges)

    monkeypatch.setattr(jax_listsched, "list_schedule_batch", spy)
    assert_equal_to_reference(problems, "HEFT", Shape(16, 4, 120, 15))
    (count, first), (rerun, second) = sizes  # the rerun: the spaced problem, padded to the suite's 2 devices
    assert (count, first, second) == (6, 8, 16) and rerun < count


def test_cpop_on_topcuoglu_example():
    """The batched CPOP gives the hand-worked schedule of Topcuoglu's example (`tests.jaxsched.problems`)."""
    got = schedule_batch([topcuoglu_example()], "CPOP")
    np.testing.assert_array_equal(np.asarray(got.proc[0]), TOPCUOGLU_CPOP_PROC)
    np.testing.assert_array_equal(np.asarray(got.start[0]), TOPCUOGLU_CPOP_START)
    np.testing.assert_array_equal(np.asarray(got.finish[0]), TOPCUOGLU_CPOP_FINISH)


def test_one_compilation_per_shape_and_config(monkeypatch):
    shape, config = Shape(10, 3, 45, 9), preset("MinMin")
    monkeypatch.setattr(jax_listsched, "list_schedule_padded", chex.assert_max_traces(list_schedule_padded, n=1))
    jax_listsched._list_schedule_batch.clear_cache()
    for offset in (0, 100):
        problems = _random_problems(6, offset)
        list_schedule_batch(pad_problems(problems, shape), plan_batch(problems, config, shape), config)


def test_bad_batches():
    problems = _random_problems(3)
    with pytest.raises(ValueError, match="unknown batched scheduler 'GA'"):
        schedule_batch(problems, "GA")
    config = preset("HEFT")
    batch = pad_problems(problems, Shape(10, 3, 45, 9))
    with pytest.raises(ValueError, match="pad every problem"):
        list_schedule_batch(batch, plan_batch(problems, config, Shape(12, 3, 45, 9)), config)
    costs, min_min = pad_costs(problems, Shape(10, 3, 45, 9)), preset("MinMin")
    for needs_graph, missing in ((config, "a stream"), (min_min, "the edges")):  # MinMin is dynamic
        with pytest.raises(ValueError, match=f"on padded costs needs {missing}"):
            list_schedule_batch(costs, plan_batch(problems, needs_graph, Shape(10, 3, 45, 9)), needs_graph)
