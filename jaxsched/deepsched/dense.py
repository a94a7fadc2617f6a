"""DeepSched as one more scheduler inside jitted programs: a trained network on `jaxsched.dense` instances.

The adversarial search (`jaxsched.adversarial`) edits `DenseInstance`s inside one compiled program, so the
network cannot read them through the host's `features.problem_features`. `dense_features` is its JAX twin
(the same definitions: paper and DAG features, times over the makespan lower bound, HEFT's visit order with
ties by topological position), padded to the instance's fixed size; `DenseScheduler.makespan` is the greedy
decoder of `NeuralScheduler.schedule` on it: the network's processors (the feedback variant decodes them one
task at a time), placed in upward-rank order by the list scheduler `jaxsched.jax_simulate.simulate_padded`, so
every assignment becomes a valid schedule. It is a pytree (the module static, the parameters traced), so a
search takes it as an argument and vmaps it over chains without recompiling for new weights. Make one with
`NeuralScheduler.dense()`.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from jaxsched.deepsched.features import Features
from jaxsched.deepsched.model import DeepSchedNet
from jaxsched.dense import (
    DenseFacts,
    DenseInstance,
    dense_comp,
    dense_edges,
    dense_facts,
    dense_levels,
    dense_mean_transfer,
    proc_mask,
    task_mask,
    to_padded,
)
from jaxsched.jax_simulate import simulate_padded


def _by_max(values: jax.Array, real: jax.Array) -> jax.Array:
    """`values` over their largest real value when that is positive (`features._by_max`), 0 where not real."""
    top = jnp.where(real, values, 0).max()
    return jnp.where(real, jnp.where(top > 0, values / jnp.where(top > 0, top, 1), values), 0)


def dense_time_scale(instance: DenseInstance) -> jax.Array:
    """[] `features.time_scale`: max(critical path at minimum costs, total minimum work / P), 1 if zero."""
    adj = dense_edges(instance)
    real_tasks, real_procs = task_mask(instance), proc_mask(instance)
    fastest = jnp.where(real_tasks, jnp.where(real_procs[None, :], dense_comp(instance), jnp.inf).min(axis=1), 0)

    def longest(j, length):  # index order is topological
        return length.at[j].set(fastest[j] + jnp.where(adj[:, j], length, 0).max())

    path = jax.lax.fori_loop(0, fastest.shape[0], longest, jnp.zeros_like(fastest)).max()
    bound = jnp.maximum(path, fastest.sum() / instance.num_procs.astype(fastest.dtype))
    return jnp.where(bound > 0, bound, 1)


def dense_features(instance: DenseInstance, facts: DenseFacts | None = None) -> Features:
    """The network inputs of one dense instance (`features.problem_features` of `to_problem(instance)` on
    its real tasks and processors), padded to its fixed size: K = T predecessor slots, every pair i < j an
    edge slot. `facts` are `dense_facts(instance, "topcuoglu")` (DeepSched's ranks are Topcuoglu's)."""
    facts = dense_facts(instance, "topcuoglu") if facts is None else facts
    adj = dense_edges(instance)
    real_tasks, real_procs = task_mask(instance), proc_mask(instance)
    num_tasks = adj.shape[0]
    dtype = jnp.float32
    comp = jnp.where(real_tasks[:, None] & real_procs[None, :], dense_comp(instance), 0).astype(dtype)
    scale = dense_time_scale(instance).astype(dtype)
    transfer = dense_mean_transfer(instance, adj, "topcuoglu").astype(dtype)  # [T, T] data / mean bandwidth
    count_procs = instance.num_procs.astype(dtype)
    mean_comp = comp.sum(axis=1) / count_procs
    levels = dense_levels(adj).astype(dtype)
    up, down = facts.rank_u.astype(dtype), facts.rank_d.astype(dtype)
    zeros = jnp.zeros(num_tasks, dtype)
    columns = [
        zeros,  # arrival
        zeros,  # priority
        zeros,  # memory
        jnp.where(real_procs[None, :], comp, jnp.inf).min(axis=1) / scale,
        mean_comp / scale,
        comp.max(axis=1) / scale,
        up / scale,
        down / scale,
        _by_max(up + down, real_tasks),
        levels / jnp.maximum(levels.max(), 1),
        jnp.log1p(adj.sum(axis=0).astype(dtype)),
        jnp.log1p(adj.sum(axis=1).astype(dtype)),
        transfer.sum(axis=0) / scale,
        transfer.sum(axis=1) / scale,
    ]
    task = jnp.where(real_tasks[:, None], jnp.stack(columns, axis=1), 0)
    mean_time = comp.sum(axis=0) / instance.num_tasks.astype(dtype)
    relative = (jnp.where(real_procs, mean_time, 0).sum() / count_procs) / jnp.maximum(mean_time, 1e-30)
    speed = _by_max(jnp.where(mean_time > 0, relative, 1), real_procs)
    ones = real_procs.astype(dtype)
    proc = jnp.stack([ones, speed, ones, speed], axis=1)
    padded = to_padded(instance, facts)
    index = jnp.arange(num_tasks, dtype=jnp.int32)
    return Features(
        task=task,
        proc=proc,
        comp=comp / scale,
        arrival_order=index,  # every arrival is 0: index order, and the real tasks are a prefix
        rank_order=jnp.argsort(_upward_position(instance, facts)).astype(jnp.int32),
        task_mask=real_tasks,
        proc_mask=real_procs,
        edge_src=padded.edge_src,
        edge_dst=padded.edge_dst,
        edge_data=jnp.where(padded.edge_mask, transfer[padded.edge_src, padded.edge_dst] / scale, 0),
        edge_mask=padded.edge_mask,
        pred=padded.pred,
        pred_data=jnp.where(adj.T, transfer.T / scale, 0),
    )


def _upward_position(instance: DenseInstance, facts: DenseFacts) -> jax.Array:
    """[T] place in decreasing upward rank, ties by topological position, padded tasks last."""
    order = jnp.lexsort((facts.topo_position, -facts.rank_u, ~task_mask(instance)))
    return jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=order.dtype))


@flax.struct.dataclass
class DenseScheduler:
    """A trained DeepSched network as a scheduler of dense instances inside jitted code (module docstring):
    `model` is static, `params` a traced pytree."""

    model: DeepSchedNet = flax.struct.field(pytree_node=False)
    params: Any

    def assign(self, instance: DenseInstance, facts: DenseFacts | None = None) -> jax.Array:
        """[T] int32 the greedy decoder's processor of every task (`NeuralScheduler.predict`)."""
        prediction = self.model.apply(self.params, dense_features(instance, facts))
        return jnp.argmax(prediction.logits, axis=1).astype(jnp.int32)

    def makespan(self, instance: DenseInstance) -> jax.Array:
        """[] makespan of the greedy schedule (`NeuralScheduler.schedule(problem).makespan`), in the
        instance's dtype."""
        facts = dense_facts(instance, "topcuoglu")
        proc = self.assign(instance, facts)
        padded = to_padded(instance, facts)
        capacity = padded.comp.shape[0]
        schedule = simulate_padded(padded, proc, facts.rank_u, capacity=capacity, method="wavefront")
        return jnp.where(padded.task_mask, schedule.finish, 0).max()
