"""TASO's table against a generated one: greedy, TASO's search and equality saturation per model (research
setting: TASO's cost), every result checked by execution; then the deployment setting's measured latency.

    python -m benchmarks.generated_study --rules results/generated_rules.json [--restrict all|new]
        [--models resnet18,...,imported] [--budget 100] [--bert-layers 2] [--small] [--saturation-seconds 20]
        [--max-iterations 100] [--ilp-seconds 20] [--match-graphs 20] [--stated all|reachable] [--multi 1]
        [--repeats 20] [--agent] [--agent-only] [--agent-epochs 15] [--out results/generated_study]

Tables (`jaxgraph.rule_tables`): `taso` is `TASO_RULES` (`RULES`, then TASO's data rules; equality
saturation states TASO's data rules and `HAND_RULES`); `generated` is `RULES`, then the generated file's rules
that pass the loader's check on 16 sampled shapes (`--restrict new`: only those TASO's table lacks up to renaming
of inputs and commutativity), and the same patterns with `HAND_RULES` for saturation. Models: the builders at
full size, batch 1 (BERT with `--bert-layers` layers of BERT-base; `--small`: at `SMALL_SIZES`, BERT as in
`benchmarks.saturation`), and `imported` = `tests/data/bert-legacy-op17.onnx` (batch 1).

Research setting, cost `Roofline(backend=TASO)`: greedy descent, `taso_search` (alpha 1.05, `--budget` graphs)
and equality saturation (multi-pattern rules in the first `--multi` rounds, `--saturation-seconds`, ILP extraction
of `--ilp-seconds`), stating every rule of the table in egglog (`--stated reachable`: only the generated rules
that can ever match in the e-graph, `RuleTable.reachable` from the original graph; their count is printed either
way), with the e-graph's seconds and peak memory. The table prints cost
reductions (1 - cost / initial), how many rules TASO's table lacks match (the original graph / any of those
graphs) and are applied by each host search, and the target: the best generated method >= 10% below TASO's
search with TASO's table, counting only result graphs that compute the original's outputs (`EQUAL`). Every
distinct result graph is saved as ONNX under `--out` and checked against the original graph's outputs (JAX, op
by op) on seeded random inputs: executed in JAX, and the saved file in onnxruntime
(largest difference relative to the largest output magnitude).

With `--agent`, the research setting's best agent too (`experiments.graphopt_rl`'s model-free agent of the
`default` config: PPO in the host `Env` with masked (xfer, location) actions, one entry per rule of the table),
trained on each model with each table for `--agent-epochs` epochs of 8 environments x 16 steps (15: the research
study's 1,920 real steps) and evaluated as that study does (the cheapest graph of its most-likely episode and 8
sampled ones), its result checked like the others'; a table of its real steps and seconds follows.
`--agent-only` runs only the agent (no other method, no deployment setting). Every row is also written to
`--out`/results.json.

Deployment setting, cost `Roofline(backend=ONNXRUNTIME)`: TASO's search with `RULES` (the setting's table) and
with `RULES` plus the generated rules; where the results differ, the two saved files' onnxruntime latencies,
alternated (`--repeats` rounds, 95% interval). Then each generated rule TASO's table lacks that matches a searched
graph is applied once there, picked by no cost model, and the rewritten file is timed against the graph's.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import time
from pathlib import Path

import jax
import numpy as np

from benchmarks.graphopt import difference
from benchmarks.saturation import SMALL_BERT
from experiments.graphopt_rl.configs import CONFIGS
from experiments.graphopt_rl.study import agent_row
from jaxgraph import (
    MODELS,
    ONNXRUNTIME,
    RESTRICTIONS,
    RULES,
    SMALL_SIZES,
    TASO,
    LocationIndex,
    Roofline,
    RuleTable,
    bert,
    cost,
    execute,
    extract_ilp,
    generated_rule_table,
    greedy,
    load_onnx,
    ort_session,
    random_inputs,
    saturate,
    save_onnx,
    taso_search,
    taso_table,
    to_graph,
)
from jaxgraph.onnx_io import batch_one
from jaxgraph.rl import evaluate_agent, make_train, replay
from jaxsched.common import compare, machine_description, write_json

IMPORTED = "tests/data/bert-legacy-op17.onnx"
DEFAULT_MODELS = "resnet18,resnet50,inception_v3,squeezenet1_1,bert,imported"
METHODS = ("greedy", "taso", "e-graph")
TARGET = 0.10  # the best generated method's cost at least 10% below TASO's search with TASO's table
EQUAL = 1e-4  # a result graph counts only where it computes the original's outputs (relative difference, both runtimes)


def load_model(name: str, bert_layers: int, small: bool):
    """A builder at full size, batch 1 (`small`: at the sizes of the saturation benchmark and the RL study), or the
    imported BERT."""
    if name == "imported":
        import onnx

        return load_onnx(IMPORTED, batch_one(onnx.load(IMPORTED, load_external_data=False)))
    if small:
        return MODELS[name](**(SMALL_BERT if name == "bert" else SMALL_SIZES[name]))
    return bert(layers=bert_layers) if name == "bert" else MODELS[name]()


def peak_memory(reset: bool = False) -> float:
    """This process's peak resident memory in GB, since the last `reset` on Linux (`/proc/self/clear_refs`),
    else over its lifetime."""
    status = Path("/proc/self/status")
    if reset and status.exists():
        Path("/proc/self/clear_refs").write_text("5")
    if status.exists():
        return int(status.read_text().split("VmHWM:")[1].split()[0]) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def equality_saturation(graph, table: RuleTable, model, args) -> tuple:
    """(graph, note) of saturation then ILP extraction, the input graph where the extraction costs more or the ILP
    has no solution (an e-graph cut off at a limit can hold classes with no well-typed e-node)."""
    egraph = saturate(graph, table.patterns, model, max_nodes=args.max_nodes, max_iterations=args.max_iterations,
                      time_limit=args.saturation_seconds, multi_iterations=args.multi)
    note = f"{len(egraph.enodes)} e-nodes, {egraph.stop} after {egraph.iterations} rounds" + (
        f", unsound: {egraph.conflicts} e-nodes of another shape than their class" if egraph.conflicts else "")
    try:
        choice, optimal = extract_ilp(egraph, args.ilp_seconds)
    except ValueError as error:
        return graph, f"{note}, ILP: no solution ({str(error).split(': ', 1)[1].split('.')[0]})"
    found = to_graph(egraph, choice)
    note += f", ILP {'optimal' if optimal else 'time limit'}"
    return (found if cost(found, model) <= cost(graph, model) else graph), note


def research(graph, table: RuleTable, args) -> dict[str, dict]:
    """method -> cost, seconds, result graph, new rewrites applied and a note, on TASO's cost (the e-graph's with
    its peak memory); "matching" -> the data rules matching the original graph, the greedy and search results or
    the first `--match-graphs` graphs the search visited. Saturation states the whole table, or with `--stated
    reachable` the generated rules `RuleTable.reachable` from the original graph."""
    model = Roofline(backend=TASO)
    rows = {}
    g = greedy(graph, table.rules, model)
    rows["greedy"] = dict(cost=g.cost, seconds=g.seconds, graph=g.graph, new=table.new_rewrites(g.history),
                          note=f"{g.explored} steps")
    visited = []
    t = taso_search(graph, 1.05, args.budget, table.rules, model,
                    on_visit=lambda v, _: visited.append(v) if len(visited) < args.match_graphs else None)
    rows["taso"] = dict(cost=t.cost, seconds=t.seconds, graph=t.graph, new=table.new_rewrites(t.history),
                        note=f"{t.explored} graphs")
    graphs = [graph, g.graph, t.graph, *visited]
    matching = table.matching(graphs)
    reachable = table.reachable([graph])
    stated = table.restricted(reachable) if args.stated == "reachable" and table.name != "taso" else table
    start, _ = time.perf_counter(), peak_memory(reset=True)
    found, note = equality_saturation(graph, stated, model, args)
    rows["e-graph"] = dict(cost=cost(found, model), seconds=time.perf_counter() - start, graph=found, new=None,
                           note=f"{len(stated.patterns)} data rules stated ({len(reachable)} reachable), {note}, "
                           f"peak {peak_memory():.2f} GB")
    rows["matching"] = dict(original=len(table.matching([graph]) & table.new), any=len(matching & table.new),
                            graphs=graphs)
    return rows


def model_free(graph, table: RuleTable, args, key) -> dict:
    """The research setting's model-free agent (the `default` config's, `--agent-epochs` epochs) trained on `graph`
    with the table, then evaluated as the research study does: the cheapest graph its episodes visited, with its
    cost, seconds (training and evaluation), real steps, the new rewrites it applies, its CPU seconds per real
    training step after the first epoch (`Env` steps, policy and update, compiled; None with one epoch) and per
    evaluation step (an `Env` step and one policy call)."""
    config = CONFIGS["default"]
    agent, model = dataclasses.replace(config.agent, epochs=args.agent_epochs), Roofline(backend=TASO)
    train_key, eval_key = jax.random.split(key)
    start, epochs = time.perf_counter(), []

    def record(so_far) -> bool:  # after every epoch: this process's CPU clock and the real steps so far
        epochs.append((time.process_time(), so_far.env_steps))
        return False  # never stops the training

    trained = make_train(agent, [graph], model, rules=table.rules, on_epoch=record)(train_key)
    (first, first_steps), (last, steps) = epochs[0], epochs[-1]
    cpu = time.process_time()
    row = agent_row(evaluate_agent(trained, graph, agent, model, eval_key, config.eval_samples, table.rules),
                    trained.env_steps, table.rules)
    evaluation_step = (time.process_time() - cpu) / row["evaluation_steps"]
    applied = [(x, location) for x, location in row["actions"] if x < len(table.rules)]
    found = replay(graph, applied, agent.max_locations, model, table.rules)
    return dict(cost=cost(found, model), seconds=time.perf_counter() - start, graph=found,
                new=table.new_rewrites(applied), steps=trained.env_steps, interactions=row["interactions"],
                step_seconds=(last - first) / (steps - first_steps) if steps > first_steps else None,
                evaluation_step_seconds=evaluation_step,
                note=f"{trained.env_steps} real steps, {len(applied)} rewrites")


def describe(pattern) -> str:
    """A rule's two sides as op names in order (`concat1 concat0 matmul -> ...`)."""
    def side(ops) -> str:
        return " ".join(o.op + (str(o.attr("axis")) if o.op in ("concat", "split") else "") for o in ops)

    return f"{side(pattern.src)} -> {side(pattern.dst)}"


