"""Load-aware scheduling of autotuning jobs (Stiller 2019): the evaluation on this machine plus a simulator study.

    python -m experiments.autotune                  # four real jobs, every policy; ~5 min on 2 quiet CPU cores
    python -m experiments.autotune --config test    # seconds: a smoke run
    python -m experiments.autotune --config full    # eight bigger jobs (for a larger machine)

One core plays the device (profiling is pinned to it). Writes results/autotune/{results.json,
results.md, gantt.png, simulation.png}; finished policies are kept in results/autotune/runs/ and a
rerun with the same config skips them (delete that folder to measure again); another config is refused.
"""

from __future__ import annotations

import argparse
import os
import sys

from experiments.autotune.configs import CONFIGS
from experiments.autotune.report import markdown
from experiments.autotune.study import run_study
from jaxsched.common import named_config


def main(argv=None) -> int:
    """Parse the flags and run the study (two usable cores at least); the exit code."""
    parser = argparse.ArgumentParser(prog="python -m experiments.autotune", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default", help=f"one of {', '.join(CONFIGS)}")
    parser.add_argument("--workdir", default="results/autotune")
    args = parser.parse_args(argv)
    if len(os.sched_getaffinity(0)) < 2:
        print("error: needs at least two usable cores (one plays the device)", file=sys.stderr)
        return 2
    try:
        results = run_study(named_config(CONFIGS, args.config), args.workdir)
    except ValueError as error:  # an unknown config name, a workdir of another configuration
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(markdown(results))
    return 0

