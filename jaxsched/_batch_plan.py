"""A whole batch planned in one compiled pass: what `schedule_batch` sends to the device, problem by problem.

`plan_flat(problems, config, shape, dtype)` gives the padded costs, the padded plans and, for a static
selection, the predecessor streams (`jaxsched._pull_stream`) or, for a dynamic one, the padded edges: the
values of `pad_costs`, `plan_batch`, `stream_batch` and `pad_edges`, for the configs whose plan needs only
upward ranks or the topological order (`fused`: HEFT, ETF, and the presets that visit tasks in topological
order, pinned or not). The problems are read in place, with no copy: every `Problem` keeps its costs, edges and
topological order in one block (`Problem.packed`), and the compiled passes get the blocks' addresses
(`PackedBatch`), so no part of the reading holds the GIL or runs in one thread alone (concatenating the blocks
under the GIL took 2.8 us per problem of 100 tasks, about a quarter of the host time). A first pass counts each
problem's stream length (the streams' padded length is the longest). Then one compiled pass (`_plan_problems`) reads
each problem's block in place and builds its graph, upward ranks, priority positions, visit order and stream in
scratch arrays the size of one problem, writing the batch arrays once. `BatchGraph` makes one pass over the whole
batch per quantity, streaming each quantity of, say, 1,024 problems through memory; here a problem's scratch
stays in cache (each step 2-3x faster on batches that fit the cache than on 1,024 problems of 100 tasks).
Threads take chunks of the batch in turn (`in_chunks`, one per core by default): the compiled pass holds no GIL,
so they plan at once. CPOP's and PEFT's plans, and the "saga" ranks, are made on the `BatchGraph`.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import numba
import numpy as np
from numba import uintp as _u

from jaxsched._pull_stream import PullStream, empty_streams
from jaxsched.batch import PaddedCosts, PaddedEdges, Shape, checked_batch, checked_costs, links_of
from jaxsched.batch_graph import HostBuffers, PackedBatch, check_fit, mean_bandwidths, take
from jaxsched.common.arguments import integer
from jaxsched.listsched import ListConfig, ListPlan, draws
from jaxsched.numba_batch_graph import (
    block_arrays,
    pad_rows,
    pairwise_sum,
    priority_position_of,
    stream_layout,
)
from jaxsched.problem import Problem


def stream_width(config: ListConfig) -> int:
    """Predecessors per micro-step of a static `config`'s stream: 4, 8 with gap insertion, whose search every
    micro-step runs (measured on Topcuoglu DAGs of 100 tasks)."""
    return 8 if config.insertion else 4


def fused(config: ListConfig, num_procs: int) -> bool:
    """Whether `plan_flat` plans `config` on `num_procs` padded processors (module docstring)."""
    return (config.ranks == "topcuoglu" and config.priority in ("upward", "topological") and num_procs <= 128
            and config.pinning != "critical_path" and config.selection != "eft_oct")


def batch_draws(problems: Sequence[Problem], config: ListConfig, task_mask: np.ndarray,
                out: np.ndarray | None = None) -> np.ndarray:
    """[B, T] int32 the draws of `config` ("wba"; zeros otherwise), in `out` when given: one seed for every
    problem, and a Generator draws in sequence, so each problem's draws are the first of the longest
    problem's."""
    draw = np.zeros(task_mask.shape, np.int32) if out is None else out
    draw.fill(0)
    if config.selection == "wba":
        longest = max(problems, key=lambda problem: problem.num_tasks)
        sequence = np.zeros(task_mask.shape[1], np.int64)
        sequence[: longest.num_tasks] = draws(longest, config)
        draw[:] = np.where(task_mask, sequence, 0)
    return draw


PART = 64  # the fewest problems a thread plans by default: handing work to a thread costs about 50 us
CHUNK = 32  # problems planned in turn by one thread: its scratch and their rows stay in cache


