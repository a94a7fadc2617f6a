"""The feedback variant's view of its own earlier decisions: a cheap partial list schedule.

Tasks are decided one at a time in upward-rank order (HEFT's visit order). Before each decision the
network sees, for every processor, what placing the task there would mean (`state_features`), read
off a `PartialSchedule` of the decisions so far. The partial schedule is the list schedule of those
decisions with two economies: a processor remembers only its GAP_SLOTS longest idle gaps (older,
shorter ones are forgotten, so a later task may be appended where the exact schedule would have
inserted it), and nothing is searched beyond them. A step costs O(P (K + GAP_SLOTS)) instead of a
search through every busy interval. The final schedule is still made by the exact list scheduler
(`wavefront_simulate`); this state only informs the choices.

Training uses teacher forcing (`teacher_state`: HEFT's choices drive the same state machine), so
training and decoding see identical features for identical decisions.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from jaxsched.deepsched.features import TASK_FEATURES, Features, assert_features

GAP_SLOTS = 4
STATE_FEATURES = ("eft", "eft_excess", "wait", "transfer")
_ARRIVAL = TASK_FEATURES.index("arrival")
_MEAN_COMP = TASK_FEATURES.index("comp_mean")


class PartialSchedule(NamedTuple):
    """Earlier decisions as a list schedule, in units of time_scale."""

    avail: jax.Array  # [P] end of the last task of each processor
    gap_start: jax.Array  # [P, GAP_SLOTS] remembered idle gaps (empty: start == end)
    gap_end: jax.Array  # [P, GAP_SLOTS]
    proc: jax.Array  # [T + 1] int32 processor of each decided task (slot T: padded predecessor)
    finish: jax.Array  # [T + 1] finish time of each decided task


class Options(NamedTuple):
    """Where a task would go on each processor."""

    ready: jax.Array  # [P] when its inputs are there
    start: jax.Array  # [P] earliest start: in a remembered gap, or after the last task
    gap: jax.Array  # [P] int32 the gap it would fill, -1 when appended


def empty_schedule(features: Features) -> PartialSchedule:
    """The partial schedule before any decision: idle processors, no gaps."""
    num_tasks, num_procs = features.comp.shape
    dtype = features.comp.dtype
    no_gaps = jnp.zeros((num_procs, GAP_SLOTS), dtype)
    return PartialSchedule(
        jnp.zeros(num_procs, dtype),
        no_gaps,
        no_gaps,
        jnp.zeros(num_tasks + 1, jnp.int32),
        jnp.zeros(num_tasks + 1, dtype),
    )


def typical_duration(features: Features) -> jax.Array:
    """[] mean execution time of the problem's tasks (/ time_scale), the unit of `state_features`."""
    mask = features.task_mask.astype(features.task.dtype)
    return jnp.maximum((features.task[:, _MEAN_COMP] * mask).sum() / jnp.maximum(mask.sum(), 1), 1e-6)


def options(features: Features, partial: PartialSchedule, task: jax.Array) -> Options:
    """Ready time and earliest start of `task` on every processor given the partial schedule."""
    num_tasks, num_procs = features.comp.shape
    preds = features.pred[task]  # [K]
    crossing = partial.proc[preds][:, None] != jnp.arange(num_procs, dtype=jnp.int32)[None, :]  # [K, P]
    arrive = partial.finish[preds][:, None] + features.pred_data[task][:, None] * crossing.astype(partial.finish.dtype)
    arrive = jnp.where((preds < num_tasks)[:, None], arrive, jnp.zeros((), arrive.dtype))
    ready = jnp.maximum(arrive.max(axis=0), features.task[task, _ARRIVAL])
    duration = features.comp[task]
    in_gap = jnp.maximum(partial.gap_start, ready[:, None])  # [P, G]
    fits = in_gap + duration[:, None] <= partial.gap_end
    gap_start = jnp.where(fits, in_gap, jnp.inf)
    gap = jnp.argmin(gap_start, axis=1).astype(jnp.int32)
    best_gap = gap_start.min(axis=1)
    tail = jnp.maximum(partial.avail, ready)
    use_gap = (best_gap < tail) & (duration > 0)
    return Options(ready, jnp.where(use_gap, best_gap, tail), jnp.where(use_gap, gap, -1))


