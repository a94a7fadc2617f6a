"""The ternary study's report: rows aggregated over seeds, the targets, the markdown tables and the figures.

Pure functions of the summary rows that `jaxquant.summarize` writes, so the report can be rebuilt
(and tested) without training.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from experiments.ternary_sweep.configs import GROWING, Study
from jaxquant import SweepResult


def _mean_std(values) -> tuple[float, float]:
    values = np.asarray(values, np.float64)
    return float(np.mean(values)), float(np.std(values))


def aggregate(rows: list[dict]) -> dict:
    """Mean and spread over seeds of one setting's summary rows."""
    out = {"runs": len(rows)}
    for key in ("final_accuracy", "peak_accuracy", "sparsity", "entropy", "peak_epoch"):
        out[key], out[key + "_std"] = _mean_std([row[key] for row in rows])
    return out


def percent(mean, std=None) -> str:
    """A fraction as a percentage with two decimals (± std when given); "–" for NaN (no value)."""
    if math.isnan(mean):
        return "–"
    return f"{100 * mean:.2f}" + (f" ± {100 * std:.2f}" if std else "")


def _bits(mean) -> str:
    return "–" if math.isnan(mean) else f"{mean:.3f}"


def table_rows(study: Study, groups: dict[str, list[dict]]) -> list[dict]:
    """Table 2: baselines and each regime at the study's Δ0 / cap, aggregated over seeds."""
    rows = []
    for kind in study.baselines:
        rows.append({"name": {"fp": "FP", "binary": "Binary", "twn": "TWN", "ttq": "TTQ"}[kind],
                     **aggregate(groups[kind])})
    ternary = groups.get("ternary", [])
    constant = [r for r in ternary if r["regime"] == "constant" and r["delta0"] == study.delta0]
    if constant:
        rows.append({"name": f"Ours (fixed Δ = {study.delta0:g})", **aggregate(constant)})
    for kind in GROWING:
        chosen = [r for r in ternary if r["regime"] == kind and r["delta_max"] == study.delta_max]
        if chosen:
            rows.append({"name": f"Ours ({kind} regime)", **aggregate(chosen)})
    return rows


def cap_rows(study: Study, groups: dict[str, list[dict]]) -> list[dict]:
    """The grid regimes at every cap the study ran (its own and the grid's), aggregated over seeds."""
    ternary = groups.get("ternary", [])
    rows = []
    for kind in study.grid_regimes:
        for cap in sorted({study.delta_max, *study.grid_delta_maxes}):
            chosen = [r for r in ternary
                      if r["regime"] == kind and r["delta_max"] == cap and r["delta0"] == study.delta0]
            if chosen:
                rows.append({"regime": kind, "delta_max": cap, "study_cap": cap == study.delta_max,
                             "m": chosen[0]["m"], **aggregate(chosen)})
    return rows


