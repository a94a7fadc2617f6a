"""`python -m experiments.deepsched --config test` end to end, on the session's dataset and training run (the
workdir the fixtures lay out): it writes its tables, JSON and plots, the tables show the JSON's numbers, a rerun
reuses the dataset, the checkpoints and the evaluation, and another configuration is refused. The tables
without the GA (it used to crash with KeyError 'ga_ratio'), and bad flags."""

import json

import pytest

from experiments import deepsched as experiment
from experiments.deepsched import CONFIGS, markdown, train_and_evaluate
from jaxsched.common import ConfigMismatch
from tests.experiments.outputs import markdown_table, modification_times


def test_test_config_writes_tables_json_plots_and_resumes(trained, workdir, capsys):
    """The session's dataset and training run are this workdir's: the experiment labels and trains nothing."""
    results = experiment.main(["--config", "test", "--workdir", str(workdir), "--quiet"])
    for name in ("config.json", "results.json", "results.md", "turnaround.png", "variants.png", "timing.png"):
        assert (workdir / name).is_file(), name
    assert json.loads((workdir / "results.json").read_text())["records"] == results["records"]
    assert results["variant_names"] == ["feedback", "eft-rule"]
    table = (workdir / "results.md").read_text()
    main = markdown_table(table, "| split | size |")
    assert [(cells[0], int(cells[1])) for cells in main] == [(row["split"], row["size"]) for row in results["by_split"]]
    for cells, row in zip(main, results["by_split"]):
        greedy, sampling = row["greedy"], row["sampling"]
        assert cells[3] == f"{greedy['ratio_mean']:.3f} / {greedy['ratio_p95']:.3f}"
        assert cells[-1] == f"{greedy['ga_ratio']:.3f}"
        assert 0.0 < sampling["ratio_mean"] <= greedy["ratio_mean"] + 1e-9  # greedy is among the samples
    variants = markdown_table(table, "| variant | decoder |")
    assert [(cells[0], cells[1]) for cells in variants] == [(r["variant"], r["decoder"]) for r in results["variants"]]
    assert all(cells[-4] == f"{r['summary']['ratio_mean']:.3f}" for cells, r in zip(variants, results["variants"]))

    def finished_work():
        return {name: mtime for name, mtime in modification_times(workdir).items()
                if name.startswith(("checkpoints/", "data/")) or name in ("records.json", "timing.json")}

    done = finished_work()
    again = experiment.main(["--config", "test", "--workdir", str(workdir), "--quiet"])
    assert finished_work() == done  # nothing labelled, trained, evaluated or timed again
    assert again["records"] == results["records"]

    with pytest.raises(ConfigMismatch, match="train.epochs") as mismatch:
        train_and_evaluate(CONFIGS["test"].replace(train={"epochs": 4}), workdir)
    assert mismatch.value.fields == ["train.epochs"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        experiment.main(["--config", "test", "--no-ga", "--workdir", str(workdir), "--quiet"])
    assert exit_info.value.code == 2 and "eval.ga" in capsys.readouterr().err


def test_tables_without_the_ga(trained, workdir):
    results = json.loads((workdir / "results.json").read_text())
    for row in results["by_split"]:
        del row["greedy"]["ga_ratio"]
    table = markdown(results)
    assert "GA ratio" not in table and "| ood | 12 |" in table


def test_bad_flags_exit_with_one_line(capsys):
    try:
        experiment.main(["--config", "test", "--samples", "0"])
    except SystemExit as exit:
        assert exit.code == 2
    else:
        raise AssertionError("no exit")
    assert capsys.readouterr().err.strip() == "error: EvalConfig.samples must be an integer >= 1, got 0"