def state_features(features: Features, task: jax.Array, where: Options) -> jax.Array:
    """[P, len(STATE_FEATURES)] for placing `task`: the earliest finish eft = start + comp
    (/ time_scale); and, in typical task durations, eft's excess over the best processor's, the wait
    for the processor (start - ready) and the transfer delay (ready minus the earliest ready over
    processors). 0 on padded processors."""
    unit = typical_duration(features)

    def excess(values):
        return (values - jnp.where(features.proc_mask, values, jnp.inf).min()) / unit

    eft = where.start + features.comp[task]
    state = jnp.stack([eft, excess(eft), (where.start - where.ready) / unit, excess(where.ready)], axis=-1)
    return jnp.where(features.proc_mask[:, None], state, jnp.zeros((), state.dtype))


def _remember(gap_start: jax.Array, gap_end: jax.Array, start: jax.Array, end: jax.Array):
    """Keeps the gap [start, end) in the slot of the shortest remembered gap, if it is longer."""
    length = gap_end - gap_start
    slot = jnp.argmin(length)
    keep = (end - start) > length[slot]
    return (
        gap_start.at[slot].set(jnp.where(keep, start, gap_start[slot])),
        gap_end.at[slot].set(jnp.where(keep, end, gap_end[slot])),
    )


def place(
    features: Features, partial: PartialSchedule, task: jax.Array, choice: jax.Array, where: Options
) -> PartialSchedule:
    """Puts `task` on processor `choice` at its earliest start: into the remembered gap it fits
    (whose remainders on both sides are remembered again), or after the last task (the idle time
    before it becomes a gap). Padded tasks change nothing."""
    real = features.task_mask[task]
    start = where.start[choice]
    duration = features.comp[task, choice]
    finish = start + duration
    gap = where.gap[choice]
    row_start, row_end = partial.gap_start[choice], partial.gap_end[choice]
    in_gap = gap >= 0
    used = jnp.maximum(gap, 0)
    before_start = jnp.where(in_gap, row_start[used], partial.avail[choice])
    after_end = jnp.where(in_gap, row_end[used], finish)
    row_end = row_end.at[used].set(jnp.where(in_gap, row_start[used], row_end[used]))  # empty the used gap
    row_start, row_end = _remember(row_start, row_end, before_start, start)
    row_start, row_end = _remember(row_start, row_end, finish, after_end)
    busy = real & (duration > 0)
    return PartialSchedule(
        avail=partial.avail.at[choice].set(jnp.where(busy & ~in_gap, finish, partial.avail[choice])),
        gap_start=partial.gap_start.at[choice].set(jnp.where(busy, row_start, partial.gap_start[choice])),
        gap_end=partial.gap_end.at[choice].set(jnp.where(busy, row_end, partial.gap_end[choice])),
        proc=partial.proc.at[task].set(choice),
        finish=partial.finish.at[task].set(finish),
    )


def teacher_state(features: Features, proc: jax.Array) -> jax.Array:
    """[T, P, len(STATE_FEATURES)] `state_features` of every task when the tasks before it in
    upward-rank order went to `proc` (HEFT's choices when training: teacher forcing)."""
    assert_features(features)
    chex.assert_rank(proc, 1)
    features = jax.tree.map(jnp.asarray, features)

    def step(partial, task):
        where = options(features, partial, task)
        return place(features, partial, task, proc[task].astype(jnp.int32), where), state_features(
            features, task, where
        )

    _, states = jax.lax.scan(step, empty_schedule(features), features.rank_order)
    return jnp.zeros_like(states).at[features.rank_order].set(states)


def decode(
    features: Features, logits: jax.Array, state_weights: jax.Array, key: jax.Array | None, temperature: jax.Array
) -> jax.Array:
    """[T] processors chosen one task at a time in upward-rank order, with scores
    logits[t] + state_features @ state_weights[t]: the argmax (key None) or a draw from the softmax
    at `temperature`."""
    assert_features(features)
    chex.assert_rank([logits, state_weights], [2, 2])
    features = jax.tree.map(jnp.asarray, features)
    num_tasks = features.comp.shape[0]
    keys = jax.random.split(jax.random.key(0) if key is None else key, num_tasks)

    def step(partial, task):
        where = options(features, partial, task)
        scores = logits[task] + state_features(features, task, where) @ state_weights[task]
        if key is None:
            choice = jnp.argmax(scores).astype(jnp.int32)
        else:
            choice = jax.random.categorical(keys[task], scores / temperature).astype(jnp.int32)
        return place(features, partial, task, choice, where), None

    partial, _ = jax.lax.scan(step, empty_schedule(features), features.rank_order)
    return partial.proc[:num_tasks]
