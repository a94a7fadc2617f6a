"""Every list scheduler (and the GA) on every workload family: makespan ratio to the best, runtime.

    python -m experiments.list_schedulers --config test       # seconds: a smoke run (CI)
    python -m experiments.list_schedulers                     # 10 instances of 50 tasks per family
    python -m experiments.list_schedulers --config full       # 50 instances of 100 tasks, 8 processors

Writes `--workdir`/{records.jsonl, config.json, results.md, heatmap.png}. A killed run resumes from
records.jsonl; a run with another configuration in the same workdir is refused (exit 2).
"""

from __future__ import annotations

import argparse

from jaxsched.common import Workdir, preset, write_text
from jaxsched.comparison import ComparisonConfig, compare, summarise

CONFIGS = {
    "test": ComparisonConfig(instances=1, num_tasks=12, num_procs=3, ga_population=6, ga_generations=2),
    "default": ComparisonConfig(),
    "full": ComparisonConfig(instances=50, num_tasks=100, num_procs=8, ga_population=100, ga_generations=100),
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="default", help=f"one of {', '.join(CONFIGS)}")
    parser.add_argument("--workdir", default="results/list_schedulers")
    args = parser.parse_args(argv)
    try:
        config = preset(CONFIGS, args.config)
        work = Workdir(args.workdir, config)
    except ValueError as error:  # an unknown config, or a workdir of another configuration (ConfigMismatch)
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    workdir = work.path
    records = compare(config, workdir / "records.jsonl")
    families, ratios, seconds = summarise(records, config.names)
    lines = ["| family | " + " | ".join(config.names) + " |", "|---|" + "---|" * len(config.names)]
    lines += [f"| {f} | " + " | ".join(f"{r:.3f}" for r in row) + " |" for f, row in zip(families, ratios)]
    lines += ["", "| scheduler | mean seconds per schedule |", "|---|---|"]
    lines += [f"| {n} | {s:.4f} |" for n, s in zip(config.names, seconds)]
    table = "\n".join(lines)
    write_text(workdir / "results.md", table + "\n")
    print(table)
    try:
        import matplotlib

        matplotlib.use("Agg")
        from jaxsched.plot import heatmap

        ax = heatmap(ratios, families, config.names, title="mean makespan / best makespan", label="ratio")
        ax.figure.savefig(workdir / "heatmap.png", dpi=150, bbox_inches="tight")
        print(f"heatmap: {workdir / 'heatmap.png'}")
    except ImportError:
        print("matplotlib not installed (extra `plots`): no heatmap written")


if __name__ == "__main__":
    main()