def cap_lines(caps: list[dict], fp: dict | None) -> list[str]:
    """The Δ_max exploration as a markdown table (accuracy difference to the FP row `fp`)."""
    lines = ["## Δ_max exploration (the study's cap marked *)", "",
             "| regime | Δ_max | M | runs | Acc. (%) | Peak acc. (%) | Sparsity (%) | Entropy (bits/sym) | "
             "Acc. diff. (%) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in caps:
        diff = "–" if fp is None else f"{100 * (row['final_accuracy'] - fp['final_accuracy']):+.2f}"
        lines.append(f"| {row['regime']} | {row['delta_max']:g}{' *' if row['study_cap'] else ''} | {row['m']:.4g} | "
                     f"{row['runs']} | {percent(row['final_accuracy'], row['final_accuracy_std'])} | "
                     f"{percent(row['peak_accuracy'])} | {percent(row['sparsity'])} | {_bits(row['entropy'])} | "
                     f"{diff} |")
    return lines


def _table2_lines(table: list[dict]) -> list[str]:
    fp = next((row for row in table if row["name"] == "FP"), None)
    lines = ["| | Acc. (%) | Peak acc. (%) | Sparsity (%) | Entropy (bits/sym) | Acc. diff. (%) | Peak epoch |",
             "|---|---|---|---|---|---|---|"]
    for row in table:
        diff = "–" if fp is None or row is fp else f"{100 * (row['final_accuracy'] - fp['final_accuracy']):+.2f}"
        accuracy = percent(row["final_accuracy"], row["final_accuracy_std"])
        lines.append(f"| {row['name']} | {accuracy} | {percent(row['peak_accuracy'])} | {percent(row['sparsity'])} | "
                     f"{_bits(row['entropy'])} | {diff} | {row['peak_epoch']:.0f} |")
    return lines


def _compression_lines(compression: dict, seed: int) -> list[str]:
    lines = [f"## Compressed export (log regime, seed {seed})", "",
             "| format | bits/weight | vs pooled entropy | vs per-layer entropy | file (bytes) |",
             "|---|---|---|---|---|"]
    for fmt in compression["files"]:
        bits = compression[fmt]
        lines.append(f"| {fmt} | {bits:.4f} | {bits / compression['entropy']:.3f}x | "
                     f"{bits / compression['layer_entropy']:.3f}x | {compression['files'][fmt]:,} |")
    lines += ["", f"{compression['weights']:,} quantized weights; pooled entropy {compression['entropy']:.4f} "
              f"bits/weight, per-layer entropy {compression['layer_entropy']:.4f}. Accuracy of the model reloaded "
              f"from the {compression['reloaded_format']} file: {percent(compression['reloaded_accuracy'])}% (trained: "
              f"{percent(compression['trained_accuracy'])}%)."]
    return lines


def _run_lines(groups: dict[str, list[dict]]) -> list[str]:
    lines = ["| quantizer | regime | Δ0 | M | Δ_max | seed | acc. (%) | peak (%) | peak epoch | sparsity (%) | "
             "entropy |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for kind, rows in groups.items():
        for row in rows:
            delta = (f"{row['regime']} | {row['delta0']:g} | {row['m']:.4g} | {row['delta_max']:g}"
                     if kind == "ternary" else "– | – | – | –")
            lines.append(f"| {kind} | {delta} | {row['seed']} | {percent(row['final_accuracy'])} | "
                         f"{percent(row['peak_accuracy'])} | {row['peak_epoch']} | {percent(row['sparsity'])} | "
                         f"{_bits(row['entropy'])} |")
    return lines


TARGETS_NOTE = (
    "What the paper reaches on its data, judged from this run's numbers. A target `not met` is a measurement, not "
    "a failed run: short or small configurations (the `test` preset trains 1 epoch of a tiny ResNet) are not "
    "expected to meet them; the default and full presets are the ones to judge.")


def report_markdown(study: Study, table: list[dict], groups: dict[str, list[dict]], compression: dict | None,
             targets: list[str], params: int, caps: list[dict] | None = None) -> str:
    """The study's report (table.md): Table 2, the Δ_max exploration, the export, targets, all runs."""
    model = study.train.model
    lines = [
        f"# Ternary sparsification study: {study.train.dataset}",
        "",
        f"Model: ResNet, {model.blocks_per_stage} block(s)/stage, widths {model.stage_widths}, {params:,} "
        f"parameters; {study.train.epochs} epochs, batch {study.train.batch_size}; seeds {list(study.seeds)}. "
        f"Growing regimes: Δ0 = {study.delta0:g}, reaching Δ_max at epoch {study.cap_epoch}. Accuracy is the "
        "final-epoch test accuracy (mean ± std over seeds); peak is the best epoch's and its epoch the "
        "paper's training-speed metric.",
        "",
        *_table2_lines(table),
    ]
    if caps and len(caps) > 1:
        lines += ["", *cap_lines(caps, next((row for row in table if row["name"] == "FP"), None))]
    if compression:
        lines += ["", *_compression_lines(compression, study.seeds[0])]
    lines += ["", "## Targets", "", TARGETS_NOTE, "", *(f"- {line}" for line in targets)]
    lines += ["", "## All runs", "", *_run_lines(groups)]
    return "\n".join(lines) + "\n"


def check_targets(table: list[dict], compression: dict | None) -> list[str]:
    """The digits targets (log-regime sparsity, entropy, accuracy against FP and binary; ANS size against the
    entropy bound), each marked `met` or `not met` with the measured numbers (`TARGETS_NOTE` says what they mean)."""
    by_name = {row["name"]: row for row in table}
    log, fp, binary = by_name.get("Ours (log regime)"), by_name.get("FP"), by_name.get("Binary")
    lines = []

    def verdict(ok: bool, text: str):
        lines.append(f"{'met' if ok else 'not met'}: {text}")

    if log:
        verdict(log["sparsity"] >= 0.85, f"log-regime sparsity {percent(log['sparsity'])}% >= 85%")
        verdict(log["entropy"] <= 0.65, f"log-regime entropy {log['entropy']:.3f} <= 0.65 bits/symbol")
        if fp:
            gap = 100 * (fp["final_accuracy"] - log["final_accuracy"])
            verdict(gap <= 1.0, f"log-regime accuracy {percent(log['final_accuracy'])}% within 1 point of FP "
                                f"{percent(fp['final_accuracy'])}% (gap {gap:.2f})")
        if binary:
            verdict(log["final_accuracy"] > binary["final_accuracy"],
                    f"log-regime accuracy above binary {percent(binary['final_accuracy'])}%")
    if compression and "ans" in compression:
        pooled = compression["ans"] / compression["entropy"]
        layered = compression["ans"] / compression["layer_entropy"]
        verdict(max(pooled, layered) <= 1.05, f"ANS-coded size {pooled:.3f}x the pooled entropy and {layered:.3f}x "
                                              "the per-layer entropy bound (<= 1.05)")
    return lines


def plot(study: Study, results: dict[str, SweepResult], groups: dict[str, list[dict]], out: Path) -> None:
    """Fig. 2 (fixed Δ), Fig. 3 (regimes) and Fig. 4 (trade-offs) as PNG files in `out`."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'jax-research-systems[plots]'): skipping the plots")
        return
    ternary = results.get("ternary")
    if ternary is None:
        return
    epochs = np.arange(1, study.train.epochs + 1)
    marker = "o" if len(epochs) < 20 else None  # a one-epoch run (the test preset) is a point, not a line
    history = ternary.history
    first = study.seeds[0]

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for i, m in enumerate(ternary.members):
        if m.regime == "constant":
            ax.plot(epochs, 100 * history.test_accuracy[:, i], label=f"Δ = {m.delta0:g}", marker=marker)
    ax.set(xlabel="epoch", ylabel="test accuracy (%)", title="Fig. 2: fixed Δ")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "fig2_fixed_delta.png", dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for i, m in enumerate(ternary.members):
        if (m.regime in GROWING and m.delta_max == study.delta_max and m.seed == first) or (
            m.regime == "constant" and m.delta0 == study.delta0
        ):
            axes[0].plot(epochs, 100 * history.test_accuracy[:, i], label=m.regime, marker=marker)
            axes[1].plot(epochs, 100 * history.sparsity[:, i], label=m.regime, marker=marker)
    axes[0].set(xlabel="epoch", ylabel="test accuracy (%)", title=f"Fig. 3a: accuracy, Δ_max = {study.delta_max:g}")
    axes[1].set(xlabel="epoch", ylabel="sparsity (%)", title="Fig. 3b: sparsity")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(out / "fig3_regimes.png", dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for kind in ("constant",) + GROWING:
        rows = [r for r in groups["ternary"] if r["regime"] == kind]
        if rows:
            accuracy = [100 * r["final_accuracy"] for r in rows]
            axes[0].scatter([100 * r["sparsity"] for r in rows], accuracy, label=kind)
            axes[1].scatter([r["entropy"] for r in rows], accuracy, label=kind)
    for kind, style in (("binary", ":"), ("fp", "--")):
        if kind in groups:
            level = 100 * np.mean([r["final_accuracy"] for r in groups[kind]])
            for ax in axes:
                ax.axhline(level, linestyle=style, color="gray", label=kind)
    axes[0].set(xlabel="sparsity (%)", ylabel="test accuracy (%)", title="Fig. 4a: accuracy vs sparsity")
    axes[1].set(xlabel="entropy (bits/symbol)", ylabel="test accuracy (%)", title="Fig. 4b: accuracy vs entropy")
    axes[1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    fig.savefig(out / "fig4_tradeoffs.png", dpi=120)
    plt.close(fig)
