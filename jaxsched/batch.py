"""The padded problem: one instance as fixed-shape arrays, so one compilation serves a whole batch.

A `Shape` names the padded sizes (tasks, processors, edges, incoming edges per task); every kernel,
the neural scheduler's features and its decoder take problems padded to one. A `PaddedProblem`
holds one instance padded to a shape, or a batch: the same pytree with a leading batch axis.
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

from jaxsched.batch_graph import BatchGraph, HostBuffers, check_fit, padded, take
from jaxsched.common.arguments import integer
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
        sizes = np.array([(*p.comp.shape, p.src.shape[0], p.max_in_degree) for p in problems]).max(axis=0)
        return cls(*(int(n) for n in np.maximum(sizes, (0, 0, 1, 1))))

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
    largest = np.ascontiguousarray(np.moveaxis(comp, 2, 0)).max(axis=0)  # [B, T]; 10x comp.max(axis=2) at P = 4
    return arrival.max(axis=1) + largest.sum(axis=1) + data_sum * inverse_bandwidth.max(axis=(1, 2))


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


def fit_shape(problems: Sequence[Problem], shape: Shape | None = None, caller: str = "fit_shape") -> Shape:
    """The shape a batch of `problems` pads to: `shape`, by default the smallest that fits them all.
    Raises ValueError (naming `caller`) for an empty batch, something not a `Problem`, or a problem
    that does not fit."""
    if not len(problems):
        raise ValueError(f"{caller} needs at least one problem")
    for problem in problems:
        check_problem(problem)
    needed = Shape.of(problems)
    shape = needed if shape is None else Shape(*shape)
    shape.check(problems[0])
    if any(n > c for n, c in zip(needed, shape)):
        for problem in problems:
            shape.check(problem)  # raises, naming what does not fit
    return shape


def checked_batch(problems, shape, caller: str) -> tuple[list[Problem], Shape | None]:
    """`problems` as a list and `shape` as a `Shape` (None stays None): ValueError, naming `caller`, for an
    empty batch, something not a `Problem` or a size of `shape` that is not a positive integer."""
    problems = list(problems)
    if not problems:
        raise ValueError(f"{caller} needs at least one problem")
    if set(map(type, problems)) != {Problem}:  # one pass in C; the loop names the first that is not one
        for problem in problems:
            check_problem(problem)
    if shape is not None:
        shape = Shape(*shape)
        for name, size in shape._asdict().items():
            integer(f"Shape.{name}", size, 1)
    return problems, shape


def fitted_graph(problems, shape, graph, caller: str, dtype=np.float64) -> tuple[list[Problem], Shape, BatchGraph]:
    """`problems` as a list, the shape they pad to (`shape`; by default the smallest that fits them all, as
    `Shape.of`) and their `BatchGraph` at it (`graph` when given, built for them at `shape` and shared by
    padding and planning; else built with its costs in `dtype`). The fit is checked on the graph's arrays:
    ValueError, naming `caller`, for an empty batch, something not a `Problem`, a problem that does not fit or
    a graph built for other problems."""
    if graph is None:
        problems, shape = checked_batch(problems, shape, caller)
    else:
        problems = list(problems)
        shape = fit_shape(problems, None, caller) if shape is None else checked_batch(problems, shape, caller)[1]
    if graph is None:
        if shape is None:
            num_tasks = max(len(p.topological_order) for p in problems)
            graph = BatchGraph.of(problems, num_tasks, max(p.comp.shape[1] for p in problems), dtype)
            shape = Shape(num_tasks, graph.comp.shape[2], max(1, int(graph.counts.max())),
                          max(1, int(graph.sizes[:, 0].max())))
        else:
            graph = BatchGraph.of(problems, shape.num_tasks, shape.num_procs, dtype)
    built = (len(graph.task_mask), *graph.comp.shape[1:])
    if built != (len(problems), shape.num_tasks, shape.num_procs):
        raise ValueError(
            f"{caller}: the graph holds {built[0]} problems padded to {built[1]} tasks and {built[2]} processors, "
            f"not {len(problems)} at {shape.num_tasks} and {shape.num_procs}"
        )
    in_degree = graph.sizes[:, 0].astype(np.int64)
    check_fit((("edges", graph.counts, shape.num_edges), ("incoming edges of a task", in_degree, shape.max_in_degree)))
    return problems, shape, graph


def _arrivals(problems: list[Problem], task_mask: np.ndarray) -> np.ndarray:
    """[B, T] float64 release times, 0 where padded or not given (one pass over the problems that give them)."""
    out = np.zeros(task_mask.shape)
    given = [b for b, p in enumerate(problems) if p.task_arrival is not None]
    if given:
        out[given] = padded([problems[b].task_arrival for b in given], out.shape[1:])
    return out


def links_of(problems: list[Problem], proc_mask: np.ndarray) -> np.ndarray:
    """[B, P, P] float64 inverse bandwidths (`Problem.inverse_bandwidth`), 0 where padded: 1 between distinct
    real processors of the problems without bandwidths, padded from the others."""
    num_procs = proc_mask.shape[1]
    real = proc_mask[:, :, None] & proc_mask[:, None, :]
    out = np.where(real, 1.0 - np.eye(num_procs), 0.0)
    given = [b for b, p in enumerate(problems) if p.bandwidth is not None]
    if given:
        out[given] = padded([problems[b].inverse_bandwidth for b in given], out.shape[1:])
    return out


class PaddedCosts(NamedTuple):
    """The costs of a padded batch without its graph: the fields of `PaddedProblem` that a static list
    scheduler scanning a predecessor stream (`jaxsched._pull_stream`) reads, cheaper to build."""

    comp: np.ndarray  # [B, T, P]
    task_mask: np.ndarray  # [B, T]
    proc_mask: np.ndarray  # [B, P]
    arrival: np.ndarray  # [B, T]
    inverse_bandwidth: np.ndarray  # [B, P, P]


def pad_costs(
    problems: Sequence[Problem], shape: Shape | None = None, dtype=np.float32, graph: BatchGraph | None = None
) -> PaddedCosts:
    """The `PaddedCosts` of `problems` (those of `pad_problems`, with its checks and errors)."""
    problems, shape, graph = fitted_graph(problems, shape, graph, "pad_costs", dtype)
    comp = graph.comp if graph.comp.dtype == dtype else graph.comp64().astype(dtype)
    return checked_costs(problems, comp, graph.task_mask, graph.proc_mask, graph.sizes, graph.comp64)


def checked_costs(problems: list[Problem], comp: np.ndarray, task_mask: np.ndarray, proc_mask: np.ndarray,
                  sizes: np.ndarray, comp64, buffers: HostBuffers | None = None,
                  links: np.ndarray | None = None) -> PaddedCosts:
    """The `PaddedCosts` of `problems` from their costs `comp` [B, T, P], already padded in the dtype the costs
    take, their masks and `sizes` (`BatchGraph.sizes`): release times and inverse bandwidths padded (in
    `buffers` when given), every time checked to fit that dtype (ValueError, as `pad_problems`; `comp64()`:
    the costs in float64, for the message); `links`: `links_of(problems, proc_mask)`, when already made."""
    dtype = comp.dtype
    links = links_of(problems, proc_mask) if links is None else links
    _, largest_sum, data_sum, least_comp, least_data = sizes.T
    bounds = largest_sum + data_sum * links.max(axis=(1, 2))
    arrays = {"inverse bandwidth": links}
    if all(p.task_arrival is None for p in problems):  # zeros: nothing to check, nothing to convert
        arrival = take(buffers, "arrival", task_mask.shape, dtype, 0)
    else:
        arrival = _arrivals(problems, task_mask)
        bounds = arrival.max(axis=1) + bounds
        arrays = {"task_arrival": arrival, **arrays}
    tiny = float(np.finfo(dtype).tiny)
    if (least_data < tiny).any():  # the arrays that hold a value too small, for the message
        arrays = {"data": padded([p.data for p in problems], (max(len(p.data) for p in problems),)), **arrays}
    if (least_comp < tiny).any():
        arrays = {"comp": comp64(), **arrays}
    _check_range(arrays, bounds, dtype)
    return PaddedCosts(comp, task_mask, proc_mask, arrival.astype(dtype, copy=False), links.astype(dtype))


class PaddedEdges(NamedTuple):
    """The edges of a padded batch (the same fields of `PaddedProblem`): what a dynamic list scheduler
    reads of the graph beside `PaddedCosts`, cheaper to build than the whole `PaddedProblem`."""

    edge_src: np.ndarray  # [B, E] int32, 0 where padded
    edge_dst: np.ndarray  # [B, E] int32, 0 where padded
    edge_data: np.ndarray  # [B, E] float, 0 where padded
    edge_mask: np.ndarray  # [B, E] bool


def pad_edges(
    problems: Sequence[Problem], shape: Shape | None = None, dtype=np.float32, graph: BatchGraph | None = None
) -> PaddedEdges:
    """The `PaddedEdges` of `problems` (those of `pad_problems`; its times are checked by `pad_costs`)."""
    problems, shape, graph = fitted_graph(problems, shape, graph, "pad_edges", dtype)
    size, num_edges, counts = len(problems), shape.num_edges, graph.counts
    # edge e of problem b lands at b * E + e - edge_offsets[b] of [B, E] flattened
    flat = np.arange(len(graph.src)) + np.repeat(np.arange(size) * num_edges - graph.edge_offsets[:-1], counts)
    edge_src, edge_dst = np.zeros(size * num_edges, np.int32), np.zeros(size * num_edges, np.int32)
    edge_data = np.zeros(size * num_edges, dtype)
    edge_src[flat], edge_dst[flat], edge_data[flat] = graph.src, graph.dst, graph.data
    return PaddedEdges(
        edge_src.reshape(size, num_edges),
        edge_dst.reshape(size, num_edges),
        edge_data.reshape(size, num_edges),
        np.arange(num_edges)[None, :] < counts[:, None],
    )


def pad_problems(
    problems: Sequence[Problem], shape: Shape | None = None, dtype=np.float32, graph: BatchGraph | None = None
) -> PaddedProblem:
    """Stacks `problems` into one batch padded to `shape` (default: the smallest that fits them all), in
    `dtype`; raises ValueError if one does not fit, or if its times do not fit `dtype` (module
    docstring). Vectorised over the batch: the edges of every problem are handled as one array.
    `graph`: the problems' `BatchGraph` at `shape`, when already built (planning shares it)."""
    problems, shape, graph = fitted_graph(problems, shape, graph, "pad_problems", dtype)
    num_tasks, _, _, max_in_degree = shape
    size = len(problems)
    costs = pad_costs(problems, shape, dtype, graph)
    edges = pad_edges(problems, shape, dtype, graph)
    owner, slot = graph.input_slots()  # incoming edges grouped by task, their place among its inputs
    flat = owner * max_in_degree + slot  # into [B, T, K] flattened
    pred = np.full(size * num_tasks * max_in_degree, num_tasks, np.int32)
    pred_data = np.zeros(size * num_tasks * max_in_degree, dtype)
    pred[flat], pred_data[flat] = graph.in_src % num_tasks, graph.in_data
    rank = graph.upward_rank()
    heft_order = np.argsort(graph.priority_position(rank), axis=1)
    return PaddedProblem(
        comp=costs.comp,
        task_mask=costs.task_mask,
        proc_mask=costs.proc_mask,
        arrival=costs.arrival,
        pred=pred.reshape(size, num_tasks, max_in_degree),
        pred_data=pred_data.reshape(size, num_tasks, max_in_degree),
        inverse_bandwidth=costs.inverse_bandwidth,
        topo_order=graph.topo_order.astype(np.int32),
        heft_order=heft_order.astype(np.int32),
        upward_rank=rank.astype(dtype),
        **edges._asdict(),
    )
