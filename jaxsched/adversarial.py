"""Adversarial instance search: simulated annealing for instances where one scheduler is far worse
than another (PISA: Coleman and Krishnamachari, "PISA: An adversarial approach to comparing task
graph scheduling algorithms", 2024), every chain of every scheduler pair advancing in one program.

A chain holds one small `DenseInstance` and a pair (a, b); its energy is makespan(a) / makespan(b).
A step applies one of PISA's moves (add or remove a dependency, or redraw a task weight, an edge's
data size, a processor speed or a link strength), schedules the new instance with every scheduler
(`jaxsched.listsched_jax` on `jaxsched.dense` plans), and accepts it if its ratio is higher, or
with probability exp((new - old) / temperature), the temperature falling geometrically from
`temperature_start` to `temperature_end`. All chains are vmapped and the steps scanned, so the
whole search is one jitted call.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxsched.common.sharding import Devices, batch_mesh, constrain_batch, padded_batch_size
from jaxsched.dense import DenseInstance, dense_facts, dense_plan, dense_positions, random_instance, to_padded
from jaxsched.listsched import PRESETS
from jaxsched.listsched_jax import list_schedule_padded

SEARCH_NAMES = tuple(PRESETS) + ("Duplex",)


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Instance size, chain counts and annealing schedule of `search`."""

    num_tasks: int = 6
    num_procs: int = 3
    steps: int = 1000
    chains_per_pair: int = 2
    edge_probability: float = 0.3
    temperature_start: float = 0.2
    temperature_end: float = 1e-3
    names: tuple[str, ...] = SEARCH_NAMES

    def __post_init__(self):
        unknown = [n for n in self.names if n not in SEARCH_NAMES]
        if unknown:
            raise ValueError(f"unknown scheduler(s) {', '.join(unknown)}; known: {', '.join(SEARCH_NAMES)}")
        if len(self.names) < 2:
            raise ValueError("the search needs at least two schedulers")
        if self.num_tasks < 2 or self.num_procs < 1 or self.steps < 1 or self.chains_per_pair < 1:
            raise ValueError(
                "need num_tasks >= 2, num_procs >= 1, steps >= 1 and chains_per_pair >= 1, got "
                f"{self.num_tasks}, {self.num_procs}, {self.steps}, {self.chains_per_pair}"
            )
        if not 0 < self.temperature_end <= self.temperature_start:
            raise ValueError("need 0 < temperature_end <= temperature_start")

    @property
    def pairs(self) -> np.ndarray:
        """[C, 2] scheduler indices (worse candidate a, reference b) of every chain."""
        count = len(self.names)
        pairs = [(a, b) for a in range(count) for b in range(count) if a != b]
        return np.repeat(np.array(pairs, dtype=np.int32), self.chains_per_pair, axis=0)


def makespans(instance: DenseInstance, draws: jax.Array, names: tuple[str, ...]) -> jax.Array:
    """[S] makespan of one dense instance under each scheduler of `names` (WBA uses `draws`)."""
    facts = dense_facts(instance)
    problem = to_padded(instance, facts)
    needed = sorted({n for n in names if n != "Duplex"} | ({"MinMin", "MaxMin"} if "Duplex" in names else set()))
    positions = {kind: dense_positions(instance, facts, kind) for kind in {PRESETS[n].priority for n in needed}}
    spans = {}
    for name in needed:
        config = PRESETS[name]
        plan = dense_plan(instance, config, draws, facts, positions[config.priority])
        spans[name] = list_schedule_padded(problem, plan, config).finish.max()
    if "Duplex" in names:
        spans["Duplex"] = jnp.where(spans["MaxMin"] < spans["MinMin"], spans["MaxMin"], spans["MinMin"])
    return jnp.stack([spans[n] for n in names])


def perturb(key: jax.Array, instance: DenseInstance) -> DenseInstance:
    """One PISA move, each kind equally likely: toggle the dependency of a random pair i < j, or redraw
    one task weight, one edge data size, one processor speed or one (symmetric) link strength."""
    num_tasks, num_procs = instance.weight.shape[0], instance.speed.shape[0]
    dtype = instance.weight.dtype
    k_kind, k_pair, k_task, k_proc, k_link, k_value = jax.random.split(key, 6)
    kind = jax.random.randint(k_kind, (), 0, 5)
    i, j = jax.random.choice(k_pair, num_tasks, (2,), replace=False)
    i, j = jnp.minimum(i, j), jnp.maximum(i, j)
    task = jax.random.randint(k_task, (), 0, num_tasks)
    proc = jax.random.randint(k_proc, (), 0, num_procs)
    p, q = jax.random.randint(k_link, (2,), 0, num_procs)
    value = 1.0 - jax.random.uniform(k_value, (), dtype)  # (0, 1]
    adj = instance.adj.at[i, j].set(jnp.where(kind == 0, ~instance.adj[i, j], instance.adj[i, j]))
    weight = instance.weight.at[task].set(jnp.where(kind == 1, value, instance.weight[task]))
    data = instance.data.at[i, j].set(jnp.where(kind == 2, value, instance.data[i, j]))
    speed = instance.speed.at[proc].set(jnp.where(kind == 3, 0.1 + 0.9 * value, instance.speed[proc]))
    link = (kind == 4) & (p != q)
    strength = instance.strength.at[p, q].set(jnp.where(link, value, instance.strength[p, q]))
    strength = strength.at[q, p].set(jnp.where(link, value, strength[q, p]))
    return DenseInstance(weight, speed, adj, data, strength)


