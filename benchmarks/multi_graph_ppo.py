"""A multi-graph PPO epoch: the jitted trainer (`jaxgraph.rl.jax_ppo`, instances drawn by `JaxEnv.reset`) against
the host trainer (`jaxgraph.rl.train`, `Env`s cycling over the same graphs), at equal work.

    python -m benchmarks.multi_graph_ppo [--graphs 16] [--num-envs 8,32] [--min-ops 10 --max-ops 60]
        [--agent tiny|default] [--rollout-steps 16] [--max-steps 24] [--update-epochs 4] [--repeats 5]
        [--clock wall|cpu] [--xla-option NAME=VALUE ...]

Equal work: the same seeded trap graphs (`jaxgraph.instances.trap_instances`, `--min-ops`..`--max-ops` ops), the
same rules (every rule of `RULES`), the same agent (`--agent`: `tiny_agent()`'s or `AgentConfig()`'s network and PPO
settings, `--num-envs` environments x `--rollout-steps` steps an epoch, episodes truncated at `--max-steps`,
`--update-epochs` passes of the PPO update over the rollout), so
both epochs take the same environment steps and the same policy updates. One jitted epoch is
`make_trainer(...).run` on one epoch key; one host epoch is what the host trainer's loop (`jaxgraph.rl.train`) runs
per epoch: `collect` on an `EnvPool` of the graphs, then the jitted PPO update. Both are compiled before timing and
timed in alternated turns (`jaxsched.common.timing.alternated_times`), and so are the host epoch's two parts alone;
the table prints median seconds per epoch and per part, environment steps per second, the ratio, and host epoch /
update: the update is the same XLA program in the jitted epoch, so that bounds the ratio however fast the jitted
rollout. `--xla-option` compiles both trainers' programs (the jitted epoch and the host epoch's update) with an
XLA option (`jax.jit`'s `compiler_options`), e.g. `xla_cpu_experimental_ynn_fusion_type=` to leave the CPU's dots
to XLA's own kernels instead of YNNPACK's. The line under the table gives how many times each row's host update
was traced (1: no retracing across the timed epochs).
Target: the jitted epoch >= 3x the host's on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import jax
import numpy as np

from jaxgraph import RULES, JaxEnv, trap_instances
from jaxgraph.rl import AgentConfig, EnvPool, GraphPolicy, collect, graph_agent, jax_ppo, make_update, tiny_agent
from jaxsched.common import CLOCKS, alternated_times, machine_description

TARGET = 3.0


AGENTS = {"tiny": tiny_agent, "default": AgentConfig}


def xla_options(pairs: list[str]) -> dict[str, str]:
    """`NAME=VALUE` strings as `jax.jit`'s `compiler_options`; ValueError on a string without `=`."""
    options = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise ValueError(f"an XLA option is NAME=VALUE, got {pair!r}")
        options[name] = value
    return options


