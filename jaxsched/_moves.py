"""Moves of the adversarial search: one random edit of a `DenseInstance`, inside a jitted program.

A move is one of `MOVES`, drawn uniformly among the kinds a chain allows:

* "toggle_edge": add or remove the dependency of a random pair i < j of real tasks.
* "add_edge": PISA's addition: a random source among the tasks that can take a new successor, then a
  random target that is neither a successor already nor an ancestor (so the graph stays acyclic; the
  target may precede the source in index order, after which the tasks are renumbered in a topological
  order, lowest index first, so that index order stays topological).
* "remove_edge": a random existing dependency removed.
* "task_weight", "edge_data" (an existing dependency's), "node_speed", "link_strength" (a random pair
  of distinct real processors, both directions): one value changed.

New values: redrawn uniformly in the range (`step=None`), or the old value nudged by a uniform draw
in [-step, step] and clipped to the range (PISA). An added dependency's data is drawn uniformly in the
value range. A move that finds nothing to change (no dependency to remove, ...) leaves the instance as
it was, as in PISA.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from jaxsched.dense import DenseInstance, proc_mask, task_mask

MOVES = ("toggle_edge", "add_edge", "remove_edge", "task_weight", "edge_data", "node_speed", "link_strength")


@dataclasses.dataclass(frozen=True)
class MoveConfig:
    """Which moves, their step (None: redraw) and the ranges values are drawn in or clipped to."""

    kinds: tuple[str, ...] = ("toggle_edge", "task_weight", "edge_data", "node_speed", "link_strength")
    step: float | None = None
    value_range: tuple[float, float] = (0.0, 1.0)  # task weights, edge data, link strengths
    speed_range: tuple[float, float] = (0.1, 1.0)

    def __post_init__(self):
        unknown = [k for k in self.kinds if k not in MOVES]
        if unknown or not self.kinds:
            raise ValueError(f"unknown or no move kinds {unknown}; known: {', '.join(MOVES)}")
        if self.step is not None and not self.step > 0:
            raise ValueError(f"the move step must be positive (or None to redraw), got {self.step}")
        for name, (low, high) in (("value_range", self.value_range), ("speed_range", self.speed_range)):
            if not (0 <= low <= high and high > 0):
                raise ValueError(
                    f"{name} must be a non-empty range of non-negative values with high > 0, got ({low}, {high})"
                )
        if not self.speed_range[0] > 0:
            raise ValueError(f"speeds must stay positive: speed_range low must be > 0, got {self.speed_range[0]}")

    @property
    def allowed(self) -> tuple[bool, ...]:
        """Per kind of `MOVES`, whether it is used."""
        return tuple(kind in self.kinds for kind in MOVES)


def _pick(key, mask) -> tuple[jax.Array, jax.Array]:
    """(a uniformly random flat index where `mask` holds, whether any does)."""
    flat = mask.reshape(-1)
    return jax.random.categorical(key, jnp.where(flat, 0.0, -jnp.inf)), flat.any()


def reachability(adj) -> jax.Array:
    """[T, T] bool: a path of one or more dependencies leads from i to j (repeated squaring)."""
    reach = adj
    for _ in range(max(math.ceil(math.log2(max(adj.shape[0], 2))), 1)):
        hop = reach.astype(jnp.float32)
        reach = reach | ((hop @ hop) > 0)
    return reach


def topological_relabel(instance: DenseInstance) -> DenseInstance:
    """The instance with its real tasks renumbered in a topological order of `adj` (any DAG over the real
    tasks, not only i < j): Kahn's order taking the ready task of lowest index first, masked tasks last.
    An instance already in index order is returned unchanged."""
    num_tasks = instance.weight.shape[0]
    real = task_mask(instance)
    adj = instance.adj & real[:, None] & real[None, :] & ~jnp.eye(num_tasks, dtype=bool)
    rank = jnp.arange(num_tasks, dtype=jnp.int32) + jnp.where(real, 0, num_tasks)

    def body(i, state):
        done, order = state
        ready = ~done & ~(adj & ~done[:, None]).any(axis=0)
        task = jnp.argmin(jnp.where(ready, rank, 2 * num_tasks)).astype(jnp.int32)
        return done.at[task].set(True), order.at[i].set(task)

    init = (jnp.zeros(num_tasks, bool), jnp.zeros(num_tasks, jnp.int32))
    _, order = jax.lax.fori_loop(0, num_tasks, body, init)
    return instance._replace(
        weight=instance.weight[order],
        adj=adj[order][:, order],
        data=instance.data[order][:, order],
    )


def perturb(key: jax.Array, instance: DenseInstance, moves: MoveConfig = MoveConfig(), allowed=None) -> DenseInstance:
    """One move of `moves` on `instance` (module docstring); `allowed` [len(MOVES)] bool (default
    `moves.allowed`) narrows the kinds per chain."""
    allowed = jnp.asarray(moves.allowed if allowed is None else allowed)
    num_tasks = instance.weight.shape[0]
    dtype = instance.weight.dtype
    keys = jax.random.split(key, 12)
    kind = jax.random.categorical(keys[0], jnp.where(allowed, 0.0, -jnp.inf))
    real_t, real_p = task_mask(instance), proc_mask(instance)
    pair_t = real_t[:, None] & real_t[None, :]
    upper = jnp.triu(jnp.ones((num_tasks, num_tasks), bool), 1)
    edges = instance.adj & upper & pair_t

    def new_value(k, old, bounds):
        low, high = bounds
        if moves.step is None:
            return high - (high - low) * jax.random.uniform(k, (), dtype)
        return jnp.clip(old + jax.random.uniform(k, (), dtype, -moves.step, moves.step), low, high)

    low, high = moves.value_range
    fresh = low + (high - low) * jax.random.uniform(keys[1], (), dtype)
    shape = (num_tasks, num_tasks)

    # toggle_edge: a random real pair i < j
    pair, has_pair = _pick(keys[2], upper & pair_t)
    i, j = jnp.unravel_index(pair, shape)
    toggled = instance.adj.at[i, j].set(~edges[i, j])
    toggle_data = instance.data.at[i, j].set(jnp.where(edges[i, j], instance.data[i, j], fresh))
    # add_edge: PISA's source, then target
    adj_any = instance.adj & pair_t
    reach = reachability(adj_any)
    valid = pair_t & ~adj_any & ~reach.T & ~jnp.eye(num_tasks, dtype=bool)
    source, can_add = _pick(keys[3], valid.any(axis=1))
    target, _ = _pick(keys[4], valid[source])
    added = instance._replace(
        adj=instance.adj.at[source, target].set(True), data=instance.data.at[source, target].set(fresh)
    )
    added = topological_relabel(added)
    # remove_edge and edge_data: a random existing dependency
    edge, has_edge = _pick(keys[5], edges)
    a, b = jnp.unravel_index(edge, shape)
    removed = instance.adj.at[a, b].set(False)
    data = instance.data.at[a, b].set(new_value(keys[6], instance.data[a, b], moves.value_range))
    # task_weight, node_speed, link_strength
    task, _ = _pick(keys[7], real_t)
    weight = instance.weight.at[task].set(new_value(keys[8], instance.weight[task], moves.value_range))
    proc, _ = _pick(keys[9], real_p)
    speed = instance.speed.at[proc].set(new_value(keys[10], instance.speed[proc], moves.speed_range))
    link, has_link = _pick(keys[11], real_p[:, None] & real_p[None, :] & ~jnp.eye(real_p.shape[0], dtype=bool))
    p, q = jnp.unravel_index(link, instance.strength.shape)
    value = new_value(jax.random.fold_in(keys[11], 1), instance.strength[p, q], moves.value_range)
    strength = instance.strength.at[p, q].set(value).at[q, p].set(value)

    toggle, add, remove, weigh, edit, speedup, relink = (kind == MOVES.index(k) for k in MOVES)
    pick = jnp.where
    return DenseInstance(
        weight=pick(add & can_add, added.weight, pick(weigh, weight, instance.weight)),
        speed=pick(speedup, speed, instance.speed),
        adj=pick(
            add & can_add,
            added.adj,
            pick(toggle & has_pair, toggled, pick(remove & has_edge, removed, instance.adj)),
        ),
        data=pick(
            add & can_add,
            added.data,
            pick(toggle & has_pair, toggle_data, pick(edit & has_edge, data, instance.data)),
        ),
        strength=pick(relink & has_link, strength, instance.strength),
        num_tasks=instance.num_tasks,
        num_procs=instance.num_procs,
    )
