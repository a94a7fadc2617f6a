"""Wall-clock timing shared by the benchmarks, the experiments and the autotuner's profile stage.

Functions passed here should finish their work before returning (call `jax.block_until_ready` on
JAX results): JAX dispatches asynchronously, so timing an unblocked call measures only the dispatch.
On a noisy machine, compare candidates with `alternated_times`, which interleaves their runs so that
a slow spell of the machine hits every candidate alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np


def _check_counts(repeats: int, warmup: int) -> None:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")


def alternated_times(fns: Mapping[str, Callable[[], object]], repeats: int, warmup: int = 1) -> dict[str, np.ndarray]:
    """Seconds of `repeats` calls of each function, run in turns (a, b, c, a, b, c, ...) after
    `warmup` untimed turns; returns `{name: times[repeats]}`."""
    _check_counts(repeats, warmup)
    if not fns:
        raise ValueError("alternated_times needs at least one function")
    times = {name: np.empty(repeats) for name in fns}
    for turn in range(warmup + repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            if turn >= warmup:
                times[name][turn - warmup] = time.perf_counter() - start
    return times


def best_time(fn: Callable[[], object], repeats: int, warmup: int = 0) -> float:
    """The fastest of `repeats` timed calls of `fn` (seconds), after `warmup` untimed calls: the
    least-disturbed run, the usual figure for a deterministic computation on a shared machine."""
    return float(alternated_times({"fn": fn}, repeats, warmup)["fn"].min())
