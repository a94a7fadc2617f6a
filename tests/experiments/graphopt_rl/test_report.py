"""The study's settings, checked against the cost models and rule tables they name, and the research setting's
targets judged from hand-worked numbers."""

import pytest

from experiments.graphopt_rl import SETTINGS, judge_research, setting
from jaxgraph import ONNXRUNTIME, RULES, TASO, Roofline, cost
from jaxgraph.rl import toy_graph


def test_settings_name_their_cost_models_and_rules():
    graph = toy_graph().graph
    assert cost(graph, SETTINGS["research"].cost_model()) == cost(graph, Roofline(backend=TASO))
    assert cost(graph, SETTINGS["deployment"].cost_model()) == cost(graph, Roofline(backend=ONNXRUNTIME))
    assert SETTINGS["deployment"].rules() is RULES
    research_rules = SETTINGS["research"].rules()
    assert len(research_rules) > len(RULES) and tuple(research_rules[:len(RULES)]) == tuple(RULES)
    with pytest.raises(ValueError, match="unknown setting 'lab'"):
        setting("lab")


def research_row(agent, taso, eqsat, eqsat_seconds, mf_curve, mb_curve):
    methods = {"greedy": 1.0, "taso_1": taso, "taso_1.05": taso, "eqsat_greedy": 1.0, "eqsat_ilp": eqsat,
               "exhaustive": None, "model_free": agent, "model_based": agent + 0.01}
    methods = {m: {"cost": c, "seconds": 10.0} for m, c in methods.items()}
    methods["eqsat_ilp"]["seconds"] = eqsat_seconds
    return {"methods": methods, "curves": {"model_free": mf_curve, "model_based": mb_curve}}


def test_research_targets_are_judged_from_the_numbers():
    fast = [[0, 1.0], [100, 0.8]], [[0, 1.0], [20, 0.8]]  # model-based reaches 0.8 in 20 steps: 5x fewer
    slow = [[0, 1.0], [100, 0.8]], [[0, 1.0], [21, 0.8]]
    good = {"models": {name: research_row(0.8, 0.85, 0.8, 1.0, *fast) for name in ("a", "b", "c")}}
    assert [met for _, met, _ in judge_research(good)] == [True, True, True]
    bad = {"models": {"a": research_row(0.86, 0.85, 0.8, 1.0, *fast), "b": research_row(0.8, 0.85, 0.8, 1.1, *slow),
                      "c": research_row(0.8, 0.8, 0.82, 1.0, *fast)}}
    judged = judge_research(bad)
    assert [met for _, met, _ in judged] == [False, False, False]
    assert "a +1.18%" in judged[0][2]  # 0.86 / 0.85 - 1
    assert "b: model-free 100 steps, model-based 21" in judged[2][2]
    tie = research_row(0.8, 0.85, 1.0, 0.5, *fast)  # both extractions find 1.0; the ILP in 0.5 s, greedy in 10 s
    assert "eq. sat., ILP extr. +25.00% vs best, 0.05x TASO's time" in judge_research({"models": {"a": tie}})[1][2]
