"""Jitted `simulate` over padded problems, equal to the NumPy reference: the JAX twin of `jaxsched.simulate`.

`simulate_padded` places tasks with the placement rule of `jaxsched.timeline` and equals the NumPy
reference (same processors, start and finish times, to float tolerance; exactly when costs are
integers or under x64, see `jaxsched.batch`). The core function is unbatched, with rank checks at
entry; `simulate_batch` vmaps it over a padded batch (and checks its inputs), and the GA vmaps it
over a population. HEFT and the rest of the list-scheduling family are `jaxsched.jax_listsched`.

`simulate_padded` keeps a processor's busy intervals sorted by start, padded with +inf, so its idle gaps
are `[finish[i-1], start[i]]` and a placement is a shifted insert. It has two algorithms (`method`) that
give identical schedules:

* "walk": one task per `lax.scan` step in placement order. XLA on CPU rewrites the whole scan carry
  every step, so the carry is small: processor p owns the segment `[offset_p, offset_p + count_p)`
  of one flat `[T + capacity]` array and a step reads and writes a `capacity`-wide window of it.
  Wins for small problems vmapped over many assignments (the GA).
* "wavefront": a task's start depends only on its predecessors' finish times and on the tasks placed
  before it on its own processor, so each loop step (a wave) places the next task of every processor
  whose predecessors are done. The loop runs max(tasks per processor, DAG depth) to T steps (345
  instead of 10,000 on the experiment's 10,000-task timing instance), each vectorised over
  processors `[P, capacity]`. Wins for one large problem (the neural scheduler's decoder).

`capacity` bounds the busy tasks per processor. It defaults to T (always enough); a smaller one is
faster, and `overflow` reports when some processor needed more (the schedule is then wrong).

The placement rule's pieces (`earliest_gap_start`, `insert_sorted`, `ready_time`) are `jaxsched.jax_timeline`,
the JAX twin of `jaxsched.timeline`, which the list-scheduling family places with too.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxsched.batch import PaddedProblem, assert_padded
from jaxsched.common.arguments import integer
from jaxsched.jax_timeline import earliest_gap_start, insert_sorted, ready_time
from jaxsched.order import METHODS, placement_order_padded


class ScheduleArrays(NamedTuple):
    """Schedule of a padded problem (values of padded tasks are meaningless)."""

    proc: jax.Array  # [T] int32
    start: jax.Array  # [T]
    finish: jax.Array  # [T]
    overflow: jax.Array  # [] bool: some processor had more busy tasks than `capacity`
    steps: jax.Array  # [] int32 loop steps taken: T, or the number of waves of the wavefront


def _capacity(problem: PaddedProblem, capacity) -> int:
    """`capacity` (default T) after checking it is a positive integer."""
    if capacity is None:
        return problem.comp.shape[0]
    return integer("capacity (busy tasks per processor)", capacity, 1)


def _with_sentinel(values, fill):
    return jnp.concatenate([values, jnp.full((1,), fill, values.dtype)])


def _unpermute(order, values_in_order):
    """Values indexed by task, from values listed in `order`."""
    return jnp.zeros_like(values_in_order).at[order].set(values_in_order)


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
    problem: PaddedProblem,
    proc: jax.Array,
    priority: jax.Array,
    capacity: int | None = None,
    method: str = "walk",
) -> ScheduleArrays:
    """List schedule of one padded problem with task t on `proc[t]`, in `priority` order (higher
    first): `jaxsched.simulate` on the padded problem. `method`: "walk" or "wavefront" (see the module
    docstring; identical schedules). Trusts `proc` to hold real processors of real tasks (under jit it
    cannot check them): `simulate_batch` checks them first."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    assert_padded(problem)
    chex.assert_rank([proc, priority], [1, 1])
    chex.assert_equal_shape([proc, priority, problem.task_mask])
    capacity = _capacity(problem, capacity)
    order = placement_order_padded(problem, priority, method)
    simulate = _walk if method == "walk" else _wavefront
    return simulate(problem, proc.astype(jnp.int32), order, capacity)


