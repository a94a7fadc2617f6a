"""TASO's substitution table as data rules (`jaxgraph.patterns`): coverage, agreement with a brute-force matcher,
host `Env` step time on BERT-base, reachable graphs and TASO's search with the full table against `RULES`.

    python -m benchmarks.taso_rules [--graphs 1000] [--steps 150] [--rounds 3] [--max-states 20000] [--soups 5]

Prints: the TASO xfers the full table covers and the share covered by data rules; the rule x graph pairs where
the generic matcher and the networkx brute-force matcher of the tests differ over `--graphs` random graphs (half
op soups, half planted pattern instances); the median host `Env` step on BERT-base (12 layers) with the full
table and with `RULES` (the same seeded random agent, which only ever picks among the first `len(RULES)` xfers
so both tables walk the same graphs; the two alternate `--rounds` times); the graphs reachable from the 2-layer
BERT builder of the RL study (`exhaustive_search`, capped at `--max-states`) and `taso_search` on TASO's cost
(alpha 1.05, budget 1000), each with both tables; the same on `--soups` graphs of planted TASO source
instances, where the data rules fire.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from jaxgraph import (
    RULES,
    TASO,
    CompiledPattern,
    Env,
    Roofline,
    bert,
    excluded_xfers,
    exhaustive_search,
    load_patterns,
    taso_rules,
    taso_search,
)
from tests.jaxgraph.brute_force import mismatches, planted_graph

SMALL_BERT = dict(seq_length=16, hidden=64, heads=2, layers=2, intermediate=128)  # the RL study's default


def coverage() -> dict:
    rules = taso_rules()
    covered = {x for r in rules for x in r.taso_ids}
    data = {r.taso_ids[0] for r in rules[len(RULES):]}
    return {"rules": len(rules), "covered": len(covered), "data": len(data), "excluded": len(excluded_xfers())}


def step_ms(graph, rules, steps: int, seed: int) -> list[float]:
    """Per-step seconds of a seeded random agent over xfers < len(RULES) (NO-OP when none applies)."""
    env = Env(graph, rules=rules, max_locations=200)
    rng = np.random.default_rng(seed)
    obs, times = env.reset().observation, []
    for _ in range(steps):
        xfers = np.flatnonzero(obs.xfer_mask[:len(RULES)])
        action = (env.num_xfers, 0)
        if len(xfers):
            xfer = int(rng.choice(xfers))
            action = (xfer, int(rng.choice(np.flatnonzero(obs.location_mask[xfer]))))
        start = time.perf_counter()
        timestep = env.step(action)
        times.append(time.perf_counter() - start)
        obs = env.reset().observation if timestep.last() else timestep.observation
    return times


def reachable(graph, rules, cost_model, max_states: int) -> str:
    try:
        result = exhaustive_search(graph, rules, cost_model, max_states=max_states)
    except ValueError:
        return f"more than {max_states} (capped)"
    return f"{result.explored} graphs, optimum {result.cost:.5f} ms ({result.seconds:.1f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=1000, help="random graphs for the brute-force comparison")
    parser.add_argument("--steps", type=int, default=150, help="Env steps per table per round on BERT-base")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-states", type=int, default=20000, help="cap of the reachable-graph enumeration")
    parser.add_argument("--soups", type=int, default=5, help="planted-instance graphs searched with both tables")
    args = parser.parse_args()
    if min(args.graphs, args.steps, args.rounds, args.max_states) < 1:
        parser.error("--graphs, --steps, --rounds and --max-states must be positive")

    c = coverage()
    print(f"coverage: {c['covered']}/151 TASO xfers in {c['rules']} rules; {c['data']} by data rules "
          f"({100 * c['data'] / c['covered']:.1f}%); {c['excluded']} generated xfers excluded")

    start = time.perf_counter()
    differ, found = mismatches([CompiledPattern(p) for p in load_patterns()], range(args.graphs // 2))
    print(f"brute force: {differ} mismatches over {2 * (args.graphs // 2)} graphs x {len(load_patterns())} data "
          f"rules ({found} locations, {time.perf_counter() - start:.0f} s)")

    base = bert()
    full = taso_rules()
    times: dict[str, list[float]] = {"RULES": [], "TASO_RULES": []}
    for round_ in range(args.rounds):
        for name, rules in (("RULES", RULES), ("TASO_RULES", full)):
            times[name] += step_ms(base, rules, args.steps, seed=round_)
    med = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
    print(f"host Env step on BERT-base ({base.num_ops} ops): {med['TASO_RULES']:.2f} ms with {len(full)} rules, "
          f"{med['RULES']:.2f} ms with {len(RULES)} rules: {med['TASO_RULES'] / med['RULES']:.2f}x (target <= 3x)")

    small = bert(**SMALL_BERT)
    cm = Roofline(backend=TASO)
    for name, rules in (("RULES", RULES), ("TASO_RULES", full)):
        count = reachable(small, rules, cm, args.max_states)
        print(f"2-layer BERT builder, {name} ({len(rules)} rules): reachable {count}")
        result = taso_search(small, 1.05, 1000, rules, cost_model=cm)
        print(f"  taso_search on TASO's cost: {result.initial_cost:.5f} -> {result.cost:.5f} ms "
              f"({100 * (1 - result.cost / result.initial_cost):.2f}% saved, {result.explored} expanded)")
    patterns = load_patterns()
    print(f"graphs of 4 planted, overlapping TASO source instances (tests' planted_graph), seeds 0-{args.soups - 1}, "
          "TASO's cost:")
    for seed in range(args.soups):
        graph = planted_graph(patterns, seed, count=4)[0]
        cells = []
        for rules in (RULES, full):
            result = taso_search(graph, 1.05, 300, rules, cost_model=cm)
            cells.append(f"{reachable(graph, rules, cm, args.max_states // 4)}; taso_search "
                         f"{100 * (1 - result.cost / result.initial_cost):.2f}% saved")
        print(f"  seed {seed} ({graph.num_ops} ops): RULES {cells[0]} | TASO_RULES {cells[1]}")

if __name__ == "__main__":
    main()
