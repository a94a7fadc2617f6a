"""PISA's heatmap in one command: every ordered pair of schedulers searched adversarially, each cell the
worst makespan ratio found (scheduler / base), replayed through the NumPy reference.

    python -m experiments.pisa                                # preset pisa: 14 schedulers, 10 restarts
    python -m experiments.pisa --preset pisa-2024 --restarts 4
    python -m experiments.pisa --tasks 50 --procs 16 --restarts 2    # where SAGA cannot go
    python -m experiments.pisa --names HEFT FastestNode CPOP --out results/pisa_small
    python -m experiments.pisa --judge results/deepsched/checkpoints/feedback   # DeepSched on the worst instances
    python -m experiments.pisa --deepsched results/deepsched/checkpoints/feedback   # ... and searched against

Prints the table and PISA's findings (HEFT / FastestNode, the least worst ratio over schedulers, how many
schedulers are 5x worse than another), writes `--out`/{instances.npz, heatmap.md, heatmap.png}; the
chains are split across `--devices` (default all). `--judge CHECKPOINT` loads a trained DeepSched
(`jaxsched.deepsched.NeuralScheduler`) and reports its makespan over the best heuristic's on every cell's
worst instance. `--deepsched CHECKPOINT` then searches adversarially against the network itself: one more
scheduler in the jitted search (`jaxsched.deepsched.NeuralScheduler.dense`), every pair (DeepSched, heuristic)
with `--restarts` chains, and reports its worst ratio to each heuristic and, on those instances, to the best
heuristic. Make a checkpoint with `python -m experiments.deepsched --variants feedback --main feedback
--no-ablation --no-ga --timing-sizes` (the default CPU config; `<workdir>/checkpoints/feedback`). Bad input:
one line, exit 2.
"""

from __future__ import annotations

import argparse
import pathlib

import numpy as np

from jaxsched import (
    LEARNED,
    SEARCH_NAMES,
    SEARCH_PRESETS,
    against_best,
    heatmap_search,
    judge,
    save_heatmap,
    search_config,
    table_markdown,
)
from jaxsched.common import add_devices_option, batch_mesh, join_from_environment, machine_description

TRAIN_COMMAND = (
    "python -m experiments.deepsched --variants feedback --main feedback --no-ablation --no-ga --timing-sizes "
    "(then <workdir>/checkpoints/feedback)"
)


