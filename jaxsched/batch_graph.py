"""A batch of problems as one graph, for planning the whole batch at once.

`BatchGraph.of(problems, num_tasks, num_procs)` numbers task t of problem b as b * T + t (T the padded
task count; padded tasks have no edges) and concatenates every problem's edges. On it, the DAG
quantities of `jaxsched.heft` and `jaxsched.priorities` are computed for every problem at once, with
the same float64 operations as the per-problem forms, so the values are equal: upward and downward
ranks, the optimistic cost table, CPOP's critical-path pins and the ready-list visit order
(`jaxsched.listsched.ready_list_order`) by the compiled walks of `jaxsched.numba_batch_graph`, priority
positions by one stable sort per problem.

Building it reads each problem's arrays in place (`PackedBatch`: costs, edges and topological order are one block
per problem, `Problem.packed`, handed to compiled code by its address), then one compiled pass
(`numba_batch_graph.build_graph`) pads the costs, groups the edges by task (in place of each problem's
`in_edges` / `out_edges`), pads the topological orders and takes the mean costs and the sizes the padding
checks, problem by problem while its arrays are in cache.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from jaxsched import numba_batch_graph
from jaxsched.heft import mean_bandwidth
from jaxsched.problem import Problem


def padded(arrays: Sequence[np.ndarray], shape: tuple[int, ...], fill=0, dtype=np.float64,
           sizes: np.ndarray | None = None) -> np.ndarray:
    """[B, *shape] the `arrays` (1-D or 2-D) stacked, each at index 0 of every axis of a slot filled with
    `fill`: one copy when they all have `shape`, else one scatter of their concatenation. `sizes` [B, ndim]:
    their shapes, when known."""
    out = np.full((len(arrays),) + shape, fill, dtype)
    if sizes is None:
        sizes = np.array([a.shape for a in arrays], np.int64)
    sizes = sizes.reshape(len(arrays), len(shape))
    if (sizes == shape).all():
        out[:] = arrays
        return out
    counts = sizes.prod(axis=1)
    slot = np.repeat(np.arange(len(arrays)), counts)
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    if len(shape) == 1:
        flat = slot * shape[0] + within
    else:
        columns = sizes[slot, 1]
        flat = (slot * shape[0] + within // columns) * shape[1] + within % columns
    out.reshape(-1)[flat] = np.concatenate([a.ravel() for a in arrays])
    return out


def check_fit(sizes) -> None:
    """Raises ValueError naming the first problem whose size exceeds its capacity, for (what, [B] sizes, capacity)."""
    for what, per_problem, capacity in sizes:
        over = np.flatnonzero(per_problem > capacity)
        if over.size:
            b = int(over[0])
            raise ValueError(f"problem {b} has {per_problem[b]} {what}, more than the padded capacity {capacity}")


class HostBuffers:
    """Host arrays reused from one call to the next, by name: fresh memory costs a page fault per 4 KiB page
    the first time it is written (on the KVM guest measured, allocating and writing the 15 KB per 100-task
    problem that the batch graph holds took 7.3 us of CPU per problem, 0.35 on reused memory), so a caller that
    plans batch after batch and lets no array outlive its call (`schedule_batch`, whose arrays reach the device
    as copies or read in place) passes the same buffers. Each name keeps the largest array asked for; an array
    taken is valid until the same name is taken again. Arrays start on a multiple of `ALIGN` bytes: XLA's CPU
    client then reads them in place instead of copying them (2-3 us of CPU per problem of 100 tasks)."""

    ALIGN = 64

    def __init__(self):
        self._bytes: dict[str, np.ndarray] = {}

    def take(self, name: str, shape: tuple[int, ...], dtype, fill=None) -> np.ndarray:
        """An array of `shape` and `dtype` in the buffer `name` (its old contents, or `fill` everywhere)."""
        dtype = np.dtype(dtype)
        size = int(np.prod(shape)) * dtype.itemsize
        held = self._bytes.get(name)
        if held is None or held.size < size:
            raw = np.empty(max(size, 1) + self.ALIGN, np.uint8)
            start = -raw.ctypes.data % self.ALIGN
            held = self._bytes[name] = raw[start:start + max(size, 1)]
        array = held[:size].view(dtype).reshape(shape)
        if fill is not None:
            array.fill(fill)
        return array


def take(buffers: HostBuffers | None, name: str, shape: tuple[int, ...], dtype, fill=None) -> np.ndarray:
    """`buffers.take(...)`, or a new array when `buffers` is None."""
    if buffers is not None:
        return buffers.take(name, shape, dtype, fill)
    return np.empty(shape, dtype) if fill is None else np.full(shape, fill, dtype)


class FlatBatch(NamedTuple):
    """A batch's arrays, each concatenated over its problems: what the batch graph's compiled pass reads."""

    task_offsets: np.ndarray  # [B + 1] where each problem's tasks start in `topo` (and its rows in `comp`)
    procs: np.ndarray  # [B] processors of each problem
    edge_offsets: np.ndarray  # [B + 1] where each problem's edges start in `src`, `dst`, `data`
    comp: np.ndarray  # every problem's comp [T_b, P_b] raveled, concatenated (float64)
    src: np.ndarray  # [E] source task within its problem
    dst: np.ndarray  # [E] destination task within its problem
    data: np.ndarray  # [E]
    topo: np.ndarray  # every problem's canonical topological order, concatenated


class PackedBatch(NamedTuple):
    """A batch's `Problem.packed` blocks as one array of their addresses: the compiled passes read every problem
    in place (`numba_batch_graph.block_arrays`), in any thread, with no copy; `problems` keeps the blocks alive."""

    problems: Sequence[Problem]
    addresses: np.ndarray  # [B] int64 where each problem's block lies (`Problem.packed_address`)
    sizes: np.ndarray  # [B, 3] each problem's tasks, processors and edges (the blocks' headers)

    @classmethod
    def read(cls, problems: Sequence[Problem]) -> "PackedBatch":
        """The blocks of `problems`: their addresses and sizes, no copy of their arrays."""
        addresses = np.fromiter((p.packed_address for p in problems), np.int64, len(problems))
        return cls(problems, addresses, numba_batch_graph.block_sizes(addresses))

    def check_fit(self, num_tasks: int, num_procs: int, num_edges: int | None = None) -> None:
        """Raises ValueError naming the first problem with more tasks, processors or edges than given."""
        tasks, procs, edges = self.sizes.T
        sizes = [("tasks", tasks, num_tasks), ("processors", procs, num_procs)]
        if num_edges is not None:
            sizes.append(("edges", edges, num_edges))
        check_fit(sizes)

    def flat(self) -> FlatBatch:
        """The batch as a `FlatBatch` (one compiled copy of every array)."""
        tasks, procs, edges = self.sizes.T
        task_offsets, row_offsets, edge_offsets = (_cumulative(count) for count in (tasks, tasks * procs, edges))
        flat = FlatBatch(task_offsets, np.ascontiguousarray(procs), edge_offsets, np.empty(row_offsets[-1]),
                         *(np.empty(edge_offsets[-1], kind) for kind in (np.int64, np.int64, np.float64)),
                         np.empty(task_offsets[-1], np.int64))
        numba_batch_graph.unpack(self.addresses, *flat)
        return flat


def _cumulative(counts: np.ndarray) -> np.ndarray:
    """[N + 1] the running sums of `counts` from 0."""
    out = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def mean_bandwidths(problems: Sequence[Problem]) -> np.ndarray:
    """[B] each problem's mean bandwidth between distinct processors (`jaxsched.heft.mean_bandwidth`), 1 for
    those without bandwidths or with one processor (data / 1.0 is data: their mean transfer is the data)."""
    divisor = np.ones(len(problems))
    linked = [b for b, p in enumerate(problems) if p.bandwidth is not None and p.num_procs > 1]
    divisor[linked] = [mean_bandwidth(problems[b]) for b in linked]
    return divisor


class BatchGraph(NamedTuple):
    """Every problem of a batch as one graph of B * T tasks (module docstring)."""

    problems: Sequence[Problem]
    comp: np.ndarray  # [B, T, P] in the dtype `of` was given (default float64), 0 where padded
    task_mask: np.ndarray  # [B, T] bool
    proc_mask: np.ndarray  # [B, P] bool
    task_offsets: np.ndarray  # [B + 1] where each problem's tasks start in the concatenation of their rows
    flat_comp: np.ndarray  # every problem's comp [T_b, P_b] raveled, concatenated (float64)
    counts: np.ndarray  # [B] edges of each problem
    edge_offsets: np.ndarray  # [B + 1] where each problem's edges start in `src`, `dst`, `data`
    src: np.ndarray  # [E] source task within its problem (edges of problem 0 first, in its order)
    dst: np.ndarray  # [E] destination task within its problem
    data: np.ndarray  # [E]
    in_ptr: np.ndarray  # [B * T + 1] where each global task's incoming edges start in `in_src`, `in_data`
    in_src: np.ndarray  # [E] the edges' global sources (b * T + t), by destination (each problem's `in_edges` order)
    in_data: np.ndarray  # [E] their data
    out_ptr: np.ndarray  # [B * T + 1] where each global task's outgoing edges start in `out_dst`, `out_data`
    out_dst: np.ndarray  # [E] the edges' global destinations, by source (each problem's `out_edges` order)
    out_data: np.ndarray  # [E] their data
    topo_order: np.ndarray  # [B, T] int32 canonical topological order, padded tasks last in index order
    position: np.ndarray  # [B, T] int32 place of each task in `topo_order`
    sizes: np.ndarray  # [B, 5] per problem: most incoming edges of a task, sum of each task's largest cost,
    # sum of the data, least non-zero cost and least non-zero datum (`numba_batch_graph.build_graph`)
    memo: dict  # quantities computed so far (read-only arrays), shared by padding and planning

    @classmethod
    def of(cls, problems: Sequence[Problem], num_tasks: int, num_procs: int, dtype=np.float64) -> "BatchGraph":
        """The batch graph of `problems`, padded to `num_tasks` tasks and `num_procs` processors (ValueError,
        naming the first problem, when one has more), its costs `comp` in `dtype` (`comp64` gives them in
        float64 for the DAG quantities)."""
        packed = PackedBatch.read(problems)
        packed.check_fit(num_tasks, num_procs)
        size, flat = len(problems), packed.flat()
        task_off, procs, edge_off, flat_comp, src, dst, data, topo = flat
        tasks = np.diff(task_off)
        slots, total = size * num_tasks, len(src)
        index = np.int32 if max(slots, total) < 2**31 else np.int64
        comp = np.zeros((size, num_tasks, num_procs), dtype)
        numba_batch_graph.pad_rows(task_off, procs, flat_comp, comp)
        arrays = dict(
            in_ptr=np.empty(slots + 1, index), in_src=np.empty(total, index), in_data=np.empty(total),
            out_ptr=np.empty(slots + 1, index), out_dst=np.empty(total, index), out_data=np.empty(total),
            topo_order=np.empty((size, num_tasks), np.int32), position=np.empty((size, num_tasks), np.int32),
        )
        mean, sizes = np.empty(slots), np.empty((size, 5))
        numba_batch_graph.build_graph(task_off, procs, edge_off, flat_comp, src, dst, data, topo, *arrays.values(),
                                      mean, sizes)
        graph = cls(
            problems=problems,
            comp=comp,
            task_mask=np.arange(num_tasks)[None, :] < tasks[:, None],
            proc_mask=np.arange(num_procs)[None, :] < procs[:, None],
            task_offsets=task_off,
            flat_comp=flat_comp,
            counts=np.diff(edge_off),
            edge_offsets=edge_off,
            src=src,
            dst=dst,
            data=data,
            **arrays,
            sizes=sizes,
            memo={},
        )
        if num_procs <= 128:
            graph._cached("_mean_comp", lambda: mean)
        return graph


    def _cached(self, name: str, compute):
        """`compute()`, once per graph (made read-only: callers share it)."""
        if name not in self.memo:
            value = compute()
            for array in value if isinstance(value, tuple) else (value,):
                if isinstance(array, np.ndarray):
                    array.setflags(write=False)
            self.memo[name] = value
        return self.memo[name]

    def comp64(self) -> np.ndarray:
        """[B, T, P] float64 the costs, 0 where padded (`comp` itself when it is float64)."""
        if self.comp.dtype == np.float64:
            return self.comp
        return self._cached("comp64", self._compute_comp64)

    def _compute_comp64(self) -> np.ndarray:
        comp = np.zeros(self.comp.shape)
        numba_batch_graph.pad_rows(self.task_offsets, self.proc_mask.sum(axis=1), self.flat_comp, comp)
        return comp

    @property
    def num_tasks(self) -> int:
        """T, the padded task count."""
        return self.task_mask.shape[1]

    def input_slots(self) -> tuple[np.ndarray, np.ndarray]:
        """(owner, slot): for the edges by destination (`in_src`), the global destination task and the edge's
        place among that task's inputs (`Problem.in_edges` order)."""
        return self._cached("input_slots", self._compute_input_slots)

    def _compute_input_slots(self):
        owner = np.repeat(np.arange(len(self.in_ptr) - 1), np.diff(self.in_ptr))
        return owner, np.arange(len(owner)) - self.in_ptr[owner]

    def in_degree(self) -> np.ndarray:
        """[B * T] each global task's incoming edges."""
        return self._cached("in_degree", lambda: np.diff(self.in_ptr))

    def _mean_comp(self) -> np.ndarray:
        """[B * T] mean execution time over each problem's processors (`comp.mean(axis=1)`); 0 padded."""
        return self._cached("_mean_comp", self._compute_mean_comp)

    def _compute_mean_comp(self) -> np.ndarray:  # more than 128 processors (`BatchGraph.of` computes the rest)
        return numba_batch_graph.mean_costs(self.comp64(), self.task_mask.sum(axis=1), self.proc_mask.sum(axis=1))

    def _rows(self, by_source: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The edges in compressed rows by global source (`by_source`, each problem's `out_edges` order) or
        destination (`in_edges` order): ([B * T + 1] row starts, [E] the task at the other end, [E] the
        edge's mean transfer time, `jaxsched.heft.mean_communication`)."""
        return self._cached(f"rows {by_source}", lambda: self._compute_rows(by_source))

    def _compute_rows(self, by_source: bool):
        ptr, other, data = (self.out_ptr, self.out_dst, self.out_data) if by_source else (
            self.in_ptr, self.in_src, self.in_data)
        divisor = mean_bandwidths(self.problems)
        if (divisor == 1.0).all():
            return ptr, other, data
        return ptr, other, data / divisor[other // self.num_tasks]

    def upward_rank(self) -> np.ndarray:
        """[B, T] `jaxsched.heft.upward_rank` of every problem; 0 padded."""
        return self._cached("upward_rank", self._compute_upward_rank)

    def _compute_upward_rank(self) -> np.ndarray:
        rank = numba_batch_graph.upward_ranks(self.topo_order, *self._rows(by_source=True), self._mean_comp())
        return rank.reshape(self.task_mask.shape)

    def downward_rank(self) -> np.ndarray:
        """[B, T] `jaxsched.priorities.downward_rank` of every problem; 0 padded."""
        return self._cached("downward_rank", self._compute_downward_rank)

    def _compute_downward_rank(self) -> np.ndarray:
        rank = numba_batch_graph.downward_ranks(self.topo_order, *self._rows(by_source=False), self._mean_comp())
        return rank.reshape(self.task_mask.shape)

    def optimistic_cost_table(self) -> np.ndarray:
        """[B, T, P] `jaxsched.priorities.optimistic_cost_table` of every problem; 0 padded."""
        return self._cached("optimistic_cost_table", self._compute_optimistic_cost_table)

    def _compute_optimistic_cost_table(self) -> np.ndarray:
        comp = self.comp64().reshape(-1, self.comp.shape[2])
        table = numba_batch_graph.optimistic_cost_tables(
            self.topo_order, *self._rows(by_source=True), comp, self.proc_mask
        )
        return table.reshape(self.comp.shape)

    def row_mean(self, table: np.ndarray) -> np.ndarray:
        """[B, T] the mean of `table` [B, T, P] over each problem's processors (NumPy's `mean`, to the bit)."""
        means = numba_batch_graph.mean_costs(table, self.task_mask.sum(axis=1), self.proc_mask.sum(axis=1))
        return means.reshape(self.task_mask.shape)

    def priority_position(self, priority: np.ndarray) -> np.ndarray:
        """[B, T] `jaxsched.priorities.priority_position` from priorities [B, T]: decreasing priority,
        ties by topological position (a stable sort of the topological order); padded tasks last."""
        priority = np.asarray(priority, np.float64)
        return numba_batch_graph.priority_positions(priority, np.diff(self.task_offsets), self.topo_order)

    def critical_path_pins(self, total: np.ndarray) -> np.ndarray:
        """[B, T] CPOP's pins (`jaxsched.priorities.critical_path`) from the rank sums `total` [B, T]
        (upward plus downward rank): each problem's critical-path tasks on its processor, -1 elsewhere."""
        length = np.where(self.task_mask, total, -np.inf).max(axis=1, keepdims=True)
        on_path = self.task_mask & np.isclose(total, length, rtol=1e-9, atol=0.0)
        ptr, successor, _ = self._rows(by_source=True)
        return numba_batch_graph.critical_path_pins(
            on_path, self.position, ptr, successor, self.in_degree(), self.comp64(), self.proc_mask
        )

    def ready_list_order(self, position: np.ndarray) -> np.ndarray:
        """[B, T] `jaxsched.listsched.ready_list_order` of every problem: the order in which a list
        scheduler that always takes the ready task of lowest `position` visits them; padded tasks last
        (their positions are the largest)."""
        ptr, successor, _ = self._rows(by_source=True)
        return numba_batch_graph.ready_list_orders(position, ptr, successor, self.in_degree())
