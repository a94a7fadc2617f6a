"""TASO's table against a generated one (research setting: TASO's cost), greedy and TASO's search per model.

    python -m benchmarks.generated_study --rules results/generated_rules.json [--models resnet18,squeezenet1_1]
        [--budget 100] [--bert-layers 2]

Tables: `taso` is `TASO_RULES` (the hand rules `RULES`, then TASO's data rules); `generated` is `RULES` then the
rules of the generated pattern file (`python -m jaxgraph.generate` or `python -m benchmarks.generate`). For each
model builder (full size, batch 1; BERT with `--bert-layers` layers) and table, prints the initial cost, the cost
after greedy descent and after `taso_search` (alpha 1.05, `--budget` graphs), both under TASO's cost model
(`Roofline(backend=TASO)`), the seconds, and the largest difference between the optimized and the original
graph's outputs on seeded random inputs (executed in JAX).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from jaxgraph import RULES, TASO, Roofline, bert, greedy, taso_rules, taso_search
from jaxgraph.execute import execute, random_inputs
from jaxgraph.models import MODELS
from jaxgraph.pattern_data import load_patterns
from jaxgraph.patterns import pattern_rules

DEFAULT_MODELS = "resnet18,resnet50,inception_v3,squeezenet1_1,bert"


def _difference(original, optimized) -> float:
    feeds = random_inputs(original, seed=0)
    a, b = execute(original, feeds), execute(optimized, feeds)
    return max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in a)


def main() -> None:
    """Print one row per model, table and search."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=Path, required=True, help="a generated pattern file")
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--bert-layers", type=int, default=2)
    args = parser.parse_args()
    tick = time.perf_counter()
    tables = {"taso": taso_rules(), "generated": RULES + pattern_rules(load_patterns(args.rules, checks=1))}
    print(f"tables: taso {len(tables['taso'])} rules, generated {len(tables['generated'])} rules "
          f"(loaded in {time.perf_counter() - tick:.1f} s)")
    model = Roofline(backend=TASO)
    print("| model | table | initial | greedy | s | taso search | s | max output difference |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        graph = bert(layers=args.bert_layers) if name == "bert" else MODELS[name]()
        for table, rules in tables.items():
            g = greedy(graph, rules, model)
            t = taso_search(graph, budget=args.budget, rules=rules, cost_model=model)
            worst = max(_difference(graph, g.graph), _difference(graph, t.graph))
            print(f"| {name} | {table} | {g.initial_cost:.4f} | {g.cost:.4f} | {g.seconds:.1f} | {t.cost:.4f} | "
                  f"{t.seconds:.1f} | {worst:.1e} |", flush=True)


if __name__ == "__main__":
    main()
