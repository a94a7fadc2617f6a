"""JaxEnv against Env step for step (`jaxgraph.parity`) on generated graphs, the builders and the ONNX test files;
prints the steps, graphs, rule families fired and mismatches per set and backend.

    python benchmarks/jax_env_parity.py [--graphs 50] [--blocks 6] [--sequences 8] [--backends taso,xla,onnxruntime]
        [--builders] [--onnx] [--tight] [--taso 40] [--matcher by-ops]

Generated graphs: `random_graph(seed, blocks)` for seeds 0..graphs-1, all in one JaxEnv per backend (sized for the
largest, so one compilation per backend). `--tight`: the same graphs again under TASO's cost in a JaxEnv whose node
and edge capacities are the largest graph's plus a few, so the largest graphs run at capacity (rewrites that could
overfill it are masked in both environments). `--builders`: the five builders of the study (small configurations as
the tests use) and `--onnx`: every file of tests/data, each in its own JaxEnv under TASO's cost. Target: 0 mismatches
over at least 10,000 steps on at least 50 generated graphs that together fire every rule family. `--taso N`: TASO's
full table (`TASO_RULES`: the hand rules and the data rules) on N graphs of planted TASO source instances (the tests'
`planted_graphs`) and N op soups (`random_taso_graph`), one JaxEnv each, TASO's cost: also the data rules fired.
`--matcher`: how those JaxEnvs match the data rules (`jaxgraph.jax_match.MATCHERS`; default: the backend's).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import jax

from jaxgraph import (
    BACKENDS,
    DATA_FAMILY,
    JAX_RULE_FAMILIES,
    MATCHERS,
    MODELS,
    SMALL_SIZES,
    fitting_env,
    hand_covered,
    load_onnx,
    load_patterns,
    random_graph,
    random_taso_graph,
    replay_parity,
    taso_rules,
)
from jaxsched.common import machine_description

FAST_COMPILE = {"xla_backend_optimization_level": 0}  # the same values; big programs compile 2-3x faster on CPU


def run(name, env, graphs, sequences):
    """Replay every graph in `env`; returns a table row."""
    reset = jax.jit(env.reset, compiler_options=FAST_COMPILE)
    step = jax.jit(env.step, compiler_options=FAST_COMPILE)
    start, steps, families, applied, mismatches = time.perf_counter(), 0, set(), set(), []
    for seed, graph in enumerate(graphs):
        report = replay_parity(env, reset, step, graph, sequences, seed)
        steps += report.steps
        families |= {env.rules[x].family for x in report.applied}
        applied |= report.applied
        mismatches += [f"{name} graph {seed}: {m}" for m in report.mismatches]
    for line in mismatches:
        print(line, file=sys.stderr)
    data = sum(env.rules[x].family == DATA_FAMILY for x in applied)
    row = (name, env.model.backend.name, len(graphs), steps, len(families), data, len(mismatches),
           time.perf_counter() - start, families)
    print("| " + " | ".join(str(x) if not isinstance(x, float) else f"{x:.0f}" for x in row[:-1]) + " |", flush=True)
    return row


def onnx_graphs():
    from jaxgraph.onnx_io import batch_one

    return {os.path.basename(path): load_onnx(path, batch_one(path))
            for path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "tests", "data", "*.onnx")))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=50)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--backends", default="taso,xla,onnxruntime")
    parser.add_argument("--builders", action="store_true")
    parser.add_argument("--onnx", action="store_true")
    parser.add_argument("--tight", action="store_true")
    parser.add_argument("--taso", type=int, default=0, help="also N planted graphs and N soups with the full table")
    parser.add_argument("--matcher", default=None, help="the data rules' matcher (jaxgraph.jax_match.MATCHERS)")
    args = parser.parse_args(argv)
    try:
        if args.matcher is not None and args.matcher not in MATCHERS:
            raise ValueError(f"unknown matcher {args.matcher!r}; known: {', '.join(MATCHERS)}")
        backends = [BACKENDS[b] for b in args.backends.split(",") if b]
        generated = [random_graph(seed, blocks=args.blocks) for seed in range(args.graphs)]
    except (KeyError, ValueError) as error:
        print(f"jax_env_parity: {error}", file=sys.stderr)
        return 2
    print(f"machine: {machine_description(load=True)} at the start")
    print("| set | backend | graphs | steps | rule families fired | data rules fired | mismatches | seconds |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    rows = [run("generated", fitting_env(generated, backend), generated, args.sequences) for backend in backends]
    if args.tight:
        rows.append(run("generated at capacity", fitting_env(generated, BACKENDS["taso"], max(map(len, generated)) + 4,
                                                            max(g.num_edges for g in generated) + 8),
                        generated, args.sequences))
    singles = {}
    if args.builders:
        singles.update({name: MODELS[name](**kwargs) for name, kwargs in SMALL_SIZES.items()})
    if args.onnx:
        singles.update(onnx_graphs())
    for name, graph in singles.items():
        rows.append(run(name, fitting_env([graph], BACKENDS["taso"]), [graph], args.sequences))
    if args.taso:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
        from tests.jaxgraph.brute_force import planted_graphs

        patterns = [p for p in load_patterns() if p.xfer not in hand_covered()]
        for name, graphs in (("planted, full table", planted_graphs(patterns, args.taso)),
                             ("soups, full table", [random_taso_graph(s, blocks=8) for s in range(args.taso)])):
            rows.append(run(name, fitting_env(graphs, BACKENDS["taso"], rules=taso_rules(), matcher=args.matcher),
                            graphs, args.sequences))
    fired = set().union(*(row[-1] for row in rows))
    families = set(JAX_RULE_FAMILIES) | ({DATA_FAMILY} if args.taso else set())
    total = sum(row[3] for row in rows)
    print(f"total: {total} steps, {sum(row[6] for row in rows)} mismatches, {len(fired)} of "
          f"{len(families)} rule families fired (missing: {sorted(families - fired)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
