"""Timing helpers: alternation order, warm-up, and argument checks."""

import time

import pytest

from jaxsched.timing import alternated_times, best_time, compare


def test_runs_alternate_after_warmup():
    calls = []
    times = alternated_times({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=2, warmup=1)
    assert calls == ["a", "b"] * 3
    assert times["a"].shape == (2,) and times["b"].shape == (2,)


def test_best_time_measures_a_sleep():
    seconds = best_time(lambda: time.sleep(0.02), repeats=2)
    assert 0.019 <= seconds < 0.5


@pytest.mark.parametrize("repeats, warmup", [(0, 0), (1.5, 0), (1, -1)])
def test_bad_counts_are_named(repeats, warmup):
    with pytest.raises(ValueError, match="repeats|warmup"):
        alternated_times({"a": lambda: None}, repeats, warmup)


def test_boolean_counts_are_refused():
    with pytest.raises(ValueError, match="repeats"):
        best_time(lambda: None, repeats=True)


def test_cpu_clock_does_not_count_sleep():
    times = alternated_times({"sleep": lambda: time.sleep(0.02)}, repeats=2, warmup=0, clock="cpu")
    assert times["sleep"].max() < 0.01


def test_unknown_clock_is_named():
    with pytest.raises(ValueError, match="clock"):
        alternated_times({"a": lambda: None}, 1, 0, clock="gpu")


def test_compare_sees_a_slower_baseline():
    """Hand-worked: 40 ms against 10 ms sleeps is a speedup of 4 on an idle machine; a sleep can only overshoot
    (by a few ms under load), which keeps the ratio above 2 and each median above its sleep."""
    result = compare(lambda: time.sleep(0.04), lambda: time.sleep(0.01), repeats=5, warmup=1)
    assert 2.0 < result.ratio < 4.1 and result.faster
    assert result.low <= result.ratio <= result.high
    assert result.baseline_ms >= 40 and result.candidate_ms >= 10
