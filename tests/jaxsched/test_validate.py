import numpy as np
import pytest

from jaxsched import Schedule, heft, validate
from tests.jaxsched.problems import topcuoglu_example


def _heft_with(**changes):
    problem = topcuoglu_example()
    schedule = heft(problem)
    arrays = {name: getattr(schedule, name).copy() for name in ("proc", "start", "finish")}
    for name, (task, value) in changes.items():
        arrays[name][task] = value
    return problem, Schedule(**arrays)


def test_heft_schedule_is_valid():
    validate(*_heft_with())


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(proc=(3, -1)), "task 3 is unscheduled"),
        (dict(start=(3, np.nan)), "task 3 is unscheduled"),
        (dict(finish=(0, 10.0)), "task 0 runs 10.0 on processor 2 but takes 9.0 there"),
        # n4 (task 3) runs 18-26 on P2; its input from n1 (P3, ends at 9) takes 9 to arrive
        (dict(start=(3, 17.0), finish=(3, 25.0)), "precedence violated on edge 0 -> 3: task 3 starts at 17.0"),
        # n2 (task 1) moved to P3 at 20-38 (it takes 18 there) collides with n3 at 9-28; its outputs
        # still reach n8 (57 on P1) and n9 (56 on P2) in time, so only the overlap is wrong
        (dict(proc=(1, 2), start=(1, 20.0), finish=(1, 38.0)), r"tasks 2 \[9.0, 28.0\) and 1 \[20.0, 38.0\) overlap"),
    ],
)
def test_each_violation_is_named(changes, message):
    with pytest.raises(ValueError, match=message):
        validate(*_heft_with(**changes))


def test_release_time_is_checked():
    problem, schedule = _heft_with()
    late = type(problem)(problem.comp, problem.src, problem.dst, problem.data, task_arrival=np.full(10, 5.0))
    with pytest.raises(ValueError, match="task 0 starts at 0.0 before its arrival 5.0"):
        validate(late, schedule)


def test_zero_length_tasks_overlap_nothing():
    problem = type(topcuoglu_example())(np.array([[4.0], [0.0]]), [], [], [])
    validate(problem, Schedule(np.array([0, 0]), np.array([0.0, 2.0]), np.array([4.0, 2.0])))


@pytest.mark.parametrize(
    "proc, message",
    [
        (0.7, "got 0.7 for task 3"),  # was read as processor 0
        (np.nan, "got nan for task 3"),  # was an IndexError
    ],
)
def test_fractional_and_nan_processor_ids_are_refused(proc, message):
    problem, schedule = _heft_with()
    as_float = schedule.proc.astype(float)
    as_float[3] = proc
    with pytest.raises(ValueError, match=f"integer processor ids, {message}"):
        validate(problem, Schedule(as_float, schedule.start, schedule.finish))
    with pytest.raises(ValueError, match="dtype bool"):
        validate(problem, Schedule(schedule.proc.astype(bool), schedule.start, schedule.finish))
    validate(problem, Schedule(schedule.proc.astype(float), schedule.start, schedule.finish))  # whole floats are ids