def default_threads(size: int) -> int:
    """Threads that plan a batch of `size` problems by default: one per core this process may run on, each
    with at least `PART` problems."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, size // PART))


_POOL: list[ThreadPoolExecutor] = []  # the worker threads of `in_chunks`, started on first use
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The worker threads shared by every caller of `in_chunks` (one fewer than the cores), started once."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max(1, (os.cpu_count() or 1) - 1), thread_name_prefix="plan_flat"))
        return _POOL[0]


def in_chunks(run: Callable[[int, int], None], size: int, threads: int, chunk: int,
              meanwhile: Callable[[], object] | None = None) -> object:
    """`run(first, last)` on the chunks of `chunk` consecutive indices of range(size), each taken by the first
    of `threads` threads free (the calling thread one of them, once it has run `meanwhile()`; the others worker
    threads): `run` must write only its chunk's rows, and runs at once in several threads where it releases
    the GIL (compiled code). Then re-raises the first error. Python threads, not numba's parallel loops: they
    need no threading layer (TBB, OpenMP; numba's fallback one aborts when two threads enter it at once) and
    callers may plan from several threads; chunks taken in turn keep the threads busy to the end on a shared
    machine, where a thread may wait for a core. A worker that has not started by the time the calling thread
    finds no chunk left (the pool busy with another caller's chunks) is cancelled, not waited for. Returns what
    `meanwhile` returned (None without it)."""
    starts, lock = iter(range(0, size, chunk)), threading.Lock()

    def work() -> None:
        while True:
            with lock:
                start = next(starts, size)
            if start >= size:
                return
            run(start, min(start + chunk, size))

    others = [_pool().submit(work) for _ in range(threads - 1)]
    try:
        done = None if meanwhile is None else meanwhile()
        work()
        return done
    finally:
        for future in others:
            if not future.cancel():
                future.result()


def plan_flat(problems: Sequence[Problem], config: ListConfig, shape: Shape | None, dtype=np.float32,
              buffers: HostBuffers | None = None, threads: int | None = None) -> tuple[
                  Shape, PaddedCosts, ListPlan, PullStream | None, PaddedEdges | None]:
    """(shape, costs, plans, streams, edges) of `problems` under `config` (one that is `fused`), padded to
    `shape` (default the smallest that fits them): streams for a static selection, edges for a dynamic one,
    None for the other; every array in `buffers` when given (valid until they are taken again). The problems
    are planned by `threads` threads at once (default `default_threads`; the arrays do not depend on it).
    ValueError as `pad_problems` for a problem that does not fit or times beyond `dtype`, or for `threads`
    not a positive integer."""
    problems, shape = checked_batch(problems, shape, "plan_flat")
    threads = default_threads(len(problems)) if threads is None else min(integer("threads", threads, 1),
                                                                         len(problems))
    size, fitted = len(problems), shape is None
    packed = PackedBatch.read(problems)
    addresses, (tasks, procs, counts) = packed.addresses, packed.sizes.T
    width, lengths = stream_width(config), np.zeros(size, np.int64)
    if not config.dynamic:  # a stream's length is the longest stream's, known before any is written
        in_chunks(lambda first, last: _stream_lengths(addresses, width, lengths, first, last), size, threads, CHUNK)
    if fitted:  # the in-degree K is read from the sizes below
        shape = Shape(int(tasks.max()), int(procs.max()), max(1, int(counts.max())), 1)
    packed.check_fit(shape.num_tasks, shape.num_procs, shape.num_edges)
    num_tasks, num_procs, num_edges = shape.num_tasks, shape.num_procs, shape.num_edges
    comp = take(buffers, "costs", (size, num_tasks, num_procs), dtype)
    sizes = take(buffers, "sizes", (size, 5), np.float64)
    position, order, pin = (take(buffers, name, (size, num_tasks), np.int32) for name in ("position", "order", "pin"))
    streams = edges = None
    if config.dynamic:
        edges = PaddedEdges(*(take(buffers, name, (size, num_edges), kind) for name, kind in (
            ("edge_src", np.int32), ("edge_dst", np.int32), ("edge_data", dtype), ("edge_mask", bool))))
    else:
        streams = empty_streams(size, lengths, num_tasks, width, dtype, buffers)
    none = np.empty((size, 0), np.int32)
    arguments = (
        addresses, mean_bandwidths(problems), config.priority == "upward", config.pinning == "fastest_processor",
        comp, sizes, position, order, pin,
        *(streams or (none, none[:, :, None], none[:, :, None].astype(dtype), none.astype(bool))),
        *(edges or (none, none, none.astype(dtype), none.astype(bool))),
    )

    def unplanned():  # what needs no plan, made while the other threads plan
        task_mask = np.less(np.arange(num_tasks)[None, :], tasks[:, None],
                            out=take(buffers, "task_mask", (size, num_tasks), bool))
        proc_mask = np.arange(num_procs)[None, :] < procs[:, None]
        draw = batch_draws(problems, config, task_mask, take(buffers, "draws", task_mask.shape, np.int32))
        return task_mask, proc_mask, links_of(problems, proc_mask), take(buffers, "oct", comp.shape, dtype, 0), draw

    task_mask, proc_mask, links, oct_table, draw = in_chunks(
        lambda first, last: _plan_problems(*arguments, first, last), size, threads, CHUNK, unplanned)
    if fitted:
        shape = shape._replace(max_in_degree=max(1, int(sizes[:, 0].max())))
    check_fit((("incoming edges of a task", sizes[:, 0].astype(np.int64), shape.max_in_degree),))

    def comp64() -> np.ndarray:
        flat, full = packed.flat(), np.zeros(comp.shape)
        pad_rows(flat.task_offsets, flat.procs, flat.comp, full)
        return full

    costs = checked_costs(problems, comp, task_mask, proc_mask, sizes, comp64, buffers, links)
    plans = ListPlan(position, order, pin, oct_table, draw)
    return shape, costs, plans, streams, edges


_jit = numba.njit(cache=True, nogil=True)


@_jit
def _stream_lengths(addresses, width, lengths, first, last):
    """Writes lengths[first:last]: the micro-steps of those problems' streams (`compact_streams`) from their
    edges' destinations in their `Problem.packed` blocks (read in place at `addresses`): a task's inputs past
    each multiple of `width` open a micro-step (a count down per task, no division)."""
    most = 1
    for b in range(first, last):
        most = max(most, block_arrays(addresses, b)[0])
    left = np.empty(most, np.int64)
    for b in range(first, last):
        left[:] = width
        steps, _, edges, _, _, _, dst, _ = block_arrays(addresses, b)
        for e in range(edges):
            target = _u(dst[_u(e)])
            left[target] -= 1
            if left[target] < 0:
                steps += 1
                left[target] = width - 1
        lengths[b] = steps


@_jit
def _stream(order, tasks, inputs, src, dst, data, start, task, place, pred, pred_data):
    """Writes one problem's predecessor stream (`numba_batch_graph.stream_of`: the same arrays) into its rows
    `task`, `place` [M], `pred`, `pred_data` [M, W] straight from its edges `src`, `dst`, `data` and each
    task's in-degree `inputs` [T], visiting tasks in `order` [T] (real tasks: t < tasks): every slot set to the
    sentinel T (data 0) by one fill, each task's first slot found by one walk over the order (into `start`
    [T], scratch), then each edge written at its destination's next slot, in edge order (`Problem.in_edges`
    order). One loop over the edges, where grouping them by task first and copying each task's group ends a
    short loop per task, whose exit the processor mispredicts."""
    steps, width = pred.shape
    pred_flat, data_flat = pred.reshape(steps * width), pred_data.reshape(steps * width)
    pred_flat[:] = len(order)
    data_flat[:] = 0
    stream_layout(order, tasks, inputs, width, task, place, start)
    for e in range(len(src)):
        target = _u(dst[e])
        slot = _u(start[target])
        start[target] += 1
        pred_flat[slot], data_flat[slot] = src[e], data[e]


@_jit
def _plan_problems(addresses, divisor, upward, fastest, costs, sizes, position, order, pin, task, pred, pred_data,
                   place, edge_src, edge_dst, edge_data, edge_mask, first, last):
    """Writes the rows first..last-1 (problems) of the padded costs [B, T, P], `sizes` (`BatchGraph.sizes`), priority
    positions and visit order [B, T] (decreasing upward rank when `upward`, else the topological order), pins (the
    processor of least total cost when `fastest`, else -1), and each problem's stream (`_stream`; when task.shape[1] >
    0) or padded edges (when edge_src.shape[1] > 0), from each problem's `Problem.packed` block, read in place at
    addresses[b] (`PackedBatch`), and its mean bandwidth `divisor`; every entry of those rows written. The upward rank
    is one loop over the edges sorted by their destination's topological position (a counting sort), from the last: when
    an edge u -> v is reached, every successor of v has been, so rank(v) = mean(v) + best(v) is final and best(u) =
    max(best(u), transfer(u, v) + rank(v)) takes it: the same maxima of the same sums as `upward_rank_of`, without a
    short loop per task. The positions increase along every edge, so the ready-list order (`ready_list_order_of`) is the
    positions sorted: along an edge u -> v, rank(u) = mean(u) + a maximum that includes transfer(u, v) + rank(v), sums
    of non-negative floats, so rank(u) >= rank(v) (rounding keeps that), and ties go to the topological position, where
    u comes first. Each call keeps its scratch and writes only its problems' rows: calls on disjoint ranges run at once
    in threads (`in_chunks`)."""
    num_tasks, num_procs = costs.shape[1:]
    most = 1
    for b in range(first, last):
        most = max(most, block_arrays(addresses, b)[2])
    in_src, in_dst, in_data = np.empty(most, np.int64), np.empty(most, np.int64), np.empty(most)
    topo_order, topo_position = np.empty(num_tasks, np.int64), np.empty(num_tasks, np.int64)
    mean, rank, best, key = np.empty(num_tasks), np.empty(num_tasks), np.empty(num_tasks), np.empty(num_tasks)
    scratch = np.empty((4, num_tasks), np.int64)  # per-task rows of integers, one per use
    inputs, fill, index, spare = scratch
    load = np.empty(num_procs)
    for b in range(first, last):
        tasks, width, edges, comp_b, data_b, src_b, dst_b, topo_b = block_arrays(addresses, b)
        order_b, position_b, cost_rows = order[b], position[b], costs[b]
        largest_sum, least = 0.0, np.inf
        load[:] = 0.0
        for t in range(tasks):
            largest, total = 0.0, 0.0
            for p in range(width):
                cost = comp_b[_u(t * width + p)]
                cost_rows[t, p] = cost
                load[p] += cost
                largest = max(largest, cost)
                least = min(least, cost) if cost != 0.0 else least
                total += cost
            mean[t] = (total if width < 8 else pairwise_sum(comp_b, t * width, width)) / width  # NumPy's order
            largest_sum += largest
            node = topo_b[t]
            topo_order[t], topo_position[_u(node)] = node, t
        cost_rows[:tasks, width:] = 0.0
        cost_rows[tasks:] = 0.0
        for t in range(tasks, num_tasks):
            mean[t] = 0.0
            topo_order[t], topo_position[t] = t, t
        inputs[:] = 0
        data_sum, least_data = 0.0, np.inf
        for e in range(edges):
            inputs[_u(dst_b[e])] += 1
            datum = data_b[e]
            data_sum += datum
            if datum != 0.0:
                least_data = min(least_data, datum)
        sizes[b, 0], sizes[b, 1], sizes[b, 2] = inputs.max(), largest_sum, data_sum
        sizes[b, 3], sizes[b, 4] = least, least_data
        if upward:  # the edges by their destination's topological position, walked from the last
            for i in range(num_tasks):
                fill[i] = inputs[_u(topo_order[i])]
            total = 0
            for i in range(num_tasks):
                fill[i], total = total, total + fill[i]
            for e in range(edges):
                target = _u(dst_b[e])
                k = _u(fill[_u(topo_position[target])])
                fill[_u(topo_position[target])] += 1
                in_src[k], in_dst[k], in_data[k] = src_b[e], target, data_b[e]
            best[:] = 0.0
            scale = divisor[b]
            linked = scale != 1.0  # data / 1.0 is the data: no division
            for k in range(edges - 1, -1, -1):  # a task's best is final before its inputs are reached
                now, source, datum = _u(in_dst[_u(k)]), _u(in_src[_u(k)]), in_data[_u(k)]
                value = datum / scale if linked else datum
                best[source] = max(best[source], value + (mean[now] + best[now]))
            for t in range(num_tasks):
                rank[t] = mean[t] + best[t]
            priority_position_of(rank, tasks, topo_order, key, index, spare, position_b)
            for t in range(num_tasks):  # the ready-list order is the positions sorted (docstring)
                order_b[_u(position_b[t])] = t
        else:
            for t in range(num_tasks):
                position_b[t], order_b[t] = topo_position[t], topo_order[t]
        chosen = 0
        for p in range(1, width):
            if load[p] < load[chosen]:
                chosen = p
        pin[b, :tasks] = chosen if fastest else -1
        pin[b, tasks:] = -1
        if task.shape[1] > 0:
            _stream(order_b, tasks, inputs, src_b, dst_b, data_b, fill, task[b], place[b], pred[b], pred_data[b])
        if edge_src.shape[1] > 0:
            edge_src[b, :edges], edge_dst[b, :edges], edge_data[b, :edges] = src_b, dst_b, data_b
            edge_src[b, edges:], edge_dst[b, edges:], edge_data[b, edges:] = 0, 0, 0
            edge_mask[b, :edges], edge_mask[b, edges:] = True, False
