"""Trap graphs: who reaches the exhaustive optimum where greedy descent cannot.

    python -m benchmarks.trap_graphs [--graphs 20] [--max-traps 3] [--agent-seconds 60 | --agent-epochs 40]
                                     [--workdir DIR]

On seeded `trap_graph`s of 10-60 ops (TASO's additive roofline cost), per graph: the exhaustive optimum
(`exhaustive_search`, checked against the optimum the generator built), greedy, `taso_search` at alpha 1.0
and 1.05 (budget 1000), and, with `--agent-seconds` or `--agent-epochs` > 0, a host PPO agent (`jaxgraph.rl`)
trained on that graph alone for that many seconds of wall time or epochs (128 environment steps each; a
budget that shared cores do not shrink) and then evaluated by its most-likely episode plus
`--samples` sampled ones, keeping the cheapest graph any of them visited (`best_of`: column `ppo`), and
the cheapest of that and the graph its training rollouts visited (`AgentResult.best`: column `ppo_seen`;
its cost is recomputed from the graph, not taken from the environment). A method hits when it ends within
1e-6 (relative) of the exhaustive optimum; seconds per graph are wall time, and for the agent also the
process's CPU time (`ppo_cpu_s`; both include compilation and evaluation). With `--workdir`, each finished
graph is a stage of a `jaxsched.common.Workdir`: a rerun with the same arguments skips it, one with other
arguments is refused. The seed range is not part of a workdir's identity, so processes over disjoint ranges
(`--first-seed`, `--graphs`) share one workdir and a run over all seeds then prints the whole table.
"""

from __future__ import annotations

import argparse
import time

import jax

from jaxgraph import cost, exhaustive_search, greedy, taso_search, trap_graph
from jaxgraph.rl import AgentConfig, PPOConfig, best_of, evaluate_agent, make_train
from jaxsched.common import ConfigMismatch, Workdir

_METHODS = ("greedy", "taso_1.0", "taso_1.05", "ppo", "ppo_seen")
_SECONDS = {"greedy": "greedy_s", "taso_1.0": "taso_1.0_s", "taso_1.05": "taso_1.05_s", "ppo": "ppo_s",
            "ppo_seen": "ppo_s"}


def agent_config(args) -> AgentConfig:
    """A small host agent: 8 environments x 16 lockstep steps per epoch, `--agent-epochs` epochs (an entropy
    schedule decays over them) or epochs until the time budget."""
    return AgentConfig(ppo=PPOConfig(learning_rate=1e-3, entropy_coef=args.entropy, entropy_final=args.entropy_final,
                                     gamma=args.gamma, lam=args.lam, update_epochs=args.update_epochs, minibatches=2),
                       hidden=32, latent=16, message_steps=2, num_envs=8, rollout_steps=16,
                       epochs=args.agent_epochs if args.agent_epochs > 0 else 100_000,
                       max_locations=8, max_steps=args.max_steps)


def train_and_evaluate(graph, config: AgentConfig, seconds: float, epochs: int, samples: int, seed: int) -> dict:
    """Train a host PPO agent on `graph` for `seconds` of wall time or `epochs` (whichever is positive): the
    cost of the cheapest graph its evaluation episodes visited (`ppo`), of the cheapest graph it visited in
    training or evaluation (`ppo_seen`), the real-environment steps training used and the wall and CPU time
    of training and evaluation."""
    start, cpu_start = time.perf_counter(), time.process_time()

    def stop(agent) -> bool:
        return len(agent.history) >= epochs if epochs > 0 else time.perf_counter() - start > seconds

    train = make_train(config, [graph], on_epoch=stop)
    agent = train(jax.random.key(seed))
    episodes = evaluate_agent(agent, graph, config, key=jax.random.key(seed + 1), samples=samples)
    evaluated = best_of(episodes).best_cost
    seen = cost(agent.best[0].graph)
    return {"ppo": evaluated, "ppo_seen": min(evaluated, seen), "ppo_env_steps": agent.env_steps,
            "ppo_s": time.perf_counter() - start, "ppo_cpu_s": time.process_time() - cpu_start}


