"""jaxgraph benchmark: search results, environment speed, measured runtimes and cost-model ranking.

    flock /tmp/bench.lock python benchmarks/graphopt.py [--models bert,squeezenet1_1] [--budget 1000]

For each of the five full-size graphs (batch 1) it prints: op count; roofline cost before and after
greedy descent and TASO search, with search times; the RL environment's step time (random agent:
find all locations of all rules + apply + observation); the measured runtime of the original and the
TASO-optimized graph in JAX (jit) and onnxruntime (CPU; with its own graph optimizations and with them
disabled); and how well the additive cost ranks graphs against their measured end-to-end runtime
(Spearman over graphs the search visited plus random rewrites). Runtimes of two graphs are timed in
alternation so machine load affects both alike; report ratios.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time

import jax
import numpy as np

from jaxgraph import (
    MODELS,
    RULES,
    Env,
    LocationIndex,
    MeasuredCost,
    Roofline,
    cost,
    greedy,
    random_inputs,
    spearman,
    taso_search,
    to_onnx,
)
from jaxgraph.execute import runner

# Published numbers (../shared/reference/graphopt_anchors.md): TASO speedup on a V100 over the framework
# baseline, and the thesis's TensorFlow -> TASO inference times (RTX 2070).
TASO_PAPER = {"inception_v3": 1.1, "squeezenet1_1": 1.3, "taso_attention_stack": 1.5}
THESIS_MS = {"squeezenet1_1": (4.60, 3.22), "resnet18": (12.20, 11.35), "resnet50": (26.70, 24.96),
             "inception_v3": (17.60, 13.80), "taso_attention_stack": (4.10, 2.03)}


def interleaved_ms(functions, repeats: int) -> tuple[list[float], list[float]]:
    """Median wall time and median process CPU time (ms) of each zero-argument function, called in
    alternation after a warm-up. CPU time does not count time spent waiting for a core, so on this shared
    machine it is the steadier of the two."""
    for fn in functions:
        jax.block_until_ready(fn())
    wall, cpu = [[] for _ in functions], [[] for _ in functions]
    for _ in range(repeats):
        for k, fn in enumerate(functions):
            start, start_cpu = time.perf_counter(), time.process_time()
            jax.block_until_ready(fn())
            cpu[k].append(time.process_time() - start_cpu)
            wall[k].append(time.perf_counter() - start)
    return [1e3 * statistics.median(b) for b in wall], [1e3 * statistics.median(b) for b in cpu]


def ort_runner(graph, inputs, optimize: bool):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if not optimize:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(to_onnx(graph).SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return lambda: session.run(None, inputs)


def env_step_ms(graph, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Wall and process-CPU step times (ms) of a uniformly random agent (valid actions only) over full episodes."""
    env, rng, wall, cpu = Env(graph), np.random.default_rng(seed), [], []
    for _ in range(episodes):
        obs, done = env.reset(), False
        while not done:
            xfer = rng.choice(np.flatnonzero(obs.xfer_mask[:-1]))
            action = (xfer, rng.choice(np.flatnonzero(obs.location_mask[xfer])))
            start, start_cpu = time.perf_counter(), time.process_time()
            obs, _, terminated, truncated, _ = env.step(action)
            cpu.append(time.process_time() - start_cpu)
            wall.append(time.perf_counter() - start)
            done = terminated or truncated
    return 1e3 * np.asarray(wall), 1e3 * np.asarray(cpu)


def random_rewrites(graph, steps: int, seed: int):
    """`graph` after `steps` uniformly random rewrites (cost may go up: enlarge-and-merge, concat of relus)."""
    rng, index = np.random.default_rng(seed), LocationIndex.build(RULES, graph)
    for _ in range(steps):
        matches = index.matches()
        if not matches:
            break
        xfer, location = matches[rng.integers(len(matches))]
        graph, delta = RULES[xfer].rewrite(graph, location, check=False)
        index = index.update(graph, delta)
    return graph


