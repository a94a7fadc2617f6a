"""`python -m experiments.schedule_demo --config test` end to end: it writes its table, JSON and Gantt charts,
every schedule is valid and the table shows the JSON's numbers, a rerun reuses every finished DAG, and another
configuration is refused; bad flags exit 2 with one line."""

import json

import pytest

import jaxsched
from experiments import schedule_demo
from jaxsched.common import ConfigMismatch
from tests.experiments.outputs import markdown_table, modification_times


def test_test_config_writes_table_json_plots_and_resumes(tmp_path, capsys):
    workdir = tmp_path / "schedule_demo"
    rows = schedule_demo.main(["--config", "test", "--workdir", str(workdir)])
    assert (workdir / "gantt.png").stat().st_size > 0 and (workdir / "config.json").is_file()
    stored = json.loads((workdir / "results.json").read_text())
    assert stored == rows and {row["method"] for row in rows} == {"HEFT", "GA"}
    table = markdown_table((workdir / "results.md").read_text(), "| DAG |")
    assert [(cells[0], cells[2]) for cells in table] == [(row["dag"], row["method"]) for row in rows]
    for cells, row in zip(table, rows):
        assert cells[3] == f"{row['makespan']:.1f}" and cells[4] == f"{row['slr']:.3f}"
        assert row["slr"] >= 1.0 - 1e-9  # no schedule beats the critical path on the fastest processors

    dags = modification_times(workdir, "dags/*.json")
    assert len(dags) == len(rows) // 2
    again = schedule_demo.main(["--config", "test", "--workdir", str(workdir)])
    assert modification_times(workdir, "dags/*.json") == dags and again == rows  # nothing scheduled again

    with pytest.raises(ConfigMismatch, match="procs") as mismatch:
        schedule_demo.run(schedule_demo.CONFIGS["default"], workdir)
    assert set(mismatch.value.fields) == {"tasks", "procs", "population", "generations"}
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        schedule_demo.main(["--config", "test", "--seed", "1", "--workdir", str(workdir)])
    assert exit_info.value.code == 2 and "seed" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--tasks", "2"], ["--config", "huge"], ["--procs", "0"]])
def test_bad_flags_exit_2_with_one_line(flags, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        schedule_demo.main([*flags, "--workdir", str(tmp_path)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("error: ")
    assert not (tmp_path / "config.json").exists()


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("devices", ["0", "-1", "4"])  # tests run on at most 2 (fake) CPU devices
def test_devices_beyond_what_there_is_exit_2_with_one_line(backend, devices, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        schedule_demo.main(["--config", "test", "--ga-backend", backend, "--devices", devices,
                            "--workdir", str(tmp_path)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "error: --devices: asked for" in error
    assert not (tmp_path / "config.json").exists()


def test_table_says_what_the_ga_minimises():
    assert "average waiting time" in schedule_demo.GA_OBJECTIVE_NOTE and "Eq. 1" in schedule_demo.GA_OBJECTIVE_NOTE
    assert jaxsched.GAConfig().objective == "waiting"  # the note is true of the GA the demo runs
