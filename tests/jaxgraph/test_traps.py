"""Trap graphs: the constructed optimum is the exhaustive optimum, computes the same function, and greedy
stops strictly above it."""

import jax
import pytest

from jaxgraph import cost, execute_reference, exhaustive_search, greedy, random_inputs, trap_graph
from jaxgraph.rl import AgentConfig, PPOConfig, best_of, evaluate_agent, make_train

from .conftest import assert_same_outputs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_constructed_optimum_is_the_exhaustive_one_and_greedy_misses_it(seed):
    trap = trap_graph(seed, min_ops=10, max_ops=22, max_traps=2)
    assert 10 <= trap.num_ops <= 22 and 1 <= trap.traps <= 2
    exhaustive = exhaustive_search(trap.graph)
    assert exhaustive.cost == pytest.approx(trap.optimum_cost, rel=1e-9)
    assert greedy(trap.graph).cost > trap.optimum_cost * (1 + 1e-6)
    x = random_inputs(trap.graph)
    assert_same_outputs(execute_reference(trap.optimum, x), execute_reference(trap.graph, x))


def test_seeded_and_sized():
    sizes = {trap_graph(seed).num_ops for seed in range(8)}
    assert len(sizes) > 1 and all(10 <= n <= 60 for n in sizes)
    assert trap_graph(5).graph.structure_hash == trap_graph(5).graph.structure_hash
    assert trap_graph(5).graph.structure_hash != trap_graph(6).graph.structure_hash


@pytest.mark.parametrize("kwargs", [dict(min_ops=3), dict(min_ops=30, max_ops=20), dict(seed=-1)])
def test_impossible_sizes_are_refused(kwargs):
    with pytest.raises(ValueError):
        trap_graph(**{"seed": 0, **kwargs})


@pytest.mark.slow
def test_host_ppo_reaches_the_exhaustive_optimum_greedy_misses():
    """A small one-trap graph: the agent's cheapest evaluated graph is the exhaustive optimum (computed here,
    independently of the agent), which greedy does not reach."""
    trap = trap_graph(0, min_ops=6, max_ops=8, max_traps=1)
    optimum = exhaustive_search(trap.graph).cost
    assert greedy(trap.graph).cost > optimum * (1 + 1e-6)
    config = AgentConfig(ppo=PPOConfig(learning_rate=1e-3, entropy_coef=0.05, minibatches=2), hidden=32, latent=16,
                         message_steps=2, num_envs=8, rollout_steps=8, epochs=30, max_locations=4, max_steps=8)
    agent = make_train(config, [trap.graph])(jax.random.key(0))
    episodes = evaluate_agent(agent, trap.graph, config, key=jax.random.key(1), samples=16)
    assert best_of(episodes).best_cost <= optimum * (1 + 1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 3])
def test_best_graph_seen_in_training_is_the_exhaustive_optimum(seed):
    """Trap graphs of the benchmark's sizes: the cheapest graph the training rollouts of 20 epochs visited
    (its cost recomputed from the graph) is the exhaustive optimum, which greedy misses."""
    trap = trap_graph(seed, max_traps=2)
    optimum = exhaustive_search(trap.graph).cost
    assert greedy(trap.graph).cost > optimum * (1 + 1e-6)
    config = AgentConfig(ppo=PPOConfig(learning_rate=1e-3, minibatches=2), hidden=32, latent=16, message_steps=2,
                         num_envs=8, rollout_steps=16, epochs=20, max_locations=8, max_steps=24)
    agent = make_train(config, [trap.graph])(jax.random.key(seed))
    assert cost(agent.best[0].graph) <= optimum * (1 + 1e-6)
