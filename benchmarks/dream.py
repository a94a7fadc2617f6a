"""Dream throughput: batched dream steps per second (world model imagining + controller acting, vmapped).

    python benchmarks/dream.py [--config default] [--batches 1024,2048,4096] [--json out.json]

One lockstep step of N dreams is what a dream-training rollout does per step: the controller (LatentPolicy on
[z, h]) samples an action under the predicted masks and values the next state, the MDN-RNN advances every dream
(LSTM, mixture sample at tau 1, reward, terminal and masks), finished dreams restart. The networks have the
study config's sizes (`experiments.graphopt_rl.CONFIGS`: the world model, controller, latent and action space of the
BERT run) with freshly initialised parameters: the time of a step does not depend on the parameter values.
The target: >= 100,000 steps/s on a CPU, >= 1,000,000 on a GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import jax
import jax.numpy as jnp

from experiments.graphopt_rl import CONFIGS, dream_step_seconds
from jaxgraph import RULES
from jaxgraph.rl import MDNRNN, DreamStart
from jaxsched.common import machine_description


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="default", choices=tuple(CONFIGS))
    parser.add_argument("--batches", default="1024,2048,4096", help="dreams per lockstep step, comma-separated")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    try:
        batches = [int(b) for b in args.batches.split(",")]
        if min(batches) < 1 or args.repeats < 1:
            raise ValueError
    except ValueError:
        print(f"error: --batches must be positive integers and --repeats positive, got {args.batches!r}, "
              f"{args.repeats}", file=sys.stderr)
        return 2
    config = CONFIGS[args.config]
    latent, max_locations, num_xfers = config.agent.latent, config.agent.max_locations, len(RULES)
    model = MDNRNN(latent, num_xfers, max_locations, config.world_model)
    params = jax.jit(model.init)(jax.random.key(0), model.initial_carry(), jnp.zeros(latent),
                                 jnp.zeros(2, jnp.int32))
    start = DreamStart(jax.random.normal(jax.random.key(1), (1, latent)), jnp.ones((1, num_xfers + 1), bool),
                       jnp.ones((1, num_xfers, max_locations), bool))
    print(f"{machine_description(load=True)}; config {args.config}: LSTM "
          f"{config.world_model.hidden}, {config.world_model.mixtures} Gaussians, latent {latent}, controller "
          f"{config.dream.hidden}, {num_xfers} xfers x {max_locations} locations\n")
    print("| dreams per step | ms per lockstep step | dream steps/s |\n|---|---|---|")
    rows = []
    for batch in batches:
        seconds = dream_step_seconds(dataclasses.replace(config.dream, num_envs=batch), model, params, start,
                                     args.repeats)
        rows.append({"batch": batch, "step_ms": 1e3 * seconds, "steps_per_s": batch / seconds})
        print(f"| {batch} | {1e3 * seconds:.2f} | {batch / seconds:,.0f} |", flush=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"config": args.config, "device": jax.devices()[0].platform, "rows": rows}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
