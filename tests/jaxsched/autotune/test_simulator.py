"""The event simulator: hand-worked example, invariants on random mixes, bounds."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxsched.autotune import (
    DEFAULT_DEMANDS,
    Demand,
    Machine,
    MockJob,
    Predictive,
    check_trace,
    make_policy,
    simulate_policy,
)
from tests.jaxsched.autotune.reference import brute_force_check

# three one-round jobs on one machine with one CPU core and one device; durations per stage
# (propose, build, profile, update)
HAND = [MockJob("A", [[1, 2, 3, 1]]), MockJob("B", [[1, 1, 2, 2]]), MockJob("C", [[2, 1, 1, 1]])]
ONE = [Machine(1, 1)]


def rows(trace):
    return sorted(zip(trace.job.tolist(), trace.stage.tolist(), trace.start.tolist(), trace.finish.tolist()))


def test_hand_worked_sequential():
    # one job after the other, stages back to back: A 0-7, B 7-13, C 13-18
    trace = simulate_policy(HAND, ONE, make_policy("sequential"))
    expected = [
        (0, 0, 0, 1),
        (0, 1, 1, 3),
        (0, 2, 3, 6),
        (0, 3, 6, 7),
        (1, 0, 7, 8),
        (1, 1, 8, 9),
        (1, 2, 9, 11),
        (1, 3, 11, 13),
        (2, 0, 13, 15),
        (2, 1, 15, 16),
        (2, 2, 16, 17),
        (2, 3, 17, 18),
    ]
    assert rows(trace) == expected


def test_hand_worked_load_aware():
    # CPU first come first served: proposes A 0-1, B 1-2, C 2-4 (all ready at 0), then builds A 4-6
    # (ready at 1), B 6-7, C 7-8; device: A 6-9, B waits from 7 to 9 (9-11), C 11-12; updates A 9-10,
    # B 11-13 and C waits for the core until 13 (13-14)
    trace = simulate_policy(HAND, ONE, make_policy("load_aware"))
    expected = [
        (0, 0, 0, 1),
        (0, 1, 4, 6),
        (0, 2, 6, 9),
        (0, 3, 9, 10),
        (1, 0, 1, 2),
        (1, 1, 6, 7),
        (1, 2, 9, 11),
        (1, 3, 11, 13),
        (2, 0, 2, 4),
        (2, 1, 7, 8),
        (2, 2, 11, 12),
        (2, 3, 13, 14),
    ]
    assert rows(trace) == expected
    assert trace.makespan == 14
    assert trace.busy_fraction(0, "device") == pytest.approx(6 / 14)


def test_hand_worked_parallel_processor_sharing():
    # all three proposes share the core at rate 1/3: A and B end at 3, C has 1 s left; builds A and B
    # join (rate 1/3): C's propose and B's build end at 6; then A's build (1 s left) and C's build share
    # at 1/2 until 8 while B profiles alone 6-8; A and C profile together at 1/2 (C ends at 10), B
    # updates 8-10, C updates 10-11, A profiles alone to 12 and updates 12-13
    trace = simulate_policy(HAND, ONE, make_policy("parallel"))
    expected = [
        (0, 0, 0, 3),
        (0, 1, 3, 8),
        (0, 2, 8, 12),
        (0, 3, 12, 13),
        (1, 0, 0, 3),
        (1, 1, 3, 6),
        (1, 2, 6, 8),
        (1, 3, 8, 10),
        (2, 0, 0, 6),
        (2, 1, 6, 8),
        (2, 2, 8, 10),
        (2, 3, 10, 11),
    ]
    np.testing.assert_allclose(rows(trace), expected, atol=1e-9)
    # interference 1.0 halves the shared rate: the three proposes take 6 s for A's 1 s of work
    slowed = simulate_policy(HAND, ONE, make_policy("parallel"), interference=1.0)
    np.testing.assert_allclose(rows(slowed)[0], (0, 0, 0, 6), atol=1e-9)


def mixes():
    """Random job mixes: durations, arrivals, CPU demands, machines."""
    job = st.tuples(
        st.integers(1, 3),  # rounds
        st.integers(0, 10**6),  # duration seed
        st.sampled_from([0.0, 0.0, 0.5, 2.0]),  # arrival
        st.integers(1, 2),  # build cores
    )
    return st.tuples(st.lists(job, min_size=1, max_size=7), st.integers(1, 3), st.integers(1, 2), st.integers(1, 2))


def build(spec):
    specs, machine_count, cores, devices = spec
    jobs = []
    for j, (rounds, seed, arrival, build_cores) in enumerate(specs):
        durations = np.random.default_rng(seed).choice([0.0, 0.5, 1.0, 1.5, 3.0], size=(rounds, 4))
        demands = (Demand("cpu"), Demand("cpu", min(build_cores, cores + 1)), Demand("device"), Demand("cpu"))
        jobs.append(MockJob(f"j{j}", durations, demands, arrival))
    machines = [Machine(cores + 1, devices)] * machine_count
    return jobs, machines


@settings(max_examples=60, deadline=None)
@given(mixes(), st.sampled_from(["sequential", "parallel", "load_aware", "predictive"]), st.sampled_from([0.0, 0.3]))
def test_every_schedule_keeps_order_and_exclusivity(spec, name, interference):
    jobs, machines = build(spec)
    trace = simulate_policy(jobs, machines, make_policy(name), interference)
    brute_force_check(trace, jobs, machines, exclusive=name != "parallel")
    check_trace(trace, [job.rounds for job in jobs], machines, exclusive=name != "parallel")
    # lower bound: no job finishes before it arrived plus its own stages back to back
    longest = max(job.arrival + job.durations.sum() for job in jobs)
    assert trace.makespan >= longest - 1e-9
    if name != "parallel":  # exclusive runs take each stage's own time exactly
        np.testing.assert_allclose(
            trace.seconds, [jobs[j].durations[r, s] for j, r, s in zip(trace.job, trace.round, trace.stage)], atol=1e-9
        )


@settings(max_examples=30, deadline=None)
@given(mixes())
def test_sequential_on_one_machine_is_the_sum_of_all_stages(spec):
    jobs, machines = build(spec)
    jobs = [MockJob(job.name, job.durations, job.demands) for job in jobs]  # all arrive at 0
    trace = simulate_policy(jobs, machines[:1], make_policy("sequential"))
    assert trace.makespan == pytest.approx(sum(job.durations.sum() for job in jobs))


def test_check_trace_catches_overlapping_profiles():
    # three cores: CPU stages never queue; B profiles 2-4, A and C join it at 3
    wide = [Machine(3, 1)]
    trace = simulate_policy(HAND, wide, make_policy("parallel"))
    with pytest.raises(ValueError, match="machine 0 device: 3 units in use at t=3, capacity 1"):
        check_trace(trace, [1, 1, 1], wide, exclusive=True)


def test_predictive_learns_durations_and_serves_most_device_work_first():
    policy = Predictive()
    for job in range(3):
        policy.register(job, DEFAULT_DEMANDS)  # profile (stage 2) is the device stage
    policy.observe(0, 1, 4.0)
    policy.observe(0, 1, 2.0)  # moving average 0.5 * 4 + 0.5 * 2
    policy.observe(1, 1, 1.0)
    policy.observe(1, 2, 3.0)
    assert policy.estimator.estimate(0)[1] == pytest.approx(3.0)
    assert policy.estimator.estimate(2)[1] == pytest.approx(7.0 / 3)  # unseen job: mean of all
    # job 0 at build of round 0 of 2: build 3, profile 3 (its prior: the mean over jobs), update 1
    # (no measurement at all: 1 s), then a full round 1 + 3 + 3 + 1 ...
    assert policy.estimator.remaining(0, 0, 1, 2) == pytest.approx(3 + 3 + 1 + (1 + 3 + 3 + 1))
    # ... of which device work: two profiles of 3 s; after round 0's profile only one is left
    assert policy.estimator.remaining(0, 0, 1, 2, (False, False, True, False)) == pytest.approx(6.0)
    assert policy.estimator.remaining(0, 0, 3, 2, (False, False, True, False)) == pytest.approx(3.0)
    # job 1 (update of round 0, one profile left) waits behind job 0 (build, two profiles left)
    # although job 1 has been ready longer
    assert policy.priority(0, 0, 1, 2, 0.0, 5.0) < policy.priority(1, 0, 3, 2, 0.0, 1.0)
    # equal device work left: first come, first served
    assert policy.priority(2, 0, 0, 2, 0.0, 1.0) < policy.priority(0, 0, 0, 2, 0.0, 2.0)