class Chain(NamedTuple):
    """One annealing chain (stacked: all of them)."""

    instance: DenseInstance
    ratio: jax.Array  # [] makespan(a) / makespan(b) of `instance`
    best: DenseInstance
    best_ratio: jax.Array  # []
    draws: jax.Array  # [T] int32 WBA's fixed random integers, so that each chain's energy is deterministic


def _ratio(spans, pair) -> jax.Array:
    return spans[pair[0]] / jnp.maximum(spans[pair[1]], jnp.finfo(spans.dtype).tiny)


def _init_chain(key, pair, config: SearchConfig) -> Chain:
    k_instance, k_draws = jax.random.split(key)
    instance = random_instance(k_instance, config.num_tasks, config.num_procs, config.edge_probability)
    draws = jax.random.randint(k_draws, (config.num_tasks,), 0, jnp.iinfo(jnp.int32).max)
    ratio = _ratio(makespans(instance, draws, config.names), pair)
    return Chain(instance, ratio, instance, ratio, draws)


def _anneal_step(chain: Chain, key, pair, temperature, config: SearchConfig) -> Chain:
    k_move, k_accept = jax.random.split(key)
    candidate = perturb(k_move, chain.instance)
    ratio = _ratio(makespans(candidate, chain.draws, config.names), pair)
    accept = (ratio >= chain.ratio) | (
        jax.random.uniform(k_accept, (), ratio.dtype) < jnp.exp((ratio - chain.ratio) / temperature)
    )
    keep = functools.partial(jnp.where, accept)
    instance = jax.tree.map(keep, candidate, chain.instance)
    ratio = jnp.where(accept, ratio, chain.ratio)
    better = ratio > chain.best_ratio
    best = jax.tree.map(functools.partial(jnp.where, better), instance, chain.best)
    return Chain(instance, ratio, best, jnp.maximum(ratio, chain.best_ratio), chain.draws)


def search(key: jax.Array, config: SearchConfig, devices: Devices = None) -> Chain:
    """Runs every chain (`config.pairs`) for `config.steps` annealing steps, the chains split across `devices`
    (`jaxsched.common.batch_mesh`: default all devices); returns the final chains, whose `best` and
    `best_ratio` hold the worst instance found for each chain's pair."""
    return _search(key, config, batch_mesh(devices))


@functools.partial(jax.jit, static_argnames=("config", "mesh"))
def _search(key: jax.Array, config: SearchConfig, mesh: Mesh) -> Chain:
    pairs = jnp.asarray(config.pairs)
    count = pairs.shape[0]
    # chains padded to a multiple of the device count with copies of the last one (dropped at the end); every
    # chain's keys are drawn for the real chains only, so the results do not depend on the device count
    rows = jnp.minimum(jnp.arange(padded_batch_size(count, mesh)), count - 1)
    chain_pairs = pairs[rows]
    k_init, k_steps = jax.random.split(key)
    chains = jax.vmap(_init_chain, in_axes=(0, 0, None))(jax.random.split(k_init, count)[rows], chain_pairs, config)
    chains = constrain_batch(chains, mesh)
    decay = (config.temperature_end / config.temperature_start) ** (1.0 / max(config.steps - 1, 1))
    temperatures = config.temperature_start * decay ** jnp.arange(config.steps, dtype=chains.ratio.dtype)

    def step(chains, x):
        step_key, temperature = x
        keys = jax.random.split(step_key, count)[rows]
        chains = jax.vmap(_anneal_step, in_axes=(0, 0, 0, None, None))(chains, keys, chain_pairs, temperature, config)
        return constrain_batch(chains, mesh), None

    chains, _ = jax.lax.scan(step, chains, (jax.random.split(k_steps, config.steps), temperatures))
    return jax.tree.map(lambda leaf: leaf[:count], chains)


def worst_ratios(chains: Chain, config: SearchConfig) -> np.ndarray:
    """[S, S] the largest makespan(a) / makespan(b) found for each pair (a row, b column; 1 on the
    diagonal)."""
    count = len(config.names)
    table = np.ones((count, count))
    pairs = config.pairs
    np.maximum.at(table, (pairs[:, 0], pairs[:, 1]), np.asarray(chains.best_ratio, dtype=np.float64))
    return table
