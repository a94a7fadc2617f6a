"""DeepSched end to end: HEFT-labelled data, one network per variant, evaluation like the paper.

    python -m experiments.deepsched                   # the CPU default (a few minutes)
    python -m experiments.deepsched --config full     # the GPU configuration (188 processors)
    python -m experiments.deepsched --config test     # seconds: the test suite's configuration

Writes `<workdir>/` (default results/deepsched): config.json, results.json, results.md (the tables
printed at the end), PNG plots (with matplotlib), and checkpoints/<variant>/ (orbax; a rerun of the same
configuration resumes or reuses them, another configuration is refused). The labelled dataset is cached
under `--data-dir`.

Tables: per split (seen = training instances, unseen = test instances, ood = application graphs)
and size: makespan ratio to HEFT (mean, p95) of the main variant's greedy and sampling decoders,
average turnaround relative to HEFT (the paper's Fig. 4 metric), processor agreement with HEFT,
the GA's ratio (paper fitness, Eq. 1), and the share of instances where the network beats HEFT.
Then every variant on unseen instances, and a timing table like the paper's Table I.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from experiments.deepsched.configs import CONFIGS, VARIANTS, DeepSchedConfig
from experiments.deepsched.evaluate import train_and_evaluate
from experiments.deepsched.report import markdown, plots
from jaxsched.common import (
    ConfigMismatch,
    add_devices_option,
    batch_mesh,
    join_from_environment,
    named_config,
    write_text,
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (each flag overrides one field of the chosen configuration)."""
    parser = argparse.ArgumentParser(prog="python -m experiments.deepsched", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="default", help=f"one of {', '.join(CONFIGS)}")
    parser.add_argument("--workdir", default="results/deepsched")
    parser.add_argument("--data-dir", default=None, help="dataset cache (default: <workdir>/data)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, help="networks to train and compare")
    parser.add_argument("--main", choices=VARIANTS, help="variant of the main table")
    parser.add_argument(
        "--no-ablation", action="store_true", help="skip the feedback variant trained without its EFT prior"
    )
    parser.add_argument("--epochs", type=int, help="override the config's epochs")
    parser.add_argument("--eval-count", type=int, help="instances per split, generator and size")
    parser.add_argument("--samples", type=int, help="assignments drawn by the sampling decoder")
    parser.add_argument("--ga-population", type=int)
    parser.add_argument("--ga-generations", type=int)
    parser.add_argument("--no-ga", action="store_true")
    parser.add_argument("--timing-sizes", type=int, nargs="*", help="tasks of the timing table (none: no timing)")
    parser.add_argument("--timing-procs", type=int)
    parser.add_argument("--timing-ga-max", type=int, help="largest size the GA is timed at")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    add_devices_option(parser)
    return parser.parse_args(argv)


def make_config(args: argparse.Namespace) -> DeepSchedConfig:
    """The chosen configuration with the flags applied; ValueError for a bad value or config name."""
    config = named_config(CONFIGS, args.config)
    overrides = {
        "variants": None if args.variants is None else tuple(args.variants),
        "main": args.main,
        "count": args.eval_count,
        "samples": args.samples,
        "ga_population": args.ga_population,
        "ga_generations": args.ga_generations,
        "timing_sizes": None if args.timing_sizes is None else tuple(args.timing_sizes),
        "timing_procs": args.timing_procs,
        "timing_ga_max": args.timing_ga_max,
    }
    evaluation = {name: value for name, value in overrides.items() if value is not None}
    if args.no_ablation:
        evaluation["ablation"] = False
    if args.no_ga:
        evaluation["ga"] = False
    config = config.replace(eval=evaluation)
    if args.epochs is not None:
        config = config.replace(train={"epochs": args.epochs})
    return config


def main(argv: Sequence[str] | None = None) -> dict:
    """Runs the experiment; prints the tables and writes them to `<workdir>/results.md`."""
    args = parse_args(argv)
    join_from_environment()
    try:
        config = make_config(args)
        batch_mesh(args.devices)  # more devices than there are: one line, exit 2
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    workdir = Path(args.workdir)
    try:
        results = train_and_evaluate(config, workdir, args.data_dir, progress=not args.quiet, devices=args.devices)
    except ConfigMismatch as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    table = markdown(results)
    write_text(workdir / "results.md", table)
    if not plots(results, workdir):
        print("matplotlib is not installed: skipping plots (pip install 'jax-research-systems[plots]')")
    print(table)
    return results

