"""`python -m experiments.ternary_sweep --config test` end to end: it writes its table, JSON, plots and exported
models, the table shows the JSON's numbers, a rerun resumes every group from its checkpoints, and another
configuration is refused; bad input exits 2 with one line."""

import dataclasses
import json

import pytest

from experiments import ternary_sweep
from experiments.ternary_sweep import report
from jaxsched.common import ConfigMismatch
from tests.experiments.outputs import markdown_table, modification_times


def test_test_config_writes_table_json_plots_and_resumes(tmp_path, capsys):
    pytest.importorskip("constriction")  # extra `compress`
    workdir = tmp_path / "ternary"
    summary = ternary_sweep.main(["--config", "test", "--workdir", str(workdir)])
    for name in ("config.json", "table.md", "results.json", "fig2_fixed_delta.png", "fig3_regimes.png",
                 "fig4_tradeoffs.png", "models/log_regime_2bit.npz", "models/log_regime_base3.npz",
                 "models/log_regime_ans.npz"):
        assert (workdir / name).is_file(), name
    assert colored_pixels(workdir / "fig3_regimes.png") > 100  # one epoch: points drawn, not empty axes
    stored = json.loads((workdir / "results.json").read_text())
    assert [row["name"] for row in stored["table"]] == ["Ours (fixed Δ = 0.1)"] + [
        f"Ours ({kind} regime)" for kind in ternary_sweep.GROWING]
    assert len(stored["histories"]["ternary"]["test_accuracy"]) == 2 + 4 + 1  # fixed, regimes, grid members
    assert stored["compression"]["reloaded_accuracy"] == stored["compression"]["trained_accuracy"]
    table = (workdir / "table.md").read_text()
    assert "MISSED" not in table and report.TARGETS_NOTE in table  # targets say what they mean
    runs = markdown_table(table, "| quantizer | regime |")
    assert len(runs) == len(stored["runs"]["ternary"])
    for cells, run in zip(runs, stored["runs"]["ternary"]):
        assert cells[1:4] == [run["regime"], f"{run['delta0']:g}", f"{run['m']:.4g}"]
        assert cells[6] == f"{100 * run['final_accuracy']:.2f}" and cells[9] == f"{100 * run['sparsity']:.2f}"
        assert 0.0 <= run["final_accuracy"] <= 1.0 and 0.0 <= run["sparsity"] <= 1.0

    checkpoints = modification_times(workdir, "checkpoints/**/*")
    again = ternary_sweep.main(["--config", "test", "--workdir", str(workdir)])
    assert modification_times(workdir, "checkpoints/**/*") == checkpoints  # no epoch trained again
    assert json.dumps(again["table"]) == json.dumps(summary["table"])  # as JSON text: NaN != NaN

    with pytest.raises(ConfigMismatch, match="seeds") as mismatch:
        ternary_sweep.train_and_evaluate(dataclasses.replace(ternary_sweep.CONFIGS["test"], seeds=(1,)), workdir)
    assert mismatch.value.fields == ["seeds"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        ternary_sweep.main(["--config", "test", "--epochs", "2", "--workdir", str(workdir)])
    assert exit_info.value.code == 2 and "train.epochs" in capsys.readouterr().err


def colored_pixels(path) -> int:
    """Pixels of the figure's left half (fig3's accuracy panel; its legend sits in the right one) in a saturated
    colour: data, since axes and text are black."""
    import matplotlib.image

    image = matplotlib.image.imread(path)[..., :3]
    left = image[:, : image.shape[1] // 2]
    return int(((left.max(axis=-1) - left.min(axis=-1)) > 0.3).sum())


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        ternary_sweep.main(["--config", "full", "--cifar-dir", str(tmp_path), "--workdir", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "lacks data_batch_1" in error and "Traceback" not in error
    assert not (tmp_path / "out").exists()  # a bad data path leaves no half-made results folder
    with pytest.raises(SystemExit) as exit_info:
        ternary_sweep.main(["--config", "huge"])
    assert exit_info.value.code == 2
    assert "unknown config 'huge'; choose one of test, default, full" in capsys.readouterr().err
