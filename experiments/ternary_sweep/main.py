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

from experiments.ternary_sweep.configs import CONFIGS, Study
from experiments.ternary_sweep.report import plot
from experiments.ternary_sweep.train import train_and_evaluate
from jaxquant import CIFAR10_ENV
from jaxsched.common import add_devices_option, checked_devices, named_config, write_json, write_text


def make_study(args: argparse.Namespace) -> Study:
    """The chosen preset with the flags applied; ValueError for a bad value or config name."""
    study = named_config(CONFIGS, args.config)
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
    """Parse the flags, run `train_and_evaluate` and write the report; returns the summary."""
    parser = argparse.ArgumentParser(prog="python -m experiments.ternary_sweep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="default", help=f"one of {', '.join(CONFIGS)}")
    parser.add_argument("--cifar-dir", default=None, help=f"CIFAR-10 directory (default: ${CIFAR10_ENV})")
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
        result = train_and_evaluate(study, workdir, progress=True, devices=args.devices)
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
