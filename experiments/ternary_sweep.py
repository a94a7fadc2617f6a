"""The ternary sparsification study of Dordoni et al. (MLSP 2024), end to end.

    python -m experiments.ternary_sweep                       # digits, one seed (CPU, minutes)
    python -m experiments.ternary_sweep --seeds 4 --baselines fp,binary,twn,ttq   # the documented run
    python -m experiments.ternary_sweep --delta-max 0.3 --grid-delta-maxes 0.2,0.4 --grid-seeds 1  # other caps
    python -m experiments.ternary_sweep --config full --cifar-dir PATH   # the paper's study on CIFAR-10 (GPU)
    python -m experiments.ternary_sweep --config test          # seconds: the test suite's configuration

Runs the full-precision and binary baselines (optionally TWN and TTQ), the fixed-Δ runs of Fig. 2
and the growth regimes of Fig. 3/4 (at the study's cap Δ_max, and the log regime at further caps),
each group as one vmapped program with per-epoch orbax checkpoints (rerun the same command to
resume after a kill; another configuration is refused), then writes to --workdir:
  table.md       Table-2-style summary (accuracy, sparsity, entropy, difference to FP), the Δ_max
                 exploration, the compression report, the targets, all runs
  results.json   configuration, per-epoch histories, summary rows, compression report
  fig2_fixed_delta.png, fig3_regimes.png, fig4_tradeoffs.png   (needs matplotlib, extra "plots")
  models/        the log-regime model exported as 2-bit, base-3 and ANS-coded weights
"""


from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

import jaxquant as jq
from jaxsched.common import add_devices_option, checked_devices, preset, write_json, write_text


def plot(study: jq.Study, results: dict[str, jq.SweepResult], groups: dict[str, list[dict]], out: Path) -> None:
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
        if (m.regime in jq.GROWING and m.delta_max == study.delta_max and m.seed == first) or (
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
    for kind in ("constant",) + jq.GROWING:
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



def make_study(args: argparse.Namespace) -> jq.Study:
    """The chosen preset with the flags applied; ValueError for a bad value or config name."""
    study = preset(jq.CONFIGS, args.config)
    if args.epochs is not None:
        study = study.with_epochs(args.epochs)
    changes = {}
    if args.seeds is not None:
        changes["seeds"] = tuple(range(args.seeds))
    if args.baselines is not None:
        changes["baselines"] = tuple(kind for kind in args.baselines.split(",") if kind)
    if args.delta_max is not None:
        changes["delta_max"] = args.delta_max
    if args.grid_delta_maxes is not None:
        changes["grid_delta_maxes"] = tuple(float(c) for c in args.grid_delta_maxes.split(",") if c)
    if args.grid_seeds is not None:
        changes["grid_seeds"] = args.grid_seeds
    if args.cifar_dir is not None:
        changes["train"] = dataclasses.replace(study.train, data_dir=args.cifar_dir)
    return dataclasses.replace(study, **changes)


def main(argv=None) -> dict:
    """Parse the flags, run `jaxquant.train_and_evaluate` and write the report; returns the summary."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="default", help=f"one of {', '.join(jq.CONFIGS)}")
    parser.add_argument("--cifar-dir", default=None, help=f"CIFAR-10 directory (default: ${jq.data.CIFAR10_ENV})")
    parser.add_argument("--epochs", type=int, default=None, help="default: the config's (40 default, 500 full)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per setting; default: the config's")
    parser.add_argument("--baselines", default=None,
                        help="comma-separated baselines among fp, binary, twn, ttq (default: the config's)")
    parser.add_argument("--delta-max", type=float, default=None, help="cap of the regime comparison")
    parser.add_argument("--grid-delta-maxes", default=None, help="comma-separated further caps for the grid regimes")
    parser.add_argument("--grid-seeds", type=int, default=None, help="seeds of the grid runs (the first N)")
    parser.add_argument("--workdir", default="results/ternary")
    add_devices_option(parser)
    args = parser.parse_args(argv)
    checked_devices(parser, args.devices)
    try:
        study = make_study(args)
    except ValueError as error:
        parser.error(str(error))
    print(f"model: {study.train.model}")
    workdir = Path(args.workdir)
    try:
        result = jq.train_and_evaluate(study, workdir, progress=True, devices=args.devices)
    except (ValueError, FileNotFoundError) as error:  # bad data path or files, a workdir of another configuration
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    write_text(workdir / "table.md", result.report)
    write_json(workdir / "results.json", result.summary)
    plot(study, result.results, result.summary["runs"], workdir)
    print(result.report)
    print(f"wrote {workdir}/table.md, results.json and plots in {result.summary['seconds']:.0f} s")
    return result.summary


if __name__ == "__main__":
    main()