def latency(paths: list[Path], feeds, repeats: int) -> tuple:
    """The second file's onnxruntime speedup over the first's (alternated) and both files' outputs."""
    first, second = (ort_session(p) for p in paths)
    c = compare(lambda: first.run(None, feeds), lambda: second.run(None, feeds), repeats=repeats)
    return c, [first.run(None, feeds), second.run(None, feeds)]


def forced_new_rewrites(name: str, graphs: list, table: RuleTable, args) -> list[dict]:
    """Each rule TASO's table lacks that matches one of `graphs` (its first location in the first such graph),
    applied whether or not a cost model picks it: the change of both costs, and the onnxruntime latency of the
    rewritten graph's saved file against the graph's (alternated, `--repeats` rounds), outputs checked equal."""
    found, rows = set(), []
    for graph in graphs:
        for x, location in sorted(LocationIndex.build(table.rules, graph).matches()):
            rule = table.rules[x]
            if rule.pattern is None or rule.pattern.xfer not in table.new or rule.pattern.xfer in found:
                continue
            found.add(rule.pattern.xfer)
            child = rule.apply(graph, location)
            paths = [args.out / f"{name}-forced-{rule.pattern.xfer}-{side}.onnx" for side in ("before", "after")]
            for path, g in zip(paths, (graph, child)):
                save_onnx(g, path)
            c, outputs = latency(paths, random_inputs(graph, seed=0), args.repeats)
            rows.append(dict(rule=f"{rule.pattern.xfer}: {describe(rule.pattern)}", latency=c,
                             difference=difference(outputs[1], outputs[0]),
                             **{m: cost(child, Roofline(backend=b)) - cost(graph, Roofline(backend=b))
                                for m, b in (("taso_cost", TASO), ("ort_cost", ONNXRUNTIME))}))
    return rows


