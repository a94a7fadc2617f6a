"""The graph encoder: padding never reaches the readout z, and z does not depend on capacity."""

import jax
import numpy as np

from jaxgraph import Env
from jaxgraph.jax_env import JaxEnv
from jaxgraph.rl import GraphEncoder, toy_graph

from ..conftest import jit, small_model


def jitted(encoder, key, obs):
    """The encoder's parameters for `obs`'s sizes, and `encode(params, obs) -> (node embeddings, z)` jitted once
    (an eager apply of the GNN takes seconds)."""
    params = jit(encoder.init)(key, obs.graph, obs.node_mask, obs.edge_mask)
    apply = jit(encoder.apply)
    return params, lambda params, obs: apply(params, obs.graph, obs.node_mask, obs.edge_mask)


def test_padded_slots_never_reach_the_readout():
    obs = Env(small_model("squeezenet1_1"), max_locations=4).reset().observation
    encoder = GraphEncoder(hidden=16, latent=8, message_steps=2)
    params, encode = jitted(encoder, jax.random.key(0), obs)
    nodes, z = encode(params, obs)
    rng = np.random.default_rng(0)
    g = obs.graph
    free_nodes, free_edges = ~obs.node_mask, ~obs.edge_mask
    assert free_nodes.sum() > 1 and free_edges.sum() > 1
    garbage = g._replace(
        nodes=np.where(free_nodes[:, None], rng.normal(size=g.nodes.shape) * 100, g.nodes).astype(np.float32),
        edges=np.where(free_edges[:, None], rng.normal(size=g.edges.shape) * 100, g.edges).astype(np.float32),
        # padded edges re-pointed at real nodes: their messages are masked, so this changes nothing either
        senders=np.where(free_edges, rng.integers(0, len(g.nodes), len(free_edges)), g.senders).astype(np.int32),
        receivers=np.where(free_edges, rng.integers(0, len(g.nodes), len(free_edges)), g.receivers).astype(np.int32))
    nodes2, z2 = encode(params, obs._replace(graph=garbage))
    np.testing.assert_allclose(z2, z, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(nodes2, nodes, rtol=1e-5, atol=1e-5)
    assert np.all(np.asarray(nodes)[free_nodes] == 0.0)  # padded node embeddings are exactly zero
    # a real change does move z (the test can fail)
    changed = g._replace(nodes=g.nodes + obs.node_mask[:, None].astype(np.float32))
    assert not np.allclose(encode(params, obs._replace(graph=changed))[1], z, atol=1e-3)


def test_readout_does_not_depend_on_capacity():
    graph = toy_graph(3).graph
    small = Env(graph, node_capacity=len(graph), edge_capacity=40, max_locations=4).reset().observation
    large = Env(graph, node_capacity=3 * len(graph), edge_capacity=120, max_locations=4).reset().observation
    large = large._replace(graph=large.graph._replace(globals=small.graph.globals))  # the fill fraction differs
    encoder = GraphEncoder(hidden=16, latent=8)
    params, encode = jitted(encoder, jax.random.key(1), small)
    nodes_s, z_s = encode(params, small)
    nodes_l, z_l = encode(params, large)
    np.testing.assert_allclose(z_l, z_s, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(nodes_l)[:len(graph)], np.asarray(nodes_s)[:len(graph)],
                               rtol=1e-5, atol=1e-5)


def test_jitted_env_observation_encodes_as_env_observation():
    """JaxEnv's observation has Env's sizes and, on a fresh graph, Env's edge rows; the encoder (vmapped, as the PPO
    trainers call it) does not see the order of the rows, in which the two environments differ after rewrites."""
    graph = small_model("squeezenet1_1")
    env = Env(graph, max_locations=4)
    jenv = JaxEnv(graph, max_locations=4, node_capacity=env.node_capacity, edge_capacity=env.edge_capacity)
    obs = env.reset().observation
    jitted_obs = jit(jenv.reset)(jax.random.key(0), jenv.params())[1].observation
    assert jax.tree.map(np.shape, jitted_obs.graph) == jax.tree.map(np.shape, obs.graph)
    for mine, theirs in [(jitted_obs.graph.senders, obs.graph.senders), (jitted_obs.graph.receivers,
                                                                         obs.graph.receivers),
                         (jitted_obs.edge_mask, obs.edge_mask)]:
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_allclose(jitted_obs.graph.edges, obs.graph.edges, rtol=1e-6, atol=1e-6)
    order = np.random.default_rng(0).permutation(len(obs.edge_mask))
    shuffled = jitted_obs.graph._replace(**{name: np.asarray(getattr(jitted_obs.graph, name))[order]
                                            for name in ("edges", "senders", "receivers")})
    encoder = GraphEncoder(hidden=16, latent=8, message_steps=2)
    params = jit(encoder.init)(jax.random.key(2), obs.graph, obs.node_mask, obs.edge_mask)
    encode = jit(jax.vmap(lambda graph, node_mask, edge_mask: encoder.apply(params, graph, node_mask, edge_mask)))
    both = jax.tree.map(lambda a, b: np.stack([np.asarray(a), np.asarray(b)]), obs[:3],
                        (shuffled, jitted_obs.node_mask, np.asarray(jitted_obs.edge_mask)[order]))
    nodes, z = encode(*both)
    np.testing.assert_allclose(z[1], z[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(nodes[1], nodes[0], rtol=1e-4, atol=1e-5)
