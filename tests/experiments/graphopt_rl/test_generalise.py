"""The generalist agent: trained on generated graphs only, it runs end to end on a graph it never saw and returns
a graph that computes the input's function at no higher cost (bounds that hold whatever it learned)."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest

from experiments.graphopt_rl import (
    GeneralistConfig,
    evaluate_unseen,
    evaluation_steps,
    train_generalist,
    training_graphs,
)
from jaxgraph import cost, random_graph, trap_graph
from jaxgraph.env import Env
from jaxgraph.execute import execute, random_inputs
from jaxgraph.rl import AgentResult, GraphPolicy, PPOConfig, tiny_agent
from tests.jaxgraph.conftest import assert_same_outputs, jit

TINY = GeneralistConfig(agent=dataclasses.replace(tiny_agent(), ppo=PPOConfig(update_epochs=1, minibatches=1),
                                                  epochs=1, rollout_steps=2, max_steps=6),
                        traps=2, trap_ops=(10, 14), max_traps=1, random_graphs=1, random_blocks=2, samples=0,
                        steps_per_op=0.5)
UNSEEN = random_graph(1000, blocks=3)


def assert_valid_and_no_dearer(result, graph, samples: int) -> None:
    """The returned graph computes `graph`'s function, costs at most as much, and is the cheapest state the
    episodes' environments reported; the most-likely episode comes first."""
    initial = cost(graph)
    assert result.initial_cost == pytest.approx(initial, rel=1e-12)
    assert cost(result.graph) <= initial * (1 + 1e-9)  # recomputed from the returned graph
    assert result.cost == pytest.approx(cost(result.graph), rel=1e-12)
    assert result.cost == pytest.approx(min(min(e.costs) for e in result.episodes), rel=1e-6)
    assert result.likely_cost == pytest.approx(min(result.episodes[0].costs), rel=1e-12)
    assert len(result.episodes) == 1 + samples
    assert all(e.env_steps <= evaluation_steps(TINY, graph) for e in result.episodes)
    inputs = random_inputs(graph)
    result.graph.validate()
    assert_same_outputs(execute(result.graph, inputs, jit=False), execute(graph, inputs, jit=False))


def test_an_untrained_agent_returns_a_valid_graph_no_dearer_than_the_input():
    """The bound holds whatever the policy: here random initial parameters (no training to compile), whose sampled
    episodes reach cheaper states, so the returned graph is a replayed one."""
    config = TINY.agent
    env = Env(UNSEEN, max_locations=config.max_locations)
    policy = GraphPolicy(env.num_xfers, config.hidden, config.latent, config.message_steps)
    obs = jax.tree.map(jnp.asarray, env.reset().observation)
    params = jit(lambda key, obs: policy.init(key, obs, jnp.argmax))(jax.random.key(0), obs)
    config = dataclasses.replace(TINY, samples=3)
    result = evaluate_unseen(AgentResult(policy, params, [], 0), UNSEEN, config, jax.random.key(1))
    assert result.cost < result.initial_cost * (1 - 1e-6)
    assert_valid_and_no_dearer(result, UNSEEN, config.samples)


@pytest.mark.slow  # about 25 CPU s: XLA compiles the agent's five programs
def test_trained_on_generated_graphs_it_returns_a_valid_graph_no_dearer_than_the_unseen_input():
    assert UNSEEN.structure_hash not in {g.structure_hash for g in training_graphs(TINY)}
    agent = train_generalist(TINY, jax.random.key(0))
    assert agent.env_steps == TINY.agent.epochs * 3 * TINY.agent.rollout_steps  # one environment per graph
    samples = 1
    result = evaluate_unseen(agent, UNSEEN, dataclasses.replace(TINY, samples=samples), jax.random.key(1))
    assert_valid_and_no_dearer(result, UNSEEN, samples)


def test_evaluation_episodes_scale_with_the_graph():
    small, large = trap_graph(0, 10, 12).graph, random_graph(1000, blocks=8)
    assert evaluation_steps(TINY, small) == max(6, -(-small.num_ops // 2))
    assert evaluation_steps(TINY, large) >= large.num_ops / 2 > 6


def test_the_distribution_is_the_generators_graphs():
    graphs = training_graphs(TINY)
    assert [g.structure_hash for g in graphs] == [
        trap_graph(0, 10, 14, 1).graph.structure_hash, trap_graph(1, 10, 14, 1).graph.structure_hash,
        random_graph(0, blocks=2).structure_hash]


@pytest.mark.parametrize("change", [dict(traps=0, random_graphs=0), dict(samples=-1), dict(steps_per_op=0.0)])
def test_bad_configurations_are_refused(change):
    with pytest.raises(ValueError):
        GeneralistConfig(**change)