def check(original, graphs: dict[str, object], out: Path) -> dict[str, tuple[float, float]]:
    """label -> (JAX difference, onnxruntime difference) of each distinct graph against the original's JAX
    outputs (relative to the largest expected magnitude); each graph saved as `out/label.onnx`."""
    feeds = random_inputs(original, seed=0)
    names = list(original.output_names)
    expected = [np.asarray(v) for v in map(execute(original, feeds, jit=False).get, names)]
    checked, results = {}, {}
    for label, graph in graphs.items():
        if graph.structure_hash not in checked:
            path = out / f"{label}.onnx"
            save_onnx(graph, path)
            jax_out = execute(graph, feeds, jit=False)
            session = ort_session(path)
            ort_out = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
            checked[graph.structure_hash] = (difference([np.asarray(jax_out[n]) for n in names], expected),
                                             difference([ort_out[n] for n in names], expected))
        results[label] = checked[graph.structure_hash]
    return results


def deployment(name: str, graph, table: RuleTable, args) -> dict:
    """TASO's search on onnxruntime's cost with `RULES` and with the generated table; where the two results
    differ, their saved files' onnxruntime latencies, alternated."""
    model = Roofline(backend=ONNXRUNTIME)
    base = taso_search(graph, 1.05, args.budget, RULES, model)
    found = taso_search(graph, 1.05, args.budget, table.rules, model)
    row = dict(initial=base.initial_cost, rules=base.cost, generated=found.cost, new=table.new_rewrites(found.history))
    if found.graph.structure_hash != base.graph.structure_hash:
        paths = [args.out / f"{name}-deployment-{label}.onnx" for label in ("rules", "generated")]
        for path, g in zip(paths, (base.graph, found.graph)):
            save_onnx(g, path)
        row["latency"] = latency(paths, random_inputs(graph, seed=0), args.repeats)[0]
    return row


