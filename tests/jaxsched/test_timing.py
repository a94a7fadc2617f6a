"""Timing helpers: alternation order, warm-up, and argument checks."""

import time

import pytest

from jaxsched.timing import alternated_times, best_time


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