def findings(names: tuple[str, ...], table: np.ndarray) -> list[str]:
    """PISA's headline findings read off a replayed table."""
    worst = np.array([np.delete(table[a], a).max() for a in range(len(names))])
    lines = [
        f"least worst ratio over schedulers: {worst.min():.2f} ({names[int(worst.argmin())]}; PISA: every one >= 2)",
        f"schedulers >= 5x worse than another: {int((worst >= 5).sum())} of {len(names)} (PISA: 10 of 15)",
    ]
    if {"HEFT", "FastestNode"} <= set(names):
        ratio = table[names.index("HEFT"), names.index("FastestNode")]
        lines.insert(0, f"HEFT / FastestNode: {ratio:.2f} (PISA: 4.34)")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="pisa", help=f"one of {', '.join(SEARCH_PRESETS)}")
    parser.add_argument("--restarts", type=int, default=10, help="chains per ordered pair")
    parser.add_argument("--names", nargs="+", default=list(SEARCH_NAMES), help="schedulers (default: all 14)")
    parser.add_argument("--tasks", type=int, default=None, help="tasks per instance (default: the preset's range)")
    parser.add_argument("--procs", type=int, default=None, help="processors (default: the preset's range)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("results/pisa"))
    parser.add_argument("--judge", type=pathlib.Path, default=None, help="a DeepSched checkpoint directory to judge")
    parser.add_argument(
        "--deepsched", type=pathlib.Path, default=None, help="a DeepSched checkpoint directory to search against"
    )
    parser.add_argument("--no-heatmap", action="store_true", help="skip the heuristics' heatmap (with --deepsched)")
    add_devices_option(parser)
    args = parser.parse_args(argv)
    join_from_environment()
    sizes = {k: v for k, v in (("num_tasks", args.tasks), ("num_procs", args.procs)) if v is not None}
    try:
        config = search_config(args.preset, chains_per_pair=args.restarts, names=tuple(args.names), **sizes)
        mesh = batch_mesh(args.devices)
        if args.judge is not None or args.deepsched is not None:
            from jaxsched.deepsched import NeuralScheduler
        network = None if args.judge is None else NeuralScheduler.load(args.judge)
        if args.deepsched is not None:
            if not args.deepsched.is_dir():
                raise FileNotFoundError(f"no checkpoint directory at {args.deepsched}; make one with {TRAIN_COMMAND}")
            learned = NeuralScheduler.load(args.deepsched)
            names = tuple(args.names) + (LEARNED,)
            versus = search_config(args.preset, chains_per_pair=args.restarts, names=names, targets=(LEARNED,), **sizes)
        elif args.no_heatmap:
            raise ValueError("--no-heatmap leaves nothing to do without --deepsched")
    except (ValueError, FileNotFoundError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    shown = versus if args.no_heatmap else config
    print(
        f"# {args.preset}: {len(shown.names)} schedulers, {len(shown.pairs)} chains, "
        f"{len(shown.temperatures)} steps, {shown.num_tasks} tasks x {shown.num_procs} processors, "
        f"{mesh.devices.size} device(s)"
    )
    print(f"# {machine_description(load=True)}")
    if not args.no_heatmap:
        heuristics(args, config, mesh, network)
    if args.deepsched is not None:
        against_network(args, versus, mesh, learned)


def heuristics(args, config, mesh, network) -> None:
    """The heuristics' heatmap, its findings and files; `network` judged on its worst instances."""
    heatmap = heatmap_search(config, args.seed, mesh)
    print(f"search (compilation included): {heatmap.seconds:.1f} s\n")
    print(table_markdown(heatmap))
    print()
    gap = np.abs(heatmap.searched - heatmap.replayed) / heatmap.replayed
    print(f"largest gap between the float32 search and the float64 replay: {gap.max():.1e}")
    for line in findings(heatmap.names, heatmap.replayed):
        print(line)
    for path in save_heatmap(heatmap, args.out):
        print(f"wrote {path}")
    if network is not None:
        ratios = judge(lambda problem: network.schedule(problem).makespan, heatmap)
        a, b = np.unravel_index(np.argmax(ratios), ratios.shape)
        median = np.median(ratios[~np.eye(len(ratios), dtype=bool)])
        print(
            f"DeepSched / best heuristic on the worst instances: worst {ratios.max():.2f} (cell "
            f"{heatmap.names[a]} / {heatmap.names[b]}), median {median:.2f} (goal: worst <= 2)"
        )


def against_network(args, config, mesh, learned) -> None:
    """DeepSched searched against: its row of the heatmap and its ratio to the best heuristic there."""
    heatmap = heatmap_search(config, args.seed, mesh, learned)
    print(f"\n{LEARNED} searched against ({len(config.pairs)} chains): {heatmap.seconds:.1f} s\n")
    print(table_markdown(heatmap))
    best = against_best(heatmap, LEARNED, learned)
    row = heatmap.replayed[heatmap.names.index(LEARNED)]
    worst, hardest = int(np.nanargmax(best)), int(np.nanargmax(row))
    print(
        f"\n{LEARNED} / heuristic, worst per pair: worst {row[hardest]:.2f} ({heatmap.names[hardest]}), "
        f"median {np.nanmedian(row):.2f}"
    )
    print(
        f"{LEARNED} / best heuristic on those instances: worst {best[worst]:.2f} (found against "
        f"{heatmap.names[worst]}), median {np.nanmedian(best):.2f} (goal: worst <= 2)"
    )
    for path in save_heatmap(heatmap, args.out / "deepsched"):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
