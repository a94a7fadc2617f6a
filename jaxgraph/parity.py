"""JaxEnv against Env, its reference twin, step for step: the same random action sequence on both, every state
compared (canonical graph, xfer mask, location sets, node features, edge rows, cost, reward, episode end).

`replay_parity` drives one instance and returns a `ParityReport` (steps, mismatches with what differed, the rule
families applied) instead of stopping at the first difference, so a benchmark can count mismatches over many graphs
and a test can assert there are none. Nodes are compared by `node_signatures` (what they compute), since the two
environments give rewrite-made nodes different ids and slots.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph.backends import Backend
from jaxgraph.cost import Roofline, cost
from jaxgraph.env import Env
from jaxgraph.graph import Graph, canonical_form, node_signatures
from jaxgraph.jax_env import JaxEnv
from jaxgraph.jax_rules import JAX_RULES
from jaxgraph.rules import Rule


class ParityReport(NamedTuple):
    """What one `replay_parity` run did: steps compared, the first difference of every sequence that had one, the
    xfers Env offered on the way and the xfers the sequences applied."""

    steps: int
    mismatches: tuple[str, ...]
    offered: frozenset[int]
    applied: frozenset[int]


def fitting_env(graphs: list[Graph], backend: Backend, node_capacity: int | None = None,
                edge_capacity: int | None = None, max_locations: int = 32, rules: Sequence[Rule] = JAX_RULES,
                matcher: str | None = None) -> JaxEnv:
    """One `JaxEnv` with `rules` that every graph of `graphs` fits, so one compilation replays them all: node and edge
    capacities twice the largest graph's (or the given ones: the largest graph's plus a few runs it at capacity),
    every root list as long as the node capacity, room for the most readers of one tensor and the deepest fusions of
    `backend`'s cost (a `Roofline`); `matcher` as `JaxEnv` takes it."""
    node_capacity = node_capacity or 2 * max(len(g) for g in graphs)
    roots = {rule.root_op for rule in rules}
    return JaxEnv(graphs, max_locations=max_locations, node_capacity=node_capacity, edge_capacity=edge_capacity,
                  root_capacity=dict.fromkeys(roots, node_capacity), cost_model=Roofline(backend=backend), rules=rules,
                  matcher=matcher)


def _close(a: float, b: float, rel: float, absolute: float = 0.0) -> bool:
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), absolute)


def edge_rows(obs, signature: dict[int, int]) -> Counter:
    """The live edge rows of an observation as a multiset of (sender, receiver, features), nodes by signature
    (`signature`: slot -> signature): equal for observations of the same graph, whatever their row order."""
    mask = np.asarray(obs.edge_mask)
    senders, receivers, edges = (np.asarray(a)[mask] for a in (obs.graph.senders, obs.graph.receivers,
                                                               obs.graph.edges))
    return Counter((signature[int(s)], signature[int(r)], tuple(np.round(e, 4).tolist()))
                   for s, r, e in zip(senders, receivers, edges))


