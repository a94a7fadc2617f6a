"""PPO on JaxEnv: compile time and seconds per epoch of the one jitted training program, against the number of
environments.

    python benchmarks/jax_ppo_epoch.py [--num-envs 8,256] [--backend onnxruntime]

The graph, rules and agent are the end-to-end race's (`benchmarks/ppo_wallclock.py`): the tiny study's BERT, all 28
rules, `CONFIGS["default"].agent` with `num_envs` replaced. For each size: the seconds to trace and lower
`jax_ppo.make_trainer(...).run` for one epoch, to compile it, and two epochs run one after the other (the first
call after compilation, then a second), and the environment steps per second of an epoch (PPO update included).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import jax

from experiments.graphopt_rl import CONFIGS, build_graph
from jaxgraph import BACKENDS, RULES, JaxEnv, Roofline
from jaxgraph.rl import jax_ppo
from jaxsched.common import machine_description


def epoch_seconds(num_envs: int, backend: str) -> dict[str, float]:
    """Lower, compile and two epochs' seconds of the JaxEnv PPO program with `num_envs` environments."""
    config = CONFIGS["default"]
    agent = dataclasses.replace(config.agent, num_envs=num_envs)
    env = JaxEnv(build_graph(config, "bert"), max_locations=agent.max_locations, rules=RULES,
                 cost_model=Roofline(backend=BACKENDS[backend]), max_steps=agent.max_steps)
    trainer = jax_ppo.make_trainer(agent, env)
    state = jax.jit(trainer.init)(jax.random.key(0))
    keys = jax.random.split(jax.random.key(1), 1)
    times = [time.perf_counter()]
    lowered = jax.jit(trainer.run).lower(state, keys)
    times.append(time.perf_counter())
    run = lowered.compile()
    times.append(time.perf_counter())
    for _ in range(2):
        state = jax.block_until_ready(run(state, keys))[0]
        times.append(time.perf_counter())
    lower, compile_, first, second = (b - a for a, b in zip(times, times[1:]))
    return dict(lower=lower, compile=compile_, first=first, second=second,
                steps_per_s=num_envs * agent.rollout_steps / second)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", default="8,256", help="comma-separated environment counts")
    parser.add_argument("--backend", default="onnxruntime", choices=sorted(BACKENDS))
    args = parser.parse_args(argv)
    try:
        sizes = [int(n) for n in args.num_envs.split(",") if n]
        if not sizes or min(sizes) < 1:
            raise ValueError
    except ValueError:
        print(f"error: --num-envs must be positive integers, got {args.num_envs!r}", file=sys.stderr)
        return 2
    print(f"{machine_description(load=True)}; default study BERT, "
          f"cost Roofline(backend={args.backend}), 16 steps per environment an epoch\n")
    print("| environments | lower s | compile s | first epoch s | second epoch s | env steps/s (with the update) |")
    print("|---|---|---|---|---|---|")
    for size in sizes:
        t = epoch_seconds(size, args.backend)
        print(f"| {size} | {t['lower']:.1f} | {t['compile']:.1f} | {t['first']:.2f} | {t['second']:.2f} | "
              f"{t['steps_per_s']:,.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
