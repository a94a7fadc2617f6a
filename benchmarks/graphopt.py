"""jaxgraph benchmark: real models optimized for onnxruntime, never slower, cost ranking, and TASO search.

    python benchmarks/graphopt.py [--quick] [--models zoo:squeezenet,tests/data/m.onnx,bert]

A model is `zoo:NAME` (the onnx wheel's light zoo models with seeded random weights, `jaxgraph.onnx_models`), the
path of an ONNX file (the torch exports in tests/data), or a builder name (`jaxgraph.MODELS`, batch 1).
The default is every zoo model, every tests/data/*.onnx and the builders bert and mobilenet_v2. Every
model runs in onnxruntime on the CPU with all its graph optimizations on (ORT_ENABLE_ALL); the original
is the model as given (the builders: as exported). Per model it prints:

1. load -> greedy and TASO search with the onnxruntime-aware costs (`Roofline(backend=ONNXRUNTIME)`, the
   analytic model; `OrtCost`, kernel times from onnxruntime's profiler) -> save -> the largest output
   difference against the original in onnxruntime (relative to the largest output; printed, not enforced:
   `python -m jaxgraph.optimize` refuses above 1e-4) ->
   end-to-end speedup over the original (alternated runs, 95% interval);
2. never slower: `python -m jaxgraph.optimize` (its defaults: TASO search, analytic cost) run on the
   model, then the file it wrote timed again against the original in a fresh alternated run;
3. rules: each rule family applied at every location where it matches, whatever the cost says, with
   the change each cost predicts and the measured end-to-end speedup: what pays on the real runtime;
4. ranking: Spearman of each cost against end-to-end onnxruntime process CPU time (steadier than wall
   time on a shared machine) over the original, the search results, the rule-family graphs, random
   rewrites, and graphs with 2-128 fusions blocked by an identity split + concat (`block_fusions`);
5. for transformer models, onnxruntime's transformer optimizer (`onnxruntime.transformers.optimizer`,
   extra `ort-transformers`) against jaxgraph and both together;
6. (builders, not with --quick) TASO search with TASO's backend-agnostic cost against the published
   numbers, and the RL environment's step time.
Runtimes of compared graphs are timed in alternation so machine load affects them alike.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import io
import json
import logging
import math
import os
import tempfile
import time

import numpy as np

from jaxgraph import (
    MODELS,
    ONNXRUNTIME,
    RULES,
    ZOO_MODELS,
    Env,
    LocationIndex,
    OrtCost,
    Patch,
    Ref,
    Roofline,
    bert,
    cost,
    greedy,
    load_onnx,
    optimize_cli,
    ort_session,
    relative_difference,
    spearman,
    taso_search,
    to_onnx,
    with_random_weights,
    zoo_path,
)
from jaxgraph.onnx_io import batch_one
from jaxsched.common import alternated_times, compare, machine_description

# Published numbers (../shared/reference/graphopt_anchors.md): TASO speedup on a V100 over the framework
# baseline, and the thesis's TensorFlow -> TASO inference times (RTX 2070), for TASO's graphs.
TASO_PAPER = {"inception_v3": 1.1, "squeezenet1_1": 1.3, "taso_attention_stack": 1.5}
THESIS_MS = {"squeezenet1_1": (4.60, 3.22), "resnet18": (12.20, 11.35), "resnet50": (26.70, 24.96),
             "inception_v3": (17.60, 13.80), "taso_attention_stack": (4.10, 2.03)}


def default_models() -> list[str]:
    return [f"zoo:{name}" for name in ZOO_MODELS] + sorted(glob.glob("tests/data/*.onnx")) + ["bert", "mobilenet_v2"]


def original_model(spec: str, args):
    """The ONNX model `spec` names, as given, its ConstantOfShape weights (the light zoo models and the
    light torch exports in tests/data) made seeded random (`jaxgraph.onnx_models.with_random_weights`)."""
    import onnx

    if spec.startswith("zoo:") or spec.endswith(".onnx"):
        return with_random_weights(onnx.load(zoo_path(spec[4:]) if spec.startswith("zoo:") else spec), seed=0)
    if spec not in MODELS:
        raise ValueError(f"unknown model {spec!r}: zoo:NAME, a .onnx path, or one of {', '.join(MODELS)}")
    return to_onnx(original_graph(spec, args))


def original_graph(spec: str, args):
    """The builder `spec` at full size, batch 1 (BERT with `--bert-layers` layers)."""
    return bert(layers=args.bert_layers) if spec == "bert" else MODELS[spec]()


def short_name(spec: str) -> str:
    return os.path.splitext(os.path.basename(spec))[0]


def env_step_ms(graph, episodes: int, seed: int) -> np.ndarray:
    """Wall step times (ms) of a uniformly random agent (valid actions only) over full episodes."""
    env, rng, wall = Env(graph), np.random.default_rng(seed), []
    for _ in range(episodes):
        timestep = env.reset()
        while not timestep.last():
            obs = timestep.observation
            xfer = rng.choice(np.flatnonzero(obs.xfer_mask[:-1]))
            action = (xfer, rng.choice(np.flatnonzero(obs.location_mask[xfer])))
            start = time.perf_counter()
            timestep = env.step(action)
            wall.append(time.perf_counter() - start)
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


def block_fusions(graph, count: int, seed: int):
    """`graph` with a split into two halves and a concat back (an identity onnxruntime runs as two copies) after
    `count` random convolutions or matmuls: it blocks their fusion with what follows and adds memory traffic,
    so that ranking candidates span a real runtime range even where no rule changes what onnxruntime runs."""
    rng = np.random.default_rng(seed)
    roots = [i for i, n in graph.nodes.items() if n.op in ("conv2d", "matmul") and not n.constant]
    for node_id in rng.permutation(roots)[:count]:
        ref = Ref(int(node_id))
        shape = graph.shape(ref)
        axis = 1 if graph.nodes[ref.node].op == "conv2d" else len(shape) - 1
        if shape[axis] < 2:
            continue
        patch = Patch(graph)
        parts = patch.add_outputs("split", [ref], axis=axis, sizes=(shape[axis] // 2, shape[axis] - shape[axis] // 2))
        patch.replace(ref, patch.add("concat", list(parts), axis=axis))
        graph, _ = patch.commit()
    return graph


def apply_everywhere(graph, family: str, limit: int = 500):
    """`graph` with every rule of `family` applied wherever it matches (until none does, or `limit` rewrites)."""
    index = LocationIndex.build(RULES, graph)
    for _ in range(limit):
        match = next(((x, loc) for x, loc in index.matches() if RULES[x].family == family), None)
        if match is None:
            break
        graph, delta = RULES[match[0]].rewrite(graph, match[1], check=False)
        index = index.update(graph, delta)
    return graph


def outputs(session, feeds) -> list[np.ndarray]:
    return session.run(None, feeds)


def difference(actual: list[np.ndarray], expected: list[np.ndarray]) -> float:
    """`jaxgraph.relative_difference` of outputs given in the same order."""
    return relative_difference(dict(enumerate(actual)), dict(enumerate(expected)))


def speedup(original_session, session, feeds, repeats: int) -> dict:
    """End-to-end onnxruntime speedup of `session` over `original_session`, alternated, 95% interval."""
    c = compare(lambda: original_session.run(None, feeds), lambda: session.run(None, feeds), repeats=repeats)
    return dict(ratio=c.ratio, low=c.low, high=c.high, original_ms=c.baseline_ms, optimized_ms=c.candidate_ms)


def bench_model(spec: str, args, costs: dict) -> dict:
    """Sections 1-4 for one model."""
    row: dict = dict(model=short_name(spec))
    start = time.perf_counter()
    model = original_model(spec, args)
    try:
        graph = load_onnx(model, batch_one(model))
    except ValueError as error:
        return dict(row, error=f"does not load: {error}")
    row.update(ops=graph.num_ops, load_s=time.perf_counter() - start)
    original = ort_session(model)
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in graph.input_shapes.items()}
    if args.rank_only:
        row["rank"] = ranking(graph, [], feeds, costs, args)
        return row
    expected = outputs(original, feeds)
    found = {}
    for method in ("greedy", "taso"):
        for key, model_ in costs.items():
            budget = args.budget if key == "analytic" else args.measured_budget
            result = (greedy(graph, cost_model=model_) if method == "greedy"
                      else taso_search(graph, args.alpha, budget, cost_model=model_, progress=args.progress))
            session = ort_session(to_onnx(result.graph)) if result.history else original
            entry = dict(cost=result.initial_cost, found=result.cost, rewrites=len(result.history),
                         seconds=result.seconds, difference=difference(outputs(session, feeds), expected))
            if result.history:
                entry.update(speedup(original, session, feeds, args.repeats))
            row[f"{method}_{key}"] = entry
            found[f"{method} {key}"] = result.graph
    print(f"  {row['model']}: searched", flush=True)
    row["cli"] = never_slower(model, original, feeds, args)
    print(f"  {row['model']}: CLI {row['cli']['keeps']}", flush=True)
    row["rules"], family_graphs = rule_effects(graph, original, feeds, costs, args)
    print(f"  {row['model']}: rules", flush=True)
    if args.rank_graphs:
        row["rank"] = ranking(graph, list(found.values()) + family_graphs, feeds, costs, args)
        print(f"  {row['model']}: ranked", flush=True)
    return row


def never_slower(model, original, feeds, args) -> dict:
    """Run the CLI on `model`; time the file it wrote against the original in a fresh alternated run."""
    with tempfile.TemporaryDirectory() as scratch:
        source, target = os.path.join(scratch, "model.onnx"), os.path.join(scratch, "optimized.onnx")
        with open(source, "wb") as f:
            f.write(model.SerializeToString())
        shapes = [f"--input-shape={name}={','.join(map(str, shape))}" for name, shape in batch_one(model).items()]
        with contextlib.redirect_stdout(io.StringIO()) as log:
            status = optimize_cli([source, "-o", target, "--budget", str(args.budget), "--repeats", str(args.repeats),
                                   "--no-progress", *shapes])
        if status:
            raise RuntimeError(f"python -m jaxgraph.optimize failed (status {status}):\n{log.getvalue()}")
        with open(source, "rb") as a, open(target, "rb") as b:
            kept_original = a.read() == b.read()
        written = ort_session(target)
    check = speedup(original, written, feeds, args.repeats)
    return dict(status=status, keeps="original" if kept_original else "optimized", log=log.getvalue(), **check,
                never_slower=check["high"] >= 1.0)


def rule_effects(graph, original, feeds, costs: dict, args) -> tuple[dict, list]:
    """Per rule family that matches: the graph with it applied everywhere, predicted and measured effect."""
    effects, graphs = {}, []
    families = sorted({RULES[x].family for x, _ in LocationIndex.build(RULES, graph).matches()})
    for family in families:
        rewritten = apply_everywhere(graph, family)
        if rewritten.structure_hash == graph.structure_hash:
            continue
        session = ort_session(to_onnx(rewritten))
        effects[family] = dict(predicted={key: cost(graph, m) / cost(rewritten, m) for key, m in costs.items()},
                               difference=difference(outputs(session, feeds), outputs(original, feeds)),
                               **speedup(original, session, feeds, args.repeats))
        graphs.append(rewritten)
    return effects, graphs


def ranking(graph, candidates: list, feeds, costs: dict, args) -> dict:
    """Spearman of each cost against end-to-end onnxruntime CPU time over distinct graphs."""
    candidates = [graph] + candidates + [random_rewrites(graph, k, seed=k) for k in (2, 5, 10, 20, 40, 80)]
    candidates += [block_fusions(graph, k, seed=k) for k in (2, 8, 32, 128)]
    unique = list({c.structure_hash: c for c in candidates}.values())
    if len(unique) < 3:
        return dict(graphs=len(unique))
    sessions = {k: ort_session(to_onnx(c)) for k, c in enumerate(unique)}
    series = alternated_times({k: lambda s=s: s.run(None, feeds) for k, s in sessions.items()}, args.repeats, 2,
                              "cpu")
    times = [float(np.median(series[k])) for k in sessions]
    result = dict(graphs=len(unique), runtime_spread=max(times) / min(times))
    for key, model in dict(taso=Roofline(), **costs).items():
        result[key] = spearman([cost(c, model) for c in unique], times)
    return result


def bench_transformers_optimizer(spec: str, args) -> dict | None:
    """onnxruntime's BERT optimizer on the original and on jaxgraph's result, all run with ORT_ENABLE_ALL."""
    try:
        from onnxruntime.transformers import optimizer
    except ImportError:
        return None
    logging.disable(logging.WARNING)
    model = original_model(spec, args)
    graph = load_onnx(model, batch_one(model))
    ours = taso_search(graph, args.alpha, args.budget, cost_model=Roofline(backend=ONNXRUNTIME)).graph
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in graph.input_shapes.items()}
    sessions, fused_ops = {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        for key, m in (("original", model), ("jaxgraph", to_onnx(ours))):
            path = os.path.join(scratch, f"{key}.onnx")
            with open(path, "wb") as f:
                f.write(m.SerializeToString())
            fused = optimizer.optimize_model(path, model_type="bert", num_heads=args.heads, hidden_size=0,
                                             opt_level=0)
            sessions[key] = ort_session(path)
            sessions[f"{key} + ort-transformers"] = ort_session(fused.model)
            fused_ops[key] = {op: n for op, n in fused.get_fused_operator_statistics().items() if n}
    expected = outputs(sessions["original"], feeds)
    differences = {k: difference(outputs(s, feeds), expected) for k, s in sessions.items()}
    series = alternated_times({k: lambda s=s: s.run(None, feeds) for k, s in sessions.items()}, args.repeats, 3)
    return dict(ms={k: 1e3 * float(np.median(series[k])) for k in sessions}, fused=fused_ops["original"],
                difference=differences, speedup={k: float(np.exp(np.mean(np.log(series["original"] / series[k]))))
                                                 for k in sessions})


def bench_search(graph, args) -> dict:
    """TASO search with TASO's backend-agnostic cost, and the environment's step time."""
    roofline = Roofline()
    g = greedy(graph, cost_model=roofline)
    t = taso_search(graph, args.alpha, args.budget, cost_model=roofline, progress=args.progress)
    steps = env_step_ms(graph, args.episodes, seed=0)
    return dict(ops=graph.num_ops, cost=cost(graph, roofline), greedy_cost=g.cost, greedy_s=g.seconds,
                taso_cost=t.cost, taso_s=t.seconds, explored=t.explored, env_steps=len(steps),
                env_median_ms=float(np.median(steps)), env_p90_ms=float(np.percentile(steps, 90)))


def interval(s: dict) -> str:
    return f"{s['ratio']:.3f}x [{s['low']:.3f}, {s['high']:.3f}]"


def print_tables(rows: dict, search_rows: dict, transformer_rows: dict, args) -> None:
    keys = ("analytic", "measured") if args.measured_budget else ("analytic",)
    print("\n1. Optimizing for onnxruntime (ORT_ENABLE_ALL): cost before -> after (rewrites), largest output "
          "difference, end-to-end speedup [95% interval]\n")
    head = " | ".join(f"{m} {k}" for m in ("greedy", "TASO") for k in keys)
    print(f"| model | ops | load s | {head} |\n|---|---|---|" + "---|" * (2 * len(keys)))
    for name, r in rows.items():
        if "error" in r:
            print(f"| {name} | {r['error']} |")
            continue
        if "greedy_analytic" not in r:  # --rank-only
            continue
        cells = []
        for method in ("greedy", "taso"):
            for key in keys:
                e = r[f"{method}_{key}"]
                cells.append(f"{e['cost']:.2f} -> {e['found']:.2f} ({e['rewrites']}), diff {e['difference']:.1e}"
                             + (f", {interval(e)}" if "ratio" in e else ""))
        print(f"| {name} | {r['ops']} | {r['load_s']:.1f} | " + " | ".join(cells) + " |")
    print("\n2. Never slower: what `python -m jaxgraph.optimize` writes, re-timed against the original "
          "(fresh alternated run, 95% interval)\n")
    print("| model | CLI keeps | written vs original | never slower |\n|---|---|---|---|")
    for name, r in rows.items():
        if "cli" in r:
            c = r["cli"]
            print(f"| {name} | {c['keeps']} | {interval(c)} | {'yes' if c['never_slower'] else 'NO'} |")
    print("\n3. Rules applied everywhere they match: cost ratio predicted (before / after) and measured "
          "end-to-end speedup [95% interval]\n")
    print(f"| model | rule | {' | '.join(f'{k} predicts' for k in keys)} | diff | measured |\n|---|---|"
          + "---|" * (len(keys) + 2))
    for name, r in rows.items():
        for family, e in r.get("rules", {}).items():
            predicted = " | ".join(f"{e['predicted'][k]:.3f}x" for k in keys)
            print(f"| {name} | {family} | {predicted} | {e['difference']:.1e} | {interval(e)} |")
    if args.rank_graphs:
        print("\n4. Ranking: Spearman of each cost against end-to-end onnxruntime CPU time (ORT_ENABLE_ALL)\n")
        print(f"| model | graphs | runtime spread | TASO roofline | {' | '.join(keys)} |\n|---|---|---|---|"
              + "---|" * len(keys))
        for name, r in rows.items():
            k = r.get("rank")
            if not k:
                continue
            if "runtime_spread" not in k:
                print(f"| {name} | {k['graphs']} | - | - |" + " - |" * len(keys))
                continue
            print(f"| {name} | {k['graphs']} | {k['runtime_spread']:.3f} | {k['taso']:.2f} | "
                  + " | ".join(f"{k[key]:.2f}" for key in keys) + " |")
    for name, t in transformer_rows.items():
        print(f"\n5. {name}: onnxruntime.transformers.optimizer (fused: {t['fused']}), median ms (speedup over "
              "the original; largest output difference), all run with ORT_ENABLE_ALL\n")
        print("| " + " | ".join(t["ms"]) + " |\n|" + "---|" * len(t["ms"]))
        print("| " + " | ".join(f"{v:.2f} ({t['speedup'][k]:.3f}x; {t['difference'][k]:.0e})"
                                for k, v in t["ms"].items()) + " |")
    if search_rows:
        print(f"\n6. TASO search, TASO's roofline cost (ms), alpha {args.alpha}, budget {args.budget}\n")
        print("| model | ops | cost | greedy | TASO | TASO ratio | paper TASO | thesis TF->TASO | greedy s | TASO s "
              "| env step median / p90 ms (steps) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, r in search_rows.items():
            tf, taso = THESIS_MS.get(name, (math.nan, 1.0))
            paper = f"{TASO_PAPER[name]}x" if name in TASO_PAPER else "-"
            print(f"| {name} | {r['ops']} | {r['cost']:.2f} | {r['greedy_cost']:.2f} | {r['taso_cost']:.2f} "
                  f"| {r['cost'] / r['taso_cost']:.3f}x | {paper} | {tf / taso:.2f}x | {r['greedy_s']:.2f} "
                  f"| {r['taso_s']:.1f} | {r['env_median_ms']:.2f} / {r['env_p90_ms']:.2f} ({r['env_steps']}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma-separated: zoo:NAME, a .onnx path, or a builder (default: all)")
    parser.add_argument("--quick", action="store_true",
                        help="defaults budget 100, measured budget 20, 10 timing rounds, 2 BERT layers; no section 6")
    parser.add_argument("--alpha", type=float, default=1.05)
    parser.add_argument("--budget", type=int, help="TASO budget (default 1000)")
    parser.add_argument("--measured-budget", type=int,
                        help="TASO budget with profiled kernel costs (default 100; 0: no search with them)")
    parser.add_argument("--repeats", type=int, help="alternated timing rounds (default 20)")
    parser.add_argument("--bert-layers", type=int, help="layers of the BERT builder (default 12)")
    parser.add_argument("--heads", type=int, default=0, help="attention heads for ort-transformers (0: detect)")
    parser.add_argument("--rank-graphs", type=int, default=1, help="0: skip the ranking")
    parser.add_argument("--rank-only", action="store_true", help="only the ranking (original, random rewrites, "
                                                                  "blocked fusions)")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    defaults = dict(budget=100, measured_budget=20, repeats=10, bert_layers=2) if args.quick else dict(
        budget=1000, measured_budget=100, repeats=20, bert_layers=12)
    for key, value in defaults.items():  # flags given explicitly win
        if getattr(args, key) is None:
            setattr(args, key, value)
    specs = args.models.split(",") if args.models else default_models()
    print(f"machine: {machine_description(load=True)}\nflags: {vars(args)}", flush=True)
    costs = {"analytic": Roofline(backend=ONNXRUNTIME)}
    if args.measured_budget:
        costs["measured"] = OrtCost()
    rows, search_rows, transformer_rows = {}, {}, {}
    for spec in specs:
        rows[short_name(spec)] = bench_model(spec, args, costs)
        name = short_name(spec)
        if args.rank_only:
            continue
        if "error" not in rows[name] and (spec == "bert" or "bert" in name or "transformer" in name):
            result = bench_transformers_optimizer(spec, args)
            if result:
                transformer_rows[name] = result
        if spec in MODELS and not args.quick:
            search_rows[spec] = bench_search(original_graph(spec, args), args)
    print_tables(rows, search_rows, transformer_rows, args)
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine_description(load=True), "flags": vars(args), "rows": rows,
                       "search": search_rows, "transformers": transformer_rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
