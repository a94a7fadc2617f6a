"""The predecessor stream of a static list scheduler: the inputs each task pulls, in visit order, cut
into micro-steps of a fixed width.

A static list scheduler visits tasks in an order fixed before it starts (`ListPlan.order`); a task's
ready time on each processor is the latest of its predecessors' finish plus transfer time, O(in-degree
x processors). Pulling a padded predecessor row at every step costs K (the largest in-degree) x P per
task, mostly padding when in-degrees are uneven (Topcuoglu DAGs of 100 tasks: K = 22, mean 3). The
stream instead gives every chunk of `width` predecessors of a task one micro-step, in visit order;
the task's last micro-step (`place`) places it. A batch then needs as many micro-steps as its longest
stream, about T + E / width, each pulling `width` predecessors.

`visit_stream` (JAX, one problem) is the one-micro-step-per-task stream of a padded problem;
`compact_streams` (NumPy, a whole batch at once) the compact one, built from the batch's `BatchGraph`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxsched.batch import PaddedProblem
from jaxsched.batch_graph import BatchGraph


class PullStream(NamedTuple):
    """Micro-steps of a static list scheduler (a leading batch axis when stacked)."""

    task: np.ndarray  # [M] int32 the task whose predecessors the micro-step pulls
    pred: np.ndarray  # [M, W] int32 predecessors pulled, T (the sentinel) where padded
    pred_data: np.ndarray  # [M, W] data of the edge from each predecessor, 0 where padded
    place: np.ndarray  # [M] bool the task's last micro-step: the task is placed there


def visit_stream(problem: PaddedProblem, order) -> PullStream:
    """One micro-step per task of `order` [T], pulling its whole padded predecessor row (width K)."""
    return PullStream(order, problem.pred[order], problem.pred_data[order], jnp.ones(order.shape, bool))


def compact_streams(graph: BatchGraph, order: np.ndarray, width: int = 4, dtype=np.float32) -> PullStream:
    """[B, M, ...] the stream of every problem of `graph` visiting its tasks in `order` [B, T] (padded
    tasks have no micro-steps), `width` predecessors per micro-step; each problem's predecessors in
    `Problem.in_edges` order. M, the longest stream, is rounded up to a multiple of ceil(T / 8) so that
    batches of one padded shape share few compilations; micro-steps past a stream's end place nothing."""
    if width < 1:
        raise ValueError(f"width must be at least 1, got {width}")
    size, num_tasks = order.shape
    rows = np.arange(size)[:, None]
    grouped, slot, inputs = graph.input_slots()  # edges grouped by destination task, over the batch
    chunks = np.where(graph.task_mask.ravel(), np.maximum(1, -(-inputs // width)), 0).reshape(size, num_tasks)
    per_visit = chunks[rows, order]  # [B, T] micro-steps of the task visited at each step
    first = np.cumsum(per_visit, axis=1) - per_visit  # first micro-step of each visit
    lengths = per_visit.sum(axis=1)
    quantum = -(-num_tasks // 8)
    steps = max(quantum, -(-int(lengths.max()) // quantum) * quantum)
    owner = np.repeat(np.arange(per_visit.size), per_visit.ravel())  # flat visit of each micro-step
    micro = np.arange(len(owner)) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # within its problem
    task = np.zeros((size, steps), np.int32)
    place = np.zeros((size, steps), bool)
    flat = owner // num_tasks * steps + micro  # into [B, M] flattened
    task.ravel()[flat] = order.ravel()[owner]
    place.ravel()[flat] = micro == (first + per_visit - 1).ravel()[owner]
    first_of_task = np.empty_like(first)  # [B, T] its first micro-step, counted over the batch
    first_of_task[rows, order] = first + rows * steps
    flat = first_of_task.ravel()[grouped] * width + slot  # into [B, M, W] flattened: slot // width micro-steps on
    pred = np.full(size * steps * width, num_tasks, np.int32)
    pred_data = np.zeros(size * steps * width, dtype)
    pred[flat], pred_data[flat] = graph.src[graph.in_order], graph.data[graph.in_order]
    return PullStream(task, pred.reshape(size, steps, width), pred_data.reshape(size, steps, width), place)
