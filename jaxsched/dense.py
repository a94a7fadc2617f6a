"""Small instances as dense fixed-shape arrays, with the list-scheduling plans computed in JAX.

The adversarial search (`jaxsched.adversarial`) edits instances inside a jitted program, so an
instance there is a `DenseInstance`: task weights, processor speeds, a dependency matrix over the
pairs i < j (so every matrix is a DAG and index order is topological), edge data sizes and link
strengths (the related-machines model of PISA: comp = weight / speed, transfer = data / strength).
`to_problem` turns one into a `Problem` for the NumPy reference; `to_padded` and `dense_plan` give
`jaxsched.listsched_jax` the padded problem and the `ListPlan` that `make_plan` would give, computed
here in JAX from the same definitions (`jaxsched.priorities`), in the instance's float dtype.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsched.batch import PaddedProblem
from jaxsched.listsched import ListConfig, ListPlan
from jaxsched.problem import Problem


class DenseInstance(NamedTuple):
    """One small instance (a batch when stacked) in PISA's related-machines model."""

    weight: jax.Array  # [T] task weight: comp[t, p] = weight[t] / speed[p]
    speed: jax.Array  # [P] processor speed, > 0
    adj: jax.Array  # [T, T] bool, task i feeds task j (only i < j is read)
    data: jax.Array  # [T, T] data size of edge i -> j: transfer = data / strength
    strength: jax.Array  # [P, P] link strength, > 0, symmetric (diagonal unused)


def _edges(adj) -> jax.Array:
    """[T, T] bool: the dependencies actually read (strict upper triangle)."""
    return jnp.triu(adj, 1)


def dense_comp(instance: DenseInstance) -> jax.Array:
    """[T, P] execution times."""
    return instance.weight[:, None] / instance.speed[None, :]


def to_problem(instance: DenseInstance) -> Problem:
    """The `Problem` of one dense instance (float64, on the host)."""
    adj = np.triu(np.asarray(instance.adj), 1)
    src, dst = np.nonzero(adj)
    strength = np.array(instance.strength, dtype=np.float64)
    np.fill_diagonal(strength, 1.0)
    comp = np.asarray(dense_comp(instance), dtype=np.float64)
    data = np.asarray(instance.data, dtype=np.float64)[src, dst]
    return Problem(comp, src, dst, data, bandwidth=strength if comp.shape[1] > 1 else None)


def _levels(adj) -> jax.Array:
    """[T] topological level (index order is topological: edges only go from i to j > i)."""
    num_tasks = adj.shape[0]

    def body(j, level):
        return level.at[j].set(jnp.where(adj[:, j], level + 1, 0).max())

    return jax.lax.fori_loop(0, num_tasks, body, jnp.zeros(num_tasks, jnp.int32))


def _mean_transfer(instance: DenseInstance, adj) -> jax.Array:
    """[T, T] mean transfer time of each edge (data over the mean off-diagonal strength)."""
    num_procs = instance.speed.shape[0]
    off = ~jnp.eye(num_procs, dtype=bool)
    mean = jnp.where(off, instance.strength, 0).sum() / max(num_procs * (num_procs - 1), 1)
    mean = mean if num_procs > 1 else jnp.ones((), instance.data.dtype)
    return jnp.where(adj, instance.data / mean, 0)


