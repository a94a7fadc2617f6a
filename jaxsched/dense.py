"""Small instances as dense fixed-shape arrays, with the list-scheduling plans computed in JAX.

The adversarial search (`jaxsched.adversarial`) edits instances inside a jitted program, so an
instance there is a `DenseInstance`: task weights, processor speeds, a dependency matrix over the
pairs i < j (so every matrix is a DAG and index order is topological), edge data sizes and link
strengths (the related-machines model of PISA: comp = weight / speed, transfer = data / strength).
`to_problem` turns one into a `Problem` for the NumPy reference; `to_padded` and `dense_plan` give
`jaxsched.jax_listsched` the padded problem and the `ListPlan` that `make_plan` would give, computed
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
    """One small instance (a batch when stacked) in PISA's related-machines model, in arrays of a
    fixed largest size: the first `num_tasks` tasks and `num_procs` processors are real, the rest
    masked (no edges, never scheduled), so instances of different sizes share one compiled program."""

    weight: jax.Array  # [T] task weight (cost): comp[t, p] = weight[t] / speed[p]
    speed: jax.Array  # [P] processor speed, > 0
    adj: jax.Array  # [T, T] bool, task i feeds task j (only i < j among real tasks is read)
    data: jax.Array  # [T, T] data size of edge i -> j: transfer = data / strength
    strength: jax.Array  # [P, P] link strength, > 0, symmetric (diagonal unused)
    num_tasks: jax.Array  # [] int32 real tasks (a prefix)
    num_procs: jax.Array  # [] int32 real processors (a prefix)


def task_mask(instance: DenseInstance) -> jax.Array:
    """[T] bool: the real tasks."""
    return jnp.arange(instance.weight.shape[-1], dtype=jnp.int32) < instance.num_tasks[..., None]


def proc_mask(instance: DenseInstance) -> jax.Array:
    """[P] bool: the real processors."""
    return jnp.arange(instance.speed.shape[-1], dtype=jnp.int32) < instance.num_procs[..., None]


def dense_edges(instance: DenseInstance) -> jax.Array:
    """[T, T] bool: the dependencies actually read (strict upper triangle, real tasks)."""
    real = task_mask(instance)
    return jnp.triu(instance.adj, 1) & real[:, None] & real[None, :]


def dense_comp(instance: DenseInstance) -> jax.Array:
    """[T, P] execution times."""
    return instance.weight[:, None] / instance.speed[None, :]


def to_problem(instance: DenseInstance) -> Problem:
    """The `Problem` of one dense instance, its real tasks and processors only (float64, on the host)."""
    num_tasks, num_procs = int(instance.num_tasks), int(instance.num_procs)
    adj = np.triu(np.asarray(instance.adj)[:num_tasks, :num_tasks], 1)
    src, dst = np.nonzero(adj)
    strength = np.array(instance.strength, dtype=np.float64)[:num_procs, :num_procs]
    np.fill_diagonal(strength, 1.0)
    comp = np.asarray(dense_comp(instance), dtype=np.float64)[:num_tasks, :num_procs]
    data = np.asarray(instance.data, dtype=np.float64)[src, dst]
    return Problem(comp, src, dst, data, bandwidth=strength if num_procs > 1 else None)


def related_instance(cost, speed, src, dst, data, strength=None, max_tasks=None, max_procs=None) -> DenseInstance:
    """The dense instance of a related-machines problem (SAGA's model): task `cost` [T], node `speed` [P],
    edges `src` -> `dst` with `data`, symmetric link `strength` [P, P] (default 1; the diagonal is
    unused: data moves within a processor instantly), padded to `max_tasks` x `max_procs`. Tasks must be
    numbered in a topological order (src < dst); ValueError otherwise or on non-positive speeds."""
    cost, speed = np.asarray(cost, np.float64), np.asarray(speed, np.float64)
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    num_tasks, num_procs = cost.shape[0], speed.shape[0]
    max_tasks = num_tasks if max_tasks is None else max_tasks
    max_procs = num_procs if max_procs is None else max_procs
    if max_tasks < num_tasks or max_procs < num_procs:
        raise ValueError(f"{num_tasks} tasks x {num_procs} processors do not fit {max_tasks} x {max_procs}")
    if np.any(src >= dst):
        raise ValueError("tasks must be numbered in a topological order: every edge needs src < dst")
    if not np.all(speed > 0):
        raise ValueError(f"processor speeds must be positive, got {speed.tolist()}")
    strength = np.ones((num_procs, num_procs)) if strength is None else np.asarray(strength, np.float64)
    off = ~np.eye(num_procs, dtype=bool)
    if strength.shape != (num_procs, num_procs) or not np.all(strength[off] > 0):
        raise ValueError(f"link strengths must be a [{num_procs}, {num_procs}] matrix of positive values")
    adj = np.zeros((max_tasks, max_tasks), bool)
    adj[src, dst] = True
    edge_data = np.zeros((max_tasks, max_tasks))
    edge_data[src, dst] = data
    links = np.ones((max_procs, max_procs))
    links[:num_procs, :num_procs] = np.where(off, strength, 1.0)
    return DenseInstance(
        weight=jnp.asarray(np.pad(cost, (0, max_tasks - num_tasks))),
        speed=jnp.asarray(np.pad(speed, (0, max_procs - num_procs), constant_values=1.0)),
        adj=jnp.asarray(adj),
        data=jnp.asarray(edge_data),
        strength=jnp.asarray(links),
        num_tasks=jnp.asarray(num_tasks, jnp.int32),
        num_procs=jnp.asarray(num_procs, jnp.int32),
    )


def dense_levels(adj) -> jax.Array:
    """[T] topological level (index order is topological: edges only go from i to j > i)."""
    num_tasks = adj.shape[0]

    def body(j, level):
        return level.at[j].set(jnp.where(adj[:, j], level + 1, 0).max())

    return jax.lax.fori_loop(0, num_tasks, body, jnp.zeros(num_tasks, jnp.int32))


def dense_mean_transfer(instance: DenseInstance, adj, convention: str) -> jax.Array:
    """[T, T] mean transfer time of each edge (`jaxsched.priorities.mean_transfer`), real processors only."""
    real = proc_mask(instance)
    off = ~jnp.eye(real.shape[0], dtype=bool) & real[:, None] & real[None, :]
    dtype = instance.strength.dtype
    if convention == "saga":
        links = (instance.num_procs * (instance.num_procs + 1) // 2).astype(dtype)
        inverse = jnp.where(jnp.triu(off, 1), 1 / instance.strength, 0).sum() / links
        return jnp.where(adj, instance.data * inverse, 0)
    count = jnp.maximum(instance.num_procs * (instance.num_procs - 1), 1).astype(dtype)
    mean = jnp.where(off, instance.strength, 0).sum() / count
    mean = jnp.where(instance.num_procs > 1, mean, 1).astype(instance.data.dtype)
    return jnp.where(adj, instance.data / mean, 0)


def dense_ranks(instance: DenseInstance, convention: str = "topcuoglu") -> tuple[jax.Array, jax.Array, jax.Array]:
    """(upward rank [T], downward rank [T], optimistic cost table [T, P]), as in `jaxsched.heft` and
    `jaxsched.priorities` under `convention` (means and minima over the real processors), one task per
    loop step in (reverse) index order."""
    adj = dense_edges(instance)
    real = proc_mask(instance)
    comp = dense_comp(instance)
    mean_comp = jnp.where(real[None, :], comp, 0).sum(axis=1) / instance.num_procs.astype(comp.dtype)
    transfer = dense_mean_transfer(instance, adj, convention)
    inverse = jnp.where(jnp.eye(real.shape[0], dtype=bool), 0, 1 / instance.strength)
    num_tasks = comp.shape[0]
    zero = jnp.zeros((), comp.dtype)

    def up(k, state):
        rank, table = state
        t = num_tasks - 1 - k
        rank = rank.at[t].set(mean_comp[t] + jnp.where(adj[t], transfer[t] + rank, zero).max())
        after = table + comp  # [T, P]
        if convention == "saga":  # the actual link p - q: [T, P, P] -> [T, P]
            moved = instance.data[t][:, None, None] * inverse[None, :, :]
            reach = jnp.where(real[None, None, :], after[:, None, :] + moved, jnp.inf).min(axis=2)
        else:
            least = jnp.where(real[None, :], after, jnp.inf).min(axis=1, keepdims=True)
            reach = jnp.minimum(after, least + transfer[t][:, None])
        table = table.at[t].set(jnp.where(adj[t][:, None] & real[None, :], reach, zero).max(axis=0))
        return rank, table

    rank_u, table = jax.lax.fori_loop(0, num_tasks, up, (jnp.zeros(num_tasks, comp.dtype), jnp.zeros_like(comp)))

    if convention == "saga":  # the task's own cost over the mean speed, not its predecessor's mean cost
        harmonic = instance.weight * instance.num_procs.astype(comp.dtype) / jnp.where(real, instance.speed, 0).sum()
        added = jnp.broadcast_to(harmonic[None, :], adj.shape)
    else:
        added = jnp.broadcast_to(mean_comp[:, None], adj.shape)

    def down(t, rank):
        return rank.at[t].set(jnp.where(adj[:, t], rank + added[:, t] + transfer[:, t], zero).max())

    rank_d = jax.lax.fori_loop(0, num_tasks, down, jnp.zeros(num_tasks, comp.dtype))
    return rank_u, rank_d, table


def _position(priority, topo_position, real) -> jax.Array:
    """[T] place in decreasing priority, ties by topological position (`priority_position`); masked
    tasks last."""
    order = jnp.lexsort((topo_position, -priority, ~real))
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


def _critical_path(adj, total, topo_position, real, rtol, convention: str) -> jax.Array:
    """[T] bool CPOP's critical path (`jaxsched.priorities.critical_path`), rank sums equal to `rtol`."""
    num_tasks = adj.shape[0]
    if convention == "saga":  # every task close to the largest entry rank sum (numpy.isclose)
        entry_max = jnp.where(real & ~adj.any(axis=0), total, -jnp.inf).max()
        return real & (jnp.abs(total - entry_max) <= 1e-8 + 1e-5 * jnp.abs(entry_max))
    on_path = (jnp.abs(total - total.max()) <= rtol * total.max()) & real
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


def dense_facts(instance: DenseInstance, convention: str = "topcuoglu") -> DenseFacts:
    """Topological positions, ranks and optimistic cost table of one dense instance, ranks under
    `convention` (`jaxsched.priorities.RANK_CONVENTIONS`)."""
    adj = dense_edges(instance)
    level = dense_levels(adj)
    num_tasks = adj.shape[0]
    topo_position = _position(-level.astype(instance.weight.dtype), jnp.arange(num_tasks), task_mask(instance))
    return DenseFacts(topo_position, *dense_ranks(instance, convention))


def dense_positions(instance: DenseInstance, facts: DenseFacts, priority: str) -> tuple[jax.Array, jax.Array]:
    """(position [T], ready-list visit order [T]) of the priority named `priority`."""
    num_tasks = facts.rank_u.shape[0]
    value = {
        "upward": lambda: facts.rank_u,
        "downward": lambda: -facts.rank_d,
        "rank_sum": lambda: facts.rank_u + facts.rank_d,
        "oct": lambda: facts.table.sum(axis=1) / instance.num_procs.astype(facts.table.dtype),
        "topological": lambda: jnp.zeros(num_tasks, facts.rank_u.dtype),
    }[priority]()
    position = _position(value, facts.topo_position, task_mask(instance)).astype(jnp.int32)
    return position, _ready_list_order(dense_edges(instance), position)


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
    may be shared between configs of one rank convention. `rtol` decides which rank sums equal the
    critical path's."""
    facts = dense_facts(instance, config.ranks) if facts is None else facts
    position, order = dense_positions(instance, facts, config.priority) if positions is None else positions
    adj = dense_edges(instance)
    comp = dense_comp(instance)
    num_tasks = comp.shape[0]
    real_tasks, real_procs = task_mask(instance), proc_mask(instance)
    pin = jnp.full(num_tasks, -1, jnp.int32)
    if config.pinning == "critical_path":
        path = _critical_path(adj, facts.rank_u + facts.rank_d, facts.topo_position, real_tasks, rtol, config.ranks)
        total = jnp.where(path[:, None], comp, 0).sum(axis=0)
        proc = jnp.argmin(jnp.where(real_procs, total, jnp.inf)).astype(jnp.int32)
        pin = jnp.where(path, proc, -1)
    elif config.pinning == "fastest_processor":
        total = jnp.where(real_tasks[:, None], comp, 0).sum(axis=0)
        pin = jnp.where(real_tasks, jnp.argmin(jnp.where(real_procs, total, jnp.inf)), -1).astype(jnp.int32)
    oct_table = facts.table if config.selection == "eft_oct" else jnp.zeros_like(comp)
    return ListPlan(position, order, pin, oct_table, draws.astype(jnp.int32))


def to_padded(instance: DenseInstance, facts: DenseFacts | None = None) -> PaddedProblem:
    """The padded problem of one dense instance (no padded tasks or processors; K = T, E = all pairs)."""
    facts = dense_facts(instance) if facts is None else facts
    adj = dense_edges(instance)
    comp = jnp.where(task_mask(instance)[:, None], dense_comp(instance), 0)
    num_tasks, num_procs = comp.shape
    index = jnp.arange(num_tasks, dtype=jnp.int32)
    src, dst = (jnp.asarray(a, jnp.int32) for a in np.triu_indices(num_tasks, 1))
    topo_order = jnp.argsort(facts.topo_position).astype(jnp.int32)
    inverse_bandwidth = jnp.where(jnp.eye(num_procs, dtype=bool), 0, 1 / instance.strength).astype(comp.dtype)
    return PaddedProblem(
        comp=comp,
        task_mask=task_mask(instance),
        proc_mask=proc_mask(instance),
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


def random_instance(
    key: jax.Array,
    num_tasks,
    num_procs,
    edge_probability: float = 0.3,
    dtype=jnp.float32,
    *,
    shape: tuple[int, int] | None = None,
    value_range: tuple[float, float] = (0.0, 1.0),
    speed_range: tuple[float, float] = (0.1, 1.0),
    chain: bool = False,
) -> DenseInstance:
    """A random dense instance of `num_tasks` x `num_procs` (traced counts allowed when `shape`, the
    padded (T, P), is given): task weights, edge data and link strengths uniform in (low, high] of
    `value_range`, speeds in [low, high] of `speed_range`; each pair i < j an edge with
    `edge_probability`, or the chain 0 -> 1 -> ... when `chain` (PISA's start)."""
    max_tasks, max_procs = (num_tasks, num_procs) if shape is None else shape
    num_tasks, num_procs = jnp.asarray(num_tasks, jnp.int32), jnp.asarray(num_procs, jnp.int32)
    keys = jax.random.split(key, 5)

    def draw(k, shape, bounds, closed=False):
        low, high = bounds
        u = jax.random.uniform(k, shape, dtype)
        return low + (high - low) * u if closed else high - (high - low) * u

    strength = jnp.triu(draw(keys[3], (max_procs, max_procs), value_range), 1)
    if chain:
        adj = jnp.eye(max_tasks, k=1, dtype=bool)
    else:
        adj = jnp.triu(jax.random.bernoulli(keys[2], edge_probability, (max_tasks, max_tasks)), 1)
    real_tasks = jnp.arange(max_tasks, dtype=jnp.int32) < num_tasks
    real_procs = jnp.arange(max_procs, dtype=jnp.int32) < num_procs
    return DenseInstance(
        weight=jnp.where(real_tasks, draw(keys[0], (max_tasks,), value_range), 0),
        speed=jnp.where(real_procs, draw(keys[1], (max_procs,), speed_range, closed=True), 1),
        adj=adj & real_tasks[:, None] & real_tasks[None, :],
        data=draw(keys[4], (max_tasks, max_tasks), value_range),
        strength=strength + strength.T + jnp.eye(max_procs, dtype=dtype),
        num_tasks=num_tasks,
        num_procs=num_procs,
    )
