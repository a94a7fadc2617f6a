"""The RL environment: masks are exact, rewards are cost decreases, observations have fixed shapes and
describe the current graph, episodes end as specified."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgraph import RULES, Env, Roofline, cost
from jaxgraph.backends import ONNXRUNTIME, TASO, XLA
from jaxgraph.cost import node_cost
from jaxgraph.env import EDGE_FEATURES, GLOBAL_FEATURES, NODE_FEATURES, node_features

from .conftest import small_model


def random_action(obs, rng):
    xfers = np.flatnonzero(obs.xfer_mask[:-1])
    xfer = int(rng.choice(xfers))
    return xfer, int(rng.choice(np.flatnonzero(obs.location_mask[xfer])))


def check_observation_describes_graph(env, obs):
    graph, slots = env.graph, env.node_slots
    capacity = env.node_capacity
    chex.assert_shape(obs.graph.nodes, (capacity + 1, NODE_FEATURES))
    chex.assert_shape(obs.graph.edges, (env.edge_capacity, EDGE_FEATURES))
    chex.assert_shape(obs.graph.globals, (1, GLOBAL_FEATURES))
    chex.assert_shape(obs.xfer_mask, (len(RULES) + 1,))
    chex.assert_shape(obs.location_mask, (len(RULES), env.max_locations))
    assert obs.node_mask.sum() == len(graph) and not obs.node_mask[capacity]
    assert sorted(slots.values()) == sorted(np.flatnonzero(obs.node_mask))
    for node_id, slot in slots.items():
        expected = node_features(graph.nodes[node_id], node_cost(env.model, graph, node_id))
        np.testing.assert_allclose(obs.graph.nodes[slot], expected)
    edges = sorted((slots[r.node], slots[i]) for i, n in graph.nodes.items() for r in n.inputs)
    mask = obs.edge_mask
    assert sorted(zip(obs.graph.senders[mask].tolist(), obs.graph.receivers[mask].tolist())) == edges
    assert (obs.graph.senders[~mask] == capacity).all() and (obs.graph.receivers[~mask] == capacity).all()
    assert obs.graph.globals[0, 0] == pytest.approx(cost(graph, env.model), rel=1e-5)
    assert obs.xfer_mask[-1]


def test_masks_are_exact_and_rewards_are_cost_decreases():
    env = Env(small_model("squeezenet1_1"), max_locations=8)
    rng = np.random.default_rng(0)
    obs = env.reset().observation
    total = 0.0
    for _ in range(6):
        check_observation_describes_graph(env, obs)
        for xfer in range(len(RULES)):
            for location_id in range(env.max_locations):
                if obs.location_mask[xfer, location_id]:
                    assert obs.xfer_mask[xfer]
                    location = env.location(xfer, location_id)  # masked in: it matches and applies
                    RULES[xfer].apply(env.graph, location)
                    slots = [env.node_slots[i] for i in location]
                    assert obs.location_nodes[xfer, location_id, :len(slots)].tolist() == slots
                else:
                    before = env.graph
                    with pytest.raises(ValueError, match="masked out"):
                        env.step((xfer, location_id))
                    assert env.graph is before
        previous = env.cost
        timestep = env.step(random_action(obs, rng))
        obs, reward = timestep.observation, timestep.reward
        assert reward == pytest.approx(previous - cost(env.graph))
        assert timestep.extras["cost"] == pytest.approx(env.cost)
        total += reward
        assert not timestep.truncated
    assert total == pytest.approx(env.initial_cost - cost(env.graph))


@pytest.mark.parametrize("name, backend", [("inception_v3", TASO), ("taso_attention_stack", TASO), ("bert", TASO),
                                           ("resnet18", ONNXRUNTIME), ("mobilenet_v2", XLA)])
def test_random_episodes_keep_the_observation_consistent(name, backend):
    """With a fusing backend a rewrite also changes the cost of untouched neighbours (a ReLU that a split
    cut off from its conv): their cost features are refreshed too."""
    env = Env(small_model(name), cost_model=Roofline(backend=backend))
    rng = np.random.default_rng(1)
    first = env.reset()
    assert first.first() and first.reward == 0.0 and first.extras["cost"] == env.initial_cost
    timestep, steps = first, 0
    while not timestep.last():
        timestep, steps = env.step(random_action(timestep.observation, rng)), steps + 1
        assert timestep.mid() or timestep.last()
        if steps % (10 if backend is TASO else 4) == 0:
            check_observation_describes_graph(env, timestep.observation)
    check_observation_describes_graph(env, timestep.observation)
    # no rewrite applies any more: terminated (discount 0)
    assert timestep.terminated and timestep.discount == 0.0 and not timestep.observation.xfer_mask[:-1].any()
    with pytest.raises(ValueError, match="episode is over"):
        env.step((len(RULES), 0))
    again = env.reset()
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)


def test_noop_ends_the_episode_and_max_steps_truncates():
    env = Env(small_model("resnet18"), max_steps=2)
    env.reset()
    end = env.step((env.num_xfers, 0))
    assert (end.reward, end.terminated, end.truncated, end.extras["rule"]) == (0.0, True, False, "NO-OP")
    assert end.last() and end.discount == 0.0
    obs = env.reset().observation
    rng = np.random.default_rng(0)
    middle = env.step(random_action(obs, rng))
    assert middle.mid() and middle.discount == 1.0 and not middle.terminated and not middle.truncated
    end = env.step(random_action(middle.observation, rng))
    assert end.truncated and not end.terminated and end.last() and end.discount == 1.0
    env.reset()
    with pytest.raises(ValueError, match="not a rewrite"):
        env.step((env.num_xfers + 1, 0))


def test_capacity_masks_out_growing_rewrites():
    graph = small_model("squeezenet1_1")
    with pytest.raises(ValueError, match="does not fit"):
        Env(graph, node_capacity=len(graph) - 1)
    env = Env(graph, node_capacity=len(graph), edge_capacity=2 * len(graph))
    obs = env.reset().observation
    for xfer, rule in enumerate(RULES):
        if rule.max_node_growth > 0:
            assert not obs.xfer_mask[xfer]
    assert obs.xfer_mask[0]  # conv + relu fusion shrinks the graph


def test_one_compiled_function_serves_every_step():
    """Observation shapes never change, so a jitted consumer (a GNN-like segment sum) traces once."""
    env = Env(small_model("taso_attention_stack"))

    @jax.jit
    @chex.assert_max_traces(n=1)
    def message_pass(nodes, senders, receivers, edge_mask, node_mask):
        messages = jnp.where(edge_mask[:, None], nodes[senders], 0.0)
        summed = jax.ops.segment_sum(messages, receivers, num_segments=nodes.shape[0])
        return jnp.sum(jnp.where(node_mask[:, None], summed, 0.0))

    rng = np.random.default_rng(0)
    timestep = env.reset()
    while not timestep.last():
        obs = timestep.observation
        g = obs.graph
        message_pass(g.nodes, g.senders, g.receivers, obs.edge_mask, obs.node_mask)
        timestep = env.step(random_action(obs, rng))


@pytest.mark.parametrize("action", [(1.7, 0), (0, 0.5), (True, 0), ("0", 0), (np.float32(0.0), 0), 3, (0, 0, 0)])
def test_non_integer_or_malformed_actions_raise(action):
    """Today's bug: (1.7, 0) ran xfer 1. An action must be a pair of integers (NumPy/JAX ints are fine)."""
    env = Env(small_model("squeezenet1_1"))
    env.reset()
    with pytest.raises(ValueError, match="integer|pair"):
        env.step(action)
    obs = env.step((jnp.int32(0), np.int64(0))).observation  # integer scalars of any library are accepted
    assert obs.node_mask.sum() == len(env.graph)


@pytest.mark.parametrize("kwargs, name", [
    (dict(node_capacity=0), "node_capacity"), (dict(edge_capacity=0), "edge_capacity"),
    (dict(node_capacity=-5), "node_capacity"), (dict(max_locations=2.5), "max_locations"),
    (dict(max_steps=0), "max_steps"), (dict(max_location_size=0), "max_location_size"), (dict(rules=()), "rule"),
])
def test_bad_constructor_arguments_raise(kwargs, name):
    """Today's bug: node_capacity=0 quietly used the default (twice the graph)."""
    with pytest.raises(ValueError, match=name):
        Env(small_model("squeezenet1_1"), **kwargs)