def dense_ranks(instance: DenseInstance) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(upward rank [T], downward rank [T], optimistic cost table [T, P]), as in `jaxsched.heft` and
    `jaxsched.priorities`, one task per loop step in (reverse) index order."""
    adj = _edges(instance.adj)
    comp = dense_comp(instance)
    mean_comp = comp.mean(axis=1)
    transfer = _mean_transfer(instance, adj)
    num_tasks = comp.shape[0]
    zero = jnp.zeros((), comp.dtype)

    def up(k, state):
        rank, table = state
        t = num_tasks - 1 - k
        rank = rank.at[t].set(mean_comp[t] + jnp.where(adj[t], transfer[t] + rank, zero).max())
        after = table + comp  # [T, P]
        reach = jnp.minimum(after, after.min(axis=1, keepdims=True) + transfer[t][:, None])
        table = table.at[t].set(jnp.where(adj[t][:, None], reach, zero).max(axis=0))
        return rank, table

    rank_u, table = jax.lax.fori_loop(0, num_tasks, up, (jnp.zeros(num_tasks, comp.dtype), jnp.zeros_like(comp)))

    def down(t, rank):
        return rank.at[t].set(jnp.where(adj[:, t], rank + mean_comp + transfer[:, t], zero).max())

    rank_d = jax.lax.fori_loop(0, num_tasks, down, jnp.zeros(num_tasks, comp.dtype))
    return rank_u, rank_d, table


def _position(priority, topo_position) -> jax.Array:
    """[T] place in decreasing priority, ties by topological position (`priority_position`)."""
    order = jnp.lexsort((topo_position, -priority))
    return jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=order.dtype))


def _ready_list_order(adj, position) -> jax.Array:
    """[T] the visit order taking the ready task of lowest position (`ready_list_order`)."""
    num_tasks = adj.shape[0]

    def body(i, state):
        done, order = state
        ready = ~done & ~(adj & ~done[:, None]).any(axis=0)
        task = jnp.argmin(jnp.where(ready, position, num_tasks)).astype(jnp.int32)
        return done.at[task].set(True), order.at[i].set(task)

    _, order = jax.lax.fori_loop(0, num_tasks, body, (jnp.zeros(num_tasks, bool), jnp.zeros(num_tasks, jnp.int32)))
    return order


def _critical_path(adj, total, comp, topo_position, rtol) -> jax.Array:
    """[T] bool CPOP's critical path (`jaxsched.priorities.critical_path`), rank sums equal to `rtol`."""
    num_tasks = adj.shape[0]
    on_path = jnp.abs(total - total.max()) <= rtol * total.max()
    entry = ~adj.any(axis=0)
    first = jnp.argmin(jnp.where(on_path & entry, topo_position, num_tasks))

    def body(_, state):
        task, alive, path = state
        successors = adj[task] & on_path
        nxt = jnp.argmin(jnp.where(successors, topo_position, num_tasks))
        alive = alive & successors.any()
        return jnp.where(alive, nxt, task), alive, path.at[nxt].set(path[nxt] | alive)

    init = (first, jnp.asarray(True), jnp.zeros(num_tasks, bool).at[first].set(True))
    _, _, path = jax.lax.fori_loop(0, num_tasks, body, init)
    return path


class DenseFacts(NamedTuple):
    """What every plan of one dense instance shares, computed once."""

    topo_position: jax.Array  # [T] place in the canonical topological order
    rank_u: jax.Array  # [T]
    rank_d: jax.Array  # [T]
    table: jax.Array  # [T, P] optimistic cost table


def dense_facts(instance: DenseInstance) -> DenseFacts:
    """Topological positions, ranks and optimistic cost table of one dense instance."""
    adj = _edges(instance.adj)
    level = _levels(adj)
    num_tasks = adj.shape[0]
    topo_position = _position(-level.astype(instance.weight.dtype), jnp.arange(num_tasks))
    return DenseFacts(topo_position, *dense_ranks(instance))


def dense_positions(instance: DenseInstance, facts: DenseFacts, priority: str) -> tuple[jax.Array, jax.Array]:
    """(position [T], ready-list visit order [T]) of the priority named `priority`."""
    num_tasks = facts.rank_u.shape[0]
    value = {
        "upward": lambda: facts.rank_u,
        "downward": lambda: -facts.rank_d,
        "rank_sum": lambda: facts.rank_u + facts.rank_d,
        "oct": lambda: facts.table.mean(axis=1),
        "topological": lambda: jnp.zeros(num_tasks, facts.rank_u.dtype),
    }[priority]()
    position = _position(value, facts.topo_position).astype(jnp.int32)
    return position, _ready_list_order(_edges(instance.adj), position)


