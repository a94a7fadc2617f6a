"""HEFT, `simulate` and the GA's population evaluation compiled for the CPU with numba.

The NumPy references (`jaxsched.heft`, `jaxsched.simulate`) stay the readable definitions; these are
the same loops compiled, with the same visit order (HEFT: decreasing upward rank, ties by canonical
topological position; `simulate`: the placement order of `jaxsched.order`), the same placement rule
(`jaxsched.timeline`) and the same ties (lowest processor index), all in float64 with the same
arithmetic, so every schedule equals the reference's to the last bit.

Timelines: each processor's busy intervals sorted by start in one row of a pair of [P, W] arrays,
whose width W doubles when some processor fills its row. `insertion_start` is the placement rule on
one row (the first idle gap that fits, else after the last task), kept apart so that every list
scheduler can place with it. HEFT computes each processor's finish after its last task in one loop
and searches the gaps only of processors whose lower bound `ready + duration` can beat the best
finish so far (as `Timelines.earliest_finish` does).

Batches: `heft_batch_numba` runs HEFT on every problem of a padded `ProblemBatch` (in its
`heft_order`, like `heft_batch`), `population_fitness_numba` simulates every chromosome of a GA
population; both spread their instances over the CPU cores (threads running compiled code without
the GIL). Compiled code is cached on disk (`cache=True`), so only the first call in a fresh
environment compiles (about 15 s of CPU).
"""

from __future__ import annotations

import concurrent.futures
import functools
import os

import numba
import numpy as np

from jaxsched.batch import ProblemBatch
from jaxsched.heft import mean_communication
from jaxsched.jax_simulate import ScheduleArrays
from jaxsched.problem import Problem, Schedule, check_problem
from jaxsched.simulate import check_assignment

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


def _over_cores(kernel, count: int, *arrays) -> None:
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
    return concurrent.futures.ThreadPoolExecutor(_cores(), thread_name_prefix="jaxsched-compiled")


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


@_jit
def heft_place(order, comp, num_procs, pred_ptr, pred_src, pred_data, arrival, inverse_bandwidth, proc, start,
               finish):
    """HEFT's placement of the tasks in `order` (each on the processor among the first `num_procs` that
    finishes it earliest, ties to the lowest index, by insertion); fills proc, start and finish."""
    uniform = is_uniform(inverse_bandwidth, num_procs)
    busy_start, busy_finish, count = empty_rows(len(order), num_procs)
    avail = np.zeros(num_procs)
    ready = np.empty(num_procs)
    for i in range(len(order)):
        task = order[i]
        fill_ready(ready, task, num_procs, pred_ptr, pred_src, pred_data, arrival, proc, finish, inverse_bandwidth,
                   uniform)
        best, best_finish, best_start = 0, np.inf, 0.0
        for p in range(num_procs):  # after the last task
            duration = comp[task, p]
            begin = ready[p] if duration == 0 else max(ready[p], avail[p])
            if begin + duration < best_finish:
                best, best_finish, best_start = p, begin + duration, begin
        for p in range(num_procs):  # in a gap, where one can beat the best so far
            duration = comp[task, p]
            if duration == 0 or ready[p] >= avail[p] or ready[p] + duration > best_finish:
                continue
            begin = insertion_start(busy_start, busy_finish, p, count[p], ready[p], duration, best_finish)
            if begin + duration < best_finish or (begin + duration == best_finish and p < best):
                best, best_finish, best_start = p, begin + duration, begin
        proc[task], start[task], finish[task] = best, best_start, best_finish
        if comp[task, best] > 0:
            avail[best] = max(avail[best], best_finish)
        busy_start, busy_finish = occupy(busy_start, busy_finish, count, best, best_start, comp[task, best])


@_jit
def _upward_rank_order(topo, mean_comp, out_ptr, out_dst, edge_value):
    """HEFT's visit order: decreasing upward rank (`jaxsched.heft.upward_rank`, the same arithmetic), ties
    by position in the canonical topological order `topo`."""
    num_tasks = len(topo)
    rank = np.zeros(num_tasks)
    for i in range(num_tasks - 1, -1, -1):
        task = topo[i]
        best = 0.0
        for k in range(out_ptr[task], out_ptr[task + 1]):
            best = max(best, edge_value[k] + rank[out_dst[k]])
        rank[task] = mean_comp[task] + best
    return topo[np.argsort(-rank[topo], kind="mergesort")]


