"""Resources, the job state machine, validation and fitted MockJob distributions."""

import numpy as np
import pytest
import scipy.stats

from jaxsched.autotune import (
    DEFAULT_DEMANDS,
    Demand,
    Machine,
    MockJob,
    Progress,
    Scheduler,
    assign_machines,
    fit_stage_distributions,
    make_policy,
    mock_jobs,
)


def test_unknown_resource_is_named():
    demands = (Demand("cpu"), Demand("gpu"), Demand("device"), Demand("cpu"))
    with pytest.raises(ValueError, match=r"job 'a' stage 'build': unknown resource 'gpu'"):
        MockJob("a", [[1, 1, 1, 1]], demands)


@pytest.mark.parametrize("rounds", [0, -3])
def test_non_positive_budget_is_named(rounds):
    from jaxsched.autotune import Job

    with pytest.raises(ValueError, match=r"job 'a': budget \(rounds\) must be an integer >= 1"):
        Job("a", rounds)


def test_negative_durations_and_arrival_are_named():
    with pytest.raises(ValueError, match="durations must be finite and non-negative"):
        MockJob("a", [[1, -1, 1, 1]])
    with pytest.raises(ValueError, match=r"job 'a': arrival \(seconds\) must be >= 0, got -1.0"):
        MockJob("a", [[1, 1, 1, 1]], arrival=-1.0)


def test_device_stage_on_machine_without_devices_is_named():
    with pytest.raises(ValueError, match=r"job 'a': stage 'profile' needs a device but machine 0 has 0 devices"):
        assign_machines([MockJob("a", [[1, 1, 1, 1]])], [Machine(2, 0)])
    with pytest.raises(ValueError, match=r"stage 'profile' needs a device"):
        Scheduler([Machine(2, 0)], make_policy("load_aware")).submit(MockJob("a", [[1, 1, 1, 1]]), 0.0)


def test_too_many_cores_missing_machine_duplicate_names():
    big = (Demand("cpu"), Demand("cpu", 4), Demand("device"), Demand("cpu"))
    with pytest.raises(ValueError, match=r"stage 'build' needs 4 cpu units, machine 0 has 2"):
        assign_machines([MockJob("a", [[1, 1, 1, 1]], big)], [Machine(2, 1)])
    with pytest.raises(ValueError, match="machine 3 does not exist"):
        assign_machines([MockJob("a", [[1, 1, 1, 1]], machine=3)], [Machine(2, 1)])
    with pytest.raises(ValueError, match="unique"):
        assign_machines([MockJob("a", [[1, 1, 1, 1]]), MockJob("a", [[1, 1, 1, 1]])], [Machine(2, 1)])
    with pytest.raises(ValueError, match="one device at a time"):
        MockJob("a", [[1, 1, 1, 1]], (Demand("cpu"), Demand("cpu"), Demand("device", 2), Demand("cpu")))


def test_machine_validation():
    with pytest.raises(ValueError, match="Machine.devices must be an integer >= 0, got -1"):
        Machine(1, -1)
    with pytest.raises(ValueError, match="both CPU and device"):
        Machine(1, 1, (0,), (0,))
    with pytest.raises(ValueError, match="must name 2 cores"):
        Machine(2, 1, (0,), (1,))
    with pytest.raises(ValueError, match="unknown policy 'fifo'"):
        make_policy("fifo")


def test_round_robin_assignment():
    jobs = [MockJob(f"j{i}", [[1, 1, 1, 1]]) for i in range(5)]
    np.testing.assert_array_equal(assign_machines(jobs, [Machine(1, 1)] * 2), [0, 1, 0, 1, 0])


def test_progress_walks_rounds_and_stages_in_order():
    state = Progress(2)
    state.arrive()
    seen = []
    while state.phase != Progress.DONE:
        seen.append((state.round, state.stage))
        state.start()
        state.finish()
    assert seen == [(r, s) for r in range(2) for s in range(4)]
    with pytest.raises(RuntimeError, match="cannot go running -> ready"):
        state.finish()
    fresh = Progress(1)
    with pytest.raises(RuntimeError, match="cannot go ready -> running: it is waiting"):
        fresh.start()


def test_fitted_distributions_match_scipy_lognormal_mle():
    rng = np.random.default_rng(0)
    stage = np.repeat(np.arange(4), 200)
    seconds = np.exp(rng.normal(np.repeat([-3.0, 0.0, 0.5, -1.0], 200), np.repeat([0.1, 0.4, 0.2, 0.3], 200)))
    dists = fit_stage_distributions(stage, seconds)
    for s in range(4):
        shape, _, scale = scipy.stats.lognorm.fit(seconds[stage == s], floc=0)
        np.testing.assert_allclose([dists.mu[s], dists.sigma[s]], [np.log(scale), shape], rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="no measured duration of stage 'update'"):
        fit_stage_distributions(np.array([0, 1, 2]), np.array([1.0, 1.0, 1.0]))
    jobs = mock_jobs(3, 5, dists, seed=1, arrival_rate=2.0)
    assert [job.durations.shape for job in jobs] == [(5, 4)] * 3
    assert 0 < jobs[0].arrival < jobs[1].arrival < jobs[2].arrival
    assert jobs[0].demands == DEFAULT_DEMANDS


def test_failed_interrupted_and_resumed_progress():
    state = Progress(3, first_round=1)
    state.arrive(), state.start(), state.finish(), state.start()
    state.interrupt()  # its worker died in stage 1 of round 1: the round starts again
    assert (state.phase, state.round, state.stage) == (Progress.WAITING, 1, 0)
    state.arrive(), state.start()
    state.fail()
    assert state.phase == Progress.FAILED
    with pytest.raises(RuntimeError, match="job cannot fail: it is failed"):
        state.fail()
    assert Progress(3, first_round=3).phase == Progress.DONE
    with pytest.raises(ValueError, match=r"first_round must be an integer in \[0, 3\], got 4"):
        Progress(3, first_round=4)
    scheduler = Scheduler([Machine(1, 1)], make_policy("load_aware"))
    scheduler.submit(MockJob("done", [[1, 1, 1, 1]]), 0.0, first_round=1)
    scheduler.submit(MockJob("fails", [[1, 1, 1, 1]]), 0.0)
    (start,) = scheduler.dispatch()
    assert start.job == 1 and scheduler.unfinished == 1
    scheduler.fail(1, start)
    assert scheduler.unfinished == 0 and scheduler.free[0, "cpu"] == 1 and scheduler.dispatch() == []
