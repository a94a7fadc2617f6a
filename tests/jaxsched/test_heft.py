import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxsched import heft, upward_rank, validate
from tests.jaxsched.naive import naive_heft, naive_upward_rank
from tests.jaxsched.problems import random_problem, topcuoglu_example


def test_published_example_ranks_and_schedule():
    """Topcuoglu, Hariri and Wu (2002): Table of upward ranks and the HEFT schedule of Fig. 3(a)."""
    problem = topcuoglu_example()
    np.testing.assert_allclose(
        upward_rank(problem), [108, 77, 80, 80, 69, 63.333, 42.667, 35.667, 44.333, 14.667], atol=1e-3
    )
    schedule = heft(problem)
    assert schedule.makespan == 80
    # paper: n1 P3 0-9, n2 P1 27-40, n3 P3 9-28, n4 P2 18-26, n5 P3 28-38, n6 P2 26-42,
    #        n7 P3 38-49, n8 P1 57-62, n9 P2 56-68, n10 P2 73-80
    np.testing.assert_array_equal(schedule.proc, [2, 0, 2, 1, 2, 1, 2, 0, 1, 1])
    np.testing.assert_array_equal(schedule.start, [0, 27, 9, 18, 28, 26, 38, 57, 56, 73])
    np.testing.assert_array_equal(schedule.finish, [9, 40, 28, 26, 38, 42, 49, 62, 68, 80])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.booleans(), st.booleans(), st.booleans())
def test_heft_matches_naive_reference_and_validates(seed, bandwidth, arrival, instant):
    problem = random_problem(seed, bandwidth=bandwidth, arrival=arrival, instant=instant)
    np.testing.assert_allclose(upward_rank(problem), naive_upward_rank(problem))
    schedule = heft(problem)
    validate(problem, schedule)
    proc, start, finish = naive_heft(problem, upward_rank(problem))
    np.testing.assert_array_equal(schedule.proc, proc)
    np.testing.assert_array_equal(schedule.start, start)
    np.testing.assert_array_equal(schedule.finish, finish)


def test_insertion_fills_an_idle_gap():
    """Hand-worked, one processor, no edges (rank = cost): t0 (4, released at 10) goes first to 10-14;
    t1 (3) then fits the idle gap 0-10 at 0, and t2 (2) the rest of it at 3. Without insertion they
    would start at 14 and 17."""
    problem = type(topcuoglu_example())(
        comp=np.array([[4.0], [3.0], [2.0]]), src=[], dst=[], data=[], task_arrival=[10.0, 0.0, 0.0]
    )
    schedule = heft(problem)
    np.testing.assert_array_equal(schedule.start, [10, 0, 3])
    validate(problem, schedule)


@pytest.mark.parametrize("seed", range(3))
def test_heft_is_deterministic(seed):
    problem = random_problem(seed, max_tasks=40)
    a, b = heft(problem), heft(problem)
    np.testing.assert_array_equal(a.start, b.start)
    np.testing.assert_array_equal(a.proc, b.proc)
