"""Padding problems to fixed shapes so one compilation serves a whole batch.

A `PaddedProblem` holds one instance padded to T tasks, P processors, K incoming edges per task and
E edges; `ProblemBatch` is the same pytree with a leading batch axis. Padded tasks cost nothing and
have no edges (they never delay a real task); padded processors are masked out; the predecessor
table uses index T as a sentinel whose finish time the kernels treat as -inf.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from jaxsched.heft import priority_order, upward_rank
from jaxsched.problem import Problem


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


ProblemBatch = PaddedProblem  # the same pytree with a leading batch axis on every array


def pad_problem(
    problem: Problem,
    num_tasks: int | None = None,
    num_procs: int | None = None,
    max_in_degree: int | None = None,
    num_edges: int | None = None,
    dtype=np.float32,
) -> PaddedProblem:
    """Pads `problem` to the given sizes (default: its own); raises ValueError if it does not fit."""
    num_tasks = num_tasks or problem.num_tasks
    num_procs = num_procs or problem.num_procs
    max_in_degree = max_in_degree or max(1, _max_in_degree(problem))
    num_edges = num_edges or max(1, problem.num_edges)
    sizes = {
        "tasks": (problem.num_tasks, num_tasks),
        "processors": (problem.num_procs, num_procs),
        "edges": (problem.num_edges, num_edges),
        "incoming edges of a task": (_max_in_degree(problem), max_in_degree),
    }
    for what, (needed, capacity) in sizes.items():
        if needed > capacity:
            raise ValueError(f"problem has {needed} {what}, more than the padded capacity {capacity}")
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


def pad_problems(
    problems: Sequence[Problem],
    num_tasks: int | None = None,
    num_procs: int | None = None,
    max_in_degree: int | None = None,
    num_edges: int | None = None,
    dtype=np.float32,
) -> ProblemBatch:
    """Stacks `problems` into one batch, padded to the given sizes or the largest in the batch."""
    if not problems:
        raise ValueError("pad_problems needs at least one problem")
    num_tasks = num_tasks or max(p.num_tasks for p in problems)
    num_procs = num_procs or max(p.num_procs for p in problems)
    max_in_degree = max_in_degree or max(1, max(_max_in_degree(p) for p in problems))
    num_edges = num_edges or max(1, max(p.num_edges for p in problems))
    padded = [pad_problem(p, num_tasks, num_procs, max_in_degree, num_edges, dtype) for p in problems]
    return ProblemBatch(*(np.stack(arrays) for arrays in zip(*padded)))


def _max_in_degree(problem: Problem) -> int:
    return int(np.bincount(problem.dst, minlength=1).max()) if problem.num_edges else 0

