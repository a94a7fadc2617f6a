"""Timing shared by the benchmarks, the experiments, the autotuner's profile stage and jaxgraph's measured
costs and command line.

Results are waited for with `jax.block_until_ready` (a no-op on non-JAX values): JAX dispatches
asynchronously, so timing an unblocked call would measure only the dispatch. On a noisy machine,
compare candidates with `alternated_times`, which interleaves their runs so that a slow spell of the
machine hits every candidate alike; `compare` turns two alternated series into a speedup with a
confidence interval. `clock="cpu"` times the process's CPU time instead of elapsed time: on a CPU
shared with other work it is far steadier (it does not count time spent waiting to be scheduled; it
does add up all threads).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import numpy as np
import scipy.stats

from jaxsched.common.arguments import integer

CLOCKS: Mapping[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def check_timing(repeats: int, warmup: int, clock: str = "wall") -> None:
    """ValueError unless `repeats` >= 1 and `warmup` >= 0 are integers (not booleans) and `clock` is in `CLOCKS`."""
    integer("repeats", repeats, 1)
    integer("warmup", warmup, 0)
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")


def alternated_times(fns: Mapping[str, Callable[[], object]], repeats: int, warmup: int = 1,
                     clock: str = "wall") -> dict[str, np.ndarray]:
    """Seconds of `repeats` calls of each function, run in counterbalanced turns (a, b, c, c, b, a, a, b,
    c, ...) after `warmup` untimed turns; returns `{name: times[repeats]}`. Reversing every other turn
    keeps a fixed position in the turn (the first run after another program's, a warm cache) and a steady
    drift of the machine's speed from favouring one function."""
    check_timing(repeats, warmup, clock)
    if not fns:
        raise ValueError("alternated_times needs at least one function")
    now, times = CLOCKS[clock], {name: np.empty(repeats) for name in fns}
    order = list(fns.items())
    for turn in range(warmup + repeats):
        for name, fn in order if turn % 2 == 0 else order[::-1]:
            start = now()
            jax.block_until_ready(fn())
            if turn >= warmup:
                times[name][turn - warmup] = now() - start
    return times


def best_time(fn: Callable[[], object], repeats: int, warmup: int = 0) -> float:
    """The fastest of `repeats` timed calls of `fn` (seconds), after `warmup` untimed calls: the
    least-disturbed run, the usual figure for a deterministic computation on a shared machine."""
    return float(alternated_times({"fn": fn}, repeats, warmup)["fn"].min())


def median_time(fn: Callable[[], object], repeats: int, warmup: int = 0, clock: str = "wall") -> float:
    """The median of `repeats` timed calls of `fn` (seconds), after `warmup` untimed calls."""
    return float(statistics.median(alternated_times({"fn": fn}, repeats, warmup, clock)["fn"]))


class Comparison(NamedTuple):
    """How much faster `candidate` ran than `baseline`: ratio > 1 means faster, with a confidence interval."""

    baseline_ms: float  # medians
    candidate_ms: float
    ratio: float  # geometric mean over rounds of baseline time / candidate time
    low: float  # confidence interval of the ratio
    high: float

    @property
    def faster(self) -> bool:
        """The candidate is faster beyond noise: the whole interval lies above 1."""
        return self.low > 1.0


def compare(baseline: Callable[[], object], candidate: Callable[[], object], repeats: int = 20, warmup: int = 3,
            confidence: float = 0.95, clock: str = "wall") -> Comparison:
    """Time two functions in alternation; the ratio's interval is a t interval on the per-round log ratios."""
    times = alternated_times({"baseline": baseline, "candidate": candidate}, repeats, warmup, clock)
    base, cand = times["baseline"], times["candidate"]
    logs = np.log(base / cand)
    mean = float(logs.mean())
    spread = float(logs.std(ddof=1) / math.sqrt(len(logs))) if len(logs) > 1 else math.inf
    half = float(scipy.stats.t.ppf(0.5 + confidence / 2, max(len(logs) - 1, 1))) * spread
    return Comparison(1e3 * float(np.median(base)), 1e3 * float(np.median(cand)), math.exp(mean),
                      math.exp(mean - half), math.exp(mean + half))
