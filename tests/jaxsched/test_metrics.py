import numpy as np
import pytest

from jaxsched import heft, summary
from tests.jaxsched.problems import topcuoglu_example


def test_metrics_on_the_published_example():
    """Hand-computed from the HEFT schedule of Topcuoglu et al. (2002), Fig. 3(a)."""
    problem = topcuoglu_example()
    metrics = summary(problem, heft(problem))
    # CP_MIN with minimum costs: n1 (9) -> n2 (13) -> n9 (12) -> n10 (7) = 41
    assert metrics["slr"] == pytest.approx(80 / 41)
    # best single processor: P1 runs everything in 127
    assert metrics["speedup"] == pytest.approx(127 / 80)
    assert metrics["efficiency"] == pytest.approx(127 / 80 / 3)
    assert metrics["avg_turnaround"] == pytest.approx(442 / 10)  # sum of finish times
    assert metrics["avg_waiting"] == pytest.approx(332 / 10)  # sum of start times
    assert metrics["makespan"] == 80


def test_ratios_with_a_zero_denominator_and_foreign_schedules_are_refused():
    from jaxsched import Problem, Schedule, slr, speedup

    free = Problem(np.zeros((2, 2)), [0], [1], [0.0])
    schedule = heft(free)
    with pytest.raises(ValueError, match="SLR .* undefined"):
        slr(free, schedule)  # was ZeroDivisionError
    with pytest.raises(ValueError, match="speedup .* undefined"):
        speedup(free, schedule)
    with pytest.raises(ValueError, match=r"schedule.proc must have shape \(10,\)"):
        summary(topcuoglu_example(), Schedule(np.zeros(2, int), np.zeros(2), np.ones(2)))
