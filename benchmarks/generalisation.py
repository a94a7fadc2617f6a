"""One agent trained on generated graphs only, against greedy on the five builders it never saw (TASO's cost).

    python -m benchmarks.generalisation [--epochs 40] [--traps 12] [--random-graphs 4] [--samples 8]
                                        [--unpruned-budget 0] [--max-states 0] [--workdir DIR]

The research setting (`experiments.graphopt_rl.settings`): TASO's cost (`Roofline(backend=TASO)`), greedy and
TASO's search (alpha 1.05, `--budget` graphs) with TASO's full table. The agent (`experiments.graphopt_rl.generalise`:
host PPO with `RULES`) trains once on `--traps` trap graphs and `--random-graphs` random graphs, then runs on each
builder (ResNet-18, ResNet-50, SqueezeNet, Inception-v3 at `SMALL_SIZES`, BERT at the study's 2 layers): its
most-likely episode and `--samples` sampled ones, episodes of `--steps-per-op` steps per op. Whether a better graph than
greedy's exists at all: `--unpruned-budget` > 0 runs TASO's search with no pruning (alpha infinite, the agent's
`RULES`) for that many graphs ("complete" when its queue empties first: every graph the rules reach, up to TASO's
size bound, was expanded), `--max-states` > 0 the exhaustive search up to that many graphs ("cap hit" past it).
Columns: cost reductions (1 - cost / initial cost); "output error" the largest difference of the returned graph's
outputs from the builder's on a random input, relative to the largest output; "below greedy" is the agent's
returned cost strictly below greedy's (relative 1e-9); CPU seconds of the process (training once, then evaluation
per builder). With `--workdir` the agent's training is checkpointed per epoch and each builder's row is kept: a
rerun with the same arguments resumes, one with other arguments is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import jax
import numpy as np

from benchmarks.saturation import BUILDERS
from benchmarks.saturation import graphs as builder_graphs
from experiments.graphopt_rl import GeneralistConfig, evaluate_unseen, train_generalist
from jaxgraph import RULES, TASO, Roofline, execute, exhaustive_search, greedy, random_inputs, taso_rules, taso_search
from jaxsched.common import ConfigMismatch, Workdir, machine_description

STRICT = 1e-9  # relative margin of "strictly below"


def existence(graph, args, model) -> dict:
    """Whether a graph cheaper than greedy's exists: the unpruned search's cost and whether it was complete, the
    exhaustive optimum (None when not run or past the cap)."""
    row = {"unpruned": None, "unpruned_complete": False, "exhaustive": None}
    if args.unpruned_budget > 0:
        found = taso_search(graph, math.inf, args.unpruned_budget, RULES, model)
        row.update(unpruned=found.cost, unpruned_complete=found.explored < args.unpruned_budget,
                   unpruned_graphs=found.explored)
    if args.max_states > 0:
        try:
            row["exhaustive"] = exhaustive_search(graph, RULES, model, max_states=args.max_states).cost
        except ValueError:  # more graphs reachable than the cap: no optimum claimed
            pass
    return row


def measure(name: str, graph, agent, config: GeneralistConfig, args) -> dict:
    """One builder's row: searches, the agent's evaluation and its CPU seconds."""
    model = Roofline(backend=TASO)
    table = taso_rules()
    row = {"model": name, "ops": graph.num_ops}
    row["greedy"] = greedy(graph, table, model).cost
    row["taso"] = taso_search(graph, 1.05, args.budget, table, model).cost
    row.update(existence(graph, args, model))
    cpu = time.process_time()
    key = jax.random.fold_in(jax.random.key(args.seed), 1 + BUILDERS.index(name))
    result = evaluate_unseen(agent, graph, config, key, model)
    row.update(initial=result.initial_cost, agent=result.cost, agent_likely=result.likely_cost,
               eval_steps=result.env_steps, eval_cpu_s=time.process_time() - cpu,
               agent_error=output_error(graph, result.graph))
    return row


def output_error(original, rewritten) -> float:
    """Largest difference of the two graphs' outputs on one random input, relative to the original's largest
    output magnitude (the returned graph must compute the builder's function)."""
    inputs = random_inputs(original)
    want, got = execute(original, inputs), execute(rewritten, inputs)
    return max(float(np.abs(np.asarray(got[k]) - np.asarray(want[k])).max() / max(np.abs(np.asarray(want[k])).max(),
                                                                                    1e-30)) for k in want)


def admits_better(row: dict) -> str:
    """'yes' when some search found a graph strictly below greedy's, 'no' when a complete search did not, else
    'unknown'."""
    found = [row[m] for m in ("taso", "unpruned", "exhaustive") if row.get(m) is not None]
    if min(found) < row["greedy"] * (1 - STRICT) or row["agent"] < row["greedy"] * (1 - STRICT):
        return "yes"
    return "no" if row["unpruned_complete"] or row["exhaustive"] is not None else "unknown"


def table_row(row: dict, strictly: bool, better: str, capped: bool) -> str:
    """One builder's markdown row, costs as reductions from the initial graph's."""
    def reduction(value):
        return "-" if value is None else f"{1 - value / row['initial']:.2%}"
    unpruned = reduction(row["unpruned"]) + (" (complete)" if row["unpruned_complete"] else "")
    exhaustive = reduction(row["exhaustive"]) if row["exhaustive"] is not None else ("cap hit" if capped else "-")
    return (f"| {row['model']} | {row['ops']} | {row['initial']:.4f} ms | {reduction(row['greedy'])} | "
            f"{reduction(row['taso'])} | {unpruned} | {exhaustive} | {reduction(row['agent_likely'])} | "
            f"**{reduction(row['agent'])}** | {row['agent_error']:.1e} | {'yes' if strictly else 'no'} | {better} | "
            f"{row['eval_cpu_s']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(BUILDERS), choices=BUILDERS)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--traps", type=int, default=12)
    parser.add_argument("--random-graphs", type=int, default=4)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--steps-per-op", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0, help="the agent's training key and the generators' seeds")
    parser.add_argument("--budget", type=int, default=1000, help="TASO search's graphs (alpha 1.05)")
    parser.add_argument("--unpruned-budget", type=int, default=0)
    parser.add_argument("--max-states", type=int, default=0)
    parser.add_argument("--workdir", help="checkpoints and finished rows; a rerun resumes")
    args = parser.parse_args()
    try:
        base = GeneralistConfig()
        config = GeneralistConfig(agent=dataclasses.replace(base.agent, epochs=args.epochs), traps=args.traps,
                                  random_graphs=args.random_graphs, seed=args.seed, samples=args.samples,
                                  steps_per_op=args.steps_per_op)
        work = Workdir(args.workdir, {k: v for k, v in vars(args).items() if k not in ("workdir", "models")}) \
            if args.workdir else None
    except (ValueError, ConfigMismatch) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    print(f"machine: {machine_description(load=True)}; cost: Roofline(backend=TASO)")
    cpu, wall = time.process_time(), time.perf_counter()
    agent = train_generalist(config, jax.random.key(args.seed), Roofline(backend=TASO),
                             workdir=(work / "agent").absolute() if work else None)
    print(f"agent: {config.traps} trap + {config.random_graphs} random graphs, {agent.env_steps} environment steps, "
          f"training {time.process_time() - cpu:.0f} CPU s ({time.perf_counter() - wall:.0f} s wall)")
    print("| model | ops | initial | greedy | TASO 1.05 | unpruned | exhaustive | agent (most likely) | agent "
          "(returned) | output error | below greedy | better exists | eval CPU s |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    below, existence_counts = 0, {"yes": 0, "no": 0, "unknown": 0}
    for name, graph in builder_graphs(args.models, 0):
        def run(name=name, graph=graph):
            return measure(name, graph, agent, config, args)
        row = work.stage(f"models/{name}.json", run) if work else run()
        strictly, better = row["agent"] < row["greedy"] * (1 - STRICT), admits_better(row)
        below += strictly
        existence_counts[better] += 1
        print(table_row(row, strictly, better, args.max_states > 0), flush=True)
    counts = existence_counts
    print(f"verdict: the agent is strictly below greedy on {below} of {len(args.models)} builders (target 3); a graph "
          f"below greedy's under these rules exists on {counts['yes']}, provably not on {counts['no']}, unknown on "
          f"{counts['unknown']}")


if __name__ == "__main__":
    main()