def _walk(problem: PaddedProblem, proc: jax.Array, order: jax.Array, capacity: int) -> ScheduleArrays:
    """The per-task walk. Everything that depends only on the assignment and the order (durations,
    transfer times, each task's segment offset and how many tasks precede it there) is computed
    before the scan and fed to it in placement order, so a step only searches and updates one window."""
    num_tasks = problem.comp.shape[0]
    dtype = problem.comp.dtype
    duration = problem.comp[jnp.arange(num_tasks), proc]
    busy = duration > 0
    counts = jnp.zeros(problem.comp.shape[1], jnp.int32).at[proc].add(busy.astype(jnp.int32))
    offset = jnp.cumsum(counts) - counts  # processor p owns slots [offset_p, offset_p + counts_p)
    proc_in_order, preds_in_order = proc[order], problem.pred[order]
    pred_proc = _with_sentinel(proc, 0)[preds_in_order]
    transfer = problem.pred_data[order] * problem.inverse_bandwidth[pred_proc, proc_in_order[:, None]]  # [T, K]
    filled = _earlier_in_group(proc_in_order, busy[order])
    window = jnp.arange(capacity)

    def step(carry: _SimulateCarry, x):
        task, preds, transfer, d, arrival, lo, filled = x
        ready = ready_time(carry.finish, preds, transfer, arrival)
        raw_start = jax.lax.dynamic_slice(carry.slot_start, (lo,), (capacity,))
        raw_finish = jax.lax.dynamic_slice(carry.slot_finish, (lo,), (capacity,))
        mine = window < filled  # the rest of the window belongs to later processors
        row_start, row_finish = jnp.where(mine, raw_start, jnp.inf), jnp.where(mine, raw_finish, jnp.inf)
        start = earliest_gap_start(row_start, row_finish, ready, d)
        pos = jnp.sum(row_start < start)
        write = (window <= filled) & (d > 0)
        new_start = jnp.where(write, insert_sorted(row_start, pos, start), raw_start)
        new_finish = jnp.where(write, insert_sorted(row_finish, pos, start + d), raw_finish)
        return _SimulateCarry(
            finish=carry.finish.at[task].set(start + d),
            slot_start=jax.lax.dynamic_update_slice(carry.slot_start, new_start, (lo,)),
            slot_finish=jax.lax.dynamic_update_slice(carry.slot_finish, new_finish, (lo,)),
        ), start

    slots = jnp.full(num_tasks + capacity, jnp.inf, dtype)
    init = _SimulateCarry(finish=jnp.full(num_tasks + 1, -jnp.inf, dtype), slot_start=slots, slot_finish=slots)
    xs = (order, preds_in_order, transfer, duration[order], problem.arrival[order], offset[proc_in_order], filled)
    carry, start = jax.lax.scan(step, init, xs)
    steps = jnp.asarray(num_tasks, jnp.int32)
    return ScheduleArrays(proc, _unpermute(order, start), carry.finish[:-1], counts.max() > capacity, steps)


class _WaveCarry(NamedTuple):
    head: jax.Array  # [P] int32 next position in each processor's queue
    finish: jax.Array  # [T + 2]: slot T is the padded-predecessor sentinel, T + 1 a discard slot
    start: jax.Array  # [T + 2]
    done: jax.Array  # [T + 2] bool
    busy_start: jax.Array  # [P, C] sorted by start, +inf padded
    busy_finish: jax.Array  # [P, C]
    waves: jax.Array  # [] int32


def _wavefront(problem: PaddedProblem, proc: jax.Array, order: jax.Array, capacity: int) -> ScheduleArrays:
    """The wavefront: each processor takes its tasks in `order`; a wave places the next task of every
    processor whose predecessors are all placed."""
    num_tasks, num_procs = problem.comp.shape
    dtype = problem.comp.dtype
    task_index = jnp.arange(num_tasks, dtype=jnp.int32)
    procs = jnp.arange(num_procs, dtype=jnp.int32)
    queue_key = jnp.where(problem.task_mask, proc, num_procs)  # padded tasks join no queue
    queue = order[jnp.argsort(queue_key[order], stable=True)].astype(jnp.int32)
    count = jnp.zeros(num_procs, jnp.int32).at[proc].add(problem.task_mask.astype(jnp.int32))
    offset = jnp.cumsum(count) - count
    proc_of = jnp.concatenate([proc, jnp.zeros(2, jnp.int32)])
    duration_of = problem.comp[task_index, proc]
    busy = jnp.zeros(num_procs, jnp.int32).at[proc].add((problem.task_mask & (duration_of > 0)).astype(jnp.int32))

    def wave(carry: _WaveCarry) -> _WaveCarry:
        active = carry.head < count
        task = queue[jnp.minimum(offset + carry.head, num_tasks - 1)]  # [P] candidate of each processor
        preds = problem.pred[task]  # [P, K], T where padded
        ready_now = active & carry.done[preds].all(axis=1)
        transfer = problem.pred_data[task] * problem.inverse_bandwidth[proc_of[preds], procs[:, None]]
        ready = jnp.maximum((carry.finish[preds] + transfer).max(axis=1), problem.arrival[task])
        duration = jnp.where(ready_now, duration_of[task], jnp.zeros((), dtype))
        start = earliest_gap_start(carry.busy_start, carry.busy_finish, ready, duration)
        column = jnp.sum(carry.busy_start < start[:, None], axis=1).astype(jnp.int32)
        write = (ready_now & (duration > 0))[:, None]
        slot = jnp.where(ready_now, task, num_tasks + 1)
        return _WaveCarry(
            head=carry.head + ready_now.astype(jnp.int32),
            finish=carry.finish.at[slot].set(start + duration),
            start=carry.start.at[slot].set(start),
            done=carry.done.at[slot].set(True),
            busy_start=jnp.where(write, insert_sorted(carry.busy_start, column, start), carry.busy_start),
            busy_finish=jnp.where(write, insert_sorted(carry.busy_finish, column, start + duration), carry.busy_finish),
            waves=carry.waves + 1,
        )

    def unfinished(carry: _WaveCarry) -> jax.Array:
        return jnp.any(carry.head < count) & (carry.waves <= num_tasks)  # the bound never binds

    rows = jnp.full((num_procs, capacity), jnp.inf, dtype)
    init = _WaveCarry(
        head=jnp.zeros(num_procs, jnp.int32),
        finish=jnp.full(num_tasks + 2, -jnp.inf, dtype),
        start=jnp.zeros(num_tasks + 2, dtype),
        done=jnp.zeros(num_tasks + 2, bool).at[num_tasks].set(True),
        busy_start=rows,
        busy_finish=rows,
        waves=jnp.zeros((), jnp.int32),
    )
    carry = jax.lax.while_loop(unfinished, wave, init)
    overflow = busy.max() > capacity
    return ScheduleArrays(proc, carry.start[:num_tasks], carry.finish[:num_tasks], overflow, carry.waves)


