"""An instant link (bandwidth inf between distinct processors, as SAGA's machine model allows): transfers
across it take zero time in every consumer, with no inf x 0 = NaN anywhere; bad bandwidths keep their error."""

import numpy as np
import pytest

from jaxsched import Problem, Schedule, heft, pad_problems, simulate, summary, upward_rank, validate
from jaxsched.deepsched import problem_features
from jaxsched.deepsched.features import bucket_shape
from jaxsched.jax import heft_batch, simulate_batch


def fork_join_with_one_instant_link() -> Problem:
    """t0 -> {t1, t2} -> t3 on two processors; P0 -> P1 is instant, P1 -> P0 has bandwidth 1.

    The mean bandwidth is inf, so ranks ignore communication: each is the sum of mean costs (5.5) below it,
    16.5, 11, 11, 5.5, and HEFT visits t0, t1, t2, t3. Hand-worked schedule: t0 on P0 [0, 1] (1 < 10);
    t1's 5 units cross the instant link, so it runs on P1 [1, 2]; t2 on P1 [2, 3] (finish 3 < 11 on P0);
    t3 needs 2 units from each over the finite link, ready on P0 at 3 + 2 = 5: P0 [5, 6] (6 < 13 on P1).
    With bandwidth 1 on both links, t1 would start on P1 only at 1 + 5 = 6.
    """
    return Problem(comp=np.array([[1.0, 10.0], [10.0, 1.0], [10.0, 1.0], [1.0, 10.0]]), src=[0, 0, 1, 2],
                   dst=[1, 2, 3, 3], data=[5.0, 5.0, 2.0, 2.0], bandwidth=np.array([[1.0, np.inf], [1.0, 1.0]]))


def test_hand_worked_instance_in_every_consumer():
    problem = fork_join_with_one_instant_link()
    np.testing.assert_array_equal(problem.inverse_bandwidth, [[0.0, 0.0], [1.0, 0.0]])
    np.testing.assert_array_equal(upward_rank(problem), [16.5, 11.0, 11.0, 5.5])
    proc, start, finish = [0, 1, 1, 0], [0.0, 1.0, 2.0, 5.0], [1.0, 2.0, 3.0, 6.0]
    schedule = heft(problem)
    np.testing.assert_array_equal(schedule.proc, proc)
    np.testing.assert_array_equal(schedule.start, start)
    np.testing.assert_array_equal(schedule.finish, finish)
    validate(problem, schedule)
    replay = simulate(problem, schedule.proc, upward_rank(problem))
    np.testing.assert_array_equal(replay.start, start)
    batch = pad_problems([problem], bucket_shape(problem))
    assert all(np.isfinite(np.asarray(array)).all() for array in batch if np.asarray(array).dtype.kind == "f")
    padded_proc = np.array([proc + [0] * (batch.comp.shape[1] - 4)])
    for out in (heft_batch(batch), simulate_batch(batch, padded_proc, batch.upward_rank)):
        np.testing.assert_array_equal(np.asarray(out.proc)[0, :4], proc)
        np.testing.assert_array_equal(np.asarray(out.start)[0, :4], start)
        np.testing.assert_array_equal(np.asarray(out.finish)[0, :4], finish)
    metrics = summary(problem, schedule)
    assert metrics["makespan"] == 6.0 and metrics["speedup"] == pytest.approx(22 / 6)  # P0 alone: 1+10+10+1
    features = problem_features(problem, bucket_shape(problem))
    assert all(np.isfinite(np.asarray(array)).all() for array in features if np.asarray(array).dtype.kind == "f")
    late = Schedule(np.array(proc), np.array([0.0, 1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(ValueError, match="precedence violated on edge 1 -> 3"):  # P1 -> P0 is not instant
        validate(problem, late)


@pytest.mark.parametrize("value", [np.nan, -np.inf, -1.0, 0.0])
def test_nan_negative_and_zero_bandwidths_are_refused(value):
    with pytest.raises(ValueError, match=r"bandwidth must be positive \(inf for an instant link\).*index \(0, 1\)"):
        Problem(np.ones((2, 2)), [0], [1], [1.0], bandwidth=np.array([[1.0, value], [1.0, 1.0]]))
