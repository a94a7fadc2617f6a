"""Jitted list scheduling over padded problems: HEFT and `simulate` as one `lax.scan` each.

Both place tasks one at a time with the placement rule of `jaxsched.timeline` and equal the NumPy
references (same processors, start and finish times, to float tolerance; exactly when costs are
integers or under x64). The core functions are unbatched; `heft_batch` and `simulate_batch` vmap
them over a `ProblemBatch`, and the GA vmaps `simulate_padded` over a population.

A processor's busy intervals are kept sorted by start, padded with +inf, so its idle gaps are
`[finish[i-1], start[i]]` and a placement is a shifted insert. XLA on CPU rewrites the whole scan
carry every step, so the layouts keep it small:
* HEFT searches every processor each step: rows `[P, capacity]`.
* `simulate` knows each task's processor in advance, so processor p owns the segment
  `[offset_p, offset_p + count_p)` of one flat `[T + capacity]` array and a step reads and writes a
  `capacity`-wide window of it.
`capacity` bounds the busy tasks per processor. It defaults to T (always enough); a smaller one is
faster, and `overflow` reports when some processor needed more (the schedule is then wrong).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsched.batch import PaddedProblem


class ScheduleArrays(NamedTuple):
    """Schedule of a padded problem (values of padded tasks are meaningless)."""

    proc: jax.Array  # [T] int32
    start: jax.Array  # [T]
    finish: jax.Array  # [T]
    overflow: jax.Array  # [] bool: some processor had more busy tasks than `capacity`


def _ready(finish, preds, transfer, arrival) -> jax.Array:
    """Time a task's inputs are all available (and it has arrived): max of finish + transfer.

    `finish` is [T + 1] with a sentinel -inf at T for padded predecessors; `preds` is [K] and
    `transfer` is [K] (one processor) or [K, P] (every processor).
    """
    arrive = finish[preds].reshape(preds.shape + (1,) * (transfer.ndim - 1)) + transfer
    return jnp.maximum(arrive.max(axis=0), arrival)


def _earliest_start(busy_start, busy_finish, ready, duration):
    """Earliest start in the first idle gap that fits; broadcasts over leading processor axes."""
    lead = busy_start.shape[:-1] + (1,)
    gap_lo = jnp.concatenate([jnp.full(lead, -jnp.inf, busy_finish.dtype), busy_finish], axis=-1)
    gap_hi = jnp.concatenate([busy_start, jnp.full(lead, jnp.inf, busy_start.dtype)], axis=-1)
    candidate = jnp.maximum(gap_lo, ready[..., None])
    fits = candidate + duration[..., None] <= gap_hi
    est = jnp.where(fits, candidate, jnp.inf).min(axis=-1)
    return jnp.where(duration == 0, ready, est)


def _insert(row, pos, value):
    """`row` with `value` inserted at `pos`, later entries shifted right (the last one drops off);
    broadcasts over leading axes (rows [P, C] with pos and value [P])."""
    slot = jax.lax.broadcasted_iota(jnp.int32, row.shape, row.ndim - 1)
    shifted = jnp.concatenate([row[..., :1], row[..., :-1]], axis=-1)
    pos, value = jnp.asarray(pos, jnp.int32)[..., None], jnp.asarray(value)[..., None]
    return jnp.where(slot < pos, row, jnp.where(slot == pos, value, shifted))


def _with_sentinel(values, fill):
    return jnp.concatenate([values, jnp.full((1,), fill, values.dtype)])


def _unpermute(order, values_in_order):
    """Values indexed by task, from values listed in `order`."""
    return jnp.zeros_like(values_in_order).at[order].set(values_in_order)


class _HeftCarry(NamedTuple):
    proc: jax.Array  # [T + 1] int32
    finish: jax.Array  # [T + 1]
    busy_start: jax.Array  # [P, C] per processor, sorted, +inf padded
    busy_finish: jax.Array  # [P, C]
    overflow: jax.Array  # [] bool


def heft_padded(problem: PaddedProblem, capacity: int | None = None) -> ScheduleArrays:
    """HEFT on one padded problem, visiting tasks in `problem.heft_order`."""
    num_tasks, num_procs = problem.comp.shape
    dtype = problem.comp.dtype
    capacity = num_tasks if capacity is None else capacity
    order = problem.heft_order
    empty = jnp.full((num_procs, capacity), jnp.inf, dtype)

    def step(carry: _HeftCarry, x):
        task, comp, preds, data, arrival = x
        transfer = data[:, None] * problem.inverse_bandwidth[carry.proc[preds]]  # [K, P]
        ready = _ready(carry.finish, preds, transfer, arrival)
        duration = jnp.where(problem.proc_mask, comp, jnp.inf)  # padded processors never win
        est = _earliest_start(carry.busy_start, carry.busy_finish, ready, duration)
        best = jnp.argmin(est + duration).astype(jnp.int32)
        start, duration = est[best], comp[best]
        row_start, row_finish = carry.busy_start[best], carry.busy_finish[best]
        pos = jnp.sum(row_start < start)
        busy = duration > 0
        return _HeftCarry(
            proc=carry.proc.at[task].set(best),
            finish=carry.finish.at[task].set(start + duration),
            busy_start=carry.busy_start.at[best].set(jnp.where(busy, _insert(row_start, pos, start), row_start)),
            busy_finish=carry.busy_finish.at[best].set(
                jnp.where(busy, _insert(row_finish, pos, start + duration), row_finish)
            ),
            overflow=carry.overflow | (busy & jnp.isfinite(row_start[-1])),
        ), start

    init = _HeftCarry(
        proc=jnp.zeros(num_tasks + 1, jnp.int32),
        finish=jnp.full(num_tasks + 1, -jnp.inf, dtype),
        busy_start=empty,
        busy_finish=empty,
        overflow=jnp.zeros((), bool),
    )
    xs = (order, problem.comp[order], problem.pred[order], problem.pred_data[order], problem.arrival[order])
    carry, start = jax.lax.scan(step, init, xs)
    return ScheduleArrays(carry.proc[:-1], _unpermute(order, start), carry.finish[:-1], carry.overflow)


def effective_priority(problem: PaddedProblem, priority: jax.Array) -> jax.Array:
    """[T] priority capped by every ancestor's (see `jaxsched.simulate`), one task per scan step."""

    def step(eff, task):
        return eff.at[task].set(jnp.minimum(priority[task], eff[problem.pred[task]].min())), None

    eff, _ = jax.lax.scan(step, _with_sentinel(priority, jnp.inf), problem.topo_order)
    return eff[:-1]