@_jit
def heft_kernel(comp, mean_comp, topo, out_ptr, out_dst, edge_value, in_ptr, in_src, in_data, arrival,
                inverse_bandwidth):
    """(proc, start, finish) of HEFT on one problem given as the arrays of `heft_inputs` (compiled)."""
    num_tasks, num_procs = comp.shape
    order = _upward_rank_order(topo, mean_comp, out_ptr, out_dst, edge_value)
    proc, start, finish = np.zeros(num_tasks, np.int64), np.zeros(num_tasks), np.zeros(num_tasks)
    heft_place(order, comp, num_procs, in_ptr, in_src, in_data, arrival, inverse_bandwidth, proc, start, finish)
    return proc, start, finish


def heft_inputs(problem: Problem) -> tuple[np.ndarray, ...]:
    """The arrays the compiled HEFT reads: comp, mean costs (NumPy's `mean`, so that ranks match the
    reference bit for bit), the canonical topological order, outgoing edges (CSR: ptr, destination,
    mean transfer time), incoming edges (CSR: ptr, source, data), release times and inverse bandwidths."""
    out_ptr, out_order = problem.out_edges
    in_ptr, in_order = problem.in_edges
    arrays = (
        problem.comp,
        problem.comp.mean(axis=1),
        problem.topological_order,
        out_ptr,
        problem.dst[out_order],
        mean_communication(problem)[out_order],
        in_ptr,
        problem.src[in_order],
        problem.data[in_order],
        problem.arrival,
        problem.inverse_bandwidth,
    )
    return tuple(frozen_array(a) for a in arrays)


def heft_numba(problem: Problem) -> Schedule:
    """`jaxsched.heft(problem)` compiled: the same schedule, to the last bit."""
    check_problem(problem)
    proc, start, finish = heft_kernel(*heft_inputs(problem))
    return Schedule(proc=proc, start=start, finish=finish)


@_jit
def _heft_batch_kernel(lo, hi, comp, num_tasks, num_procs, arrival, pred_ptr, pred_src, pred_data, inverse_bandwidth,
                       order, proc, start, finish):
    for b in range(lo, hi):
        heft_place(order[b, : num_tasks[b]], comp[b], num_procs[b], pred_ptr[b], pred_src, pred_data, arrival[b],
                   inverse_bandwidth[b], proc[b], start[b], finish[b])


def heft_batch_numba(batch: ProblemBatch) -> ScheduleArrays:
    """HEFT on every problem of a padded batch, in its `heft_order`, compiled and spread over the CPU cores:
    `heft_batch` on the CPU. Computes in float64 (pad with `dtype=np.float64` to equal `jaxsched.heft`
    exactly whatever the costs); returns NumPy arrays, zero for padded tasks."""
    comp = np.asarray(batch.comp, np.float64)
    if comp.ndim != 3:
        raise ValueError(f"heft_batch_numba needs a batch (comp [B, T, P]), got comp of shape {comp.shape}")
    size, padded_tasks, _ = comp.shape
    pred = np.asarray(batch.pred)
    real_edge = pred != padded_tasks  # [B, T, K]; every instance's incoming edges, one CSR over the batch
    flat_ptr = np.concatenate([np.zeros(1, np.int64), np.cumsum(real_edge.sum(axis=2))])
    pred_ptr = flat_ptr[np.arange(size)[:, None] * padded_tasks + np.arange(padded_tasks + 1)]  # [B, T + 1]
    proc = np.zeros((size, padded_tasks), np.int64)
    start, finish = np.zeros((size, padded_tasks)), np.zeros((size, padded_tasks))
    _over_cores(
        _heft_batch_kernel, size, frozen_array(comp), frozen_array(np.asarray(batch.task_mask).sum(axis=1)),
        frozen_array(np.asarray(batch.proc_mask).sum(axis=1)), frozen_array(batch.arrival), frozen_array(pred_ptr),
        frozen_array(pred[real_edge]), frozen_array(np.asarray(batch.pred_data)[real_edge]),
        frozen_array(batch.inverse_bandwidth),
        np.array(batch.heft_order, np.int64), proc, start, finish,
    )
    overflow = np.zeros(size, bool)
    return ScheduleArrays(proc.astype(np.int32), start, finish, overflow, np.full(size, padded_tasks, np.int32))


