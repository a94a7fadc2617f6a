"""Network inputs of a `Problem`: the paper's task and machine features, DAG features, padded.

Paper features (section IV-C): per task its arrival time, execution time on each processor, priority
and memory; per processor its cores, frequency and memory. DAG features (the "dag" and "gnn"
variants only): upward and downward rank, criticality, level, degrees, data in and out.

Defaults for what a problem lacks: arrival 0, priority 0, task memory 0, processor cores 1 and memory
1; a missing processor frequency is derived from `comp` as the processor's relative speed (mean
execution time over all processors divided by the mean on this one). Every time is divided by the
makespan lower bound `time_scale`, and every other feature by its maximum over the problem, so the
network sees the same numbers for a problem and a rescaled copy of it.

The padded structure (masks, edges, predecessor table, HEFT's visit order) is that of
`jaxsched.pad_problem` for the same `Shape`: features derive from the padded problem.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import numpy as np

from jaxsched.batch import Shape, pad_problem
from jaxsched.heft import mean_bandwidth, mean_communication
from jaxsched.metrics import critical_path_min
from jaxsched.priorities import downward_rank
from jaxsched.problem import Problem

PAPER_TASK_FEATURES = ("arrival", "priority", "memory", "comp_min", "comp_mean", "comp_max")
DAG_TASK_FEATURES = (
    "upward_rank",
    "downward_rank",
    "criticality",
    "level",
    "in_degree",
    "out_degree",
    "data_in",
    "data_out",
)
TASK_FEATURES = PAPER_TASK_FEATURES + DAG_TASK_FEATURES
PAPER_PROC_FEATURES = ("cores", "frequency", "memory")
PROC_FEATURES = PAPER_PROC_FEATURES + ("speed",)


class Features(NamedTuple):
    """One problem padded to a `Shape` (stacked: a leading batch axis)."""

    task: np.ndarray  # [T, len(TASK_FEATURES)] float32, 0 where padded
    proc: np.ndarray  # [P, len(PROC_FEATURES)] float32, 0 where padded
    comp: np.ndarray  # [T, P] execution time / time_scale, 0 where padded
    arrival_order: np.ndarray  # [T] int32 tasks by arrival time (ties by index), padded tasks last
    rank_order: np.ndarray  # [T] int32 tasks by decreasing upward rank (HEFT's visit order), padded last
    task_mask: np.ndarray  # [T] bool
    proc_mask: np.ndarray  # [P] bool
    edge_src: np.ndarray  # [E] int32, 0 where padded
    edge_dst: np.ndarray  # [E] int32, 0 where padded
    edge_data: np.ndarray  # [E] mean transfer time / time_scale, 0 where padded
    edge_mask: np.ndarray  # [E] bool
    pred: np.ndarray  # [T, K] int32 predecessors of each task, T where padded
    pred_data: np.ndarray  # [T, K] their mean transfer time / time_scale, 0 where padded

    @property
    def shape(self) -> Shape:
        """The padded sizes (`Shape.read`)."""
        return Shape.read(self)


def assert_features(features: Features) -> None:
    """Raises (chex) unless `features` are those of one unbatched problem: the boundary check of the
    network and the feedback state machine, so a batch passed where one problem belongs fails here."""
    chex.assert_rank([features.task, features.proc, features.comp, features.pred, features.pred_data], [2, 2, 2, 2, 2])
    chex.assert_rank([features.task_mask, features.proc_mask, features.rank_order, features.edge_src], [1, 1, 1, 1])


def time_scale(problem: Problem) -> float:
    """Makespan lower bound max(critical path at minimum costs, total minimum work / P); 1 if zero.

    Times are divided by it, so HEFT's start and finish labels lie in [0, makespan / bound].
    """
    work = float(problem.comp.min(axis=1).sum()) / problem.num_procs
    bound = max(critical_path_min(problem), work)
    return bound if bound > 0 else 1.0


def _by_max(values: np.ndarray) -> np.ndarray:
    top = float(values.max()) if values.size else 0.0
    return values / top if top > 0 else values


def task_features(problem: Problem, scale: float, up: np.ndarray) -> np.ndarray:
    """[T, len(TASK_FEATURES)] unpadded task features (see the module docstring); `up` is the
    upward rank."""
    num_tasks = problem.num_tasks
    zeros = np.zeros(num_tasks)
    priority = zeros if problem.task_priority is None else _by_max(problem.task_priority)
    memory = zeros if problem.task_memory is None else _by_max(problem.task_memory)
    mean_comp = problem.comp.mean(axis=1)
    down = downward_rank(problem, mean_comp)
    through = up + down
    comm = mean_communication(problem)
    levels = problem.levels
    columns = [
        problem.arrival / scale,
        priority,
        memory,
        problem.comp.min(axis=1) / scale,
        mean_comp / scale,
        problem.comp.max(axis=1) / scale,
        up / scale,
        down / scale,
        _by_max(through),
        levels / max(1, int(levels.max())),
        np.log1p(np.bincount(problem.dst, minlength=num_tasks)),
        np.log1p(np.bincount(problem.src, minlength=num_tasks)),
        np.bincount(problem.dst, weights=comm, minlength=num_tasks) / scale,
        np.bincount(problem.src, weights=comm, minlength=num_tasks) / scale,
    ]
    return np.stack(columns, axis=1)


def proc_features(problem: Problem) -> np.ndarray:
    """[P, len(PROC_FEATURES)] unpadded processor features (see the module docstring)."""
    mean_time = problem.comp.mean(axis=0)
    speed = _by_max(np.where(mean_time > 0, mean_time.mean() / np.maximum(mean_time, 1e-30), 1.0))
    ones = np.ones(problem.num_procs)
    cores = ones if problem.proc_cores is None else _by_max(problem.proc_cores)
    frequency = speed if problem.proc_frequency is None else _by_max(problem.proc_frequency)
    memory = ones if problem.proc_memory is None else _by_max(problem.proc_memory)
    return np.stack([cores, frequency, memory, speed], axis=1)


def problem_features(problem: Problem, shape: Shape) -> Features:
    """`problem`'s features padded to `shape`; raises ValueError if it does not fit."""
    padded = pad_problem(problem, shape, dtype=np.float64)
    num_tasks, num_procs, num_edges, _ = shape
    t = problem.num_tasks
    scale = time_scale(problem)

    def pad(array, shape, dtype=np.float32):
        out = np.zeros(shape, dtype)
        out[tuple(slice(0, n) for n in array.shape)] = array
        return out

    up = padded.upward_rank[:t]
    arrival_order = np.lexsort((np.arange(t), problem.arrival)).astype(np.int32)
    return Features(
        task=pad(task_features(problem, scale, up), (num_tasks, len(TASK_FEATURES))),
        proc=pad(proc_features(problem), (num_procs, len(PROC_FEATURES))),
        comp=(padded.comp / scale).astype(np.float32),
        arrival_order=np.concatenate([arrival_order, np.arange(t, num_tasks, dtype=np.int32)]),
        rank_order=padded.heft_order,
        task_mask=padded.task_mask,
        proc_mask=padded.proc_mask,
        edge_src=padded.edge_src,
        edge_dst=padded.edge_dst,
        edge_data=pad(mean_communication(problem) / scale, (num_edges,)),
        edge_mask=padded.edge_mask,
        pred=padded.pred,
        pred_data=(padded.pred_data / mean_bandwidth(problem) / scale).astype(np.float32),
    )


def padded_size(needed: int, minimum: int = 8) -> int:
    """`needed` rounded up to a multiple of 8 and to one of eight sizes per power of two.

    Padded shapes come from a few buckets, so a scheduler compiles once per bucket rather than once
    per problem size.
    """
    size = max(int(needed), minimum, 1)
    step = 1 << max((size - 1).bit_length() - 3, 3)
    return -(-size // step) * step


def bucket_shape(problem: Problem) -> Shape:
    """The padded `Shape` of `problem` for inference: tasks and processors by `padded_size`, edges
    and predecessors per task by powers of two (they vary most between problems)."""

    def power_of_two(n: int, minimum: int) -> int:
        return 1 << (max(n, minimum) - 1).bit_length()

    return Shape(
        padded_size(problem.num_tasks),
        padded_size(problem.num_procs),
        power_of_two(problem.num_edges, 8),
        power_of_two(problem.max_in_degree, 4),
    )
