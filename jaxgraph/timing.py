"""Timing helpers shared by the measured cost models, the command line and the benchmark.

Runs that are compared are timed in alternation, so load drift on a shared machine hits all of them
alike; a comparison reports the geometric mean of the per-round ratios with a t confidence interval.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import jax
import numpy as np
import scipy.stats

from jaxgraph.arguments import integer

CLOCKS: Mapping[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def check_timing(warmup: int, repeats: int, clock: str) -> None:
    """ValueError unless warmup >= 0 and repeats >= 1 are integers and `clock` is one of `CLOCKS`."""
    integer("warmup", warmup, 0)
    integer("repeats", repeats, 1)
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")


def interleaved_seconds(functions: Sequence[Callable[[], Any]], warmup: int, repeats: int,
                        clock: str = "wall") -> np.ndarray:
    """[repeats, len(functions)] seconds per call, the functions called in turn each round after `warmup`
    rounds (results are waited for with `jax.block_until_ready`, so JAX dispatch is not mistaken for work)."""
    check_timing(warmup, repeats, clock)
    now = CLOCKS[clock]
    for _ in range(warmup):
        for fn in functions:
            jax.block_until_ready(fn())
    times = np.empty((repeats, len(functions)))
    for r in range(repeats):
        for k, fn in enumerate(functions):
            start = now()
            jax.block_until_ready(fn())
            times[r, k] = now() - start
    return times


def median_seconds(fn: Callable[[], Any], warmup: int, repeats: int, clock: str = "wall") -> float:
    """Median time of one call of `fn` (see `interleaved_seconds`)."""
    return float(statistics.median(interleaved_seconds([fn], warmup, repeats, clock)[:, 0]))


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


def compare(baseline: Callable[[], Any], candidate: Callable[[], Any], warmup: int = 3, repeats: int = 20,
            confidence: float = 0.95, clock: str = "wall") -> Comparison:
    """Time two functions in alternation; the ratio's interval is a t interval on the per-round log ratios."""
    times = interleaved_seconds([baseline, candidate], warmup, repeats, clock)
    logs = np.log(times[:, 0] / times[:, 1])
    mean = float(logs.mean())
    spread = float(logs.std(ddof=1) / math.sqrt(len(logs))) if len(logs) > 1 else math.inf
    half = float(scipy.stats.t.ppf(0.5 + confidence / 2, max(len(logs) - 1, 1))) * spread
    return Comparison(1e3 * float(np.median(times[:, 0])), 1e3 * float(np.median(times[:, 1])), math.exp(mean),
                      math.exp(mean - half), math.exp(mean + half))
