"""Adversarial instance search throughput and findings: every ordered pair of list schedulers.

    python benchmarks/adversarial.py                        # 14 schedulers, 182 pairs x 4 chains, 1,000 steps
    python benchmarks/adversarial.py --steps 100 --chains-per-pair 1 --names HEFT MET OLB
    python benchmarks/adversarial.py --preset pisa          # PISA as SAGA runs it (3-5 tasks and nodes)
    python benchmarks/adversarial.py --preset pisa --tasks 50 --procs 16 --chains-per-pair 2

Runs `jaxsched.search` once to compile, then times a second search (another key): annealing steps
per second across the batch (chains x steps / seconds). Each chain's best instance is replayed
through the NumPy reference (float64) and the worst confirmed ratio per pair is printed as a table
and drawn as a heatmap (`--out`/heatmap.png, extra `plots`). Targets: >= 10,000 steps/s on 2 CPU
cores; a ratio >= 2 against some other scheduler for every scheduler.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import jax
import numpy as np

from jaxsched import SEARCH_NAMES, SEARCH_PRESETS, SearchConfig, replay, search, search_config
from jaxsched.common import add_devices_option, batch_mesh, join_from_environment, machine_description


def replayed_ratios(chains, config: SearchConfig) -> np.ndarray:
    """[S, S] worst makespan ratio per pair, each chain's best instance replayed by the NumPy reference
    (WBA with the chain's draws, HEFT, CPOP and PEFT under the search's rank convention)."""
    table = np.ones((len(config.names), len(config.names)))
    for c, (a, b) in enumerate(config.pairs):
        best = jax.tree.map(lambda x, c=c: x[c], chains.best)
        spans = replay(best, (config.names[a], config.names[b]), config.ranks, chains.draws[c])
        table[a, b] = max(table[a, b], spans[0] / spans[1])
    return table


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="uniform", help=f"one of {', '.join(SEARCH_PRESETS)}")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--chains-per-pair", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=None, help="tasks per instance (default: the preset's)")
    parser.add_argument("--procs", type=int, default=None, help="processors per instance (default: the preset's)")
    parser.add_argument("--names", nargs="+", default=list(SEARCH_NAMES))
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("results/adversarial"))
    add_devices_option(parser)
    args = parser.parse_args(argv)
    join_from_environment()
    try:
        sizes = {k: v for k, v in (("num_tasks", args.tasks), ("num_procs", args.procs)) if v is not None}
        config = search_config(
            args.preset, steps=args.steps, chains_per_pair=args.chains_per_pair, names=tuple(args.names), **sizes
        )
        mesh = batch_mesh(args.devices)
    except ValueError as error:
        parser.exit(2, f"{error}\n")
    steps = len(config.temperatures)
    print(
        f"# {args.preset}: {len(config.pairs)} chains, {steps} steps, "
        f"{config.num_tasks} tasks x {config.num_procs} procs"
    )
    print(f"# {machine_description(load=True)}")
    start = time.perf_counter()
    jax.block_until_ready(search(jax.random.key(0), config, mesh))
    compile_and_run = time.perf_counter() - start
    start = time.perf_counter()
    chains = jax.block_until_ready(search(jax.random.key(1), config, mesh))
    seconds = time.perf_counter() - start
    rate = len(config.pairs) * steps / seconds
    print(f"first call (compile + run) {compile_and_run:.1f} s; timed call {seconds:.2f} s: {rate:,.0f} steps/s")
    table = replayed_ratios(chains, config)
    print("\n| scheduler | worst ratio found | against |")
    print("|---|---|---|")
    for a, name in enumerate(config.names):
        b = int(np.argmax(np.where(np.arange(len(config.names)) == a, 0, table[a])))
        print(f"| {name} | {table[a, b]:.2f} | {config.names[b]} |")
    weakest = min(np.delete(table[a], a).max() for a in range(len(config.names)))
    print(f"\nsmallest worst ratio over schedulers: {weakest:.2f} (target >= 2)")
    print(f"{rate:,.0f} annealing steps/s (target >= 10,000)")
    try:
        from jaxsched import heatmap

        ax = heatmap(table, config.names, config.names, title="worst makespan ratio (row / column)", label="ratio")
        args.out.mkdir(parents=True, exist_ok=True)
        ax.figure.savefig(args.out / "heatmap.png", dpi=150, bbox_inches="tight")
        print(f"heatmap: {args.out / 'heatmap.png'}")
    except ImportError as error:
        print(error)


if __name__ == "__main__":
    main()
