"""Model-free PPO on real environments: a tiny run finds the toy graph's known optimum, training
resumes exactly from its checkpoints, the update does not retrace."""

import dataclasses
import shutil

import chex
import jax
import numpy as np
import pytest

from jaxgraph import cost, taso_search
from jaxgraph.rl import (
    EnvPool,
    TrainState,
    collect,
    evaluate_agent,
    graph_agent,
    make_optimizer,
    make_train,
    make_update,
    tiny_agent,
    toy_graph,
)

from ..conftest import jit

TOY = toy_graph(3)


@pytest.fixture(scope="module")
def trained():
    """The tiny agent trained on the toy (no checkpoints: saving 20 of them took 12 s on 2 cores)."""
    config = tiny_agent()
    return config, make_train(config, [TOY.graph])(jax.random.key(0))


@pytest.mark.numerics
def test_tiny_ppo_finds_the_known_optimum(trained):
    config, result = trained
    optimum = cost(TOY.optimal_graph)
    assert taso_search(TOY.graph, progress=False).cost == pytest.approx(optimum, rel=1e-9)  # second reference
    greedy, *sampled = evaluate_agent(result, TOY.graph, config, key=jax.random.key(1), samples=3)
    assert greedy.final_cost == pytest.approx(optimum, rel=1e-6)
    assert greedy.best_cost == pytest.approx(optimum, rel=1e-6)
    assert len([a for a in greedy.actions if a[0] != 25]) == TOY.optimal_steps
    assert len(sampled) == 3 and all(e.best_cost >= optimum * (1 - 1e-6) for e in sampled)
    (best,) = result.best  # the cheapest graph training visited: the optimum, by its recomputed cost
    assert cost(best.graph) == pytest.approx(optimum, rel=1e-6) and best.cost == pytest.approx(optimum, rel=1e-6)
    first, last = result.history[0], result.history[-1]
    assert last["mean_return"] > first["mean_return"]
    assert result.env_steps == config.epochs * config.num_envs * config.rollout_steps


def test_resume_after_a_kill_reproduces_the_uninterrupted_run(trained, tmp_path):
    """A run killed after epoch 1 of 2 left the checkpoint of epoch 1 (an uninterrupted run's directory minus its
    last step); rerunning resumes from 1 and ends exactly where the uninterrupted run did. The fixture's
    configuration but for the epochs (which a run's identity leaves out), so the fixture's compiled programs serve."""
    config = dataclasses.replace(trained[0], epochs=2)
    workdir = tmp_path / "full"
    uninterrupted = make_train(config, [TOY.graph], workdir=workdir)(jax.random.key(0))
    killed = tmp_path / "ckpt"
    shutil.copytree(workdir, killed)
    shutil.rmtree(killed / str(config.epochs))
    assert sorted(int(p.name) for p in killed.iterdir() if p.name.isdigit()) == [config.epochs - 1]
    resumed = make_train(config, [TOY.graph], workdir=killed)(jax.random.key(0))
    assert resumed.history == uninterrupted.history
    chex.assert_trees_all_equal(resumed.params, uninterrupted.params)
    with pytest.raises(ValueError, match="different run"):
        make_train(config, [toy_graph(2).graph], workdir=killed)(jax.random.key(0))


def test_update_compiles_once(trained):
    config, result = trained
    pool = EnvPool([TOY.graph, toy_graph(2).graph], 4, config.max_locations, config.max_steps)
    agent = graph_agent(result.policy)
    update = jit(chex.assert_max_traces(make_update(agent.evaluate, config.ppo), n=1))
    state = TrainState(result.params, make_optimizer(config.ppo).init(result.params))
    for seed in range(3):
        trajectory, stats = collect(pool, agent, state.params, jax.random.key(seed), 4)
        chex.assert_shape(trajectory.action, (4, 4, 2))
        state, metrics = update(state, trajectory, jax.random.key(seed))
        assert np.isfinite(metrics["policy_loss"])


def test_on_epoch_sees_every_epoch_before_its_checkpoint_and_can_stop_training(tmp_path):
    """The hook gets the agent after each epoch (its parameters evaluate like any AgentResult's), before that
    epoch's checkpoint is written (what it records survives any kill that the checkpoint survives), and
    returning True ends training there, its checkpoint written."""
    config = tiny_agent()
    seen = []

    def saved_epochs():
        return sorted(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit())

    def on_epoch(agent):
        seen.append((len(agent.history), agent.env_steps))
        assert max(saved_epochs(), default=0) == len(agent.history) - 1
        episode = evaluate_agent(agent, TOY.graph, config)[0]
        assert cost(TOY.optimal_graph) * (1 - 1e-9) <= episode.best_cost <= cost(TOY.graph) * (1 + 1e-9)
        return len(agent.history) == 3

    result = make_train(config, [TOY.graph], on_epoch=on_epoch, workdir=tmp_path)(jax.random.key(2))
    per_epoch = config.num_envs * config.rollout_steps
    assert seen == [(1, per_epoch), (2, 2 * per_epoch), (3, 3 * per_epoch)]
    assert len(result.history) == 3 and result.env_steps == 3 * per_epoch and max(saved_epochs()) == 3
