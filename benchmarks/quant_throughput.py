"""Training throughput (images/s) of quantization-aware training, per quantizer.

    python -m benchmarks.quant_throughput                                  # CPU: digits, small ResNet
    python -m benchmarks.quant_throughput --config resnet20 --cifar-dir PATH   # GPU: ResNet-20, CIFAR-10
    python -m benchmarks.quant_throughput --config resnet20 --paths loop,grouped,im2col   # random CIFAR-shaped

Times whole jitted epochs (`Trainer.run_epoch`: augmentation, forward, backward, Adam, projection
and the end-of-epoch evaluation) after one warm-up epoch that includes compilation, for the
full-precision, binary and ternary models, one member and a vmapped population of --members for each
of --paths (how vmapped members' convolutions batch: `ModelConfig.vmap_conv`, see `jaxquant.conv`).
The rate is that of the fastest of --epochs timed epochs (each from the warmed-up state: the same
work every time), the usual figure for a deterministic computation on a shared machine.
"""

from __future__ import annotations

import argparse
import dataclasses

import jax
import jax.numpy as jnp

import jaxquant as jq
from benchmarks.sweep import cifar_shaped, with_vmap_conv
from jaxquant import VMAP_CONV_PATHS, device_data
from jaxsched.common import best_time


def throughput(config: jq.TrainConfig, dataset: jq.Dataset, members: int, epochs: int) -> tuple[float, float]:
    """(training images per second over all members, compile-and-first-epoch seconds)."""
    trainer = jq.make_trainer(config, dataset)
    data = device_data(dataset, config.eval_batch_size)
    keys = jax.random.split(jax.random.key(0), members)
    regimes = jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (members,)), config.delta_regime())
    run_epoch = jax.jit(jax.vmap(trainer.run_epoch, in_axes=(0, 0, None, None)))
    state = jax.jit(jax.vmap(trainer.init))(keys)
    warmed = {}

    def first_epoch():
        warmed["state"] = jax.block_until_ready(run_epoch(state, regimes, jnp.int32(1), data))[0]

    warmup = best_time(first_epoch, repeats=1)  # compilation and the first epoch
    seconds = best_time(lambda: jax.block_until_ready(run_epoch(warmed["state"], regimes, jnp.int32(2), data)),
                        repeats=epochs)
    images = members * trainer.steps_per_epoch * config.batch_size
    return images / seconds, warmup


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=("digits", "resnet20", "resnet20star"), default="digits")
    parser.add_argument("--cifar-dir", default=None)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs after the warm-up (fastest counts)")
    parser.add_argument("--paths", default="auto", help=f"comma-separated vmap conv paths of {VMAP_CONV_PATHS}")
    parser.add_argument("--kinds", default="fp,binary,ternary", help="comma-separated quantizers")
    args = parser.parse_args(argv)
    paths, kinds = [p for p in args.paths.split(",") if p], [k for k in args.kinds.split(",") if k]
    if not paths or set(paths) - set(VMAP_CONV_PATHS) or not kinds:
        parser.exit(2, f"quant_throughput: --paths must name some of {VMAP_CONV_PATHS}; --kinds some quantizers\n")

    if args.config == "digits":
        base = jq.TrainConfig()
    else:
        model = jq.RESNET20 if args.config == "resnet20" else jq.RESNET20_STAR
        base = jq.TrainConfig(dataset="cifar10", data_dir=args.cifar_dir, model=model, batch_size=256,
                              eval_batch_size=1000)
    dataset = cifar_shaped() if base.dataset == "cifar10" and not args.cifar_dir else jq.load_dataset(
        base.dataset, base.data_dir)
    device = jax.devices()[0]
    print(f"device: {device.platform} ({device.device_kind}), jax {jax.__version__}; {args.config}, "
          f"widths {base.model.stage_widths}, {base.model.blocks_per_stage} block(s)/stage, batch {base.batch_size}\n")
    print("| quantizer | members | vmap conv path | images/s (all members) | images/s per member | "
          "compile + first epoch (s) |")
    print("|---|---|---|---|---|---|")
    for kind in kinds:
        config = dataclasses.replace(base, model=dataclasses.replace(base.model, quant=jq.QuantConfig(kind)))
        for members, path in [(1, "-")] + [(args.members, path) for path in paths]:
            rate, warmup = throughput(with_vmap_conv(config, "auto" if path == "-" else path), dataset, members,
                                      args.epochs)
            print(f"| {kind} | {members} | {path} | {rate:,.0f} | {rate / members:,.0f} | {warmup:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
