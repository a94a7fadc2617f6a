"""A batch of problems as one graph, for planning the whole batch at once.

`BatchGraph.of(problems, num_tasks, num_procs)` numbers task t of problem b as b * T + t (T the padded
task count; padded tasks have no edges) and concatenates every problem's edges. On it, the DAG
quantities of `jaxsched.heft` and `jaxsched.priorities` are computed for every problem at once, with
the same float64 operations as the per-problem forms, so the values are equal: upward and downward
ranks, the optimistic cost table, CPOP's critical-path pins and the ready-list visit order
(`jaxsched.listsched.ready_list_order`) by the compiled walks of `jaxsched.batch_sweeps`, priority
positions by one stable sort per problem.

Building it touches each problem once per array it reads (costs, edges, topological order), with no
other per-problem Python: the edges are grouped by task over the whole batch (`batch_sweeps.group_by`),
not read from each problem's `in_edges` / `out_edges`, and problems of unequal sizes are padded by one
scatter of their concatenated arrays.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from jaxsched import batch_sweeps
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


class BatchGraph(NamedTuple):
    """Every problem of a batch as one graph of B * T tasks (module docstring)."""

    problems: Sequence[Problem]
    comp: np.ndarray  # [B, T, P] float64, 0 where padded
    task_mask: np.ndarray  # [B, T] bool
    proc_mask: np.ndarray  # [B, P] bool
    counts: np.ndarray  # [B] edges of each problem
    batch: np.ndarray  # [E] problem of each edge (edges of problem 0 first, in its order)
    src: np.ndarray  # [E] source task within its problem
    dst: np.ndarray  # [E] destination task within its problem
    data: np.ndarray  # [E]
    in_ptr: np.ndarray  # [B * T + 1] where each global task's incoming edges start in `in_order`
    in_order: np.ndarray  # [E] edges sorted by global destination (each problem's `in_edges` order)
    out_ptr: np.ndarray  # [B * T + 1] where each global task's outgoing edges start in `out_order`
    out_order: np.ndarray  # [E] edges sorted by global source (each problem's `out_edges` order)
    topo_order: np.ndarray  # [B, T] canonical topological order, padded tasks last in index order
    position: np.ndarray  # [B, T] place of each task in `topo_order`
    memo: dict  # quantities computed so far (read-only arrays), shared by padding and planning

    @classmethod
    def of(cls, problems: Sequence[Problem], num_tasks: int, num_procs: int) -> "BatchGraph":
        """The batch graph of `problems`, padded to `num_tasks` tasks and `num_procs` processors."""
        size = len(problems)
        sizes = np.array([(*p.comp.shape, p.src.shape[0]) for p in problems], np.int64).reshape(size, 3)
        tasks, procs, counts = sizes[:, 0], sizes[:, 1], sizes[:, 2]
        batch = np.repeat(np.arange(size), counts)
        src = np.concatenate([p.src for p in problems])
        dst = np.concatenate([p.dst for p in problems])
        in_ptr, in_order = batch_sweeps.group_by(batch * num_tasks + dst, size * num_tasks)
        out_ptr, out_order = batch_sweeps.group_by(batch * num_tasks + src, size * num_tasks)
        topo_order = padded([p.topological_order for p in problems], (num_tasks,), -1, np.int64, tasks)
        unused = topo_order < 0
        if unused.any():
            topo_order[unused] = np.broadcast_to(np.arange(num_tasks), topo_order.shape)[unused]
        position = np.empty_like(topo_order)
        position[np.arange(size)[:, None], topo_order] = np.arange(num_tasks)
        return cls(
            problems=problems,
            comp=padded([p.comp for p in problems], (num_tasks, num_procs), sizes=sizes[:, :2]),
            task_mask=np.arange(num_tasks)[None, :] < tasks[:, None],
            proc_mask=np.arange(num_procs)[None, :] < procs[:, None],
            counts=counts,
            batch=batch,
            src=src,
            dst=dst,
            data=np.concatenate([p.data for p in problems]),
            in_ptr=in_ptr,
            in_order=in_order,
            out_ptr=out_ptr,
            out_order=out_order,
            topo_order=topo_order,
            position=position,
            memo={},
        )

    def _cached(self, name: str, compute):
        """`compute()`, once per graph (made read-only: callers share it)."""
        if name not in self.memo:
            value = compute()
            for array in value if isinstance(value, tuple) else (value,):
                if isinstance(array, np.ndarray):
                    array.setflags(write=False)
            self.memo[name] = value
        return self.memo[name]

    @property
    def num_tasks(self) -> int:
        """T, the padded task count."""
        return self.task_mask.shape[1]

    def global_src(self) -> np.ndarray:
        """[E] edge sources numbered over the batch (b * T + t)."""
        return self.batch * self.num_tasks + self.src

    def global_dst(self) -> np.ndarray:
        """[E] edge destinations numbered over the batch."""
        return self.batch * self.num_tasks + self.dst

    def input_slots(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(owner, slot, inputs): for the edges in `in_order`, the global destination task and the edge's
        place among that task's inputs (`Problem.in_edges` order); and [B * T] each task's in-degree."""
        return self._cached("input_slots", self._compute_input_slots)

    def _compute_input_slots(self):
        owner = self.global_dst()[self.in_order]
        return owner, np.arange(len(owner)) - self.in_ptr[owner], np.diff(self.in_ptr)

    def _mean_comp(self) -> np.ndarray:
        """[B * T] mean execution time over each problem's processors (`comp.mean(axis=1)`); 0 padded."""
        return self._cached("_mean_comp", self._compute_mean_comp)

    def _compute_mean_comp(self) -> np.ndarray:
        return batch_sweeps.mean_costs(self.comp, self.task_mask.sum(axis=1), self.proc_mask.sum(axis=1))

    def _rows(self, by_source: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The edges in compressed rows by global source (`by_source`, each problem's `out_edges` order) or
        destination (`in_edges` order): ([B * T + 1] row starts, [E] the task at the other end, [E] the
        edge's mean transfer time)."""
        return self._cached(f"rows {by_source}", lambda: self._compute_rows(by_source))

    def _compute_rows(self, by_source: bool):
        ptr, order = (self.out_ptr, self.out_order) if by_source else (self.in_ptr, self.in_order)
        other = self.global_dst() if by_source else self.global_src()
        return ptr, other[order], self._edge_value()[order]

    def _edge_value(self) -> np.ndarray:
        """[E] mean transfer time of each edge (`jaxsched.heft.mean_communication`)."""
        return self._cached("_edge_value", self._compute_edge_value)

    def _compute_edge_value(self) -> np.ndarray:
        linked = [b for b, p in enumerate(self.problems) if p.bandwidth is not None and p.num_procs > 1]
        if not linked:
            return self.data
        divisor = np.ones(len(self.problems))  # data / 1.0 is data: the problems without bandwidths
        divisor[linked] = [mean_bandwidth(self.problems[b]) for b in linked]
        return self.data / divisor[self.batch]

    def upward_rank(self) -> np.ndarray:
        """[B, T] `jaxsched.heft.upward_rank` of every problem; 0 padded."""
        return self._cached("upward_rank", self._compute_upward_rank)

    def _compute_upward_rank(self) -> np.ndarray:
        rank = batch_sweeps.upward_ranks(self.topo_order, *self._rows(by_source=True), self._mean_comp())
        return rank.reshape(self.task_mask.shape)

    def downward_rank(self) -> np.ndarray:
        """[B, T] `jaxsched.priorities.downward_rank` of every problem; 0 padded."""
        return self._cached("downward_rank", self._compute_downward_rank)

    def _compute_downward_rank(self) -> np.ndarray:
        rank = batch_sweeps.downward_ranks(self.topo_order, *self._rows(by_source=False), self._mean_comp())
        return rank.reshape(self.task_mask.shape)

    def optimistic_cost_table(self) -> np.ndarray:
        """[B, T, P] `jaxsched.priorities.optimistic_cost_table` of every problem; 0 padded."""
        return self._cached("optimistic_cost_table", self._compute_optimistic_cost_table)

    def _compute_optimistic_cost_table(self) -> np.ndarray:
        comp = self.comp.reshape(-1, self.comp.shape[2])
        table = batch_sweeps.optimistic_cost_tables(
            self.topo_order, *self._rows(by_source=True), comp, self.proc_mask
        )
        return table.reshape(self.comp.shape)

    def row_mean(self, table: np.ndarray) -> np.ndarray:
        """[B, T] the mean of `table` [B, T, P] over each problem's processors (NumPy's `mean`, to the bit)."""
        means = batch_sweeps.mean_costs(table, self.task_mask.sum(axis=1), self.proc_mask.sum(axis=1))
        return means.reshape(self.task_mask.shape)

    def priority_position(self, priority: np.ndarray) -> np.ndarray:
        """[B, T] `jaxsched.priorities.priority_position` from priorities [B, T]: decreasing priority,
        ties by topological position (a stable sort of the topological order); padded tasks last."""
        return batch_sweeps.priority_positions(np.asarray(priority, np.float64), self.task_mask, self.topo_order)

    def critical_path_pins(self, total: np.ndarray) -> np.ndarray:
        """[B, T] CPOP's pins (`jaxsched.priorities.critical_path`) from the rank sums `total` [B, T]
        (upward plus downward rank): each problem's critical-path tasks on its processor, -1 elsewhere."""
        length = np.where(self.task_mask, total, -np.inf).max(axis=1, keepdims=True)
        on_path = self.task_mask & np.isclose(total, length, rtol=1e-9, atol=0.0)
        ptr, successor, _ = self._rows(by_source=True)
        return batch_sweeps.critical_path_pins(
            on_path, self.position, ptr, successor, np.diff(self.in_ptr), self.comp, self.proc_mask
        )

    def ready_list_order(self, position: np.ndarray) -> np.ndarray:
        """[B, T] `jaxsched.listsched.ready_list_order` of every problem: the order in which a list
        scheduler that always takes the ready task of lowest `position` visits them; padded tasks last
        (their positions are the largest)."""
        ptr, successor, _ = self._rows(by_source=True)
        return batch_sweeps.ready_list_orders(position, ptr, successor, np.diff(self.in_ptr))