def bench_model(name: str, args) -> dict:
    graph = MODELS[name]()
    roofline = Roofline()
    row: dict = {"model": name, "ops": graph.num_ops, "nodes": len(graph), "cost": cost(graph, roofline)}
    g = greedy(graph, cost_model=roofline)
    row.update(greedy_cost=g.cost, greedy_s=g.seconds)
    visited = []
    t = taso_search(graph, args.alpha, args.budget, cost_model=roofline, progress=args.progress,
                    on_visit=lambda graph_, cost_: visited.append(graph_))
    row.update(taso_cost=t.cost, taso_s=t.seconds, explored=t.explored, rewrites=len(t.history))
    steps, steps_cpu = env_step_ms(graph, args.episodes, seed=0)
    row.update(env_steps=len(steps), env_median_ms=float(np.median(steps)), env_mean_ms=float(steps.mean()),
               env_p90_ms=float(np.percentile(steps, 90)), env_max_ms=float(steps.max()),
               env_cpu_median_ms=float(np.median(steps_cpu)), env_cpu_p90_ms=float(np.percentile(steps_cpu, 90)))
    print(f"  {name}: searched and stepped", flush=True)

    optimized = [t.graph]
    if args.measured_search:
        measured = MeasuredCost(clock=args.clock)
        m = taso_search(graph, args.alpha, args.budget, cost_model=measured, progress=args.progress)
        row.update(measured_cost=m.initial_cost, measured_taso_cost=m.cost, measured_taso_s=m.seconds,
                   measured_same_as_roofline=m.graph.structure_hash == t.graph.structure_hash)
        optimized.append(m.graph)

    inputs = random_inputs(graph)
    if not args.skip_runtime:
        for key, make in (("jax", lambda g_: runner(g_, inputs)), ("ort", lambda g_: ort_runner(g_, inputs, True)),
                          ("ort_raw", lambda g_: ort_runner(g_, inputs, False))):
            row[f"{key}_wall_ms"], row[f"{key}_cpu_ms"] = interleaved_ms([make(g_) for g_ in [graph] + optimized],
                                                                         args.repeats)
        print(f"  {name}: timed", flush=True)

    if args.rank_graphs:
        step = max(1, len(visited) // args.rank_graphs)
        candidates = [graph, g.graph, t.graph] + visited[step::step][:args.rank_graphs]
        candidates += [random_rewrites(graph, k, seed=k) for k in (5, 20, 60)]
        unique = list({c.structure_hash: c for c in candidates}.values())
        measured = MeasuredCost(clock=args.clock)
        costs = [cost(c, roofline) for c in unique]
        op_costs = [cost(c, measured) for c in unique]
        ort = interleaved_ms([ort_runner(c, inputs, False) for c in unique], args.repeats)[1]
        rank = dict(graphs=len(unique), cost_spread=max(costs) / min(costs), runtime_spread=max(ort) / min(ort),
                    roofline_vs_ort=spearman(costs, ort), measured_vs_ort=spearman(op_costs, ort))
        if args.rank_jax:
            subset = slice(0, args.rank_jax)
            jax_cpu = interleaved_ms([runner(c, inputs) for c in unique[subset]], args.repeats)[1]
            rank.update(jax_graphs=len(jax_cpu), roofline_vs_jax=spearman(costs[subset], jax_cpu),
                        measured_vs_jax=spearman(op_costs[subset], jax_cpu))
        row["rank"] = rank
        print(f"  {name}: ranked", flush=True)
    return row


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor())
    return (f"{model}, {os.cpu_count()} cores; jax {jax.__version__} on {jax.devices()[0].platform}; "
            f"load average {os.getloadavg()[0]:.1f} at start")