def dense_plan(
    instance: DenseInstance,
    config: ListConfig,
    draws: jax.Array,
    facts: DenseFacts | None = None,
    positions: tuple[jax.Array, jax.Array] | None = None,
    rtol: float = 1e-5,
) -> ListPlan:
    """The `ListPlan` of `config` on one dense instance (`make_plan`'s definitions, in JAX); `draws`
    [T] int32 are WBA's random integers. `facts` and `positions` (`dense_facts`, `dense_positions`)
    may be shared between configs. `rtol` decides which rank sums equal the critical path's."""
    facts = dense_facts(instance) if facts is None else facts
    position, order = dense_positions(instance, facts, config.priority) if positions is None else positions
    adj = _edges(instance.adj)
    comp = dense_comp(instance)
    num_tasks = comp.shape[0]
    pin = jnp.full(num_tasks, -1, jnp.int32)
    if config.pinning == "critical_path":
        path = _critical_path(adj, facts.rank_u + facts.rank_d, comp, facts.topo_position, rtol)
        proc = jnp.argmin(jnp.where(path[:, None], comp, 0).sum(axis=0)).astype(jnp.int32)
        pin = jnp.where(path, proc, -1)
    elif config.pinning == "fastest_processor":
        pin = jnp.full(num_tasks, jnp.argmin(comp.sum(axis=0)), jnp.int32)
    oct_table = facts.table if config.selection == "eft_oct" else jnp.zeros_like(comp)
    return ListPlan(position, order, pin, oct_table, draws.astype(jnp.int32))


def to_padded(instance: DenseInstance, facts: DenseFacts | None = None) -> PaddedProblem:
    """The padded problem of one dense instance (no padded tasks or processors; K = T, E = all pairs)."""
    facts = dense_facts(instance) if facts is None else facts
    adj = _edges(instance.adj)
    comp = dense_comp(instance)
    num_tasks, num_procs = comp.shape
    index = jnp.arange(num_tasks, dtype=jnp.int32)
    src, dst = (jnp.asarray(a, jnp.int32) for a in np.triu_indices(num_tasks, 1))
    topo_order = jnp.argsort(facts.topo_position).astype(jnp.int32)
    inverse_bandwidth = jnp.where(jnp.eye(num_procs, dtype=bool), 0, 1 / instance.strength).astype(comp.dtype)
    return PaddedProblem(
        comp=comp,
        task_mask=jnp.ones(num_tasks, bool),
        proc_mask=jnp.ones(num_procs, bool),
        arrival=jnp.zeros(num_tasks, comp.dtype),
        pred=jnp.where(adj.T, index[None, :], num_tasks).astype(jnp.int32),
        pred_data=jnp.where(adj.T, instance.data.T, 0).astype(comp.dtype),
        inverse_bandwidth=inverse_bandwidth,
        topo_order=topo_order,
        heft_order=dense_positions(instance, facts, "upward")[1],
        upward_rank=facts.rank_u,
        edge_src=src,
        edge_dst=dst,
        edge_data=instance.data[src, dst].astype(comp.dtype),
        edge_mask=adj[src, dst],
    )


def random_instance(key: jax.Array, num_tasks: int, num_procs: int, edge_probability: float = 0.3, dtype=jnp.float32):
    """A random dense instance: weights, data and strengths uniform in (0, 1], speeds in [0.1, 1]
    (PISA starts from such small random instances), each pair i < j an edge with `edge_probability`."""
    keys = jax.random.split(key, 5)

    def unit(k, shape):
        return 1.0 - jax.random.uniform(k, shape, dtype)  # (0, 1]

    strength = unit(keys[3], (num_procs, num_procs))
    return DenseInstance(
        weight=unit(keys[0], (num_tasks,)),
        speed=0.1 + 0.9 * jax.random.uniform(keys[1], (num_procs,), dtype),
        adj=jnp.triu(jax.random.bernoulli(keys[2], edge_probability, (num_tasks, num_tasks)), 1),
        data=unit(keys[4], (num_tasks, num_tasks)),
        strength=jnp.triu(strength, 1) + jnp.triu(strength, 1).T + jnp.eye(num_procs, dtype=dtype),
    )