def epochs(config: AgentConfig, graphs, repeats: int, clock: str = "wall",
           options: dict[str, str] | None = None) -> dict[str, float]:
    """Compile seconds of the jitted epoch; median seconds of a jitted epoch, a host epoch (the host trainer's loop
    body: `collect`, then the jitted update) and of the host epoch's two parts, alternated; and how many times
    the host update was traced. Both trainers' programs compile with XLA `options`."""
    env = JaxEnv(graphs, max_locations=config.max_locations, rules=RULES, max_steps=config.max_steps)
    trainer = jax_ppo.make_trainer(config, env)
    state = jax.jit(trainer.init)(jax.random.key(0))
    epoch_key = jax.random.split(jax.random.key(1), 1)
    start = time.perf_counter()
    run = jax.jit(trainer.run).lower(state, epoch_key).compile(options)
    compile_seconds = time.perf_counter() - start
    pool = EnvPool(graphs, config.num_envs, config.max_locations, config.max_steps, None, RULES)
    agent = graph_agent(GraphPolicy(pool.num_xfers, config.hidden, config.latent, config.message_steps))
    ppo_update, traces = make_update(agent.evaluate, config.ppo), []

    def traced_update(*args):
        traces.append(None)  # runs once per trace, never when a compiled update runs
        return ppo_update(*args)

    update = jax.jit(traced_update, compiler_options=options)

    def rollout():
        return collect(pool, agent, state.params, jax.random.key(3), config.rollout_steps)[0]

    trajectory = rollout()

    def host_epoch():
        return update(state, rollout(), jax.random.key(4))[0].params

    times = alternated_times({"jitted": lambda: run(state, epoch_key)[0].params, "host": host_epoch,
                              "rollout": lambda: rollout().value,
                              "update": lambda: update(state, trajectory, jax.random.key(4))[0].params},
                             repeats, warmup=1, clock=clock)
    return {"compile": compile_seconds, "update traces": len(traces),
            **{name: float(np.median(t)) for name, t in times.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", type=int, default=16, help="trap graphs in the pool")
    parser.add_argument("--num-envs", default="8,32", help="comma-separated environment counts")
    parser.add_argument("--agent", choices=sorted(AGENTS), default="tiny",
                        help="network and PPO settings: tiny_agent() or AgentConfig()")
    parser.add_argument("--rollout-steps", type=int, default=16)
    parser.add_argument("--max-steps", type=int, default=24, help="episode truncation")
    parser.add_argument("--min-ops", type=int, default=10)
    parser.add_argument("--max-ops", type=int, default=60)
    parser.add_argument("--update-epochs", type=int, default=4, help="PPO passes over each rollout")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="elapsed time, or the process's CPU time (steadier on a shared machine)")
    parser.add_argument("--xla-option", action="append", default=[], metavar="NAME=VALUE",
                        help="an XLA compiler option for both trainers' programs (repeatable)")
    args = parser.parse_args(argv)
    try:
        sizes = [int(n) for n in args.num_envs.split(",") if n]
        if not sizes or min(*sizes, args.graphs, args.rollout_steps, args.max_steps, args.repeats,
                            args.update_epochs) < 1:
            raise ValueError("a count below 1")
        options = xla_options(args.xla_option)
        pool = trap_instances(args.graphs, min_ops=args.min_ops, max_ops=args.max_ops)
    except ValueError as error:
        print(f"error: counts must be positive integers, op counts possible and XLA options NAME=VALUE: {error}",
              file=sys.stderr)
        return 2
    print(f"{machine_description(load=True)}; {args.graphs} trap graphs of {min(g.num_ops for g in pool.graphs)}-"
          f"{max(g.num_ops for g in pool.graphs)} ops, all {len(RULES)} rules, {args.agent} agent network, "
          f"{args.rollout_steps} steps per environment an epoch, episodes of at most {args.max_steps} steps, "
          f"{args.update_epochs} PPO passes, median {args.clock} seconds of {args.repeats} alternated epochs, "
          f"XLA options {options or 'none'}\n")
    print("| environments | env steps an epoch | jitted compile s | host epoch s (rollout + update) | jitted epoch s | "
          "host steps/s | jitted steps/s | ratio | bound: host epoch / update |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst, traces = np.inf, []
    for size in sizes:
        agent = AGENTS[args.agent]()
        config = dataclasses.replace(agent, num_envs=size, rollout_steps=args.rollout_steps, max_steps=args.max_steps,
                                     ppo=dataclasses.replace(agent.ppo, update_epochs=args.update_epochs))
        t = epochs(config, pool.graphs, args.repeats, args.clock, options)
        traces.append(t["update traces"])
        steps = size * args.rollout_steps
        ratio = t["host"] / t["jitted"]
        worst = min(worst, ratio)
        print(f"| {size} | {steps} | {t['compile']:.1f} | {t['host']:.3f} ({t['rollout']:.3f} + {t['update']:.3f}) | "
              f"{t['jitted']:.3f} | {steps / t['host']:,.0f} | {steps / t['jitted']:,.0f} | {ratio:.1f}x | "
              f"{t['host'] / t['update']:.1f}x |", flush=True)
    print(f"\nHost update traces per row: {traces} (1: no retracing across the timed epochs)")
    print(f"Verdict: {'met' if worst >= TARGET else 'not met'} (worst ratio {worst:.1f}x, target {TARGET:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
