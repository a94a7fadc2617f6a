import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxsched import heft, simulate, upward_rank, validate
from jaxsched.generate import random_dag
from tests.jaxsched.naive import naive_simulate
from tests.jaxsched.problems import random_problem


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.booleans(), st.booleans())
def test_simulate_matches_greedy_reference_and_validates(seed, extras, instant):
    problem = random_problem(seed, bandwidth=extras, arrival=extras, instant=instant)
    rng = np.random.default_rng(seed)
    proc = rng.integers(0, problem.num_procs, problem.num_tasks)
    priority = rng.integers(0, 5, problem.num_tasks).astype(float)  # many ties on purpose
    schedule = simulate(problem, proc, priority)
    validate(problem, schedule)
    ref_proc, ref_start, ref_finish = naive_simulate(problem, proc, priority)
    np.testing.assert_array_equal(schedule.proc, ref_proc)
    np.testing.assert_array_equal(schedule.start, ref_start)
    np.testing.assert_array_equal(schedule.finish, ref_finish)


@pytest.mark.parametrize("seed", range(5))
def test_simulating_heft_assignment_in_rank_order_reproduces_heft(seed):
    problem = random_dag(80, 6, ccr=2.0, seed=seed)
    reference = heft(problem)
    replay = simulate(problem, reference.proc, upward_rank(problem))
    np.testing.assert_array_equal(replay.start, reference.start)
    np.testing.assert_array_equal(replay.finish, reference.finish)


def test_priority_against_precedence_is_repaired():
    """A child with higher priority than its parent still runs after it."""
    problem = random_problem(1, max_tasks=2)
    problem = type(problem)(np.array([[2.0], [3.0]]), [0], [1], [5.0])
    schedule = simulate(problem, [0, 0], [0.1, 0.9])
    np.testing.assert_array_equal(schedule.start, [0.0, 2.0])


@pytest.mark.parametrize(
    "proc, priority, message",
    [
        ([0, 2], [0.0, 0.0], r"proc\[1\] = 2 is out of range for 2 processors"),
        ([0], [0.0, 0.0], "must have shape"),
        ([0.5, 1.0], [0.0, 0.0], "integer processor indices"),
        ([0, 1], [0.0, np.nan], "priority must be finite"),
    ],
)
def test_bad_assignment_raises(proc, priority, message):
    problem = type(random_problem(0))(np.ones((2, 2)), [0], [1], [1.0])
    with pytest.raises(ValueError, match=message):
        simulate(problem, np.asarray(proc), priority)
