"""The padded problem: one instance as fixed-shape arrays, so one compilation serves a whole batch.

A `Shape` names the padded sizes (tasks, processors, edges, incoming edges per task); every kernel,
the neural scheduler's features and its decoder take problems padded to one. A `PaddedProblem`
holds one instance padded to a shape; `ProblemBatch` is the same pytree with a leading batch axis.
Padded tasks cost nothing and have no edges (they never delay a real task); padded processors are
masked out; the predecessor table uses index T as a sentinel whose finish time the kernels treat
as -inf.

Precision contract of `dtype=np.float32` (the default): every time must be representable, so
`pad_problem` raises ValueError when a value or the problem's time bound (`time_bound`: the latest
any task can finish) exceeds float32's range, or when a non-zero value is below its smallest
normal number (it would flush to zero). Times are then rounded to float32: with integer costs the
kernels equal the float64 references exactly as long as `time_bound` is at most 2**24 (every
integer up to it is a float32); beyond it, or with fractional costs, they agree to float32
rounding. Pad with `dtype=np.float64` under `jax.enable_x64(True)` for float64 arithmetic.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence, TypeVar

import chex
import numpy as np

from jaxsched.common.arguments import integer
from jaxsched.heft import mean_communication
from jaxsched.problem import Problem, check_problem


class Shape(NamedTuple):
    """Padded sizes: capacity for tasks (T), processors (P), edges (E) and incoming edges per task (K)."""

    num_tasks: int
    num_procs: int
    num_edges: int
    max_in_degree: int

    @classmethod
    def of(cls, problems: Problem | Sequence[Problem]) -> "Shape":
        """The smallest shape that fits `problems` (one or several); edges and K are at least 1."""
        problems = [problems] if isinstance(problems, Problem) else list(problems)
        if not problems:
            raise ValueError("Shape.of needs at least one problem")
        return cls(
            max(p.num_tasks for p in problems),
            max(p.num_procs for p in problems),
            max(1, max(p.num_edges for p in problems)),
            max(1, max(p.max_in_degree for p in problems)),
        )

    @classmethod
    def read(cls, padded) -> "Shape":
        """The shape of a padded form (`PaddedProblem`, the neural scheduler's `Features`: anything with
        `comp [.., T, P]`, `edge_src [.., E]` and `pred [.., T, K]`); a batch's leading axis is ignored."""
        return cls(*padded.comp.shape[-2:], padded.edge_src.shape[-1], padded.pred.shape[-1])

    def check(self, problem: Problem) -> None:
        """Raises ValueError when `problem` does not fit this shape (or a size is not a positive integer)."""
        for name, size in self._asdict().items():
            integer(f"Shape.{name}", size, 1)
        sizes = (
            ("tasks", problem.num_tasks, self.num_tasks),
            ("processors", problem.num_procs, self.num_procs),
            ("edges", problem.num_edges, self.num_edges),
            ("incoming edges of a task", problem.max_in_degree, self.max_in_degree),
        )
        for what, needed, capacity in sizes:
            if needed > capacity:
                raise ValueError(f"problem has {needed} {what}, more than the padded capacity {capacity}")


class PaddedProblem(NamedTuple):
    """One problem (or, stacked, a batch of them) as fixed-shape arrays."""

    comp: np.ndarray  # [T, P] float; 0 for padded tasks and processors
    task_mask: np.ndarray  # [T] bool
    proc_mask: np.ndarray  # [P] bool
    arrival: np.ndarray  # [T] release time
    pred: np.ndarray  # [T, K] int32 predecessor indices, T where padded
    pred_data: np.ndarray  # [T, K] communication time of each incoming edge, 0 where padded
    inverse_bandwidth: np.ndarray  # [P, P] multiplies data to give transfer time; 0 on the diagonal
    topo_order: np.ndarray  # [T] int32 canonical topological order, padded tasks last
    heft_order: np.ndarray  # [T] int32 HEFT visit order (decreasing upward rank), padded tasks last
    upward_rank: np.ndarray  # [T] float
    edge_src: np.ndarray  # [E] int32, 0 where padded
    edge_dst: np.ndarray  # [E] int32, 0 where padded
    edge_data: np.ndarray  # [E] float, 0 where padded
    edge_mask: np.ndarray  # [E] bool

    @property
    def shape(self) -> Shape:
        """The padded sizes (`Shape.read`)."""
        return Shape.read(self)


def assert_padded(problem: PaddedProblem) -> None:
    """Raises (chex) unless `problem` is one unbatched padded problem: the boundary check of the
    unbatched cores, so that a batch passed where one problem belongs fails here, not inside XLA."""
    chex.assert_rank(
        [problem.comp, problem.task_mask, problem.proc_mask, problem.pred, problem.pred_data, problem.arrival],
        [2, 1, 1, 2, 2, 1],
    )
    chex.assert_rank([problem.inverse_bandwidth, problem.topo_order, problem.heft_order], [2, 1, 1])


ProblemBatch = PaddedProblem  # the same pytree with a leading batch axis on every array

Tree = TypeVar("Tree", bound=tuple)


