"""Smoke test of `python -m experiments.ternary_sweep` on a two-epoch digits study (slow)."""

import json

import pytest

from experiments import ternary_sweep


@pytest.mark.slow
def test_study_writes_table_results_and_models(tmp_path):
    summary = ternary_sweep.main(["--epochs", "2", "--seeds", "1", "--out", str(tmp_path)])
    assert {row["name"] for row in summary["table"]} >= {"FP", "Binary", "Ours (log regime)"}
    assert (tmp_path / "table.md").read_text().startswith("# Ternary sparsification study: digits")
    stored = json.loads((tmp_path / "results.json").read_text())
    assert len(stored["histories"]["ternary"]["test_accuracy"][0]) == 2
    assert summary["compression"]["reloaded_accuracy"] == summary["compression"]["trained_accuracy"]
    assert {p.name for p in (tmp_path / "models").iterdir()} == {
        "log_regime_2bit.npz", "log_regime_base3.npz", "log_regime_ans.npz"
    }
    # The Δ_max exploration lists the log regime at the study's cap and at each grid cap.
    assert [(row["delta_max"], row["study_cap"]) for row in summary["caps"]] == [(0.2, False), (0.25, True),
                                                                                   (0.3, False)]
    assert "## Δ_max exploration" in (tmp_path / "table.md").read_text()
    # A rerun resumes every group from its finished checkpoints and reproduces the numbers (compared as
    # JSON text: the baselines' sparsity and entropy are NaN, and NaN != NaN).
    again = ternary_sweep.main(["--epochs", "2", "--seeds", "1", "--out", str(tmp_path)])
    assert json.dumps(again["table"]) == json.dumps(summary["table"])
    assert json.dumps(again["caps"]) == json.dumps(summary["caps"])


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        ternary_sweep.main(["--config", "cifar10", "--cifar-dir", str(tmp_path), "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "lacks data_batch_1" in error and "Traceback" not in error