def list_order(problem: PaddedProblem, priority: jax.Array) -> jax.Array:
    """[T] placement order: decreasing effective priority, ties by canonical topological position."""
    eff = effective_priority(problem, priority)
    return problem.topo_order[jnp.argsort(-eff[problem.topo_order], stable=True)]


def _earlier_in_group(group, flag):
    """[N] for each position i: how many j < i have group[j] == group[i] and flag[j]."""
    perm = jnp.argsort(group, stable=True)
    count = flag[perm].astype(jnp.int32)
    before = jnp.cumsum(count) - count  # exclusive, in group-sorted order
    sorted_group = group[perm]
    first = jnp.searchsorted(sorted_group, sorted_group, side="left")
    return _unpermute(perm, before - before[first])


class _SimulateCarry(NamedTuple):
    finish: jax.Array  # [T + 1]
    slot_start: jax.Array  # [T + C] processor segments, each sorted by start
    slot_finish: jax.Array  # [T + C]


def simulate_padded(
    problem: PaddedProblem, proc: jax.Array, priority: jax.Array, capacity: int | None = None
) -> ScheduleArrays:
    """List schedule of one padded problem with task t on `proc[t]`, in `priority` order (higher first).

    Everything that depends only on the assignment and the order (durations, transfer times, each
    task's segment offset and how many tasks precede it there) is computed before the scan and fed
    to it in placement order, so a step only searches and updates one window.
    """
    num_tasks = problem.comp.shape[0]
    dtype = problem.comp.dtype
    capacity = num_tasks if capacity is None else capacity
    proc = proc.astype(jnp.int32)
    duration = problem.comp[jnp.arange(num_tasks), proc]
    busy = duration > 0
    counts = jnp.zeros(problem.comp.shape[1], jnp.int32).at[proc].add(busy.astype(jnp.int32))
    offset = jnp.cumsum(counts) - counts  # processor p owns slots [offset_p, offset_p + counts_p)
    order = list_order(problem, priority)
    proc_in_order, preds_in_order = proc[order], problem.pred[order]
    pred_proc = _with_sentinel(proc, 0)[preds_in_order]
    transfer = problem.pred_data[order] * problem.inverse_bandwidth[pred_proc, proc_in_order[:, None]]  # [T, K]
    filled = _earlier_in_group(proc_in_order, busy[order])
    window = jnp.arange(capacity)

    def step(carry: _SimulateCarry, x):
        task, preds, transfer, d, arrival, lo, filled = x
        ready = _ready(carry.finish, preds, transfer, arrival)
        raw_start = jax.lax.dynamic_slice(carry.slot_start, (lo,), (capacity,))
        raw_finish = jax.lax.dynamic_slice(carry.slot_finish, (lo,), (capacity,))
        mine = window < filled  # the rest of the window belongs to later processors
        row_start, row_finish = jnp.where(mine, raw_start, jnp.inf), jnp.where(mine, raw_finish, jnp.inf)
        start = _earliest_start(row_start, row_finish, ready, d)
        pos = jnp.sum(row_start < start)
        write = (window <= filled) & (d > 0)
        new_start = jnp.where(write, _insert(row_start, pos, start), raw_start)
        new_finish = jnp.where(write, _insert(row_finish, pos, start + d), raw_finish)
        return _SimulateCarry(
            finish=carry.finish.at[task].set(start + d),
            slot_start=jax.lax.dynamic_update_slice(carry.slot_start, new_start, (lo,)),
            slot_finish=jax.lax.dynamic_update_slice(carry.slot_finish, new_finish, (lo,)),
        ), start

    slots = jnp.full(num_tasks + capacity, jnp.inf, dtype)
    init = _SimulateCarry(finish=jnp.full(num_tasks + 1, -jnp.inf, dtype), slot_start=slots, slot_finish=slots)
    xs = (order, preds_in_order, transfer, duration[order], problem.arrival[order], offset[proc_in_order], filled)
    carry, start = jax.lax.scan(step, init, xs)
    return ScheduleArrays(proc, _unpermute(order, start), carry.finish[:-1], counts.max() > capacity)


@functools.partial(jax.jit, static_argnames="capacity")
def heft_batch(batch: PaddedProblem, capacity: int | None = None) -> ScheduleArrays:
    """HEFT on every problem of a padded batch (one compilation per padded shape)."""
    return jax.vmap(heft_padded, in_axes=(0, None))(batch, capacity)


@functools.partial(jax.jit, static_argnames="capacity")
def simulate_batch(
    batch: PaddedProblem, proc: jax.Array, priority: jax.Array, capacity: int | None = None
) -> ScheduleArrays:
    """`simulate` on every problem of a padded batch: proc [B, T], priority [B, T]."""
    return jax.vmap(simulate_padded, in_axes=(0, 0, 0, None))(batch, proc, priority, capacity)
