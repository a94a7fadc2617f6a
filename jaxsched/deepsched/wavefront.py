"""`simulate` in waves: the same list schedule, placed one task per processor per loop step.

`jaxsched.simulate` places tasks one by one in effective-priority order. A task's start depends only
on its predecessors' finish times and on the busy intervals of the tasks placed before it on its own
processor. So each processor can take its tasks in that order independently of the others, as soon
as a task's predecessors are placed: every loop step (a wave) places the next task of every
processor whose predecessors are all done. The result equals the sequential list schedule exactly
(same placement rule, same busy intervals, same arithmetic), but the loop runs for at least
max(tasks per processor, DAG depth) steps and at most T (345 instead of 10,000 in the experiment's
timing instance), each step vectorised over processors. On a
CPU, where XLA rewrites a loop's whole carry every step, that is what makes decoding 10,000 tasks
fast; on an accelerator it means few, wide steps.

Busy intervals are rows `[P, capacity]` sorted by start and padded with +inf (as in
`jaxsched.kernels`); `capacity` must be at least the number of busy tasks of any processor
(`row_capacity` gives the smallest power of two that is).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsched.batch import PaddedProblem
from jaxsched.kernels import _earliest_start, _insert


class WaveSchedule(NamedTuple):
    """Schedule of a padded problem (values of padded tasks are meaningless)."""

    proc: jax.Array  # [T] int32
    start: jax.Array  # [T]
    finish: jax.Array  # [T]
    waves: jax.Array  # [] int32 loop steps taken


def row_capacity(problem: PaddedProblem, proc: np.ndarray) -> int:
    """Smallest power of two >= the busy (positive-duration) tasks of any processor, over one
    assignment proc [T] or several [N, T] of the unbatched padded `problem`."""
    comp, task_mask = np.asarray(problem.comp), np.asarray(problem.task_mask)
    proc = np.asarray(proc).reshape(-1, comp.shape[0])
    busy = (comp[np.arange(comp.shape[0]), proc] > 0) & task_mask  # [N, T]
    most = max(int(np.bincount(row[keep], minlength=1).max()) for row, keep in zip(proc, busy))
    return 1 << max(most - 1, 0).bit_length()


def placement_order(problem: PaddedProblem, priority: jax.Array) -> jax.Array:
    """[T] int32 tasks by decreasing effective priority, ties by canonical topological position: the
    order in which `jaxsched.simulate` places them (padded tasks may fall anywhere)."""
    num_tasks = priority.shape[0]
    position = jnp.zeros(num_tasks, jnp.int32).at[problem.topo_order].set(jnp.arange(num_tasks, dtype=jnp.int32))
    return jnp.lexsort((position, -effective_priority(problem, priority))).astype(jnp.int32)


def effective_priority(problem: PaddedProblem, priority: jax.Array) -> jax.Array:
    """[T] priority capped by every ancestor's (as `jaxsched.simulate`), one DAG level per step.

    `jaxsched.kernels.effective_priority` computes the same with one task per step: faster for the
    GA's population of small problems (8.8 ms against 20.9 ms for 100 x 486 tasks on CPU), slower
    for one large problem, where depth << T.
    """
    bound = jnp.concatenate([priority, jnp.full((1,), jnp.inf, priority.dtype)])

    def relax(state):
        eff, _ = state
        new = jnp.minimum(priority, eff[problem.pred].min(axis=1))
        return jnp.concatenate([new, eff[-1:]]), jnp.any(new != eff[:-1])

    eff, _ = jax.lax.while_loop(lambda state: state[1], relax, (bound, jnp.asarray(True)))
    return eff[:-1]


class _Carry(NamedTuple):
    head: jax.Array  # [P] int32 next position in each processor's queue
    finish: jax.Array  # [T + 2]: slot T is the padded-predecessor sentinel, T + 1 a discard slot
    start: jax.Array  # [T + 2]
    done: jax.Array  # [T + 2] bool
    busy_start: jax.Array  # [P, C] sorted by start, +inf padded
    busy_finish: jax.Array  # [P, C]
    waves: jax.Array  # [] int32


def wavefront_simulate(problem: PaddedProblem, proc: jax.Array, order: jax.Array, capacity: int) -> WaveSchedule:
    """List schedule of one padded problem with task t on `proc[t]`, tasks taken in `order` (a
    precedence-consistent permutation, e.g. `placement_order(problem, priority)`): equal to
    `jaxsched.simulate(problem, proc, priority)` on the unpadded problem. Vmappable over proc/order."""
    num_tasks, num_procs = problem.comp.shape
    dtype = problem.comp.dtype
    proc = proc.astype(jnp.int32)
    task_index = jnp.arange(num_tasks, dtype=jnp.int32)
    procs = jnp.arange(num_procs, dtype=jnp.int32)
    queue_key = jnp.where(problem.task_mask, proc, num_procs)  # padded tasks join no queue
    queue = order[jnp.argsort(queue_key[order], stable=True)].astype(jnp.int32)
    count = jnp.zeros(num_procs, jnp.int32).at[proc].add(problem.task_mask.astype(jnp.int32))
    offset = jnp.cumsum(count) - count
    proc_of = jnp.concatenate([proc, jnp.zeros(2, jnp.int32)])
    duration_of = problem.comp[task_index, proc]

    def wave(carry: _Carry) -> _Carry:
        active = carry.head < count
        task = queue[jnp.minimum(offset + carry.head, num_tasks - 1)]  # [P] candidate of each processor
        preds = problem.pred[task]  # [P, K], T where padded
        ready_now = active & carry.done[preds].all(axis=1)
        transfer = problem.pred_data[task] * problem.inverse_bandwidth[proc_of[preds], procs[:, None]]
        ready = jnp.maximum((carry.finish[preds] + transfer).max(axis=1), problem.arrival[task])
        duration = jnp.where(ready_now, duration_of[task], jnp.zeros((), dtype))
        start = _earliest_start(carry.busy_start, carry.busy_finish, ready, duration)
        column = jnp.sum(carry.busy_start < start[:, None], axis=1).astype(jnp.int32)
        write = (ready_now & (duration > 0))[:, None]
        slot = jnp.where(ready_now, task, num_tasks + 1)
        return _Carry(
            head=carry.head + ready_now.astype(jnp.int32),
            finish=carry.finish.at[slot].set(start + duration),
            start=carry.start.at[slot].set(start),
            done=carry.done.at[slot].set(True),
            busy_start=jnp.where(write, _insert(carry.busy_start, column, start), carry.busy_start),
            busy_finish=jnp.where(write, _insert(carry.busy_finish, column, start + duration), carry.busy_finish),
            waves=carry.waves + 1,
        )

    def unfinished(carry: _Carry) -> jax.Array:
        return jnp.any(carry.head < count) & (carry.waves <= num_tasks)  # the bound never binds

    rows = jnp.full((num_procs, capacity), jnp.inf, dtype)
    init = _Carry(
        head=jnp.zeros(num_procs, jnp.int32),
        finish=jnp.full(num_tasks + 2, -jnp.inf, dtype),
        start=jnp.zeros(num_tasks + 2, dtype),
        done=jnp.zeros(num_tasks + 2, bool).at[num_tasks].set(True),
        busy_start=rows,
        busy_finish=rows,
        waves=jnp.zeros((), jnp.int32),
    )
    carry = jax.lax.while_loop(unfinished, wave, init)
    return WaveSchedule(proc, carry.start[:num_tasks], carry.finish[:num_tasks], carry.waves)
