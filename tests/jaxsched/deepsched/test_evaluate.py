"""The experiment end to end on the test configuration, reusing the session's dataset and training
run: `python -m experiments.deepsched --config test --no-ga` (it used to crash with KeyError
'ga_ratio' at the end)."""

import json

from experiments import deepsched as experiment


def test_experiment_without_ga_reports_every_split(trained, workdir, capsys):
    results = experiment.main(["--config", "test", "--workdir", str(workdir), "--no-ga", "--timing-sizes", "--quiet"])
    # test config: 2 sizes; seen/unseen hold one generator, ood cycles 3 generators over 4 instances per size
    assert len(results["records"]) == 2 + 2 + 6
    assert results["variant_names"] == ["feedback", "eft-rule"]
    assert not any("ga_ratio" in row["greedy"] for row in results["by_split"])
    table = capsys.readouterr().out
    assert "GA ratio" not in table and "| ood | 12 |" in table
    assert (workdir / "results.md").read_text() == table.rstrip("\n") + "\n"
    saved = json.loads((workdir / "results.json").read_text())
    assert saved["records"] == results["records"]
    for record in saved["records"]:  # the sampling decoder keeps the greedy assignment among its samples
        for variant in results["variant_names"]:
            assert record[f"{variant}/sampling"]["makespan"] <= record[f"{variant}/greedy"]["makespan"]


def test_bad_flags_exit_with_one_line(capsys):
    try:
        experiment.main(["--config", "test", "--samples", "0"])
    except SystemExit as exit:
        assert exit.code == 2
    else:
        raise AssertionError("no exit")
    assert capsys.readouterr().err.strip() == "error: EvalConfig.samples must be an integer >= 1, got 0"