@_jit
def _placement_order(topo, in_ptr, in_src, priority):
    """`jaxsched.order.placement_order`: decreasing effective priority (capped by every ancestor's), ties by
    topological position."""
    eff = priority.copy()
    for i in range(len(topo)):
        task = topo[i]
        for k in range(in_ptr[task], in_ptr[task + 1]):
            eff[task] = min(eff[task], eff[in_src[k]])
    return topo[np.argsort(-eff[topo], kind="mergesort")]


@_jit
def _simulate_one(comp, topo, in_ptr, in_src, in_data, arrival, inverse_bandwidth, proc, priority, start, finish):
    """`jaxsched.simulate` of one chromosome (proc, priority); fills start and finish."""
    num_tasks, num_procs = comp.shape
    busy_start, busy_finish, count = empty_rows(num_tasks, num_procs)
    avail = np.zeros(num_procs)
    order = _placement_order(topo, in_ptr, in_src, priority)
    for i in range(num_tasks):
        task = order[i]
        p = proc[task]
        ready = arrival[task]
        for k in range(in_ptr[task], in_ptr[task + 1]):
            u = in_src[k]
            ready = max(ready, finish[u] + in_data[k] * inverse_bandwidth[proc[u], p])
        duration = comp[task, p]
        begin = earliest_start(busy_start, busy_finish, p, count[p], avail[p], ready, duration)
        start[task], finish[task] = begin, begin + duration
        if duration > 0:
            avail[p] = max(avail[p], begin + duration)
        busy_start, busy_finish = occupy(busy_start, busy_finish, count, p, begin, duration)


@_jit
def _simulate_population(lo, hi, comp, topo, in_ptr, in_src, in_data, arrival, inverse_bandwidth, proc, priority,
                         start, finish):
    for n in range(lo, hi):
        _simulate_one(comp, topo, in_ptr, in_src, in_data, arrival, inverse_bandwidth, proc[n], priority[n], start[n],
                      finish[n])


def simulate_population_numba(problem: Problem, proc, priority) -> tuple[np.ndarray, np.ndarray]:
    """(start [N, T], finish [N, T]) of `jaxsched.simulate(problem, proc[n], priority[n])` for every row n,
    compiled and spread over the CPU cores; equal to the reference to the last bit."""
    proc, priority = check_assignment(problem, proc, priority)
    if proc.ndim != 2:
        raise ValueError(f"proc and priority must be [N, T] populations, got shape {proc.shape}")
    in_ptr, in_order = problem.in_edges
    start, finish = np.zeros(proc.shape), np.zeros(proc.shape)
    inputs = (problem.comp, problem.topological_order, in_ptr, problem.src[in_order], problem.data[in_order],
              problem.arrival, problem.inverse_bandwidth, proc, priority)
    _over_cores(_simulate_population, proc.shape[0], *(frozen_array(a) for a in inputs), start, finish)
    return start, finish


def population_fitness_numba(problem: Problem, proc, priority, objective: str = "waiting") -> np.ndarray:
    """[N] GA fitness of every chromosome (`jaxsched.ga.fitness_of`: average waiting time, paper Eq. 1, or
    makespan), simulated by `simulate_population_numba`; equal to the NumPy GA's evaluation."""
    if objective not in ("waiting", "makespan"):
        raise ValueError(f"objective must be 'waiting' or 'makespan', got {objective!r}")
    start, finish = simulate_population_numba(problem, proc, priority)
    if objective == "makespan":
        return finish.max(axis=1)
    return np.array([np.mean(row - problem.arrival) for row in start])
