"""The placement rule (`jaxsched.timeline`) in JAX: the pieces every jitted scheduler places with.

A task that becomes ready at `r` and runs `d > 0` on a processor starts in the first idle gap that fits it, or
after the processor's last task; a zero-length task starts at `r` (`jaxsched.timeline`). Two representations of
a processor's busy time, each suited to one kind of scheduler:

* Busy intervals sorted by start, padded with +inf (`earliest_gap_start`, `insert_sorted`): the idle gaps are
  `[finish[i-1], start[i]]` and a placement is a shifted insert. `jaxsched.jax_simulate` keeps these, since an
  assignment known in advance bounds the busy tasks per processor.
* Like `jaxsched.timeline.Timelines`, each processor's idle gaps before its last busy interval and the end of
  that interval (`earliest_start_in_gaps`, `occupy_gaps`): rows `[P, G]`, fewer than the busy tasks (at most
  16 against 36 on Topcuoglu DAGs of 100 tasks on 4 processors), so each placement searches about half as many
  slots. The list-scheduling family (`jaxsched.jax_listsched`) keeps these; its assignment is not known in
  advance, so G cannot be, and the family reruns what overflows.

`ready_time` gives when a task's inputs are all available, on one processor or on every one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def ready_time(finish, preds, transfer, arrival) -> jax.Array:
    """Time a task's inputs are all available (and it has arrived): max of finish + transfer.

    `finish` is [T + 1] with a sentinel -inf at T for padded predecessors; `preds` is [K] and
    `transfer` is [K] (one processor) or [K, P] (every processor).
    """
    arrive = finish[preds].reshape(preds.shape + (1,) * (transfer.ndim - 1)) + transfer
    return jnp.maximum(arrive.max(axis=0), arrival)


def earliest_gap_start(busy_start, busy_finish, ready, duration):
    """Earliest start in the first idle gap that fits; broadcasts over leading processor axes."""
    lead = busy_start.shape[:-1] + (1,)
    gap_lo = jnp.concatenate([jnp.full(lead, -jnp.inf, busy_finish.dtype), busy_finish], axis=-1)
    gap_hi = jnp.concatenate([busy_start, jnp.full(lead, jnp.inf, busy_start.dtype)], axis=-1)
    candidate = jnp.maximum(gap_lo, ready[..., None])
    fits = candidate + duration[..., None] <= gap_hi
    est = jnp.where(fits, candidate, jnp.inf).min(axis=-1)
    return jnp.where(duration == 0, ready, est)


def insert_sorted(row, pos, value):
    """`row` with `value` inserted at `pos`, later entries shifted right (the last one drops off);
    broadcasts over leading axes (rows [P, C] with pos and value [P])."""
    slot = jax.lax.broadcasted_iota(jnp.int32, row.shape, row.ndim - 1)
    shifted = jnp.concatenate([row[..., :1], row[..., :-1]], axis=-1)
    pos, value = jnp.asarray(pos, jnp.int32)[..., None], jnp.asarray(value)[..., None]
    return jnp.where(slot < pos, row, jnp.where(slot == pos, value, shifted))


def earliest_start_in_gaps(gap_start, gap_end, avail, ready, duration):
    """Earliest start under the placement rule from each processor's idle gaps [P, G] (sorted, +inf where
    unused) and the end of its last busy interval `avail` [P], for ready times and durations [..., P]."""
    lead = (1,) * (jnp.ndim(ready) - 1)
    gap_start, gap_end, avail = (x.reshape(lead + x.shape) for x in (gap_start, gap_end, avail))
    candidate = jnp.maximum(gap_start, ready[..., None])  # [..., P, G]
    in_gap = jnp.where(candidate + duration[..., None] <= gap_end, candidate, jnp.inf).min(axis=-1)
    return jnp.where(duration == 0, ready, jnp.minimum(in_gap, jnp.maximum(ready, avail)))


def occupy_gaps(gap_start, gap_end, avail, start, finish, min_length):
    """(gap_start, gap_end, overflow) of one processor after `[start, finish)`, placed by
    `earliest_start_in_gaps`, becomes busy (finish > start), as `jaxsched.timeline.Timelines.occupy`:
    the gap holding it gives way to the idle time left on each side, or, after the last task, the idle
    time before it becomes the last gap; an idle interval is kept only where a task of `min_length`
    fits. Moving `avail` to `finish` is left to the caller. `overflow`: a kept gap fell off the end of
    the rows [G]."""
    num_gaps = gap_start.shape[-1]
    slot = jnp.arange(num_gaps, dtype=jnp.int32)
    used = jnp.sum(jnp.isfinite(gap_start), dtype=jnp.int32)
    inside = start < avail
    k = jnp.clip(jnp.sum(gap_start <= start, dtype=jnp.int32) - 1, 0, num_gaps - 1)  # the gap holding the task (inside)
    left_start = jnp.where(inside, gap_start[k], avail)
    keep_left = (left_start < start) & (left_start + min_length <= start)
    keep_right = inside & (finish < gap_end[k]) & (finish + min_length <= gap_end[k])
    at = jnp.where(inside, k, used)  # first slot of the new gaps: left, then right
    added = keep_left.astype(jnp.int32) + keep_right.astype(jnp.int32)
    shift = added - inside.astype(jnp.int32)  # later gaps move by -1, 0 or +1

    def rebuilt(row, left, right):
        moved = jnp.where(
            shift > 0,
            jnp.concatenate([row[:1], row[:-1]]),
            jnp.where(shift < 0, jnp.concatenate([row[1:], jnp.full(1, jnp.inf, row.dtype)]), row),
        )
        new = jnp.where(slot == at, jnp.where(keep_left, left, right), right)
        return jnp.where(slot < at, row, jnp.where(slot < at + added, new, moved))

    return (
        rebuilt(gap_start, left_start, finish),
        rebuilt(gap_end, start, gap_end[k]),
        used + shift > num_gaps,
    )
