"""The study configurations and report helpers on hand-written rows (fast: no training)."""

import dataclasses
import math

import pytest

from experiments.ternary_sweep import configs, report


def _digits(seeds, **changes):
    """The default (digits) study with `seeds` seeds and the FP baseline only."""
    return dataclasses.replace(configs.CONFIGS["default"], seeds=tuple(range(seeds)), baselines=("fp",), **changes)


def _row(regime, delta_max, seed, accuracy, sparsity=0.9, entropy=0.5, delta0=0.1):
    return {"regime": regime, "delta0": delta0, "m": 1.0, "delta_max": delta_max, "seed": seed,
            "final_accuracy": accuracy, "peak_accuracy": accuracy, "peak_epoch": 3, "sparsity": sparsity,
            "entropy": entropy, "final_delta": delta_max}


def test_digits_grid_runs_every_seed_at_the_neighbouring_caps():
    study = _digits(3)
    roles = configs.ternary_members(study)
    assert study.delta_max == 0.25
    assert [(m.delta_max, m.seed) for m in roles["grid"]] == [(c, s) for c in (0.2, 0.3) for s in range(3)]
    assert [(m.regime, m.seed) for m in roles["regimes"]][:4] == [("linear", s) for s in range(3)] + [("square", 0)]
    # The fixed-Δ runs never use the cap: constant Δ0 stays below it.
    assert [m.delta0 for m in roles["fixed"]] == [0.01, 0.1, 0.2, 0.3]
    assert all(m.delta_max >= m.delta0 for m in roles["fixed"])


def test_grid_seeds_one_keeps_the_earlier_member_order():
    # The earlier documented run (cap 0.3, grid 0.2/0.4 on the first seed) stays resumable from its checkpoints.
    study = _digits(4, delta_max=0.3, grid_delta_maxes=(0.2, 0.4), grid_seeds=1)
    grid = configs.ternary_members(study)["grid"]
    assert [(m.regime, m.delta_max, m.seed) for m in grid] == [("log", 0.2, 0), ("log", 0.4, 0)]
    assert grid[0].m == pytest.approx(0.621335, rel=1e-5)  # 0.1 + 0.1 M log 5 = 0.2


def test_cap_rows_aggregate_each_cap_over_seeds():
    study = _digits(2)
    ternary = [_row("log", 0.25, 0, 0.98), _row("log", 0.25, 1, 0.96), _row("log", 0.2, 0, 1.0),
               _row("log", 0.2, 1, 0.99), _row("linear", 0.25, 0, 0.5), _row("constant", 0.25, 0, 0.1, delta0=0.2)]
    caps = report.cap_rows(study, {"ternary": ternary})
    assert [(c["delta_max"], c["runs"], c["study_cap"]) for c in caps] == [(0.2, 2, False), (0.25, 2, True)]
    assert caps[1]["final_accuracy"] == pytest.approx(0.97)
    assert caps[1]["final_accuracy_std"] == pytest.approx(0.01)
    text = "\n".join(report.cap_lines(caps, {"final_accuracy": 0.99}))
    assert "| log | 0.25 * | 1 | 2 | 97.00 ± 1.00 |" in text
    assert "| -2.00 |" in text


def test_targets_report_met_and_missed_with_numbers():
    nan = math.nan
    table = [{"name": "FP", "final_accuracy": 0.99}, {"name": "Binary", "final_accuracy": 0.985},
             {"name": "Ours (log regime)", "final_accuracy": 0.981, "sparsity": 0.9, "entropy": 0.7}]
    compression = {"ans": 0.36, "entropy": 0.35, "layer_entropy": 0.34, "2bit": 2.0, "base3": 1.6}
    lines = report.check_targets(table, compression)
    assert lines[0] == "met: log-regime sparsity 90.00% >= 85%"
    assert lines[1].startswith("not met: log-regime entropy 0.700")
    assert lines[2].startswith("met: log-regime accuracy 98.10% within 1 point of FP 99.00% (gap 0.90)")
    assert lines[3].startswith("not met: log-regime accuracy above binary 98.50%")
    assert lines[4].startswith("not met: ANS-coded size 1.029x the pooled entropy and 1.059x")
    assert report.percent(nan) == "–"


@pytest.mark.parametrize("change, message", [
    (dict(cap_epoch=2.5), "Study.cap_epoch must be an integer >= 1, got 2.5"),
    (dict(delta_max=float("nan")), "Study.delta_max must be finite, got nan"),
    (dict(grid_seeds=0), "Study.grid_seeds must be an integer >= 1, got 0"),
])
def test_study_fields_are_checked_like_every_config(change, message):
    with pytest.raises(ValueError) as error:
        _digits(1, **change)
    assert str(error.value) == message
