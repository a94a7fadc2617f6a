"""`python -m experiments.graphopt_rl --config test` end to end: it writes its table, JSON and plots, the table
shows the JSON's numbers, a rerun resumes every finished stage, and another configuration is refused."""

import json

import pytest

from experiments import graphopt_rl
from jaxgraph.rl import CONFIGS, run_study
from jaxsched.common import ConfigMismatch
from tests.experiments.outputs import markdown_table, modification_times


def test_test_config_writes_table_json_plots_and_resumes(tmp_path, capsys):
    workdir = tmp_path / "graphopt_rl"
    assert graphopt_rl.main(["--config", "test", "--workdir", str(workdir), "--quiet"]) == 0
    for name in ("config.json", "results.json", "table.md", "held_out.json", "rewards.png", "world_model.png",
                 "transformations.png", "models/bert.json", "models/taso_attention_stack.json"):
        assert (workdir / name).is_file(), name
    results = json.loads((workdir / "results.json").read_text())
    assert all(set(row["latency_ms"]) == {"onnxruntime", "jax"} for row in results["models"].values())  # the timers
    assert "step_time" in results["models"]["bert"] and "end-to-end latency" in (workdir / "table.md").read_text()
    rows = markdown_table((workdir / "table.md").read_text(), "| model | ops | initial |")
    assert [row[0] for row in rows] == list(results["models"])
    for row in rows:
        model = results["models"][row[0]]
        assert row[2] == f"{model['initial_cost']:.4f}"
        for cell, method in zip(row[3:], ("greedy", "taso", "model_free", "model_based")):
            numbers = model["methods"][method]
            assert cell == f"{numbers['cost']:.4f} ({100 * numbers['reduction']:.2f}%)"
            assert numbers["cost"] <= model["initial_cost"] * (1 + 1e-6)  # every method returns its best graph

    stages = modification_times(workdir, "models/*.json") | modification_times(workdir, "held_out.json")
    checkpoints = modification_times(workdir, "checkpoints/**/*")
    assert graphopt_rl.main(["--config", "test", "--workdir", str(workdir), "--quiet"]) == 0
    assert modification_times(workdir, "models/*.json") | modification_times(workdir, "held_out.json") == stages
    assert modification_times(workdir, "checkpoints/**/*") == checkpoints
    assert json.loads((workdir / "results.json").read_text())["models"] == results["models"]

    with pytest.raises(ConfigMismatch, match="seed") as mismatch:
        run_study(CONFIGS["test"], workdir, seed=1)
    assert mismatch.value.directory == workdir and mismatch.value.fields == ["seed"]
    with pytest.raises(SystemExit) as exit_info:
        graphopt_rl.main(["--config", "default", "--workdir", str(workdir), "--quiet"])
    assert exit_info.value.code == 2 and "different run" in capsys.readouterr().err
