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
from jaxsched.heft import upward_rank
from jaxsched.order import priority_order
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
    transfer = float(problem.inverse_bandwidth.max()) if problem.num_procs > 1 else 0.0
    return float(problem.arrival.max() + problem.comp.max(axis=1).sum() + problem.data.sum() * transfer)


def _check_range(problem: Problem, dtype) -> None:
    """Raises ValueError when `problem`'s times do not fit `dtype` (see the module docstring)."""
    info = np.finfo(dtype)
    bound = time_bound(problem)
    if bound > float(info.max):
        raise ValueError(
            f"times of this problem reach {bound:.3g}, beyond {np.dtype(dtype).name}'s range ({info.max:.3g}); "
            "pad with dtype=np.float64 (under jax.enable_x64) or rescale the costs"
        )
    arrays = {
        "comp": problem.comp,
        "data": problem.data,
        "task_arrival": problem.arrival,
        "inverse bandwidth": problem.inverse_bandwidth,
    }
    for name, array in arrays.items():
        tiny = (array != 0) & (np.abs(array) < float(info.tiny))
        if tiny.any():
            value = array[tuple(np.argwhere(tiny)[0])]
            raise ValueError(
                f"{name} holds {value:.3g}, below {np.dtype(dtype).name}'s smallest normal number "
                f"({info.tiny:.3g}): it would round to zero; pad with dtype=np.float64 or rescale the costs"
            )


def pad_problem(problem: Problem, shape: Shape | None = None, dtype=np.float32) -> PaddedProblem:
    """Pads `problem` to `shape` (default: its own, `Shape.of(problem)`) in `dtype`; raises ValueError
    if it does not fit, or if its times do not fit `dtype` (see the module docstring)."""
    check_problem(problem)
    shape = Shape.of(problem) if shape is None else Shape(*shape)
    shape.check(problem)
    _check_range(problem, dtype)
    num_tasks, num_procs, num_edges, max_in_degree = shape
    t, p, e = problem.num_tasks, problem.num_procs, problem.num_edges
    comp = np.zeros((num_tasks, num_procs), dtype)
    comp[:t, :p] = problem.comp
    arrival = np.zeros(num_tasks, dtype)
    arrival[:t] = problem.arrival
    pred = np.full((num_tasks, max_in_degree), num_tasks, np.int32)
    pred_data = np.zeros((num_tasks, max_in_degree), dtype)
    in_ptr, in_order = problem.in_edges
    slot = np.arange(e) - in_ptr[problem.dst[in_order]]  # position of each edge among its task's inputs
    pred[problem.dst[in_order], slot] = problem.src[in_order]
    pred_data[problem.dst[in_order], slot] = problem.data[in_order]
    inverse_bandwidth = np.zeros((num_procs, num_procs), dtype)
    inverse_bandwidth[:p, :p] = problem.inverse_bandwidth
    rank = upward_rank(problem)
    padding = np.arange(t, num_tasks, dtype=np.int32)
    edge_src, edge_dst = np.zeros(num_edges, np.int32), np.zeros(num_edges, np.int32)
    edge_data = np.zeros(num_edges, dtype)
    edge_src[:e], edge_dst[:e], edge_data[:e] = problem.src, problem.dst, problem.data
    return PaddedProblem(
        comp=comp,
        task_mask=np.arange(num_tasks) < t,
        proc_mask=np.arange(num_procs) < p,
        arrival=arrival,
        pred=pred,
        pred_data=pred_data,
        inverse_bandwidth=inverse_bandwidth,
        topo_order=np.concatenate([problem.topological_order.astype(np.int32), padding]),
        heft_order=np.concatenate([priority_order(problem, rank).astype(np.int32), padding]),
        upward_rank=np.concatenate([rank, np.zeros(num_tasks - t)]).astype(dtype),
        edge_src=edge_src,
        edge_dst=edge_dst,
        edge_data=edge_data,
        edge_mask=np.arange(num_edges) < e,
    )


def pad_problems(problems: Sequence[Problem], shape: Shape | None = None, dtype=np.float32) -> ProblemBatch:
    """Stacks `problems` into one batch padded to `shape` (default: the smallest that fits them all)."""
    if not len(problems):
        raise ValueError("pad_problems needs at least one problem")
    shape = Shape.of(problems) if shape is None else shape
    return stack([pad_problem(p, shape, dtype) for p in problems])