def stack(items: Sequence[Tree]) -> Tree:
    """NamedTuples of same-shape arrays stacked along a new leading batch axis."""
    if not len(items):
        raise ValueError("stack needs at least one item")
    return type(items[0])(*(np.stack(arrays) for arrays in zip(*items)))


def time_bound(problem: Problem) -> float:
    """The latest time any task of `problem` can finish under any list schedule: the last release
    time plus every task's largest cost plus every edge's largest transfer time."""
    arrays = (problem.comp, problem.arrival, problem.data.sum(), problem.inverse_bandwidth)
    return float(_time_bounds(*(np.asarray(a)[None] for a in arrays))[0])


def _time_bounds(comp, arrival, data_sum, inverse_bandwidth) -> np.ndarray:
    """[B] `time_bound` of each problem of a batch from its padded float64 arrays (padding adds zeros)."""
    return arrival.max(axis=1) + comp.max(axis=2).sum(axis=1) + data_sum * inverse_bandwidth.max(axis=(1, 2))


def _check_range(arrays: dict, bounds: np.ndarray, dtype) -> None:
    """Raises ValueError when a batch's times (`bounds`, and the padded float64 `arrays` by name, each
    with a leading batch axis) do not fit `dtype` (see the module docstring)."""
    info = np.finfo(dtype)
    name = np.dtype(dtype).name

    def which(index: int) -> str:
        return f"problem {index}: " if len(bounds) > 1 else ""

    beyond = np.flatnonzero(bounds > float(info.max))
    if beyond.size:
        i = int(beyond[0])
        raise ValueError(
            f"{which(i)}times reach {bounds[i]:.3g}, beyond {name}'s range ({info.max:.3g}); "
            "pad with dtype=np.float64 (under jax.enable_x64) or rescale the costs"
        )
    for what, array in arrays.items():
        tiny = (array != 0) & (np.abs(array) < float(info.tiny))
        if tiny.any():
            index = tuple(np.argwhere(tiny)[0])
            raise ValueError(
                f"{which(int(index[0]))}{what} holds {array[index]:.3g}, below {name}'s smallest normal number "
                f"({info.tiny:.3g}): it would round to zero; pad with dtype=np.float64 or rescale the costs"
            )


def pad_problem(problem: Problem, shape: Shape | None = None, dtype=np.float32) -> PaddedProblem:
    """Pads `problem` to `shape` (default: its own, `Shape.of(problem)`) in `dtype`; raises ValueError
    if it does not fit, or if its times do not fit `dtype` (see the module docstring)."""
    check_problem(problem)
    return PaddedProblem(*(array[0] for array in pad_problems([problem], shape, dtype)))


def _upward_ranks(
    problems: Sequence[Problem],
    comp: np.ndarray,
    task_mask: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    out_order: np.ndarray,
) -> np.ndarray:
    """[B * T] `jaxsched.heft.upward_rank` of every problem at once, on the batch as one graph of
    B * T tasks (`comp` [B, T, P] padded, `task_mask` [B, T]; `src`, `dst`: edges in that numbering,
    `out_order` sorts them by source): one step per level of the deepest problem, each a max over
    every out-edge of that level's tasks. The same float64 operations as the per-problem form: equal
    values; padded tasks rank 0."""
    size = task_mask.size
    task = np.flatnonzero(task_mask)
    if all(p.num_procs == comp.shape[2] for p in problems):
        mean_comp = comp.mean(axis=2).ravel()  # padded tasks: 0
    else:
        mean_comp = np.zeros(size)
        mean_comp[task] = np.concatenate([p.comp.mean(axis=1) for p in problems])
    level = np.zeros(size, np.int64)
    level[task] = np.concatenate([p.levels for p in problems])
    edge_value = np.concatenate([mean_communication(p) for p in problems])[out_order]
    src, dst = src[out_order], dst[out_order]
    by_level = np.argsort(level[src].astype(np.uint16 if level.max() < 2**16 else np.int64), kind="stable")
    src, dst, edge_value = src[by_level], dst[by_level], edge_value[by_level]  # by (level, source)
    edge_level = level[src]
    first = np.flatnonzero(np.concatenate([[True], src[1:] != src[:-1]]))  # each source's first edge
    bounds = np.searchsorted(edge_level, np.arange(int(level.max()) + 2))  # level L: bounds[L]:bounds[L + 1]
    groups = np.searchsorted(first, bounds)
    rank = mean_comp.copy()  # exit tasks
    for lo, hi, group_lo, group_hi in reversed(list(zip(bounds[:-1], bounds[1:], groups[:-1], groups[1:]))):
        if lo == hi:
            continue
        starts = first[group_lo:group_hi]
        best = np.maximum.reduceat(edge_value[lo:hi] + rank[dst[lo:hi]], starts - lo)
        owners = src[starts]
        rank[owners] = mean_comp[owners] + best
    return rank


