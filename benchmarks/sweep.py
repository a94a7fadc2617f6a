"""Sweep efficiency: K configurations in one vmapped program against K sequential runs, per conv path.

    python benchmarks/sweep.py                                          # CPU: digits, small ResNet
    python benchmarks/sweep.py --config resnet20 --cifar-dir PATH       # GPU: ResNet-20 on CIFAR-10
    python benchmarks/sweep.py --config resnet20                        # ... on CIFAR-shaped random data

Both sides run `jaxquant.make_train` for the same number of steps: the vmapped side as
`jit(vmap(train))(keys, regimes)` over K members with different Δ regimes and seeds, once per
`--paths` (how vmapped members' convolutions batch: `ModelConfig.vmap_conv`, see `jaxquant.conv`),
the sequential side as K calls of one compiled `jit(train)` (an unbatched run is the same plain
convolution on every path). Compilation is timed separately and excluded from the run times. The GPU
target: the vmapped sweep takes <= 3x one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Sequence

import jax
import numpy as np

import jaxquant as jq
from jaxquant import VMAP_CONV_PATHS
from jaxsched.common import alternated_times, machine_description

REGIMES = ("constant", "linear", "square", "exp", "log")


def members(k: int) -> list[jq.SweepMember]:
    """K members cycling through the regimes with different seeds and caps."""
    out = []
    for i in range(k):
        kind = REGIMES[i % len(REGIMES)]
        m = 0.0 if kind == "constant" else jq.multiplier_reaching_cap(kind, 0.1, 0.3, 2)
        out.append(jq.SweepMember(kind, 0.1, m, 0.3 + 0.02 * (i // len(REGIMES)), seed=i))
    return out


def cifar_shaped(train: int = 50_000, test: int = 10_000, seed: int = 0) -> jq.Dataset:
    """Random uint8 images of CIFAR-10's shape (32 x 32 x 3, 10 classes, its augmentation): the same work per step
    as CIFAR-10, for timing where the files are absent."""
    rng = np.random.default_rng(seed)
    images = lambda n: rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)  # noqa: E731
    labels = lambda n: rng.integers(0, 10, n).astype(np.int32)  # noqa: E731
    return jq.Dataset("cifar10", images(train), labels(train), images(test), labels(test),
                      np.full(3, 127.5, np.float32), np.full(3, 64.0, np.float32), 10, pad=4, flip=True)


def sweep_config(name: str, epochs: int | None = None, cifar_dir: str | None = None) -> jq.TrainConfig:
    """The benchmark's training setup: "digits" (the small ResNet) or "resnet20" (batch 128), one learning rate."""
    if name == "digits":
        config = jq.TrainConfig(epochs=epochs or 3)
    else:
        config = jq.TrainConfig(dataset="cifar10", data_dir=cifar_dir, model=jq.RESNET20, epochs=epochs or 2,
                                batch_size=128, eval_batch_size=1000)
    return dataclasses.replace(config, learning_rates=(5e-3,), lr_epochs=(0,))


def with_vmap_conv(config: jq.TrainConfig, path: str) -> jq.TrainConfig:
    """`config` with its model's convolutions batched along `path` under vmap."""
    return dataclasses.replace(config, model=dataclasses.replace(config.model, vmap_conv=path))


def sweep_seconds(config: jq.TrainConfig, dataset: jq.Dataset, k: int, repeats: int,
                  paths: Sequence[str] = ("auto",)) -> dict:
    """Median seconds of the vmapped sweep of `k` members per path ("vmapped <path>") and of the `k` runs one
    after another ("sequential"), alternated; compile seconds ("compile <side>") and the largest train-loss
    difference per epoch between each vmapped path and the separate runs ("drift <path>")."""
    keys, regimes = jq.member_inputs(members(k))
    member = lambda i: (keys[i], jax.tree.map(lambda leaf: leaf[i], regimes))  # noqa: E731
    compiled, out = {}, {}

    def compile_timed(name, fn, *args):
        start = time.perf_counter()
        compiled[name] = jax.jit(fn).lower(*args).compile()
        out[f"compile {name}"] = time.perf_counter() - start

    for path in paths:
        compile_timed(path, jax.vmap(jq.make_train(with_vmap_conv(config, path), dataset)), keys, regimes)
    compile_timed("one", jq.make_train(config, dataset), *member(0))
    metrics = {}

    def vmapped(path):
        def run():
            metrics[path] = jax.block_until_ready(compiled[path](keys, regimes))[1]
        return run

    def sequential():
        metrics["one"] = [jax.block_until_ready(compiled["one"](*member(i)))[1] for i in range(k)]

    sides = {f"vmapped {path}": vmapped(path) for path in paths} | {"sequential": sequential}
    times = alternated_times(sides, repeats, warmup=0)  # turns alternate, so a slow spell hits every side
    out.update({name: float(np.median(t)) for name, t in times.items()})
    alone = np.stack([np.asarray(m.train_loss) for m in metrics["one"]])
    for path in paths:
        out[f"drift {path}"] = np.abs(alone - np.asarray(metrics[path].train_loss)).max(axis=0).tolist()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=("digits", "resnet20"), default="digits")
    parser.add_argument("--cifar-dir", default=None, help="resnet20: CIFAR-10's files (default: random CIFAR-shaped)")
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=None, help="default: 3 (digits), 2 (resnet20)")
    parser.add_argument("--repeats", type=int, default=3, help="alternated timed runs of each side (medians)")
    parser.add_argument("--paths", default="auto", help=f"comma-separated vmap conv paths of {VMAP_CONV_PATHS}")
    args = parser.parse_args(argv)
    paths = [p for p in args.paths.split(",") if p]
    if not paths or set(paths) - set(VMAP_CONV_PATHS) or min(args.members, args.repeats) < 1:
        parser.exit(2, f"sweep: --paths must name some of {VMAP_CONV_PATHS}; --members, --repeats positive\n")

    config = sweep_config(args.config, args.epochs, args.cifar_dir)
    dataset = (cifar_shaped() if args.config == "resnet20" and not args.cifar_dir
               else jq.load_dataset(config.dataset, config.data_dir))
    steps = config.epochs * (len(dataset.train_labels) // config.batch_size)
    out = sweep_seconds(config, dataset, args.members, args.repeats, paths)
    one_run = out["sequential"] / args.members

    print(f"machine: {machine_description(load=True)}")
    print(f"config: {args.config}, model widths {config.model.stage_widths}, {config.model.blocks_per_stage} "
          f"block(s)/stage, batch {config.batch_size}, {steps} steps per member\n")
    print(f"medians of {args.repeats} alternated runs; compilation timed once, excluded from the runs; "
          f"sequential {out['sequential']:.2f} s, one run {one_run:.2f} s (compile {out['compile one']:.1f} s)")
    print("| K | vmap conv path | vmapped (s) | vmapped / one run | vmapped / sequential | compile vmapped (s) | "
          "max train-loss drift |")
    print("|---|---|---|---|---|---|---|")
    for path in paths:
        vmapped = out[f"vmapped {path}"]
        print(f"| {args.members} | {path} | {vmapped:.2f} | {vmapped / one_run:.2f}x | "
              f"{vmapped / out['sequential']:.2f}x | {out[f'compile {path}']:.1f} | "
              f"{max(out[f'drift {path}']):.1e} |")
    print("\ndrift: max |train loss difference| vmapped vs sequential over the epochs (float rounding, amplified by "
          "Adam and the thresholds)")


if __name__ == "__main__":
    main()
