"""Jitted list scheduling over padded problems: HEFT and `simulate` as one `lax.scan` each.

Both place tasks one at a time with the placement rule of `jaxsched.timeline` and equal the NumPy
references (same processors, start and finish times, to float tolerance; exactly when costs are
integers or under x64). The core functions are unbatched; `heft_batch` and `simulate_batch` vmap
them over a `ProblemBatch`, and the GA vmaps `simulate_padded` over a population.

Each processor's busy intervals are a row of `capacity` slots sorted by start, padded with +inf, so
the idle gaps are `[finish[i-1], start[i]]` and a placement is a shifted insert into one row.
`capacity` defaults to T (always enough); a smaller one saves work when no processor can receive
more tasks than that, and `overflow` reports if one did.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsched.batch import PaddedProblem


class ScheduleArrays(NamedTuple):
    """Schedule of a padded problem (values of padded tasks are meaningless)."""

    proc: jax.Array  # [T] int32
    start: jax.Array  # [T]
    finish: jax.Array  # [T]
    overflow: jax.Array  # [] bool: some processor needed more than `capacity` slots


class _Carry(NamedTuple):
    proc: jax.Array  # [T + 1] int32, sentinel slot T
    finish: jax.Array  # [T + 1], sentinel slot T holds -inf
    start: jax.Array  # [T]
    busy_start: jax.Array  # [P, C] sorted, +inf padded
    busy_finish: jax.Array  # [P, C]
    overflow: jax.Array  # [] bool


def _initial_carry(problem: PaddedProblem, capacity: int | None) -> _Carry:
    num_tasks, num_procs = problem.comp.shape
    dtype = problem.comp.dtype
    capacity = num_tasks if capacity is None else capacity
    inf = jnp.full((num_procs, capacity), jnp.inf, dtype)
    return _Carry(
        proc=jnp.zeros(num_tasks + 1, jnp.int32),
        finish=jnp.full(num_tasks + 1, -jnp.inf, dtype),
        start=jnp.zeros(num_tasks, dtype),
        busy_start=inf,
        busy_finish=inf,
        overflow=jnp.zeros((), bool),
    )


def _ready_on(problem: PaddedProblem, carry: _Carry, task: jax.Array, procs: jax.Array) -> jax.Array:
    """[len(procs)] time all inputs of `task` are available on each of `procs` (and it has arrived)."""
    preds = problem.pred[task]  # [K]
    inverse_bandwidth = problem.inverse_bandwidth[carry.proc[preds][:, None], procs[None, :]]  # [K, len(procs)]
    arrive = carry.finish[preds][:, None] + problem.pred_data[task][:, None] * inverse_bandwidth
    return jnp.maximum(arrive.max(axis=0), problem.arrival[task])


def _earliest_start(busy_start, busy_finish, ready, duration):
    """Earliest start in the first idle gap that fits; broadcasts over leading processor axes."""
    lead = busy_start.shape[:-1] + (1,)
    gap_lo = jnp.concatenate([jnp.full(lead, -jnp.inf, busy_finish.dtype), busy_finish], axis=-1)
    gap_hi = jnp.concatenate([busy_start, jnp.full(lead, jnp.inf, busy_start.dtype)], axis=-1)
    candidate = jnp.maximum(gap_lo, ready[..., None])
    fits = candidate + duration[..., None] <= gap_hi
    est = jnp.where(fits, candidate, jnp.inf).min(axis=-1)
    return jnp.where(duration == 0, ready, est)


def _place(carry: _Carry, task, proc, start, duration) -> _Carry:
    """Records the task and inserts its busy interval into its processor's sorted row."""
    row_start, row_finish = carry.busy_start[proc], carry.busy_finish[proc]
    slot = jnp.arange(row_start.shape[0])
    pos = jnp.sum(row_start < start)
    finish = start + duration

    def insert(row, value):
        shifted = jnp.concatenate([row[:1], row[:-1]])
        return jnp.where(slot < pos, row, jnp.where(slot == pos, value, shifted))

    busy = duration > 0
    new_start = jnp.where(busy, insert(row_start, start), row_start)
    new_finish = jnp.where(busy, insert(row_finish, finish), row_finish)
    return _Carry(
        proc=carry.proc.at[task].set(proc),
        finish=carry.finish.at[task].set(finish),
        start=carry.start.at[task].set(start),
        busy_start=carry.busy_start.at[proc].set(new_start),
        busy_finish=carry.busy_finish.at[proc].set(new_finish),
        overflow=carry.overflow | (busy & jnp.isfinite(row_start[-1])),
    )


def _result(carry: _Carry) -> ScheduleArrays:
    return ScheduleArrays(carry.proc[:-1], carry.start, carry.finish[:-1], carry.overflow)


def heft_padded(problem: PaddedProblem, capacity: int | None = None) -> ScheduleArrays:
    """HEFT on one padded problem, visiting tasks in `problem.heft_order`."""
    comp = jnp.where(problem.proc_mask, problem.comp, jnp.inf)  # padded processors never win
    all_procs = jnp.arange(comp.shape[1])

    def step(carry, task):
        duration = comp[task]
        ready = _ready_on(problem, carry, task, all_procs)
        est = _earliest_start(carry.busy_start, carry.busy_finish, ready, duration)
        best = jnp.argmin(est + duration).astype(jnp.int32)
        return _place(carry, task, best, est[best], problem.comp[task, best]), None

    carry, _ = jax.lax.scan(step, _initial_carry(problem, capacity), problem.heft_order)
    return _result(carry)


def effective_priority(problem: PaddedProblem, priority: jax.Array) -> jax.Array:
    """[T] priority capped by every ancestor's (see `jaxsched.simulate`), one task per scan step."""
    eff = jnp.concatenate([priority, jnp.full((1,), jnp.inf, priority.dtype)])

    def step(eff, task):
        return eff.at[task].set(jnp.minimum(priority[task], eff[problem.pred[task]].min())), None

    eff, _ = jax.lax.scan(step, eff, problem.topo_order)
    return eff[:-1]


def list_order(problem: PaddedProblem, priority: jax.Array) -> jax.Array:
    """[T] placement order: decreasing effective priority, ties by canonical topological position."""
    eff = effective_priority(problem, priority)
    return problem.topo_order[jnp.argsort(-eff[problem.topo_order], stable=True)]


def simulate_padded(
    problem: PaddedProblem, proc: jax.Array, priority: jax.Array, capacity: int | None = None
) -> ScheduleArrays:
    """List schedule of one padded problem with task t on `proc[t]`, in `priority` order (higher first)."""
    proc = proc.astype(jnp.int32)

    def step(carry, task):
        p = proc[task]
        duration = problem.comp[task, p]
        ready = _ready_on(problem, carry, task, p[None])[0]
        est = _earliest_start(carry.busy_start[p], carry.busy_finish[p], ready, duration)
        return _place(carry, task, p, est, duration), None

    carry, _ = jax.lax.scan(step, _initial_carry(problem, capacity), list_order(problem, priority))
    return _result(carry)


@jax.jit
def heft_batch(batch: PaddedProblem) -> ScheduleArrays:
    """HEFT on every problem of a padded batch (one compilation per padded shape)."""
    return jax.vmap(heft_padded)(batch)


@jax.jit
def simulate_batch(batch: PaddedProblem, proc: jax.Array, priority: jax.Array) -> ScheduleArrays:
    """`simulate` on every problem of a padded batch: proc [B, T], priority [B, T]."""
    return jax.vmap(simulate_padded)(batch, proc, priority)
