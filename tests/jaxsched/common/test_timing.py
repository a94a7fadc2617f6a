"""Timing helpers: alternation order, warm-up, and argument checks."""

import time

import pytest

from jaxsched.common import timing
from jaxsched.common.timing import alternated_times, best_time, compare


def test_runs_alternate_in_counterbalanced_turns_after_warmup():
    calls = []
    times = alternated_times({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=2, warmup=1)
    assert calls == ["a", "b", "b", "a", "a", "b"]  # one warm-up turn, then two timed turns
    assert times["a"].shape == (2,) and times["b"].shape == (2,)


def test_counterbalanced_turns_cancel_a_steady_slowdown(monkeypatch):
    """Two equal functions on a machine that slows down by 1 ms per call: plain turns (a, b, a, b) would
    charge b 1 ms more every turn (20 ms over 20 turns); counterbalanced turns charge both alike."""

    def readings():  # start and stop of call k are k ms apart
        now = 0.0
        for k in range(1, 41):
            yield now
            now += k * 1e-3
            yield now

    clock = readings()
    monkeypatch.setitem(timing.CLOCKS, "fake", lambda: next(clock))
    times = alternated_times({"a": lambda: None, "b": lambda: None}, repeats=20, warmup=0, clock="fake")
    assert times["a"].sum() == pytest.approx(times["b"].sum())
    assert times["a"].sum() + times["b"].sum() == pytest.approx(sum(range(1, 41)) * 1e-3)


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
