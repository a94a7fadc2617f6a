"""`python -m experiments.autotune`: the tiny config end to end (slow), resuming, bad input."""

import json
import os

import pytest

from experiments import autotune
from jaxsched.autotune import Machine, MockJob, make_policy, simulate_policy
from jaxsched.autotune.study import CONFIGS, fit_interference

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores")


@pytest.mark.slow
def test_tiny_study_writes_results_and_a_rerun_resumes(tmp_path):
    assert autotune.main(["--config", "test", "--workdir", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["measured"]) == {"sequential", "load_aware"}
    for row in results["measured"].values():
        assert row["makespan_s"] > 0 and 0 <= row["device_busy"] <= 1
        assert row["replay_error"] < 0.01  # exclusive runs replay exactly, up to the runner's bookkeeping
    assert {(r["jobs"], r["machines"]) for r in results["simulation"]} == {(10, 1), (10, 2)}
    assert (tmp_path / "results.md").read_text().startswith("| policy |")
    assert (tmp_path / "gantt.png").stat().st_size > 0 and (tmp_path / "simulation.png").stat().st_size > 0
    stored = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "runs").iterdir()}
    assert autotune.main(["--config", "test", "--workdir", str(tmp_path)]) == 0  # finished policies are kept
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "runs").iterdir()} == stored
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["measured"]["load_aware"]["makespan_s"] == results["measured"]["load_aware"]["makespan_s"]


def test_unknown_config_exits_2_with_one_line(tmp_path, capsys):
    assert autotune.main(["--config", "huge", "--workdir", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "unknown config 'huge'" in error


def test_fitted_interference_recovers_the_slowdown_of_an_uncoordinated_run():
    # two one-round jobs, alone: the sequential run is their stages back to back
    jobs = [MockJob("a", [[1.0, 2.0, 1.0, 1.0]]), MockJob("b", [[1.0, 1.0, 2.0, 1.0]])]
    machine = Machine(1, 1)
    sequential = simulate_policy(jobs, [machine], make_policy("sequential"))
    slowed = simulate_policy(jobs, [machine], make_policy("parallel"), interference=0.6)
    config = CONFIGS["test"]  # one round per job, as above
    assert fit_interference(config, sequential, slowed, machine) == pytest.approx(0.6)
