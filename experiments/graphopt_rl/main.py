"""The graph-optimization agents of seed 004 (thesis chapter 5), end to end.

    python -m experiments.graphopt_rl                 # the default: small graphs, CPU, minutes
    python -m experiments.graphopt_rl --config full   # the thesis's graphs and sizes (GPU machine)
    python -m experiments.graphopt_rl --config test   # seconds (the test suite)
    python -m experiments.graphopt_rl --settings research   # one setting only (a configuration of its own)

Two settings, never mixed: `research` (TASO's cost model and full rule table, `TASO_RULES`, for every method:
greedy, TASO search at alpha 1.0 and 1.05, equality saturation with greedy and ILP extraction, the exhaustive
optimum where the reachable space is small enough, and the agents; on SqueezeNet the Table 5.1 analog; gains
are cost reductions) and `deployment` (onnxruntime's runtime-aware cost and `RULES`: greedy, TASO search and the
agents, with the measured end-to-end latency of each result in onnxruntime and JAX; on BERT the Table 5.1 analog
and the real vs dream step time; a multi-graph agent on a held-out graph).
For every agent the best cost found against real-environment steps. Writes to --workdir (a rerun of the same
configuration resumes; another configuration is refused):
  config.json, results.json, table.md, <setting>/models/*.json (one per finished model: a rerun skips them),
  deployment/held_out.json, checkpoints/ (per-epoch orbax checkpoints of the model-free agents: a rerun resumes
  them), sample_efficiency_<setting>.png, rewards.png, world_model.png, transformations.png
"""

from __future__ import annotations

import argparse
import dataclasses

from experiments.graphopt_rl.configs import CONFIGS
from experiments.graphopt_rl.report import results_table
from experiments.graphopt_rl.settings import SETTINGS
from experiments.graphopt_rl.study import run_study
from jaxsched.common import ConfigMismatch, add_devices_option, checked_devices


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run (or resume) `run_study` in --workdir and print the table; 0 when done."""
    parser = argparse.ArgumentParser(prog="python -m experiments.graphopt_rl", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="default", choices=tuple(CONFIGS))
    parser.add_argument("--workdir", default="results/graphopt_rl")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--settings", nargs="+", choices=tuple(SETTINGS),
                        help="run only these settings (default: the config's)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--jitted-agent", action=argparse.BooleanOptionalAction, default=None,
                        help="research setting: also the jitted multi-graph agent (default: the config's; on in full)")
    add_devices_option(parser)
    args = parser.parse_args(argv)
    checked_devices(parser, args.devices)
    config = CONFIGS[args.config]
    if args.settings:
        config = dataclasses.replace(config, settings=tuple(dict.fromkeys(args.settings)))
    if args.jitted_agent is not None:
        config = dataclasses.replace(config, jitted_agent=args.jitted_agent)
    try:
        results = run_study(config, args.workdir, seed=args.seed, progress=not args.quiet, devices=args.devices)
    except ConfigMismatch as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    print(results_table(results))
    return 0
