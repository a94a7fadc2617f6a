"""jaxgraph benchmark: search results, environment speed, optimizing for onnxruntime, and cost ranking.

    flock /tmp/bench.lock python benchmarks/graphopt.py [--models bert,mobilenet_v2] [--budget 1000]

For each full-size graph (batch 1) it prints:
1. TASO search with TASO's backend-agnostic roofline cost (greedy and TASO search, search times) and the
   RL environment's step time (random agent: apply + incremental re-match + observation);
2. optimizing for onnxruntime (CPU, ORT_ENABLE_ALL): the onnxruntime-aware analytic cost and the kernel
   times onnxruntime's profiler measures, before and after TASO search with each, and the measured
   end-to-end speedup (with a 95% interval) of the graphs found with TASO's cost and with the
   onnxruntime costs; `keep` is what `python -m jaxgraph.optimize` would write;
3. how well each cost ranks graphs (Spearman against end-to-end onnxruntime process CPU time, steadier
   than wall time on a shared machine, over the original, the search results and random rewrites);
4. for BERT, onnxruntime's transformer optimizer (`onnxruntime.transformers.optimizer`, needs the
   `ort-transformers` extra) against jaxgraph and both together.
Runtimes of compared graphs are timed in alternation so machine load affects them alike.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import tempfile
import time

import jax
import numpy as np

from jaxgraph import (
    MODELS,
    RULES,
    Env,
    LocationIndex,
    Roofline,
    cost,
    greedy,
    random_inputs,
    save_onnx,
    spearman,
    taso_search,
    to_onnx,
)
from jaxgraph.backends import ONNXRUNTIME
from jaxgraph.cost import OrtCost, ort_session
from jaxsched.timing import alternated_times, compare

# Published numbers (../shared/reference/graphopt_anchors.md): TASO speedup on a V100 over the framework
# baseline, and the thesis's TensorFlow -> TASO inference times (RTX 2070), for TASO's graphs.
TASO_PAPER = {"inception_v3": 1.1, "squeezenet1_1": 1.3, "taso_attention_stack": 1.5}
THESIS_MS = {"squeezenet1_1": (4.60, 3.22), "resnet18": (12.20, 11.35), "resnet50": (26.70, 24.96),
             "inception_v3": (17.60, 13.80), "taso_attention_stack": (4.10, 2.03)}


def env_step_ms(graph, episodes: int, seed: int) -> np.ndarray:
    """Wall step times (ms) of a uniformly random agent (valid actions only) over full episodes."""
    env, rng, wall = Env(graph), np.random.default_rng(seed), []
    for _ in range(episodes):
        obs, done = env.reset(), False
        while not done:
            xfer = rng.choice(np.flatnonzero(obs.xfer_mask[:-1]))
            action = (xfer, rng.choice(np.flatnonzero(obs.location_mask[xfer])))
            start = time.perf_counter()
            obs, _, terminated, truncated, _ = env.step(action)
            wall.append(time.perf_counter() - start)
            done = terminated or truncated
    return 1e3 * np.asarray(wall)


def random_rewrites(graph, steps: int, seed: int):
    """`graph` after `steps` uniformly random rewrites (cost may go up)."""
    rng, index = np.random.default_rng(seed), LocationIndex.build(RULES, graph)
    for _ in range(steps):
        matches = index.matches()
        if not matches:
            break
        xfer, location = matches[rng.integers(len(matches))]
        graph, delta = RULES[xfer].rewrite(graph, location, check=False)
        index = index.update(graph, delta)
    return graph


def ort_runner(graph, inputs):
    session = ort_session(to_onnx(graph))
    return lambda: session.run(None, inputs)


def speedup(original, graph, inputs, repeats: int) -> dict:
    """End-to-end onnxruntime comparison of `graph` against `original` (identical graphs: ratio 1)."""
    if graph.structure_hash == original.structure_hash:
        return dict(ratio=1.0, low=1.0, high=1.0, keep="original (no rewrite)")
    c = compare(ort_runner(original, inputs), ort_runner(graph, inputs), repeats=repeats)
    return dict(ratio=c.ratio, low=c.low, high=c.high, original_ms=c.baseline_ms, optimized_ms=c.candidate_ms,
                keep="optimized" if c.faster else "original")


def bench_search(name: str, graph, args) -> dict:
    roofline = Roofline()
    g = greedy(graph, cost_model=roofline)
    visited = []
    t = taso_search(graph, args.alpha, args.budget, cost_model=roofline, progress=args.progress,
                    on_visit=lambda graph_, cost_: visited.append(graph_))
    steps = env_step_ms(graph, args.episodes, seed=0)
    row = dict(ops=graph.num_ops, cost=cost(graph, roofline), greedy_cost=g.cost, greedy_s=g.seconds,
               taso_cost=t.cost, taso_s=t.seconds, explored=t.explored, env_steps=len(steps),
               env_median_ms=float(np.median(steps)), env_p90_ms=float(np.percentile(steps, 90)))
    return row, g.graph, t.graph, visited


def bench_onnxruntime(name: str, graph, taso_graph, visited, args, measured: OrtCost) -> dict:
    analytic, inputs = Roofline(backend=ONNXRUNTIME), random_inputs(graph)
    a = taso_search(graph, args.alpha, args.budget, cost_model=analytic, progress=args.progress)
    m = taso_search(graph, args.alpha, args.measured_budget, cost_model=measured, progress=args.progress)
    row = dict(ort_cost=a.initial_cost, ort_search_cost=a.cost, ort_rewrites=len(a.history),
               measured_cost=m.initial_cost, measured_search_cost=m.cost, measured_rewrites=len(m.history),
               taso_speedup=speedup(graph, taso_graph, inputs, args.repeats),
               ort_speedup=speedup(graph, a.graph, inputs, args.repeats),
               measured_speedup=speedup(graph, m.graph, inputs, args.repeats))
    print(f"  {name}: optimized for onnxruntime", flush=True)
    if args.rank_graphs:
        step = max(1, len(visited) // args.rank_graphs)
        candidates = [graph, taso_graph, a.graph, m.graph] + visited[step::step][:args.rank_graphs]
        candidates += [random_rewrites(graph, k, seed=k) for k in (5, 20, 60)]
        unique = list({c.structure_hash: c for c in candidates}.values())
        series = alternated_times({k: ort_runner(c, inputs) for k, c in enumerate(unique)}, args.repeats, 3, "cpu")
        times = np.array([np.median(series[k]) for k in range(len(unique))])
        row["rank"] = dict(graphs=len(unique), runtime_spread=float(times.max() / times.min()),
                           **{f"{key}_vs_ort": spearman([cost(c, model) for c in unique], times)
                              for key, model in (("taso", Roofline()), ("analytic", analytic),
                                                 ("measured", measured))})
        print(f"  {name}: ranked {len(unique)} graphs", flush=True)
    return row


def bench_transformers_optimizer(graph, ours, args) -> dict:
    """onnxruntime's BERT optimizer on the original and on jaxgraph's result, all run with ORT_ENABLE_ALL."""
    from onnxruntime.transformers import optimizer

    logging.disable(logging.WARNING)
    inputs, hidden = random_inputs(graph), graph.input_shapes["x"][-1]
    sessions, fused_ops = {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        for key, g in (("original", graph), ("jaxgraph", ours)):
            path = os.path.join(scratch, f"{key}.onnx")
            save_onnx(g, path)
            fused = optimizer.optimize_model(path, model_type="bert", num_heads=hidden // 64, hidden_size=hidden,
                                             opt_level=0)
            sessions[key] = ort_session(path)
            sessions[f"{key} + ort-transformers"] = ort_session(fused.model)
            fused_ops[key] = {op: n for op, n in fused.get_fused_operator_statistics().items() if n}
    series = alternated_times({k: lambda s=s: s.run(None, inputs) for k, s in sessions.items()}, args.repeats, 3)
    times = [np.median(series[k]) for k in sessions]
    return dict(ms={k: 1e3 * float(t) for k, t in zip(sessions, times)}, fused=fused_ops["original"])


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor())
    return (f"{model}, {os.cpu_count()} cores; jax {jax.__version__} on {jax.devices()[0].platform}; "
            f"load average {os.getloadavg()[0]:.1f}")


def print_tables(rows: dict, args) -> None:
    print(f"\n1. TASO search, TASO's roofline cost (ms), alpha {args.alpha}, budget {args.budget}\n")
    print("| model | ops | cost | greedy | TASO | TASO ratio | paper TASO | thesis TF->TASO | greedy s | TASO s "
          "| env step median / p90 ms (steps) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        tf, taso = THESIS_MS.get(name, (float("nan"), 1.0))
        paper = f"{TASO_PAPER[name]}x" if name in TASO_PAPER else "-"
        print(f"| {name} | {r['ops']} | {r['cost']:.2f} | {r['greedy_cost']:.2f} | {r['taso_cost']:.2f} "
              f"| {r['cost'] / r['taso_cost']:.3f}x | {paper} | {tf / taso:.2f}x | {r['greedy_s']:.2f} "
              f"| {r['taso_s']:.1f} | {r['env_median_ms']:.2f} / {r['env_p90_ms']:.2f} ({r['env_steps']}) |")
    print("\n2. Optimizing for onnxruntime (ORT_ENABLE_ALL): costs before -> after TASO search (rewrites), and the "
          "measured end-to-end speedup of the graph each cost finds [95% interval] -> what the CLI keeps\n")
    print("| model | analytic cost | measured kernels cost | TASO-cost graph | analytic-cost graph "
          "| measured-cost graph |")
    print("|---|---|---|---|---|---|")

    def cell(s):
        return f"{s['ratio']:.3f}x [{s['low']:.3f}, {s['high']:.3f}] -> {s['keep']}"

    for name, r in rows.items():
        print(f"| {name} | {r['ort_cost']:.2f} -> {r['ort_search_cost']:.2f} ({r['ort_rewrites']}) "
              f"| {r['measured_cost']:.2f} -> {r['measured_search_cost']:.2f} ({r['measured_rewrites']}) "
              f"| {cell(r['taso_speedup'])} | {cell(r['ort_speedup'])} | {cell(r['measured_speedup'])} |")
    if args.rank_graphs:
        print("\n3. Ranking: Spearman of each cost against end-to-end onnxruntime CPU time (ORT_ENABLE_ALL)\n")
        print("| model | graphs | runtime spread | TASO roofline | onnxruntime analytic | onnxruntime measured |")
        print("|---|---|---|---|---|---|")
        for name, r in rows.items():
            k = r["rank"]
            print(f"| {name} | {k['graphs']} | {k['runtime_spread']:.3f} | {k['taso_vs_ort']:.2f} "
                  f"| {k['analytic_vs_ort']:.2f} | {k['measured_vs_ort']:.2f} |")
    for name, r in rows.items():
        if "transformers" in r:
            t = r["transformers"]
            print(f"\n4. {name}: onnxruntime.transformers.optimizer (fused: {t['fused']}), median ms, "
                  "all run with ORT_ENABLE_ALL\n")
            print("| " + " | ".join(t["ms"]) + " |\n|" + "---|" * len(t["ms"]))
            print("| " + " | ".join(f"{v:.2f}" for v in t["ms"].values()) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,resnet50,squeezenet1_1,inception_v3,mobilenet_v2,bert,"
                                            "taso_attention_stack")
    parser.add_argument("--alpha", type=float, default=1.05)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--measured-budget", type=int, default=100, help="TASO budget with measured kernel costs")
    parser.add_argument("--rank-graphs", type=int, default=6, help="visited graphs per model in the ranking (0: skip)")
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    print(f"machine: {machine()}", flush=True)
    measured, rows = OrtCost(), {}
    for name in args.models.split(","):
        graph = MODELS[name]()
        row, greedy_graph, taso_graph, visited = bench_search(name, graph, args)
        print(f"  {name}: searched and stepped", flush=True)
        row.update(bench_onnxruntime(name, graph, taso_graph, visited, args, measured))
        if name == "bert":
            row["transformers"] = bench_transformers_optimizer(graph, greedy_graph, args)
        rows[name] = row
    print_tables(rows, args)
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "rows": rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