def row_capacity(problem: PaddedProblem, proc) -> int:
    """Smallest power of two >= the busy (positive-duration) real tasks of any processor, over one
    assignment proc [T] or several [N, T] of the unbatched padded `problem` (on the host): the
    smallest `capacity` that cannot overflow, rounded so that similar assignments share a compilation."""
    comp, task_mask = np.asarray(problem.comp), np.asarray(problem.task_mask)
    proc = np.asarray(proc).reshape(-1, comp.shape[0])
    busy = (comp[np.arange(comp.shape[0]), proc] > 0) & task_mask  # [N, T]
    most = max(int(np.bincount(row[keep], minlength=1).max()) for row, keep in zip(proc, busy))
    return 1 << max(most - 1, 0).bit_length()


@functools.partial(jax.jit, static_argnames=("capacity", "method"))
def _simulate_batch(batch: PaddedProblem, proc, priority, capacity: int | None, method: str) -> ScheduleArrays:
    return jax.vmap(simulate_padded, in_axes=(0, 0, 0, None, None))(batch, proc, priority, capacity, method)


def check_batch_assignment(batch: PaddedProblem, proc, priority) -> None:
    """Raises ValueError unless proc [B, T] holds integer ids of real processors and priority [B, T]
    finite real numbers, for every real task of the padded `batch` (padded tasks are ignored)."""
    task_mask, proc_mask = np.asarray(batch.task_mask), np.asarray(batch.proc_mask)
    proc, priority = np.asarray(proc), np.asarray(priority)
    if proc.shape != task_mask.shape or priority.shape != task_mask.shape:
        raise ValueError(
            f"proc and priority must have the batch's shape {task_mask.shape}, got {proc.shape} and {priority.shape}"
        )
    if not np.issubdtype(proc.dtype, np.integer):
        raise ValueError(f"proc must hold integer processor ids, got dtype {proc.dtype}")
    if not (np.issubdtype(priority.dtype, np.floating) or np.issubdtype(priority.dtype, np.integer)):
        raise ValueError(f"priority must hold real numbers, got dtype {priority.dtype}")
    num_procs = proc_mask.shape[-1]
    inside = (proc >= 0) & (proc < num_procs)
    rows = np.arange(proc.shape[0])[:, None]
    real = inside & proc_mask[rows, np.where(inside, proc, 0)]
    bad = task_mask & ~real
    if bad.any():
        b, t = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"proc[{b}, {t}] = {proc[b, t]} is not a processor of problem {b}, which has {int(proc_mask[b].sum())}"
        )
    bad = task_mask & ~np.isfinite(priority)
    if bad.any():
        b, t = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"priority[{b}, {t}] = {priority[b, t]} must be finite")


def simulate_batch(
    batch: PaddedProblem, proc, priority, capacity: int | None = None, method: str = "walk"
) -> ScheduleArrays:
    """`simulate` on every problem of a padded batch: proc [B, T], priority [B, T] (checked on the
    host by `check_batch_assignment`; one compilation per padded shape, capacity and method)."""
    check_batch_assignment(batch, proc, priority)
    return _simulate_batch(batch, proc, priority, capacity, method)
