"""HEFT compiled for the CPU with numba: the numba twin of `jaxsched.heft`.

The NumPy reference stays the readable definition; this is the same loop compiled, with the same visit order
(decreasing upward rank, ties by canonical topological position), the same placement rule
(`jaxsched.numba_timeline`, the compiled `jaxsched.timeline`) and the same ties (lowest processor index), all
in float64 with the same arithmetic, so every schedule equals the reference's to the last bit. HEFT computes
each processor's finish after its last task in one loop and searches the gaps only of processors whose lower
bound `ready + duration` can beat the best finish so far (as `Timelines.earliest_finish` does).

`heft_batch_numba` runs HEFT on every problem of a padded batch (a `PaddedProblem` with a leading batch axis, in
its `heft_order`, like `jaxsched.jax.heft_batch`), spread over the CPU cores. The face `jaxsched.numba` gives these
as `heft` and `heft_batch`. Compiled code is cached on disk (`cache=True`), so only the first call
in a fresh environment compiles (about 15 s of CPU).
"""

from __future__ import annotations

import numba
import numpy as np

from jaxsched.batch import PaddedProblem
from jaxsched.heft import mean_communication
from jaxsched.jax_simulate import ScheduleArrays
from jaxsched.numba_timeline import (
    empty_rows,
    fill_ready,
    frozen_array,
    insertion_start,
    is_uniform,
    occupy,
    over_cores,
)
from jaxsched.problem import Problem, Schedule, check_problem

_jit = numba.njit(cache=True, nogil=True)


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


def heft_batch_numba(batch: PaddedProblem) -> ScheduleArrays:
    """HEFT on every problem of a padded batch, in its `heft_order`, compiled and spread over the CPU cores:
    `jaxsched.jax.heft_batch` on the CPU. Computes in float64 (pad with `dtype=np.float64` to equal `jaxsched.heft`
    exactly whatever the costs); returns NumPy arrays, zero for padded tasks."""
    comp = np.asarray(batch.comp, np.float64)
    if comp.ndim != 3:
        raise ValueError(f"jaxsched.numba.heft_batch needs a batch (comp [B, T, P]), got comp of shape {comp.shape}")
    size, padded_tasks, _ = comp.shape
    pred = np.asarray(batch.pred)
    real_edge = pred != padded_tasks  # [B, T, K]; every instance's incoming edges, one CSR over the batch
    flat_ptr = np.concatenate([np.zeros(1, np.int64), np.cumsum(real_edge.sum(axis=2))])
    pred_ptr = flat_ptr[np.arange(size)[:, None] * padded_tasks + np.arange(padded_tasks + 1)]  # [B, T + 1]
    proc = np.zeros((size, padded_tasks), np.int64)
    start, finish = np.zeros((size, padded_tasks)), np.zeros((size, padded_tasks))
    over_cores(
        _heft_batch_kernel, size, frozen_array(comp), frozen_array(np.asarray(batch.task_mask).sum(axis=1)),
        frozen_array(np.asarray(batch.proc_mask).sum(axis=1)), frozen_array(batch.arrival), frozen_array(pred_ptr),
        frozen_array(pred[real_edge]), frozen_array(np.asarray(batch.pred_data)[real_edge]),
        frozen_array(batch.inverse_bandwidth),
        np.array(batch.heft_order, np.int64), proc, start, finish,
    )
    overflow = np.zeros(size, bool)
    return ScheduleArrays(proc.astype(np.int32), start, finish, overflow, np.full(size, padded_tasks, np.int32))
