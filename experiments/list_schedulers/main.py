"""Every list scheduler (and the GA) on every workload family: makespan ratio to the best, runtime.

    python -m experiments.list_schedulers --config test       # seconds: a smoke run (CI)
    python -m experiments.list_schedulers                     # 10 instances of 50 tasks per family
    python -m experiments.list_schedulers --config full       # 50 instances of 100 tasks, 8 processors

Writes `--workdir`/{records.jsonl, config.json, results.md, heatmap.png}. A killed run resumes from
records.jsonl; a run with another configuration in the same workdir is refused (exit 2).
"""

from __future__ import annotations

import argparse

from experiments.list_schedulers.compare import compare, summarise
from experiments.list_schedulers.configs import CONFIGS
from experiments.list_schedulers.report import heatmap_png, markdown
from jaxsched.common import Workdir, named_config, write_text


def main(argv=None) -> None:
    """Parse the flags, run the comparison (resuming from records.jsonl) and write its table and heatmap."""
    parser = argparse.ArgumentParser(prog="python -m experiments.list_schedulers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="default", help=f"one of {', '.join(CONFIGS)}")
    parser.add_argument("--workdir", default="results/list_schedulers")
    args = parser.parse_args(argv)
    try:
        config = named_config(CONFIGS, args.config)
        work = Workdir(args.workdir, config)
    except ValueError as error:  # an unknown config, or a workdir of another configuration (ConfigMismatch)
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    workdir = work.path
    records = compare(config, workdir / "records.jsonl")
    families, ratios, seconds = summarise(records, config.names)
    table = markdown(families, ratios, seconds, config.names)
    write_text(workdir / "results.md", table + "\n")
    print(table)
    heatmap_png(families, ratios, config.names, workdir / "heatmap.png")

