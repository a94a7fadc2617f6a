"""The research setting's jitted multi-graph agent (`experiments.graphopt_rl.jitted_agent`) against the host `Env`:
the actions it reports for each model reach, replayed in `Env` with the same rules and cost, the cost it reports."""

import dataclasses

import numpy as np
import pytest

from experiments.graphopt_rl import SETTINGS
from experiments.graphopt_rl.jitted_agent import jitted_multi_graph
from experiments.graphopt_rl.report import jitted_lines
from jaxgraph import GraphBuilder, cost
from jaxgraph.rl import replay, tiny_agent, toy_graph


@pytest.mark.slow
def test_jitted_multi_graph_agent_reports_costs_env_reproduces():
    """About 3 minutes on 2 cores (compiling PPO over JaxEnv with TASO's table). Two toy graphs train together; a
    graph of another output count is skipped by name."""
    import jax

    b = GraphBuilder()
    x = b.input("x", (2, 3))
    relu = b.add("relu", [x])
    two_outputs = b.build({"a": relu, "b": b.add("relu", [relu])})
    graphs = {"toy2": toy_graph(2).graph, "toy3": toy_graph(3).graph, "two_outputs": two_outputs}
    config = dataclasses.replace(tiny_agent(), num_envs=2, rollout_steps=4, epochs=2, max_steps=8)
    research = SETTINGS["research"]
    result = jitted_multi_graph(config, graphs, research, jax.random.key(0), samples=2)
    assert result["skipped"] == ["two_outputs"] and set(result["graphs"]) == {"toy2", "toy3"}
    assert result["env_steps"] == 2 * 2 * 4 and len(result["mean_return"]) == 2
    for name, row in result["graphs"].items():
        graph = graphs[name]
        assert row["initial_cost"] == pytest.approx(cost(graph, research.cost_model()), rel=1e-5)
        reached = replay(graph, [tuple(a) for a in row["actions"]], config.max_locations, research.cost_model(),
                         research.rules())
        assert cost(reached, research.cost_model()) == pytest.approx(row["agent_cost"], rel=1e-5)
        assert row["agent_cost"] <= row["initial_cost"] and np.isfinite(row["agent_cost"])


def test_report_lists_the_jitted_agent_beside_taso():
    """Hand-worked: cost 2.0 -> 1.5 is a 25% reduction; TASO's 0.1 reduction prints as 10%; skipped models named."""
    section = {"models": {"a": {"methods": {"taso_1.05": {"reduction": 0.1}}}},
               "jitted_multi_graph": {"graphs": {"a": {"initial_cost": 2.0, "agent_cost": 1.5, "evaluation_steps": 7,
                                                       "actions": []}},
                                      "skipped": ["b"], "env_steps": 16, "train_seconds": 3.0, "mean_return": [0.1]}}
    lines = jitted_lines(section)
    assert "| a | 25.00% | 10.00% | 7 |" in lines and lines[-1].endswith("b")
    assert jitted_lines({"models": {}}) == []
