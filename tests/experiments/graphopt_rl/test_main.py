"""`python -m experiments.graphopt_rl --config test` end to end: it writes its table, JSON and plots, the table
shows the JSON's numbers, a rerun resumes every finished stage, and another configuration is refused. The
default suite runs the research setting alone; both settings side by side are the slow test."""

import json

import pytest

from experiments import graphopt_rl
from experiments.graphopt_rl import CONFIGS, run_study
from jaxgraph import RULES, TASO_RULES
from jaxsched.common import ConfigMismatch
from tests.experiments.outputs import markdown_table, modification_times

MODELS = ("bert", "taso_attention_stack")


def check_research(research: dict, table: str) -> None:
    """The research rows and their part of the table: TASO's table for every method, the searches against the
    exhaustive optimum, the agents' curves, the Table 5.1 analog on the research tau model."""
    assert all(row["setting"] == "research" and row["rules"] == "TASO_RULES" for row in research.values())
    assert all(row["agent_xfers"] == {"model_free": len(TASO_RULES), "model_based": len(TASO_RULES)}
               for row in research.values())  # the agents choose among TASO's table too
    assert not any("latency_ms" in row for row in research.values())  # nothing measured on TASO's cost
    assert "speedup" not in table.replace("not a speedup", "")
    rows = markdown_table(table, "| model | ops | initial |")
    assert [row[0] for row in rows] == list(research)
    for row in rows:
        model = research[row[0]]
        assert row[2] == f"{model['initial_cost']:.4f}"
        methods = model["methods"]
        assert set(methods) == {"greedy", "taso_1", "taso_1.05", "eqsat_greedy", "eqsat_ilp", "exhaustive",
                                "model_free", "model_based"}
        optimum = methods["exhaustive"]["cost"]
        assert optimum is not None  # the test graphs' reachable spaces are under the cap
        for name in ("greedy", "taso_1", "taso_1.05", "model_free", "model_based"):  # one table: none beats it
            assert optimum <= methods[name]["cost"] * (1 + 1e-9), name
        for agent in ("model_free", "model_based"):
            curve = model["curves"][agent]
            assert curve[0] == [0, model["initial_cost"]]
            assert all(a[0] < b[0] and b[1] < a[1] for a, b in zip(curve, curve[1:]))  # steps up, cost down
            assert curve[-1][1] <= methods[agent]["cost"] * (1 + 1e-9)  # the curve holds the returned graph
            assert curve[-1][0] <= methods[agent]["interactions"]  # and counts no step the agent did not take
    assert [n for n, row in research.items() if "tau_sweep" in row] == ["taso_attention_stack"]
    sweep = research["taso_attention_stack"]["tau_sweep"]
    tau_rows = markdown_table(table, "| tau |")
    assert [float(row[0]) for row in tau_rows] == sweep["taus"]
    for row, dream, real in zip(tau_rows, sweep["dream_pct"], sweep["real_pct"]):
        assert row[3] == f"{sum(real) / len(real) - sum(dream) / len(dream):+.2f}"  # the gap: real - dream


def test_research_setting_writes_table_json_plots_resumes_and_refuses_other_configs(tmp_path, capsys):
    pytest.importorskip("egglog")  # extra `egraph`
    workdir = tmp_path / "graphopt_rl"
    argv = ["--config", "test", "--settings", "research", "--workdir", str(workdir), "--quiet"]
    assert graphopt_rl.main(argv) == 0
    for name in ("config.json", "results.json", "table.md", "sample_efficiency_research.png",
                 *(f"research/models/{m}.json" for m in MODELS)):
        assert (workdir / name).is_file(), name
    results = json.loads((workdir / "results.json").read_text())
    assert list(results["settings"]) == ["research"]
    check_research(results["settings"]["research"]["models"], (workdir / "table.md").read_text())

    stages = modification_times(workdir, "*/models/*.json")
    checkpoints = modification_times(workdir, "checkpoints/**/*")
    assert graphopt_rl.main(argv) == 0
    assert modification_times(workdir, "*/models/*.json") == stages
    assert modification_times(workdir, "checkpoints/**/*") == checkpoints
    assert json.loads((workdir / "results.json").read_text())["settings"] == results["settings"]

    with pytest.raises(ConfigMismatch, match="seed") as mismatch:
        run_study(CONFIGS["test"], workdir, seed=1)
    assert mismatch.value.directory == workdir and "seed" in mismatch.value.fields
    with pytest.raises(ConfigMismatch) as mismatch:  # a full run never reuses the small run's per-model results
        run_study(CONFIGS["full"], workdir)
    assert "study.models" in mismatch.value.fields and "seed" not in mismatch.value.fields
    for other in (["--config", "default", "--settings", "research"], ["--config", "full", "--settings", "research"],
                  ["--config", "test"], ["--config", "test", "--settings", "deployment"]):
        with pytest.raises(SystemExit) as exit_info:
            graphopt_rl.main([*other, "--workdir", str(workdir), "--quiet"])
        assert exit_info.value.code == 2 and "different run" in capsys.readouterr().err


@pytest.mark.slow
def test_both_settings_side_by_side_never_mixed(tmp_path):
    workdir = tmp_path / "graphopt_rl"
    assert graphopt_rl.main(["--config", "test", "--workdir", str(workdir), "--quiet"]) == 0
    for name in ("deployment/held_out.json", "rewards.png", "world_model.png", "transformations.png",
                 "sample_efficiency_research.png", "sample_efficiency_deployment.png",
                 *(f"{s}/models/{m}.json" for s in ("research", "deployment") for m in MODELS)):
        assert (workdir / name).is_file(), name
    results = json.loads((workdir / "results.json").read_text())
    table = (workdir / "table.md").read_text()
    research, deployment = (results["settings"][s]["models"] for s in ("research", "deployment"))
    research_part, deployment_part = table.split("## Deployment setting")
    check_research(research, research_part)
    assert all(row["setting"] == "deployment" and row["rules"] == "RULES" for row in deployment.values())
    assert all(row["agent_xfers"] == {"model_free": len(RULES), "model_based": len(RULES)}
               for row in deployment.values())
    assert all(set(row["latency_ms"]) == {"onnxruntime", "jax"} for row in deployment.values())  # the timers
    assert "step_time" in deployment["bert"] and "end-to-end latency" in table
    assert [n for n, row in deployment.items() if "tau_sweep" in row] == ["bert"]
    # the two settings price the same graph differently: TASO's cost has no fused kernels
    assert research["bert"]["initial_cost"] != deployment["bert"]["initial_cost"]
    rows = markdown_table(deployment_part, "| model | ops | initial |")
    assert [row[0] for row in rows] == list(deployment)
    for row in rows:
        model = deployment[row[0]]
        assert row[2] == f"{model['initial_cost']:.4f}"
        for cell, method in zip(row[3:], ("greedy", "taso", "model_free", "model_based")):
            numbers = model["methods"][method]
            assert cell == f"{numbers['cost']:.4f} ({100 * numbers['reduction']:.2f}%)"
            assert numbers["cost"] <= model["initial_cost"] * (1 + 1e-6)  # every method returns its best graph
