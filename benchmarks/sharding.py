"""Batch axis across devices: a vmapped jaxquant sweep and a jitted PPO run on 1 device against all devices.

    python -m benchmarks.sharding                                        # CPU: 2 host devices
    python -m benchmarks.sharding --host-devices 0                       # GPU/TPU: the real devices

Each side is the library's own entry point with `devices=N`: `jaxquant.run_sweep` of `--members` members (digits,
the small ResNet, `--epochs` epochs) and `jaxgraph.rl.make_jax_train` with `--envs` environments on the toy graph
(2 conv blocks, its 2 rules). Both are compiled before timing; the 1-device and N-device runs then alternate
(`jaxsched.common.timing.alternated_times`), each timed in wall seconds and in this process's CPU seconds: CPU / wall
is how many cores a run kept busy, which says whether one device already used every core (XLA:CPU runs one
device's large operations on its own thread pool), the reason more devices cannot help on a small machine.
The target on 2 cores: >= 1.6x on 2 devices.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host-devices", type=int, default=2,
                        help="fake CPU devices (XLA_FLAGS); 0 keeps the platform's own devices")
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--ppo-epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="alternated timed runs of each side")
    parser.add_argument("--devices", type=int, default=None, help="devices of the sharded side (default: all)")
    args = parser.parse_args(argv)
    if min(args.members, args.epochs, args.envs, args.ppo_epochs, args.repeats) < 1 or args.host_devices < 0:
        print("error: sizes and repeats must be positive (--host-devices >= 0)", file=sys.stderr)
        return 2
    if args.host_devices:
        os.environ["JAX_PLATFORMS"] = "cpu"
        os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.host_devices}"

    import dataclasses

    import jax
    import numpy as np

    import jaxquant as jq
    from jaxgraph import RULES, JaxEnv
    from jaxgraph.rl import make_jax_train, tiny_agent, toy_graph
    from jaxsched.common import alternated_times, machine_description

    devices = args.devices or len(jax.devices())
    if not 1 <= devices <= len(jax.devices()):
        print(f"error: --devices {devices} but there are {len(jax.devices())}", file=sys.stderr)
        return 2
    print(f"{machine_description(load=True)}; {devices} devices\n")

    config = jq.TrainConfig(epochs=args.epochs, learning_rates=(5e-3,), lr_epochs=(0,))
    dataset = jq.load_dataset(config.dataset, config.data_dir)
    members = [jq.SweepMember(("linear", "log")[i % 2], seed=i) for i in range(args.members)]

    def sweep(n):
        return lambda: jax.block_until_ready(
            jq.run_sweep(config, members, dataset=dataset, progress=False, devices=n).state)

    toy = toy_graph(2)
    agent = dataclasses.replace(tiny_agent(), num_envs=args.envs, epochs=args.ppo_epochs)
    env = JaxEnv(toy.graph, max_locations=agent.max_locations, rules=RULES[:2])
    key = jax.random.key(0)

    def ppo(n):
        compiled = jax.jit(make_jax_train(agent, env, devices=n)).lower(key).compile()
        return lambda: jax.block_until_ready(compiled(key))

    rows = [(f"jaxquant sweep, {args.members} members x {args.epochs} epoch(s)", sweep),
            (f"PPO, {args.envs} environments x {args.ppo_epochs} epochs", ppo)]
    print(f"| program | 1 device s | {devices} devices s | speed-up | cores busy, 1 device | "
          f"cores busy, {devices} devices |")
    print("|---|---|---|---|---|---|")
    for name, make in rows:
        sides = {"one": make(1), "all": make(devices)}
        for side in sides.values():
            side()  # compile (the sweep) and warm up
        seconds = {}
        for clock in ("wall", "cpu"):
            times = alternated_times(sides, args.repeats, 0, clock)
            seconds[clock] = {side: float(np.median(t)) for side, t in times.items()}
        wall, cpu = seconds["wall"], seconds["cpu"]
        print(f"| {name} | {wall['one']:.2f} | {wall['all']:.2f} | {wall['one'] / wall['all']:.2f}x | "
              f"{cpu['one'] / wall['one']:.2f} | {cpu['all'] / wall['all']:.2f} |", flush=True)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