def _percent(initial: float, value: float) -> str:
    return f"{100 * (1 - value / initial):.2f}%"


def results_json(research_rows: dict, methods: tuple[str, ...], args) -> dict:
    """The research setting's rows as JSON: per model and table, each method's cost, reduction, seconds, new
    rewrites and note (the agent's real steps too), and the largest differences of its result graph (JAX,
    onnxruntime)."""
    models = {}
    for name, (graph, rows, checks) in research_rows.items():
        initial = cost(graph, Roofline(backend=TASO))
        models[name] = {"ops": graph.num_ops, "initial_cost": initial, **{table: {m: {
            **{k: v for k, v in found[m].items() if k != "graph"}, "reduction": 1 - found[m]["cost"] / initial,
            "difference": checks[f"{name}-{table}-{m}"]} for m in methods} for table, found in rows.items()}}
    return {"machine": machine_description(load=True), "args": {k: str(v) for k, v in vars(args).items()},
            "models": models}


def agent_table(research_rows: dict) -> None:
    """Print the agent's cost reduction per model and table with its real steps and seconds."""
    print("\nResearch setting's model-free agent (TASO's cost): cost reduction, real training steps, seconds "
          "(training and evaluation), CPU seconds per real training step after the first epoch and per evaluation step")
    print("| model | table | agent | real steps | seconds | CPU s per step: training / evaluation | new rewrites | "
          "largest difference JAX / onnxruntime |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (graph, rows, checks) in research_rows.items():
        initial = cost(graph, Roofline(backend=TASO))
        for table, found in rows.items():
            a = found["agent"]
            jax_difference, ort_difference = checks[f"{name}-{table}-agent"]
            training = "-" if a["step_seconds"] is None else f"{a['step_seconds']:.4f}"
            print(f"| {name} | {table} | {_percent(initial, a['cost'])} | {a['steps']} | {a['seconds']:.1f} | "
                  f"{training} / {a['evaluation_step_seconds']:.4f} | {len(a['new'])} | "
                  f"{jax_difference:.1e} / {ort_difference:.1e} |")


def main() -> None:
    """Run both settings on every model and print the tables and the verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=Path, required=True, help="a generated pattern file")
    parser.add_argument("--restrict", choices=RESTRICTIONS, default="all")
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--bert-layers", type=int, default=2)
    parser.add_argument("--small", action="store_true", help="builders at `SMALL_SIZES` (BERT: 2 layers, hidden 64)")
    parser.add_argument("--saturation-seconds", type=float, default=20.0)
    parser.add_argument("--ilp-seconds", type=float, default=20.0)
    parser.add_argument("--max-nodes", type=int, default=20_000)
    parser.add_argument("--max-iterations", type=int, default=100, help="saturation rounds at most")
    parser.add_argument("--match-graphs", type=int, default=20, help="visited graphs whose matching rules count")
    parser.add_argument("--stated", choices=("all", "reachable"), default="all", help="the generated rules "
                        "saturation states: all, or those reachable from the original graph")
    parser.add_argument("--multi", type=int, default=1, help="rounds in which multi-pattern rules run")
    parser.add_argument("--repeats", type=int, default=20, help="alternated latency rounds (deployment)")
    parser.add_argument("--agent", action="store_true", help="also the research setting's model-free agent")
    parser.add_argument("--agent-only", action="store_true", help="only the agent (implies --agent)")
    parser.add_argument("--agent-epochs", type=int, default=15, help="the agent's epochs of 8 x 16 real steps")
    parser.add_argument("--out", type=Path, default=Path("results/generated_study"))
    args = parser.parse_args()
    args.agent = args.agent or args.agent_only
    if args.agent_epochs < 1:
        parser.exit(2, f"--agent-epochs must be at least 1, got {args.agent_epochs}\n")
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    tables = (taso_table(), generated_rule_table(args.rules, args.restrict))
    print(f"machine: {machine_description(load=True)}; tables: " + ", ".join(
        f"{t.name} {len(t.rules)} rules ({len(t.new)} not in TASO's, {len(t.rejected)} rejected by the loader's "
        f"check: {list(t.rejected)})" for t in tables)
        + f", loaded in {time.perf_counter() - start:.1f} s")
    methods = ("agent",) if args.agent_only else METHODS + (("agent",) if args.agent else ())
    research_rows, deployment_rows, forced_rows = {}, {}, {}
    for i, name in enumerate(args.models.split(",")):
        graph = load_model(name, args.bert_layers, args.small)
        rows = {t.name: {} if args.agent_only else research(graph, t, args) for t in tables}
        for t in tables if "agent" in methods else ():
            rows[t.name]["agent"] = model_free(graph, t, args, jax.random.fold_in(jax.random.key(0), i))
        graphs = {f"{name}-{t}-{m}": rows[t][m]["graph"] for t in rows for m in methods}
        research_rows[name] = (graph, rows, check(graph, graphs, args.out))
        if not args.agent_only:
            forced_rows[name] = forced_new_rewrites(name, rows[tables[1].name]["matching"]["graphs"], tables[1], args)
            deployment_rows[name] = deployment(name, graph, tables[1], args)
        agents = ", ".join(f"{t}: {_percent(cost(graph, Roofline(backend=TASO)), rows[t]['agent']['cost'])}, "
                           f"{rows[t]['agent']['seconds']:.0f} s" for t in rows if "agent" in methods)
        print(f"{name} done ({time.perf_counter() - start:.0f} s)" + (f"; agent {agents}" if agents else ""),
              flush=True)
    write_json(args.out / "results.json", results_json(research_rows, methods, args))
    if "agent" in methods:
        agent_table(research_rows)
    if args.agent_only:
        print(f"\ntotal {time.perf_counter() - start:.0f} s wall, {time.process_time():.0f} s CPU (this process)")
        return

    print("\nResearch setting (TASO's cost): cost reduction, seconds; new = rewrites applied that TASO's table lacks")
    print("| model | ops | new rules matching: original / searched | table | greedy | TASO search | e-graph (ILP) | "
          + "agent | " * args.agent + "new rewrites (greedy / TASO) | e-graph | largest difference JAX / onnxruntime |")
    print("|---" * (10 + args.agent) + "|")
    met = 0
    for name, (graph, rows, checks) in research_rows.items():
        initial = cost(graph, Roofline(backend=TASO))
        for table, found in rows.items():
            cells = [f"{_percent(initial, found[m]['cost'])}, {found[m]['seconds']:.1f} s" for m in methods]
            worst = [max(checks[f"{name}-{table}-{m}"][i] for m in methods) for i in (0, 1)]
            matching = f"{found['matching']['original']} / {found['matching']['any']}"
            print(f"| {name} | {graph.num_ops} | {matching} | {table} | " + " | ".join(cells)
                  + f" | {len(found['greedy']['new'])} / {len(found['taso']['new'])} | {found['e-graph']['note']}"
                  + f" | {worst[0]:.1e} / {worst[1]:.1e} |")
        generated = tables[1].name
        best = min((rows[generated][m]["cost"] for m in methods
                    if max(checks[f"{name}-{generated}-{m}"]) <= EQUAL), default=initial)
        reference = rows["taso"]["taso"]["cost"]
        met += best <= (1 - TARGET) * reference
        print(f"| {name} | | | best generated vs TASO's search (TASO's table) | {100 * (1 - best / reference):+.2f}% "
              + "| " * (5 + args.agent) + "|")
    print(f"\ntarget (best generated method >= {TARGET:.0%} below TASO's search with TASO's table on >= 2 models): "
          f"{met} models: {'met' if met >= 2 else 'not met'}")

    print("\nDeployment setting (onnxruntime's cost): TASO's search with RULES and with the generated table")
    print("| model | RULES | generated | new rewrites applied | latency RULES / generated ms | speedup [95%] |")
    print("|---|---|---|---|---|---|")
    for name, row in deployment_rows.items():
        c = row.get("latency")
        timing = ("same graph | -" if c is None else
                  f"{c.baseline_ms:.3f} / {c.candidate_ms:.3f} | {c.ratio:.3f}x [{c.low:.3f}, {c.high:.3f}]")
        print(f"| {name} | {_percent(row['initial'], row['rules'])} | {_percent(row['initial'], row['generated'])} | "
              f"{len(row['new'])} {sorted(set(row['new']))[:3]} | {timing} |")
    print("\nEach new rule matching a searched graph, applied once: cost changes, onnxruntime latency after / before")
    print("| model | rule | TASO cost change | onnxruntime cost change | largest difference | "
          "latency before / after ms | speedup [95%] |")
    print("|---|---|---|---|---|---|---|")
    for name, rows in forced_rows.items():
        for r in rows:
            c = r["latency"]
            print(f"| {name} | {r['rule']} | {r['taso_cost']:+.4f} | {r['ort_cost']:+.4f} | {r['difference']:.1e} | "
                  f"{c.baseline_ms:.3f} / {c.candidate_ms:.3f} | {c.ratio:.3f}x [{c.low:.3f}, {c.high:.3f}] |")
    print(f"\ntotal {time.perf_counter() - start:.0f} s wall, {time.process_time():.0f} s CPU (this process)")


if __name__ == "__main__":
    main()