def _timed(run) -> tuple[float, float]:
    start = time.perf_counter()
    result = run()
    return result.cost, time.perf_counter() - start


def measure(seed: int, args) -> dict:
    trap = trap_graph(seed, max_traps=args.max_traps)
    exhaustive = exhaustive_search(trap.graph, max_states=args.max_states)
    if abs(exhaustive.cost - trap.optimum_cost) > 1e-9 * trap.optimum_cost:
        raise RuntimeError(f"seed {seed}: the generator's optimum {trap.optimum_cost} is not the exhaustive "
                           f"one {exhaustive.cost}")
    row = {"seed": seed, "ops": trap.num_ops, "traps": trap.traps, "states": exhaustive.explored,
           "initial": exhaustive.initial_cost, "optimum": exhaustive.cost, "exhaustive_s": exhaustive.seconds}
    row["greedy"], row["greedy_s"] = _timed(lambda: greedy(trap.graph))
    for alpha in (1.0, 1.05):
        row[f"taso_{alpha}"], row[f"taso_{alpha}_s"] = _timed(
            lambda alpha=alpha: taso_search(trap.graph, alpha=alpha, budget=1000))
    if args.agent_seconds > 0 or args.agent_epochs > 0:
        row.update(train_and_evaluate(trap.graph, agent_config(args), args.agent_seconds, args.agent_epochs,
                                      args.samples, seed))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--max-traps", type=int, default=3)
    parser.add_argument("--max-states", type=int, default=100_000)
    parser.add_argument("--agent-seconds", type=float, default=0.0)
    parser.add_argument("--agent-epochs", type=int, default=0, help="train for epochs instead of seconds")
    parser.add_argument("--samples", type=int, default=32, help="sampled evaluation episodes per agent")
    parser.add_argument("--entropy", type=float, default=0.01)
    parser.add_argument("--entropy-final", type=float, help="decay the entropy bonus linearly to this over the epochs")
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--lam", type=float, default=0.97)
    parser.add_argument("--update-epochs", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=24, help="episode length during training")
    parser.add_argument("--workdir", help="keep each finished graph here; a rerun resumes")
    args = parser.parse_args()
    settings = {k: v for k, v in vars(args).items() if k not in ("workdir", "first_seed", "graphs")}
    try:
        work = Workdir(args.workdir, settings) if args.workdir else None
    except ConfigMismatch as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    rows = []
    print(f"{'seed':>4} {'ops':>4} {'traps':>5} {'states':>6} {'optimum':>8} "
          + " ".join(f"{m:>10}" for m in _METHODS))
    for seed in range(args.first_seed, args.first_seed + args.graphs):
        row = work.stage(f"graphs/{seed}.json", lambda seed=seed: measure(seed, args)) if work else measure(seed, args)
        rows.append(row)
        cells = " ".join(f"{row[m] / row['optimum']:>10.4f}" if m in row else f"{'-':>10}" for m in _METHODS)
        print(f"{row['seed']:>4} {row['ops']:>4} {row['traps']:>5} {row['states']:>6} {row['optimum']:>8.4f} {cells}",
              flush=True)
    print("hits (cost within 1e-6 of the exhaustive optimum; cells above are cost / optimum):")
    print(f"  {'method':>10} {'hits':>6} {'mean cost/opt':>13} {'s/graph':>8} {'CPU s/graph':>11}")
    for method in _METHODS:
        if method in rows[0]:
            hits = sum(row[method] <= row["optimum"] * (1 + 1e-6) for row in rows)
            ratio = sum(row[method] / row["optimum"] for row in rows) / len(rows)
            seconds = sum(row[_SECONDS[method]] for row in rows) / len(rows)
            cpu = sum(row["ppo_cpu_s"] for row in rows) / len(rows) if method.startswith("ppo") else seconds
            print(f"  {method:>10} {hits:>3}/{len(rows):<2} {ratio:>13.4f} {seconds:>8.2f} {cpu:>11.2f}")


if __name__ == "__main__":
    main()