def compare_states(jenv: JaxEnv, state, obs, instance: Graph, env: Env, reference) -> list[str]:
    """What differs between JaxEnv's state and observation and Env's (whose last observation is `reference`):
    the graph (canonical form), the xfer mask, the locations of every xfer in order (as node signatures and as
    slots), the node in every slot and its features, the edge rows (as a multiset: the row order is the one
    documented difference) and the cost. Empty when they agree."""
    graph = jenv.decode(state.graph, instance)
    problems = []
    if canonical_form(graph) != canonical_form(env.graph):
        problems.append("canonical graphs differ")
    ours, theirs = node_signatures(graph), node_signatures(env.graph)
    if not np.array_equal(np.asarray(obs.xfer_mask), reference.xfer_mask):
        problems.append(f"xfer masks differ at {np.flatnonzero(np.asarray(obs.xfer_mask) != reference.xfer_mask)}")
        return problems
    for xfer in np.flatnonzero(reference.xfer_mask[:-1]):
        mine = [tuple(ours[int(s)] for s in np.asarray(obs.location_nodes[xfer, k]) if s < jenv.node_capacity)
                for k in np.flatnonzero(np.asarray(obs.location_mask[xfer]))]
        env_locations = [tuple(theirs[i] for i in env.location(xfer, k)[:jenv.max_location_size])
                         for k in np.flatnonzero(reference.location_mask[xfer])]
        if mine != env_locations:
            same_set = Counter(mine) == Counter(env_locations)
            problems.append(f"locations of {jenv.rules[xfer].name} differ{' in order' if same_set else ''}")
    if problems:
        return problems
    if not np.array_equal(np.asarray(obs.location_nodes), reference.location_nodes):
        problems.append("location slots differ")
    slots = env.node_slots
    if not np.array_equal(np.asarray(obs.node_mask), reference.node_mask) or any(
            ours[slot] != theirs[node_id] for node_id, slot in slots.items()):
        problems.append("node slots differ")
    elif not np.allclose(np.asarray(obs.graph.nodes), reference.graph.nodes, rtol=1e-5, atol=1e-6):
        problems.append("node features differ")
    if not _close(float(state.cost), env.cost, 1e-5):
        problems.append(f"cost {float(state.cost)} != {env.cost}")
    if not _close(float(obs.graph.globals[0, 0]), cost(graph, jenv.model), 1e-5):
        problems.append("JaxEnv's cost is not the cost of its graph")
    env_signature = {slot: theirs[node_id] for node_id, slot in env.node_slots.items()}
    if edge_rows(obs, ours) != edge_rows(reference, env_signature):
        problems.append("edge rows differ")
    return problems


def replay_parity(jenv: JaxEnv, reset: Callable, step: Callable, instance: Graph, sequences: int, seed: int,
                  stop: float = 0.1) -> ParityReport:
    """`sequences` random action sequences on `instance`: a uniformly random valid xfer and location from JaxEnv's
    masks (the NO-OP with probability `stop`), the same action (same xfer and location id) sent to an Env with the
    same rules, cost model and capacities, every state and reward compared. `reset` and `step` are `jenv`'s, jitted
    by the caller (one compilation serves every instance of the same sizes). A sequence stops at its first mismatch.
    """
    env = Env(instance, max_locations=jenv.max_locations, rules=jenv.rules, node_capacity=jenv.node_capacity,
              edge_capacity=jenv.edge_capacity, cost_model=jenv.model, max_location_size=jenv.max_location_size)
    params = jenv.params(instance)
    rng = np.random.default_rng(seed)
    key = jax.random.key(seed)
    steps, mismatches, offered, applied = 0, [], set(), set()
    for sequence in range(sequences):
        state, timestep = reset(key, params)
        obs, reference = timestep.observation, env.reset().observation
        terminated = False
        problems = compare_states(jenv, state, obs, instance, env, reference)
        while not terminated and not problems:
            offered.update(np.flatnonzero(reference.xfer_mask[:-1]).tolist())
            rewrites = np.flatnonzero(np.asarray(obs.xfer_mask)[:-1])
            xfer = jenv.num_xfers if not len(rewrites) or rng.random() < stop else int(rng.choice(rewrites))
            location = 0 if xfer == jenv.num_xfers else int(rng.choice(np.flatnonzero(np.asarray(
                obs.location_mask[xfer]))))
            state, timestep = step(key, state, jnp.array([xfer, location]), params)
            expected = env.step((xfer, location))
            obs, reference = timestep.observation, expected.observation
            steps += 1
            if xfer < jenv.num_xfers:
                applied.add(xfer)
            if not _close(float(timestep.reward), expected.reward, 1e-4, 1e-6 * env.initial_cost):
                problems.append(f"reward {float(timestep.reward)} != {expected.reward}")
            if ((int(timestep.step_type), float(timestep.discount), bool(timestep.extras["invalid"]))
                    != (expected.step_type, expected.discount, False)):
                problems.append("episode ends differ")
            problems += compare_states(jenv, state, obs, instance, env, reference)
            terminated = bool(timestep.last())
        if problems:
            mismatches.append(f"sequence {sequence}, step {steps}: " + "; ".join(problems))
    return ParityReport(steps, tuple(mismatches), frozenset(offered), frozenset(applied))
