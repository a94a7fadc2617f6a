"""PPO on the jitted environment: one tiny run end to end on drawn trap graphs (the README's path), the run in
pieces, and its jitted evaluation against the host evaluation (`jaxgraph.rl.train.evaluate_agent` in `Env`, the
reference twin) and against the host cost of the graphs its recorded actions lead to."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgraph import RULES, Env, JaxEnv, canonical_form, cost, execute, random_inputs
from jaxgraph.instances import trap_instances
from jaxgraph.rl import AgentResult, GraphPolicy, best_of, evaluate_agent, tiny_agent, toy_graph
from jaxgraph.rl.jax_ppo import make_evaluate, make_jax_train, make_trainer

from ..conftest import jit

TOY = toy_graph(2)
CONFIG = tiny_agent()
CONFIG = type(CONFIG)(**{**CONFIG.__dict__, "num_envs": 2, "rollout_steps": 2, "max_steps": 6})
TOY_RULES = RULES[:2]  # FuseConvRelu and FuseConvBatchNorm (stride 1, SAME): the toy's rewrites; few rules compile fast


TRAP_RULES = tuple(r for r in RULES if r.family in ("FuseConvRelu", "MergeConvs", "SplitConcat"))


def test_tiny_jitted_ppo_trains_end_to_end_on_drawn_trap_graphs():
    """Not `numerics`: every assertion holds whatever the float32 rounding (bounds, not learned values).

    The README's path on four trap graphs in one environment (the rule families their optima need: fewer to
    compile): reset draws different instances, each held as its graph, one jitted run of three epochs
    trains with finite losses, no epoch's mean return exceeds what the best instance's known optimum saves, and
    the trained agent's graph, evaluated in the host `Env`, computes the input's function at no higher cost."""
    pool = trap_instances(4, min_ops=8, max_ops=14, max_traps=1)
    config = dataclasses.replace(tiny_agent(), num_envs=4, rollout_steps=8, epochs=3, max_steps=8)
    env = JaxEnv(pool.graphs, max_locations=config.max_locations, rules=TRAP_RULES)
    params = env.params()
    drawn = [int(env.draw(key, params)) for key in jax.random.split(jax.random.key(0), 16)]
    assert len(set(drawn)) > 1
    for index in set(drawn):
        held = env.decode(jax.tree.map(lambda leaf, index=index: leaf[index], params.instances), index)
        assert canonical_form(held) == canonical_form(pool.graphs[index])
    result = jit(make_jax_train(config, env))(jax.random.key(1))
    assert all(np.isfinite(np.asarray(v)).all() for v in result.metrics.values())
    episodes, returns = np.asarray(result.episodes), np.asarray(result.mean_return)
    assert episodes.sum() > 0 and np.isfinite(returns[episodes > 0]).all() and np.isnan(returns[episodes == 0]).all()
    best = max(1.0 - optimum / cost(g) for g, optimum in zip(pool.graphs, pool.optima))
    assert (returns[episodes > 0] <= best + 1e-5).all()
    policy = GraphPolicy(env.num_xfers, config.hidden, config.latent, config.message_steps)
    graph = pool.graphs[0]
    episode = best_of(evaluate_agent(AgentResult(policy, result.params, [], 0), graph, config, rules=TRAP_RULES))
    host = Env(graph, max_locations=config.max_locations, rules=TRAP_RULES)
    host.reset()
    for action in episode.best_actions:
        host.step(action)
    assert cost(host.graph) == pytest.approx(episode.best_cost, rel=1e-6) and episode.best_cost <= cost(graph)
    inputs = random_inputs(graph)
    expected, ours = execute(graph, inputs, jit=False), execute(host.graph, inputs, jit=False)
    for name in expected:
        np.testing.assert_allclose(np.asarray(ours[name]), np.asarray(expected[name]), rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def env():
    return JaxEnv(TOY.graph, max_locations=CONFIG.max_locations, rules=TOY_RULES)


@pytest.mark.slow
def test_training_in_chunks_equals_one_run(env):
    """About 100 s under load on 2 cores (two compilations of a PPO epoch on JaxEnv)."""
    trainer = make_trainer(CONFIG, env)
    run = jax.jit(chex.assert_max_traces(trainer.run, n=2))  # one trace per chunk length
    keys = jax.random.split(jax.random.key(1), 2)
    start = jax.jit(trainer.init)(jax.random.key(0))
    whole, curves = run(start, keys)
    chunked, first = run(start, keys[:1])
    chunked, second = run(chunked, keys[1:])
    chex.assert_trees_all_close(chunked.params, whole.params, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose([first.mean_return[0], second.mean_return[0]], curves.mean_return, rtol=1e-5)


@pytest.mark.slow
def test_jitted_evaluation_equals_host_evaluation(env):
    """About 90 s under load on 2 cores (compiling the jitted episodes and step).
    Random parameters: the most-likely-action episode takes the same rewrites at the same costs in both
    environments (locations are numbered differently, so they are compared by cost); sampled episodes stay
    within the toy's bounds; every recorded cost is the host cost of the graph its action prefix reaches."""
    policy = GraphPolicy(env.num_xfers, CONFIG.hidden, CONFIG.latent, CONFIG.message_steps)
    obs = env.reset(jax.random.key(0), env.params())[1].observation
    params = policy.init(jax.random.key(3), obs, lambda logits: logits.argmax())
    samples = 3
    result = jax.jit(make_evaluate(CONFIG, env, samples))(params, jax.random.key(4))
    episodes = result.episodes()
    assert len(episodes) == samples + 1
    host = evaluate_agent(AgentResult(policy, params, [], 0), TOY.graph, CONFIG, rules=TOY_RULES)[0]
    assert [x for x, _ in episodes[0].actions] == [x for x, _ in host.actions]
    np.testing.assert_allclose(episodes[0].costs, host.costs, rtol=1e-5)
    optimum, initial = cost(TOY.optimal_graph), cost(TOY.graph)
    step = jax.jit(env.step)
    capped = env.params()._replace(max_steps=jnp.int32(CONFIG.max_steps))  # the evaluation's truncation
    for episode in episodes:
        assert episode.costs[0] == pytest.approx(initial, rel=1e-5)
        assert min(episode.costs) >= optimum * (1 - 1e-5)
        state, _ = env.reset(jax.random.key(0), capped)
        ends = []
        for action, recorded in zip(episode.actions, episode.costs[1:]):
            state, timestep = step(jax.random.key(0), state, np.asarray(action, np.int32), capped)
            ends.append(bool(timestep.last()))
            assert cost(env.decode(state.graph)) == pytest.approx(recorded, rel=1e-5)
        # the replayed environment ends the episode at its last recorded action and at no earlier one
        assert ends == [False] * (episode.env_steps - 1) + [True]
        assert episode.env_steps <= CONFIG.max_steps
    assert float(result.best_cost) == pytest.approx(best_of(episodes).best_cost, rel=1e-6)
    with pytest.raises(ValueError, match="samples"):
        make_evaluate(CONFIG, env, -1)
