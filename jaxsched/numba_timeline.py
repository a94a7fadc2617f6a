"""The placement rule (`jaxsched.timeline`) compiled for the CPU with numba, and what every compiled scheduler
shares: read-only inputs and a batch spread over the CPU cores.

Each processor's busy intervals are sorted by start in one row of a pair of [P, W] arrays, whose width W
doubles when some processor fills its row. `insertion_start` is the placement rule on one row (the first idle
gap that fits, else after the last task), kept apart so that every list scheduler can place with it;
`earliest_start` is `Timelines.earliest_start`; `fill_ready` gives a task's ready time on every processor. All
in float64 with the NumPy reference's arithmetic and ties (lowest processor index), so the compiled schedulers
(`jaxsched.numba_heft`, `jaxsched.numba_simulate`, `jaxsched.numba_listsched`) equal theirs to the last bit.

`over_cores` runs a compiled kernel over slices of a batch in threads, one per core (compiled code runs without
the GIL). Compiled code is cached on disk (`cache=True`), so only the first call in a fresh environment compiles.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os

import numba
import numpy as np

_jit = numba.njit(cache=True, nogil=True)


def frozen_array(array) -> np.ndarray:
    """A read-only C-contiguous view of `array` (int64 or float64): the compiled functions see every input as
    read-only, whichever caller gave it, so each compiles once."""
    array = np.asarray(array)
    kind = np.int64 if np.issubdtype(array.dtype, np.integer) or array.dtype == bool else np.float64
    view = np.ascontiguousarray(array, kind).view()
    view.setflags(write=False)
    return view


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def over_cores(kernel, count: int, *arrays) -> None:
    """Runs `kernel(lo, hi, *arrays)` on slices [lo, hi) of `count` instances, one slice per CPU core, in
    threads (the compiled kernels release the GIL and write disjoint rows of their outputs)."""
    cuts = np.linspace(0, count, min(_cores(), max(count, 1)) + 1).astype(np.int64)
    if len(cuts) == 2:
        kernel(0, count, *arrays)
        return
    jobs = [_pool().submit(kernel, lo, hi, *arrays) for lo, hi in zip(cuts[:-1], cuts[1:])]
    for job in jobs:
        job.result()


@functools.cache
def _pool() -> concurrent.futures.ThreadPoolExecutor:
    """One thread per core, started on first use and kept (starting threads costs more than a small batch)."""
    return concurrent.futures.ThreadPoolExecutor(_cores(), thread_name_prefix="jaxsched-numba")


@_jit
def _first_not_below(busy_start, proc, count, value):
    """First k < count with busy_start[proc, k] >= value (count if none): binary search on one row."""
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) // 2
        if busy_start[proc, mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo


@_jit
def insertion_start(busy_start, busy_finish, proc, count, ready, duration, finish_by):
    """Start of a task (`ready`, `duration` > 0) in the first idle gap of processor `proc` that fits it,
    among the gaps before its last busy interval; `inf` when none fits or the first that fits would
    finish after `finish_by`. Row `proc` of busy_start/busy_finish holds its `count` busy intervals, sorted.

    Gap k is [finish[k-1], start[k]] (gap 0 opens at -inf); gaps ending before `ready + duration`
    cannot hold the task, so the search starts at the first that does (binary search). Rows are indexed,
    never sliced: a view would cost two reference-count updates in this, the innermost loop.
    """
    k = _first_not_below(busy_start, proc, count, ready + duration)
    while k < count:
        begin = ready if k == 0 else max(busy_finish[proc, k - 1], ready)
        if begin + duration > finish_by:  # later gaps start later still
            return np.inf
        if begin + duration <= busy_start[proc, k]:
            return begin
        k += 1
    return np.inf


@_jit
def earliest_start(busy_start, busy_finish, proc, count, avail, ready, duration):
    """Earliest start on processor `proc`, whose last busy interval ends at `avail` (`Timelines.earliest_start`)."""
    if duration == 0 or ready >= avail:
        return ready
    begin = insertion_start(busy_start, busy_finish, proc, count, ready, duration, avail)
    return begin if begin < np.inf else avail


@_jit
def occupy(busy_start, busy_finish, count, proc, start, duration):
    """Inserts [start, start + duration) into the sorted row of `proc`, doubling the rows' width when it is
    full; returns the (possibly new) rows. Zero-length tasks occupy no time."""
    if duration == 0:
        return busy_start, busy_finish
    n = count[proc]
    if n == busy_start.shape[1]:
        wider_start = np.empty((busy_start.shape[0], 2 * n))
        wider_finish = np.empty((busy_start.shape[0], 2 * n))
        wider_start[:, :n] = busy_start
        wider_finish[:, :n] = busy_finish
        busy_start, busy_finish = wider_start, wider_finish
    pos = _first_not_below(busy_start, proc, n, start)
    for k in range(n, pos, -1):
        busy_start[proc, k] = busy_start[proc, k - 1]
        busy_finish[proc, k] = busy_finish[proc, k - 1]
    busy_start[proc, pos] = start
    busy_finish[proc, pos] = start + duration
    count[proc] = n + 1
    return busy_start, busy_finish


@_jit
def empty_rows(num_tasks, num_procs):
    """Empty timelines of `num_procs` processors: busy_start and busy_finish rows [P, W] (W sized for an even
    spread of `num_tasks`, doubled by `occupy` when full) and each row's count of busy intervals."""
    width = max(4, 2 * ((num_tasks + num_procs - 1) // num_procs))
    return np.empty((num_procs, width)), np.empty((num_procs, width)), np.zeros(num_procs, np.int64)


@_jit
def is_uniform(inverse_bandwidth, num_procs):
    """Whether every transfer costs `data` between distinct processors (no bandwidths)."""
    for p in range(num_procs):
        for q in range(num_procs):
            if inverse_bandwidth[p, q] != (0.0 if p == q else 1.0):
                return False
    return True


@_jit
def fill_ready(ready, task, num_procs, pred_ptr, pred_src, pred_data, arrival, proc, finish, inverse_bandwidth,
               uniform):
    """ready[p] = max(arrival, max over predecessors u of finish[u] + data * inverse_bandwidth[proc[u], p]).

    Without bandwidths an input arrives at finish + data except on its own processor, so only the one
    processor hosting every latest-arriving input (if one does) can differ from the maximum.
    """
    lo, hi = pred_ptr[task], pred_ptr[task + 1]
    if not uniform:
        for p in range(num_procs):
            r = arrival[task]
            for k in range(lo, hi):
                u = pred_src[k]
                r = max(r, finish[u] + pred_data[k] * inverse_bandwidth[proc[u], p])
            ready[p] = r
        return
    latest, host, single = -np.inf, -1, True
    for k in range(lo, hi):
        u = pred_src[k]
        a = finish[u] + pred_data[k]
        if a > latest:
            latest, host, single = a, proc[u], True
        elif a == latest and proc[u] != host:
            single = False
    ready[:num_procs] = max(arrival[task], latest)
    if single and host >= 0:
        r = arrival[task]
        for k in range(lo, hi):
            u = pred_src[k]
            r = max(r, finish[u] if proc[u] == host else finish[u] + pred_data[k])
        ready[host] = r
