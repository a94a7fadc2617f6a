"""A batch of problems as one graph, for planning the whole batch with a few vectorised NumPy steps.

`BatchGraph.of(problems, num_tasks, num_procs)` numbers task t of problem b as b * T + t (T the padded
task count; padded tasks have no edges) and concatenates every problem's edges. On it, the DAG
quantities of `jaxsched.heft` and `jaxsched.priorities` are computed for every problem at once, one
step per level of the deepest problem (each step a segmented max over that level's edges, sorted by
the task they update), with the same float64 operations as the per-problem forms, so the values are
equal: upward and downward ranks, the optimistic cost table, CPOP's critical-path pins, priority
positions and the ready-list visit order (`jaxsched.listsched.ready_list_order`), the last by one
step per task over the whole batch.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from jaxsched.heft import mean_communication
from jaxsched.problem import Problem


def padded(arrays: Sequence[np.ndarray], shape: tuple[int, ...], fill=0, dtype=np.float64) -> np.ndarray:
    """[B, *shape] the `arrays` stacked, each at index 0 of every axis of a slot filled with `fill`."""
    out = np.full((len(arrays),) + shape, fill, dtype)
    if all(a.shape == shape for a in arrays):
        out[:] = arrays
        return out
    for slot, array in zip(out, arrays):
        slot[tuple(slice(0, n) for n in array.shape)] = array
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
    in_order: np.ndarray  # [E] edges sorted by global destination (each problem's `in_edges` order)
    out_order: np.ndarray  # [E] edges sorted by global source (each problem's `out_edges` order)
    topo_order: np.ndarray  # [B, T] canonical topological order, padded tasks last in index order
    position: np.ndarray  # [B, T] place of each task in `topo_order`
    memo: dict  # quantities computed so far (read-only arrays), shared by padding and planning

    @classmethod
    def of(cls, problems: Sequence[Problem], num_tasks: int, num_procs: int) -> "BatchGraph":
        """The batch graph of `problems`, padded to `num_tasks` tasks and `num_procs` processors."""
        size = len(problems)
        counts = np.array([p.num_edges for p in problems])
        starts = np.repeat(np.cumsum(counts) - counts, counts)  # each edge's problem's first edge
        topo_order = padded([p.topological_order for p in problems], (num_tasks,), fill=-1, dtype=np.int64)
        unused = topo_order < 0
        topo_order[unused] = np.broadcast_to(np.arange(num_tasks), topo_order.shape)[unused]
        position = np.empty_like(topo_order)
        position[np.arange(size)[:, None], topo_order] = np.arange(num_tasks)
        return cls(
            problems=problems,
            comp=padded([p.comp for p in problems], (num_tasks, num_procs)),
            task_mask=np.arange(num_tasks)[None, :] < np.array([p.num_tasks for p in problems])[:, None],
            proc_mask=np.arange(num_procs)[None, :] < np.array([p.num_procs for p in problems])[:, None],
            counts=counts,
            batch=np.repeat(np.arange(size), counts),
            src=np.concatenate([p.src for p in problems]),
            dst=np.concatenate([p.dst for p in problems]),
            data=np.concatenate([p.data for p in problems]),
            in_order=np.concatenate([p.in_edges[1] for p in problems]) + starts,
            out_order=np.concatenate([p.out_edges[1] for p in problems]) + starts,
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
        inputs = np.bincount(owner, minlength=self.task_mask.size)
        return owner, np.arange(len(owner)) - (np.cumsum(inputs) - inputs)[owner], inputs

    def _mean_comp(self) -> np.ndarray:
        """[B * T] mean execution time over each problem's processors (`comp.mean(axis=1)`); 0 padded."""
        return self._cached("_mean_comp", self._compute_mean_comp)

    def _compute_mean_comp(self) -> np.ndarray:
        if self.proc_mask.all():
            return self.comp.mean(axis=2).ravel()
        out = np.zeros(self.task_mask.size)
        out[np.flatnonzero(self.task_mask)] = np.concatenate([p.comp.mean(axis=1) for p in self.problems])
        return out

    def _levels(self) -> np.ndarray:
        """[B * T] each task's DAG level (`Problem.levels`); 0 padded."""
        return self._cached("_levels", self._compute_levels)

    def _compute_levels(self) -> np.ndarray:
        level = np.zeros(self.task_mask.size, np.int64)
        level[np.flatnonzero(self.task_mask)] = np.concatenate([p.levels for p in self.problems])
        return level

    def _sweep(self, by_source: bool):
        """The edges sorted by (level of the task they update, that task) (`by_source`: the source, else
        the destination) and, per level in update order (deepest first when `by_source`), (edges
        slice, first edge of each updated task within it, the updated tasks)."""
        return self._cached(f"sweep {by_source}", lambda: self._compute_sweep(by_source))

    def _compute_sweep(self, by_source: bool):
        order = self.out_order if by_source else self.in_order
        owner = (self.global_src() if by_source else self.global_dst())[order]
        level = self._levels()
        owner_level = level[owner]
        by_level = np.argsort(owner_level.astype(np.uint16 if level.max() < 2**16 else np.int64), kind="stable")
        order, owner, owner_level = order[by_level], owner[by_level], owner_level[by_level]
        first = np.flatnonzero(np.concatenate([[True], owner[1:] != owner[:-1]]))
        bounds = np.searchsorted(owner_level, np.arange(int(level.max()) + 2))
        groups = np.searchsorted(first, bounds)
        steps = []
        for lo, hi, group_lo, group_hi in zip(bounds[:-1], bounds[1:], groups[:-1], groups[1:]):
            if lo < hi:
                starts = first[group_lo:group_hi]
                steps.append((slice(lo, hi), starts - lo, owner[starts]))
        return order, steps[::-1] if by_source else steps

    def _edge_value(self) -> np.ndarray:
        """[E] mean transfer time of each edge (`jaxsched.heft.mean_communication`)."""
        return self._cached("_edge_value", self._compute_edge_value)

    def _compute_edge_value(self) -> np.ndarray:
        return np.concatenate([mean_communication(p) for p in self.problems])

    def upward_rank(self) -> np.ndarray:
        """[B, T] `jaxsched.heft.upward_rank` of every problem; 0 padded."""
        return self._cached("upward_rank", self._compute_upward_rank)

    def _compute_upward_rank(self) -> np.ndarray:
        mean_comp = self._mean_comp()
        order, steps = self._sweep(by_source=True)
        dst, edge_value = self.global_dst()[order], self._edge_value()[order]
        rank = mean_comp.copy()  # exit tasks
        for edges, starts, owners in steps:
            rank[owners] = mean_comp[owners] + np.maximum.reduceat(edge_value[edges] + rank[dst[edges]], starts)
        return rank.reshape(self.task_mask.shape)

    def downward_rank(self) -> np.ndarray:
        """[B, T] `jaxsched.priorities.downward_rank` of every problem; 0 padded."""
        return self._cached("downward_rank", self._compute_downward_rank)

    def _compute_downward_rank(self) -> np.ndarray:
        mean_comp = self._mean_comp()
        order, steps = self._sweep(by_source=False)
        src, edge_value = self.global_src()[order], self._edge_value()[order]
        rank = np.zeros(self.task_mask.size)  # entry tasks
        for edges, starts, owners in steps:
            through = rank[src[edges]] + mean_comp[src[edges]] + edge_value[edges]
            rank[owners] = np.maximum.reduceat(through, starts)
        return rank.reshape(self.task_mask.shape)

    def optimistic_cost_table(self) -> np.ndarray:
        """[B, T, P] `jaxsched.priorities.optimistic_cost_table` of every problem; 0 padded."""
        return self._cached("optimistic_cost_table", self._compute_optimistic_cost_table)

    def _compute_optimistic_cost_table(self) -> np.ndarray:
        size, num_tasks, num_procs = self.comp.shape
        comp = self.comp.reshape(size * num_tasks, num_procs)
        proc_mask = np.repeat(self.proc_mask, num_tasks, axis=0)  # [B * T, P]
        order, steps = self._sweep(by_source=True)
        dst, edge_value = self.global_dst()[order], self._edge_value()[order]
        table = np.zeros(comp.shape)
        for edges, starts, owners in steps:
            after = np.where(proc_mask[dst[edges]], table[dst[edges]] + comp[dst[edges]], np.inf)
            elsewhere = after.min(axis=1, keepdims=True) + edge_value[edges, None]
            table[owners] = np.maximum.reduceat(np.minimum(after, elsewhere), starts, axis=0)
        return np.where(proc_mask, table, 0.0).reshape(self.comp.shape)

    def row_mean(self, table: np.ndarray) -> np.ndarray:
        """[B, T] the mean of `table` [B, T, P] over each problem's processors."""
        if self.proc_mask.all():
            return table.mean(axis=2)
        out = np.zeros(self.task_mask.shape)
        for b, problem in enumerate(self.problems):
            out[b, : problem.num_tasks] = table[b, : problem.num_tasks, : problem.num_procs].mean(axis=1)
        return out

    def priority_position(self, priority: np.ndarray) -> np.ndarray:
        """[B, T] `jaxsched.priorities.priority_position` from priorities [B, T]: decreasing priority,
        ties by topological position (a stable sort of the topological order); padded tasks last."""
        rows = np.arange(len(priority))[:, None]
        key = np.where(self.task_mask, -priority, np.inf)[rows, self.topo_order]
        order = self.topo_order[rows, np.argsort(key, axis=1, kind="stable")]
        position = np.empty_like(order)
        position[rows, order] = np.arange(self.num_tasks)
        return position

    def critical_path_pins(self, total: np.ndarray) -> np.ndarray:
        """[B, T] CPOP's pins (`jaxsched.priorities.critical_path`) from the rank sums `total` [B, T]
        (upward plus downward rank): each problem's critical-path tasks on its processor, -1 elsewhere;
        the path is walked for every problem at once."""
        size, num_tasks, num_procs = self.comp.shape
        length = np.where(self.task_mask, total, -np.inf).max(axis=1, keepdims=True)
        on_path = self.task_mask & np.isclose(total, length, rtol=1e-9, atol=0.0)
        rows = np.arange(size)
        entries = on_path & (self._levels().reshape(size, num_tasks) == 0)
        task = np.argmin(np.where(entries, self.position, num_tasks), axis=1)
        successors = self._successors()  # [B * T, D], B * T where padded
        on_path_flat = np.concatenate([on_path.ravel(), [False]])
        position_flat = np.concatenate([self.position.ravel(), [num_tasks]])
        pin = np.full((size, num_tasks), -1, np.int64)
        path = np.zeros((size, num_tasks), bool)
        load = np.zeros((size, num_procs))
        walking = np.ones(size, bool)
        while walking.any():
            path[rows[walking], task[walking]] = True
            load[walking] += self.comp[rows[walking], task[walking]]
            nexts = successors[rows * num_tasks + task]  # [B, D]
            key = np.where(on_path_flat[nexts], position_flat[nexts], num_tasks)
            pick = np.argmin(key, axis=1)
            walking &= key[rows, pick] < num_tasks
            task = np.where(walking, nexts[rows, pick] - rows * num_tasks, task)
        proc = np.where(self.proc_mask, load, np.inf).argmin(axis=1)
        pin[path] = np.broadcast_to(proc[:, None], pin.shape)[path]
        return pin

    def _successors(self) -> np.ndarray:
        """[B * T, D] each task's successors (global numbers, `out_edges` order), B * T where padded."""
        return self._cached("successors", self._compute_successors)

    def _compute_successors(self) -> np.ndarray:
        src = self.global_src()[self.out_order]
        outputs = np.bincount(src, minlength=self.task_mask.size)
        width = max(1, int(outputs.max(initial=0)))
        slot = np.arange(len(src)) - (np.cumsum(outputs) - outputs)[src]
        table = np.full(self.task_mask.size * width, self.task_mask.size, np.int64)
        table[src * width + slot] = self.global_dst()[self.out_order]
        return table.reshape(-1, width)

    def ready_list_order(self, position: np.ndarray) -> np.ndarray:
        """[B, T] `jaxsched.listsched.ready_list_order` of every problem: the order in which a list
        scheduler that always takes the ready task of lowest `position` visits them; padded tasks last
        (their positions are the largest). Problems whose positions increase along every edge take them
        sorted; the others one vectorised step per task, together."""
        size, num_tasks = position.shape
        backward = position[self.batch, self.src] >= position[self.batch, self.dst]
        order = np.argsort(position, axis=1)
        picked = np.flatnonzero(np.bincount(self.batch, backward, minlength=size) > 0)
        if not picked.size:
            return order
        successors = self._successors()
        waiting = np.append(np.bincount(self.global_dst(), minlength=size * num_tasks), 0)  # last: padded
        latest = np.iinfo(np.int64).max
        for step in range(num_tasks):
            ready = waiting[:-1].reshape(size, num_tasks)[picked] == 0
            task = np.argmin(np.where(ready, position[picked], latest), axis=1)
            order[picked, step] = task
            flat = picked * num_tasks + task
            waiting[flat] = -1
            np.subtract.at(waiting, successors[flat].ravel(), 1)
        return order
