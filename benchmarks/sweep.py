"""Sweep efficiency: K configurations in one vmapped program against K sequential runs.

    python benchmarks/sweep.py                                          # CPU: digits, small ResNet
    python benchmarks/sweep.py --config resnet20 --cifar-dir PATH       # GPU: ResNet-20 on CIFAR-10

Both sides run `jaxquant.make_train` for the same number of steps: the vmapped side as
`jit(vmap(train))(keys, regimes)` over K members with different Δ regimes and seeds, the
sequential side as K calls of one compiled `jit(train)`. Compilation is timed separately and
excluded from the run times. The GPU target: the vmapped sweep takes <= 3x one run.
"""

from __future__ import annotations

import argparse
import dataclasses

import jax
import numpy as np

import jaxquant as jq
from jaxsched.common.machine import machine_description
from jaxsched.common.timing import alternated_times, best_time

REGIMES = ("constant", "linear", "square", "exp", "log")


def members(k: int) -> list[jq.SweepMember]:
    """K members cycling through the regimes with different seeds and caps."""
    out = []
    for i in range(k):
        kind = REGIMES[i % len(REGIMES)]
        m = 0.0 if kind == "constant" else jq.multiplier_reaching_cap(kind, 0.1, 0.3, 2)
        out.append(jq.SweepMember(kind, 0.1, m, 0.3 + 0.02 * (i // len(REGIMES)), seed=i))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=("digits", "resnet20"), default="digits")
    parser.add_argument("--cifar-dir", default=None)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=None, help="default: 3 (digits), 2 (resnet20)")
    parser.add_argument("--repeats", type=int, default=3, help="alternated timed runs of each side (medians)")
    args = parser.parse_args(argv)

    if args.config == "digits":
        config = jq.TrainConfig(epochs=args.epochs or 3)
    else:
        config = jq.TrainConfig(dataset="cifar10", data_dir=args.cifar_dir, model=jq.RESNET20,
                                epochs=args.epochs or 2, batch_size=128, eval_batch_size=1000)
    config = dataclasses.replace(config, learning_rates=(5e-3,), lr_epochs=(0,))
    dataset = jq.load_dataset(config.dataset, config.data_dir)
    train = jq.make_train(config, dataset)
    keys, regimes = jq.member_inputs(members(args.members))
    steps = config.epochs * (len(dataset.train_labels) // config.batch_size)

    member = lambda i: (keys[i], jax.tree.map(lambda leaf: leaf[i], regimes))  # noqa: E731
    compiled = {}

    def compile_vmapped():
        compiled["vmapped"] = jax.jit(jax.vmap(train)).lower(keys, regimes).compile()

    def compile_single():
        compiled["single"] = jax.jit(train).lower(*member(0)).compile()

    vmapped_compile, single_compile = best_time(compile_vmapped, 1), best_time(compile_single, 1)
    vmapped_compiled, single_compiled = compiled["vmapped"], compiled["single"]

    outputs = {}  # the last run's metrics of each side, for the drift check

    def run_vmapped():
        outputs["together"] = jax.block_until_ready(vmapped_compiled(keys, regimes))[1]

    def run_sequential():
        outputs["alone"] = [jax.block_until_ready(single_compiled(*member(i)))[1] for i in range(args.members)]

    # The sides alternate (vmapped, sequential, vmapped, ...) so a slow spell of the machine hits both.
    times = alternated_times({"vmapped": run_vmapped, "sequential": run_sequential}, args.repeats, warmup=0)
    vmapped_time, sequential_time = float(np.median(times["vmapped"])), float(np.median(times["sequential"]))
    one_run = sequential_time / args.members
    losses = np.stack([np.asarray(alone.train_loss) for alone in outputs["alone"]])
    drift = np.abs(losses - np.asarray(outputs["together"].train_loss)).max(axis=0)  # [epochs]

    print(f"machine: {machine_description(load=True)}")
    print(f"config: {args.config}, model widths {config.model.stage_widths}, {config.model.blocks_per_stage} "
          f"block(s)/stage, batch {config.batch_size}, {steps} steps per member\n")
    print(f"medians of {args.repeats} alternated runs; compilation timed once, excluded from the runs")
    print("| K | vmapped (s) | sequential (s) | one run (s) | vmapped / one run | vmapped / sequential | "
          "compile vmapped (s) | compile one (s) |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.members} | {vmapped_time:.2f} | {sequential_time:.2f} | {one_run:.2f} | "
          f"{vmapped_time / one_run:.2f}x | {vmapped_time / sequential_time:.2f}x | {vmapped_compile:.1f} | "
          f"{single_compile:.1f} |")
    print(f"\nmax |train loss difference| vmapped vs sequential, per epoch: "
          f"{', '.join(f'{d:.1e}' for d in drift)} (float rounding, amplified by Adam and the thresholds)")


if __name__ == "__main__":
    main()
