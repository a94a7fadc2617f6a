"""The agents' study (`python -m experiments.graphopt_rl`): configs reject bad input, an agent's row counts every
interaction, and targets are judged from hand-made numbers (the end-to-end run of the test config is test_main.py)."""


import pytest

from experiments import graphopt_rl
from experiments.graphopt_rl import CONFIGS, GraphoptConfig, judge_targets
from experiments.graphopt_rl.study import agent_row
from jaxgraph import RULES
from jaxgraph.rl import Episode
from jaxsched.common import named_config


def test_configs_reject_bad_input():
    with pytest.raises(ValueError, match="unknown config 'huge'; choose one of test, default, full"):
        named_config(CONFIGS, "huge")
    good = CONFIGS["test"]
    with pytest.raises(ValueError, match="at least two distinct"):
        GraphoptConfig(models=(("resnet18", ()), ("nonet", ())), agent=good.agent, world_model=good.world_model,
                    dream=good.dream, tau_model="resnet18", held_out="resnet18")
    parts = dict(models=good.models, agent=good.agent, world_model=good.world_model, dream=good.dream)
    with pytest.raises(ValueError, match="tau_model 'resnet50'"):
        GraphoptConfig(**parts, research_tau_model="bert", tau_model="resnet50")
    with pytest.raises(ValueError, match="research_tau_model 'squeezenet1_1'"):  # the default: not a test model
        GraphoptConfig(**parts)
    with pytest.raises(ValueError, match="every tau positive"):
        GraphoptConfig(**parts, research_tau_model="bert", taus=(1.0, -0.5))
    with pytest.raises(SystemExit) as exit_info:
        graphopt_rl.main(["--config", "huge"])
    assert exit_info.value.code == 2


def test_an_agent_row_returns_the_cheapest_state_and_counts_every_interaction():
    """Three evaluation episodes (the most-likely one first): the row returns the cheapest state any of them visited,
    the final state of the first, and training plus every evaluation step (2 + 3 + 2)."""
    first = Episode([(0, 0), (1, 0)], [1.0, 1.1, 1.2])
    second = Episode([(0, 0), (1, 0), (2, 0)], [1.0, 0.7, 0.9, 1.0])
    third = Episode([(0, 0), (1, 0)], [1.0, 0.8, 0.6])
    row = agent_row([first, second, third], training_steps=100, rules=RULES[::-1])
    assert row["cost"] == 0.6 and row["final_cost"] == 1.2  # final state of the first (most-likely) episode
    assert row["actions"] == [(0, 0), (1, 0)]
    assert row["rules"] == [RULES[-1].name, RULES[-2].name]  # named from the table the agent acted in
    assert row["interactions"] == 100 + 2 + 3 + 2 and row["evaluation_steps"] == 7


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
