"""The generated-rules study's agent option: the research setting's model-free agent trained with a generated
table on a graph whose optimum is known by hand, and the option's bad input."""

import argparse
import json
import sys

import chex
import jax
import numpy as np
import pytest

from benchmarks.generated_study import main, model_free
from jaxgraph import TASO, GraphBuilder, Roofline, cost, execute, random_inputs
from jaxgraph.rule_tables import generated_rule_table
from tests.jaxgraph.test_rule_tables import IDEMPOTENT


def _relus(count: int):
    b = GraphBuilder()
    y = b.input("x", (1, 2, 4, 4))
    for _ in range(count):
        y = b.add("relu", [y])
    return b.build({"y": y})


@pytest.mark.slow  # about 45 s on 2 shared cores: compiling the default config's PPO update
def test_the_agent_reaches_the_hand_worked_optimum_with_a_generated_rule(tmp_path):
    # relu(relu(x)) -> relu(x) (xfer 1001, TASO's table lacks it) is the only rewrite: one relu is the optimum
    path = tmp_path / "generated.json"
    path.write_text(json.dumps({"source": "test", "rules": [IDEMPOTENT]}))
    table = generated_rule_table(path)
    graph, optimum = _relus(2), _relus(1)
    row = model_free(graph, table, argparse.Namespace(agent_epochs=1), jax.random.key(0))
    assert row["steps"] == 8 * 16 and row["step_seconds"] is None  # one epoch of the default config: 8 x 16 steps
    model = Roofline(backend=TASO)
    chex.assert_trees_all_close(row["cost"], cost(optimum, model), rtol=1e-6)
    chex.assert_equal(row["graph"].op_counts, {"relu": 1})
    assert len(row["new"]) == 1 and "1001" in row["new"][0]
    feeds = random_inputs(graph, seed=0)
    np.testing.assert_array_equal(execute(row["graph"], feeds, jit=False)["y"], np.maximum(feeds["x"], 0))


def test_agent_epochs_below_one_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(sys, "argv", ["generated_study", "--rules", str(tmp_path / "r.json"), "--agent",
                                      "--agent-epochs", "0", "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2 and "--agent-epochs must be at least 1" in capsys.readouterr().err
