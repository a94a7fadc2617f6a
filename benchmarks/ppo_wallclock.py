"""End-to-end wall-clock to TASO's cost on BERT: PPO on the jitted env vs PPO on the host env vs the world model.

    python benchmarks/ppo_wallclock.py [--time-cap 130] [--model bert] [--json out.json]

The graph is the tiny study's BERT (`--model bert`: the `bert` builder at 16 tokens, hidden 64, 2 heads, 2 layers,
intermediate 128) or the imported `tests/data/bert-legacy-op17.onnx` (`--model imported`). The target is TASO's
search (alpha 1.05, budget 100, as in the study) on the same graph, rules (all 28 of `RULES`) and cost model; an
unpruned search checks that it is the reachable optimum. The three trainers (`jaxgraph.rl.wallclock`) use the tiny
study's sizes (`CONFIGS["default"]`): the same `AgentConfig` for both PPO trainers (8 envs x 16 steps an epoch,
GNN hidden 32, latent 16, 16 locations per xfer, episodes of at most 24 steps), and the study's world model
(48 x 16 random-agent steps, 40 fit epochs) and dream controller (64 dreams x 16 steps per update, tau 1). Each
runs on its own clock, one after another, until an evaluation reaches the target or `--time-cap` seconds pass
(checked after each evaluation). One-shot runs: nothing is alternated, so the load of the machine during each run
matters; the load average is printed before and after.

The cost model is the analytic `Roofline` of `--backend` (default `taso`; the study used `onnxruntime`, which
`JaxEnv` computes too).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import jax

from jaxgraph.backends import ONNXRUNTIME, TASO, XLA
from jaxgraph.cost import Roofline
from jaxgraph.jax_env import JaxEnv
from jaxgraph.onnx_io import load_onnx
from jaxgraph.rl.study import CONFIGS, batch_one, build_graph
from jaxgraph.rl.wallclock import TRAINERS, race, wallclock_table
from jaxsched.common import machine_description

IMPORTED = "tests/data/bert-legacy-op17.onnx"
BACKENDS = {"taso": TASO, "xla": XLA, "onnxruntime": ONNXRUNTIME}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-cap", type=float, default=130.0, help="seconds per trainer (default 130: the "
                        "whole script within 8 minutes on 2 CPU cores)")
    parser.add_argument("--model", default="bert", choices=("bert", "imported"))
    parser.add_argument("--backend", default="taso", choices=sorted(BACKENDS))
    parser.add_argument("--trainers", default=",".join(TRAINERS), help="comma-separated subset of "
                        f"{','.join(TRAINERS)}")
    parser.add_argument("--chunk-updates", type=int, default=5, help="dream updates between evaluations")
    parser.add_argument("--eval-samples", type=int, help="sampled episodes per evaluation besides the most-likely-"
                        "action one (default: the study's 8; 0 asks the policy itself to reach the target)")
    parser.add_argument("--jitted-evaluation", action="store_true", help="evaluate the JaxEnv-trained policy in "
                        "JaxEnv (jax_ppo.make_evaluate, a second large compilation) instead of in Env")
    parser.add_argument("--ppo-envs", type=int, help="environments per PPO epoch, both PPO trainers (default: the "
                        "study's 8); the jitted environment's advantage is many environments in one program")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    config = CONFIGS["default"]
    trainers = [t for t in args.trainers.split(",") if t]
    try:
        if args.eval_samples is not None:
            config = dataclasses.replace(config, eval_samples=args.eval_samples)  # validates it
        if args.ppo_envs is not None:
            config = dataclasses.replace(config, agent=dataclasses.replace(config.agent, num_envs=args.ppo_envs))
        if args.model == "imported" and not os.path.isfile(IMPORTED):
            raise FileNotFoundError(f"{IMPORTED} not found (run from the repository root)")
        graph = build_graph(config, "bert") if args.model == "bert" else load_onnx(IMPORTED, batch_one(IMPORTED))
        cost_model = Roofline(backend=BACKENDS[args.backend])
        if "jax_env" in trainers:
            try:  # JaxEnv refuses a graph that does not fit its sizes before any clock starts
                JaxEnv(graph, max_locations=config.agent.max_locations, cost_model=cost_model).params()
            except ValueError as error:
                raise ValueError(f"JaxEnv cannot run this model and cost ({error}); leave jax_env out of "
                                 f"--trainers") from error
        if args.time_cap <= 0 or args.chunk_updates < 1 or not set(trainers) <= set(TRAINERS) or not trainers:
            raise ValueError(f"need --time-cap > 0, --chunk-updates >= 1 and --trainers among {TRAINERS}")
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{machine_description(load=True)}; model {args.model} ({graph.num_ops} ops), "
          f"cost Roofline(backend={args.backend}), "
          f"{config.agent.num_envs} environments x {config.agent.rollout_steps} steps per PPO epoch, "
          f"time cap {args.time_cap:g} s per trainer, seed {args.seed}; each evaluation: the most-likely-action "
          f"episode + {config.eval_samples} sampled, in {'JaxEnv' if args.jitted_evaluation else 'Env'} for the "
          f"jitted trainer, every epoch (PPO) or {args.chunk_updates} dream updates\n", flush=True)
    result = race(graph, config, cost_model, args.time_cap, jax.random.key(args.seed), trainers=trainers,
                  chunk_updates=args.chunk_updates, jitted_evaluation=args.jitted_evaluation, progress=True)
    optimum = result["optimum"]
    print(f"initial cost {result['initial_cost']:.5f} ms; target: TASO's search {result['taso_cost']:.5f} ms "
          f"({100 * (1 - result['taso_cost'] / result['initial_cost']):.2f}% saved, {result['taso_seconds']:.1f} s); "
          f"reachable optimum {optimum['cost']:.5f} ms ({optimum['explored']} graphs, "
          f"{'all' if optimum['exhausted'] else 'budget hit'})\n")
    print(wallclock_table(result, args.time_cap))
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        runs = {name: {**run._asdict(), "evaluations": [e._asdict() for e in run.evaluations]}
                for name, run in result["runs"].items()}
        with open(args.json, "w") as file:
            json.dump({**result, "runs": runs, "time_cap": args.time_cap, "model": args.model,
                       "backend": args.backend, "ppo_envs": config.agent.num_envs,
                       "eval_samples": config.eval_samples, "machine": machine_description(load=True)}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