def print_tables(rows: list[dict], args) -> None:
    print(f"\nTASO search: alpha {args.alpha}, budget {args.budget} graphs; costs are roofline ms (batch 1)\n")
    print("| model | ops | cost | greedy | TASO | TASO ratio | paper TASO | thesis TF->TASO | greedy s | TASO s "
          "| env step wall median / mean / p90 / max ms | env step CPU median / p90 ms (steps) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        tf, taso = THESIS_MS.get(r["model"], (math.nan, 1.0))
        paper = f"{TASO_PAPER[r['model']]}x" if r["model"] in TASO_PAPER else "-"
        print(f"| {r['model']} | {r['ops']} | {r['cost']:.2f} | {r['greedy_cost']:.2f} | {r['taso_cost']:.2f} "
              f"| {r['cost'] / r['taso_cost']:.3f}x | {paper} "
              f"| {tf / taso:.2f}x | {r['greedy_s']:.2f} | {r['taso_s']:.1f} "
              f"| {r['env_median_ms']:.2f} / {r['env_mean_ms']:.2f} / {r['env_p90_ms']:.2f} / {r['env_max_ms']:.1f} "
              f"| {r['env_cpu_median_ms']:.2f} / {r['env_cpu_p90_ms']:.2f} ({r['env_steps']}) |")
    if args.measured_search:
        print(f"\nTASO search with per-op costs measured by JAX on this machine ({args.clock} clock, ms)\n")
        print("| model | measured cost | TASO | ratio | same graph as with roofline | TASO s |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['model']} | {r['measured_cost']:.2f} | {r['measured_taso_cost']:.2f} "
                  f"| {r['measured_cost'] / r['measured_taso_cost']:.3f}x | {r['measured_same_as_roofline']} "
                  f"| {r['measured_taso_s']:.1f} |")
    if not args.skip_runtime:
        which = "roofline-TASO" + (" / measured-TASO" if args.measured_search else "")
        print(f"\nMeasured runtime, original -> {which} graph: median wall ms, and the original/optimized ratio "
              "of wall time and of process CPU time (timed in alternation)\n")
        print("| model | JAX jit ms | wall ratio | CPU ratio | onnxruntime ms | wall ratio | CPU ratio "
              "| onnxruntime, graph opts off, ms | wall ratio | CPU ratio |")
        print("|---|---|---|---|---|---|---|---|---|---|")

        def ratios(ms):
            return " / ".join(f"{ms[0] / v:.3f}x" for v in ms[1:])

        for r in rows:
            cells = []
            for key in ("jax", "ort", "ort_raw"):
                wall, cpu = r[f"{key}_wall_ms"], r[f"{key}_cpu_ms"]
                cells.append(f"{wall[0]:.1f} -> {' / '.join(f'{v:.1f}' for v in wall[1:])} | {ratios(wall)} "
                             f"| {ratios(cpu)}")
            print(f"| {r['model']} | " + " | ".join(cells) + " |")
    if args.rank_graphs:
        print(f"\nRanking: Spearman correlation of additive cost (roofline, or per-op JAX timings with the "
              f"{args.clock} clock) with end-to-end process CPU time; spreads are max/min over the graphs\n")
        print("| model | graphs | cost spread | runtime spread (ORT) | roofline vs ORT | per-op vs ORT "
              "| graphs (JAX) | roofline vs JAX | per-op vs JAX |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            k = r["rank"]
            jax_cells = (f"{k['jax_graphs']} | {k['roofline_vs_jax']:.2f} | {k['measured_vs_jax']:.2f}"
                         if "jax_graphs" in k else "- | - | -")
            print(f"| {r['model']} | {k['graphs']} | {k['cost_spread']:.3f} | {k['runtime_spread']:.3f} "
                  f"| {k['roofline_vs_ort']:.2f} | {k['measured_vs_ort']:.2f} | {jax_cells} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--alpha", type=float, default=1.05)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--rank-graphs", type=int, default=8, help="visited graphs per model in the ranking (0: skip)")
    parser.add_argument("--rank-jax", type=int, default=5, help="of those, how many to also time end to end in JAX")
    parser.add_argument("--skip-runtime", action="store_true")
    parser.add_argument("--measured-search", action="store_true",
                        help="also run TASO search with per-op costs measured by JAX on this machine")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="clock of the per-op measurements")
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    print(f"machine: {machine()}", flush=True)
    rows = [bench_model(name, args) for name in args.models.split(",")]
    print_tables(rows, args)
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
