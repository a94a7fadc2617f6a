"""The agents' study (`python -m experiments.graphopt_rl`): configs reject bad input, random-agent data is
consistent with the real Env, and targets are judged from hand-made numbers (the end-to-end run of the test
config is tests/experiments/test_graphopt_rl.py)."""


import numpy as np
import pytest

from experiments import graphopt_rl
from jaxgraph import Env, cost
from jaxgraph.rl import CONFIGS, StudyConfig, judge_targets, random_sequences
from jaxgraph.rl.toy import toy_graph
from jaxsched.common import preset


def test_configs_reject_bad_input():
    with pytest.raises(ValueError, match="unknown config 'huge'; choose one of test, default, full"):
        preset(CONFIGS, "huge")
    good = CONFIGS["test"]
    with pytest.raises(ValueError, match="at least two distinct"):
        StudyConfig(models=(("resnet18", ()), ("nonet", ())), agent=good.agent, world_model=good.world_model,
                    dream=good.dream, tau_model="resnet18", held_out="resnet18")
    parts = dict(models=good.models, agent=good.agent, world_model=good.world_model, dream=good.dream)
    with pytest.raises(ValueError, match="tau_model 'resnet50'"):
        StudyConfig(**parts, research_tau_model="bert", tau_model="resnet50")
    with pytest.raises(ValueError, match="research_tau_model 'squeezenet1_1'"):  # the default: not a test model
        StudyConfig(**parts)
    with pytest.raises(ValueError, match="every tau positive"):
        StudyConfig(**parts, research_tau_model="bert", taus=(1.0, -0.5))
    with pytest.raises(SystemExit) as exit_info:
        graphopt_rl.main(["--config", "huge"])
    assert exit_info.value.code == 2


def test_random_agent_sequences_follow_the_real_env():
    """z = the observation's cost, so the recorded rewards, latents and episode starts can be checked
    against the Env's own bookkeeping."""
    graph = toy_graph(3).graph
    env = Env(graph, max_locations=4, max_steps=5)
    initial = cost(graph)
    data = random_sequences(env, lambda obs: obs.graph.globals[0, :1], 6, 5, 0.2, np.random.default_rng(0))
    assert data.z.shape == (6, 5, 1) and data.action.shape == (6, 5, 2)
    assert data.next_location_mask.shape == (6, 5, env.num_xfers, 4)
    z, next_z = data.z.reshape(-1), data.next_z.reshape(-1)
    first, terminated = data.is_first.reshape(-1), data.terminated.reshape(-1)
    np.testing.assert_allclose(data.reward.reshape(-1) * initial, z - next_z, rtol=1e-4, atol=1e-9)
    assert first[0] and np.allclose(z[first], initial)  # every episode starts from the unmodified graph
    assert (first[1:] >= terminated[:-1]).all()  # a terminated step is followed by a new episode
    inside = ~first[1:]
    np.testing.assert_allclose(z[1:][inside], next_z[:-1][inside])  # within an episode the latents chain
    noop = data.action.reshape(-1, 2)[:, 0] == env.num_xfers
    assert noop.any() and (~noop).any() and (terminated[noop]).all()
    never = random_sequences(env, lambda obs: obs.graph.globals[0, :1], 2, 3, 0.0, np.random.default_rng(1))
    assert (never.action[..., 0] < env.num_xfers).all()  # a random agent that never stops voluntarily


def hand_made_results(mf_bert, mb_bert, taso_bert, agent_held_out, steps_per_s):
    def row(mf, mb, taso):
        methods = {"greedy": 1.0, "taso": taso, "model_free": mf, "model_based": mb}
        return {"methods": {m: {"cost": c} for m, c in methods.items()}}

    bert = row(mf_bert, mb_bert, taso_bert)
    bert["step_time"] = {"device": "cpu", "dream_steps_per_s": steps_per_s}
    return {"models": {"resnet18": row(0.9, 0.95, 0.9), "bert": bert},
            "held_out": {"graph": "bert", "agent_cost": agent_held_out, "greedy_cost": 1.0, "initial_cost": 1.2}}


def test_targets_are_judged_from_the_numbers():
    met = [m for _, m, _ in judge_targets(hand_made_results(0.94, 0.92, 0.95, 1.0, 2e5))]
    assert met == [True, True, True, True]
    what = judge_targets(hand_made_results(1.0, 0.96, 0.95, 1.01, 9e4))
    assert [m for _, m, _ in what] == [False, False, False, False]
    assert "+5.26%" in what[0][2]  # 1.0 / 0.95 - 1
    tie = judge_targets(hand_made_results(0.96, 0.95 * (1 - 1e-16), 0.95, 1.0, 2e5))
    assert not tie[1][1]  # the same graph's cost summed in another order is not "better than TASO"
