"""The compiled list scheduler against the NumPy reference (`jaxsched.listsched`), to the last bit, on every
covered preset, plus CPOP's published example."""

import numpy as np
import pytest

from jaxsched import ListConfig, list_schedule, make_plan, schedule
from jaxsched.numba_listsched import COVERED, list_schedule_numba
from tests.jaxsched.problems import (
    TOPCUOGLU_CPOP_FINISH,
    TOPCUOGLU_CPOP_PROC,
    TOPCUOGLU_CPOP_START,
    random_problem,
    topcuoglu_example,
)


def _assert_same(expected, got):
    np.testing.assert_array_equal(got.proc, expected.proc)
    np.testing.assert_array_equal(got.start, expected.start)
    np.testing.assert_array_equal(got.finish, expected.finish)


@pytest.mark.parametrize("name", COVERED)
def test_equals_numpy_reference(name):
    for seed in range(40):
        problem = random_problem(seed, max_tasks=14, bandwidth=seed % 2 == 0, arrival=seed % 3 == 0,
                                 instant=seed % 5 == 0)
        _assert_same(schedule(problem, name), list_schedule_numba(problem, name))


def test_non_preset_configs_equal_numpy_reference():
    """Selections and placements the presets do not pair: insertion with the dynamic rules, append-only
    PEFT, WBA with another seed and threshold, CPOP pinning with EST (with insertion and append-only),
    OLB pinned as FastestNode."""
    configs = [ListConfig("upward", "min_min", True), ListConfig("oct", "eft_oct", False),
               ListConfig("topological", "wba", True, seed=7, alpha=0.2),
               ListConfig("rank_sum", "est", True, "critical_path"),
               ListConfig("rank_sum", "est", False, "critical_path"),
               ListConfig("upward", "earliest_free", False, "fastest_processor")]
    for config in configs:
        for seed in range(10):
            problem = random_problem(seed, bandwidth=seed % 2 == 0, arrival=seed % 3 == 0)
            plan = make_plan(problem, config)
            _assert_same(list_schedule(problem, config, plan), list_schedule_numba(problem, config, plan))


def test_cpop_on_topcuoglu_example():
    """Topcuoglu, Hariri and Wu (2002), Sec. 4.2 and Fig. 3(b): makespan 86, and every task's processor,
    start and finish as worked by hand (`tests.jaxsched.problems`)."""
    result = list_schedule_numba(topcuoglu_example(), "CPOP")
    assert result.makespan == 86
    np.testing.assert_array_equal(result.proc, TOPCUOGLU_CPOP_PROC)
    np.testing.assert_array_equal(result.start, TOPCUOGLU_CPOP_START)
    np.testing.assert_array_equal(result.finish, TOPCUOGLU_CPOP_FINISH)


def test_uncovered_scheduler_is_named():
    with pytest.raises(ValueError, match="no compiled list scheduler 'GA'; covered: HEFT, CPOP"):
        list_schedule_numba(random_problem(0), "GA")
    with pytest.raises(ValueError, match="expected a ListConfig"):
        list_schedule_numba(random_problem(0), 3)
