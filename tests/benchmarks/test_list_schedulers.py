"""`end_to_end_times` of benchmarks/list_schedulers.py (what `benchmarks.gpu` calls) on a tiny batch: the figures
it returns add up, its schedules were checked against the NumPy reference, and bad input gets a ValueError."""

import pytest

from benchmarks.list_schedulers import end_to_end_times


def test_end_to_end_times_returns_consistent_figures():
    figures = end_to_end_times(["MCT"], instances=3, tasks=6, procs=2)
    assert list(figures) == ["MCT"]
    row = figures["MCT"]
    assert set(row) == {"end_to_end_s", "kernel_s", "host_us_per_instance"}
    assert row["end_to_end_s"] > 0 and row["kernel_s"] > 0
    assert row["host_us_per_instance"] == pytest.approx((row["end_to_end_s"] - row["kernel_s"]) / 3 * 1e6)


@pytest.mark.parametrize("names, sizes, message", [
    (["GA"], {}, "unknown batched scheduler 'GA'"),
    (["HEFT"], {"instances": 0}, "instances must be at least 1"),
])
def test_end_to_end_times_rejects_bad_input(names, sizes, message):
    with pytest.raises(ValueError, match=message):
        end_to_end_times(names, **sizes)