def _padded(arrays: Sequence[np.ndarray], shape: tuple[int, ...], fill=0, dtype=np.float64) -> np.ndarray:
    """[B, *shape] the `arrays` stacked, each in the leading corner of its `fill`ed slot."""
    out = np.full((len(arrays),) + shape, fill, dtype)
    if all(a.shape == shape for a in arrays):
        out[:] = arrays
        return out
    for slot, array in zip(out, arrays):
        slot[tuple(slice(0, n) for n in array.shape)] = array
    return out


def pad_problems(problems: Sequence[Problem], shape: Shape | None = None, dtype=np.float32) -> ProblemBatch:
    """Stacks `problems` into one batch padded to `shape` (default: the smallest that fits them all), in
    `dtype`; raises ValueError if one does not fit, or if its times do not fit `dtype` (module
    docstring). Vectorised over the batch: the edges of every problem are handled as one array."""
    problems = list(problems)
    if not problems:
        raise ValueError("pad_problems needs at least one problem")
    for problem in problems:
        check_problem(problem)
    needed = Shape.of(problems)
    shape = needed if shape is None else Shape(*shape)
    shape.check(problems[0])
    if any(n > c for n, c in zip(needed, shape)):
        for problem in problems:
            shape.check(problem)  # raises, naming what does not fit
    num_tasks, num_procs, num_edges, max_in_degree = shape
    size = len(problems)
    comp = _padded([p.comp for p in problems], (num_tasks, num_procs))
    arrival = _padded([p.arrival for p in problems], (num_tasks,))
    inverse_bandwidth = _padded([p.inverse_bandwidth for p in problems], (num_procs, num_procs))
    counts = np.array([p.num_edges for p in problems])
    batch = np.repeat(np.arange(size), counts)
    src = np.concatenate([p.src for p in problems])
    dst = np.concatenate([p.dst for p in problems])
    data = np.concatenate([p.data for p in problems])
    _check_range(
        {"comp": comp, "data": data[:, None], "task_arrival": arrival, "inverse bandwidth": inverse_bandwidth},
        _time_bounds(comp, arrival, np.bincount(batch, data, minlength=size), inverse_bandwidth),
        dtype,
    )
    starts = np.cumsum(counts) - counts  # each problem's first edge
    in_order = np.concatenate([p.in_edges[1] for p in problems]) + np.repeat(starts, counts)
    out_order = np.concatenate([p.out_edges[1] for p in problems]) + np.repeat(starts, counts)
    src_global, dst_global = batch * num_tasks + src, batch * num_tasks + dst
    grouped = dst_global[in_order]  # incoming edges grouped by task, in edge order (`Problem.in_edges`)
    inputs = np.bincount(grouped, minlength=size * num_tasks)
    slot = np.arange(len(grouped)) - (np.cumsum(inputs) - inputs)[grouped]  # place among the task's inputs
    flat = grouped * max_in_degree + slot  # into [B, T, K] flattened
    pred = np.full(size * num_tasks * max_in_degree, num_tasks, np.int32)
    pred_data = np.zeros(size * num_tasks * max_in_degree, dtype)
    pred[flat], pred_data[flat] = src[in_order], data[in_order]
    flat = batch * num_edges + np.arange(len(batch)) - np.repeat(starts, counts)  # into [B, E] flattened
    edge_src, edge_dst = np.zeros(size * num_edges, np.int32), np.zeros(size * num_edges, np.int32)
    edge_data = np.zeros(size * num_edges, dtype)
    edge_src[flat], edge_dst[flat], edge_data[flat] = src, dst, data
    topo_order = _padded([p.topological_order for p in problems], (num_tasks,), fill=-1, dtype=np.int64)
    unused = topo_order < 0  # padded tasks come last, in index order
    topo_order[unused] = np.broadcast_to(np.arange(num_tasks), topo_order.shape)[unused]
    rows = np.arange(size)[:, None]
    padding = np.arange(num_tasks)[None, :] >= np.array([p.num_tasks for p in problems])[:, None]
    rank = _upward_ranks(problems, comp, ~padding, src_global, dst_global, out_order)
    # HEFT's order: decreasing rank, ties by topological position (a stable sort of the topological
    # order), padded tasks last
    key = np.where(padding, np.inf, -rank.reshape(size, num_tasks))[rows, topo_order]
    heft_order = topo_order[rows, np.argsort(key, axis=1, kind="stable")]
    return PaddedProblem(
        comp=comp.astype(dtype),
        task_mask=~padding,
        proc_mask=np.arange(num_procs)[None, :] < np.array([p.num_procs for p in problems])[:, None],
        arrival=arrival.astype(dtype),
        pred=pred.reshape(size, num_tasks, max_in_degree),
        pred_data=pred_data.reshape(size, num_tasks, max_in_degree),
        inverse_bandwidth=inverse_bandwidth.astype(dtype),
        topo_order=topo_order.astype(np.int32),
        heft_order=heft_order.astype(np.int32),
        upward_rank=rank.reshape(size, num_tasks).astype(dtype),
        edge_src=edge_src.reshape(size, num_edges),
        edge_dst=edge_dst.reshape(size, num_edges),
        edge_data=edge_data.reshape(size, num_edges),
        edge_mask=np.arange(num_edges)[None, :] < counts[:, None],
    )
