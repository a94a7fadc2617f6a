"""Best-seen tracking: the pool returns the cheapest graph its environments visited, checked against every
visited graph's cost recomputed from scratch (not the environments' incremental costs). The trainer's
`AgentResult.best` is checked in test_train against the toy graph's optimum built by construction."""

import numpy as np
import pytest

from jaxgraph import cost, trap_graph
from jaxgraph.rl import EnvPool, toy_graph

GRAPHS = (trap_graph(0, min_ops=6, max_ops=8, max_traps=1).graph, toy_graph(2).graph)


def record_visits(pool):
    """Wrap each environment's step to keep the graph it reached (before the pool resets a finished episode)."""
    visited = {g: [graph] for g, graph in enumerate(pool.graphs)}
    slots = [i % len(pool.graphs) for i in range(len(pool.envs))]
    for env, slot in zip(pool.envs, slots):
        def step(action, env=env, g=slot, inner=env.step):
            result = inner(action)
            visited[g].append(env.graph)
            return result
        env.step = step
    return visited


def random_actions(obs, rng):
    """A valid rewrite per environment (the NO-OP only where none applies), uniformly over the masks."""
    actions = []
    for xfer_mask, location_mask in zip(obs.xfer_mask, obs.location_mask):
        rewrites = np.flatnonzero(xfer_mask[:-1])
        if not len(rewrites):
            actions.append((len(xfer_mask) - 1, 0))
            continue
        xfer = int(rng.choice(rewrites))
        actions.append((xfer, int(rng.choice(np.flatnonzero(location_mask[xfer])))))
    return np.asarray(actions)


def test_pool_keeps_the_cheapest_visited_graph_of_each_graph():
    pool = EnvPool(GRAPHS, 4, max_locations=8, max_steps=6)
    visited = record_visits(pool)
    rng = np.random.default_rng(0)
    obs = pool.reset()
    for _ in range(40):
        obs = pool.step(random_actions(obs, rng))[0]
    for g, graphs in enumerate(visited.values()):
        costs = [cost(graph) for graph in graphs]
        assert len(costs) > 40 and np.any(np.diff(costs) > 0)  # the walk went up as well as down
        assert pool.best[g].cost == pytest.approx(min(costs), rel=1e-9)
        assert cost(pool.best[g].graph) == pytest.approx(min(costs), rel=1e-9)
    assert min(cost(g) for g in visited[0]) < cost(GRAPHS[0]) * (1 - 1e-6)
    pool.forget_best()
    assert [b.graph for b in pool.best] == list(GRAPHS)
