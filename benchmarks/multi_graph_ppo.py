"""A multi-graph PPO epoch: the jitted trainer (`jaxgraph.rl.jax_ppo`, instances drawn by `JaxEnv.reset`) against
the host trainer (`jaxgraph.rl.train`, `Env`s cycling over the same graphs), at equal work.

    python -m benchmarks.multi_graph_ppo [--graphs 16] [--num-envs 8,32] [--min-ops 10 --max-ops 60]
        [--update-epochs 4] [--repeats 5]

Equal work: the same seeded trap graphs (`jaxgraph.instances.trap_instances`, `--min-ops`..`--max-ops` ops), the
same rules (every rule of `RULES`), the same agent (`tiny_agent()`'s network and PPO settings, `--num-envs`
environments x `--rollout-steps` steps an epoch, `--update-epochs` passes of the PPO update over the rollout), so
both epochs take the same environment steps and the same policy updates. One jitted epoch is
`make_trainer(...).run` on one epoch key; one host epoch is what the host trainer's loop (`jaxgraph.rl.train`) runs
per epoch: `collect` on an `EnvPool` of the graphs, then the jitted PPO update. Both are compiled before timing and
timed in alternated turns (`jaxsched.common.timing.alternated_times`), and so are the host epoch's two parts alone;
the table prints median seconds per epoch and per part, environment steps per second, the ratio, and host epoch /
update: the update is the same XLA program in the jitted epoch, so that bounds the ratio however fast the jitted
rollout.
Target: the jitted epoch >= 3x the host's on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import jax
import numpy as np

from jaxgraph.instances import trap_instances
from jaxgraph.jax_env import JaxEnv
from jaxgraph.rl import EnvPool, GraphPolicy, collect, graph_agent, jax_ppo, make_update, tiny_agent
from jaxgraph.rl.configs import AgentConfig
from jaxgraph.rules import RULES
from jaxsched.common import machine_description
from jaxsched.common.timing import alternated_times

TARGET = 3.0


def epochs(config: AgentConfig, graphs, repeats: int) -> dict[str, float]:
    """Compile seconds of the jitted epoch; median seconds of a jitted epoch, a host epoch (the host trainer's loop
    body: `collect`, then the jitted update) and of the host epoch's two parts, alternated."""
    env = JaxEnv(graphs, max_locations=config.max_locations, rules=RULES, max_steps=config.max_steps)
    trainer = jax_ppo.make_trainer(config, env)
    state = jax.jit(trainer.init)(jax.random.key(0))
    epoch_key = jax.random.split(jax.random.key(1), 1)
    start = time.perf_counter()
    run = jax.jit(trainer.run).lower(state, epoch_key).compile()
    compile_seconds = time.perf_counter() - start
    pool = EnvPool(graphs, config.num_envs, config.max_locations, config.max_steps, None, RULES)
    agent = graph_agent(GraphPolicy(pool.num_xfers, config.hidden, config.latent, config.message_steps))
    update = jax.jit(make_update(agent.evaluate, config.ppo))

    def rollout():
        return collect(pool, agent, state.params, jax.random.key(3), config.rollout_steps)[0]

    trajectory = rollout()

    def host_epoch():
        return update(state, rollout(), jax.random.key(4))[0].params

    times = alternated_times({"jitted": lambda: run(state, epoch_key)[0].params, "host": host_epoch,
                              "rollout": lambda: rollout().value,
                              "update": lambda: update(state, trajectory, jax.random.key(4))[0].params},
                             repeats, warmup=1)
    return {"compile": compile_seconds, **{name: float(np.median(t)) for name, t in times.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", type=int, default=16, help="trap graphs in the pool")
    parser.add_argument("--num-envs", default="8,32", help="comma-separated environment counts")
    parser.add_argument("--rollout-steps", type=int, default=16)
    parser.add_argument("--min-ops", type=int, default=10)
    parser.add_argument("--max-ops", type=int, default=60)
    parser.add_argument("--update-epochs", type=int, default=4, help="PPO passes over each rollout")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        sizes = [int(n) for n in args.num_envs.split(",") if n]
        if not sizes or min(*sizes, args.graphs, args.rollout_steps, args.repeats, args.update_epochs) < 1:
            raise ValueError("a count below 1")
        pool = trap_instances(args.graphs, min_ops=args.min_ops, max_ops=args.max_ops)
    except ValueError as error:
        print(f"error: counts must be positive integers and op counts possible: {error}", file=sys.stderr)
        return 2
    print(f"{machine_description(load=True)}; {args.graphs} trap graphs of {min(g.num_ops for g in pool.graphs)}-"
          f"{max(g.num_ops for g in pool.graphs)} ops, all {len(RULES)} rules, tiny_agent network, "
          f"{args.rollout_steps} steps per environment an epoch, {args.update_epochs} PPO passes, median of "
          f"{args.repeats} alternated epochs\n")
    print("| environments | env steps an epoch | jitted compile s | host epoch s (rollout + update) | jitted epoch s | "
          "host steps/s | jitted steps/s | ratio | bound: host epoch / update |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = np.inf
    for size in sizes:
        agent = tiny_agent()
        config = dataclasses.replace(agent, num_envs=size, rollout_steps=args.rollout_steps, max_steps=24,
                                     ppo=dataclasses.replace(agent.ppo, update_epochs=args.update_epochs))
        t = epochs(config, pool.graphs, args.repeats)
        steps = size * args.rollout_steps
        ratio = t["host"] / t["jitted"]
        worst = min(worst, ratio)
        print(f"| {size} | {steps} | {t['compile']:.1f} | {t['host']:.3f} ({t['rollout']:.3f} + {t['update']:.3f}) | "
              f"{t['jitted']:.3f} | {steps / t['host']:,.0f} | {steps / t['jitted']:,.0f} | {ratio:.1f}x | "
              f"{t['host'] / t['update']:.1f}x |", flush=True)
    print(f"\nVerdict: {'met' if worst >= TARGET else 'not met'} (worst ratio {worst:.1f}x, target {TARGET:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
