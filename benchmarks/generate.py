"""The rule generator on TASO's operator set and size bound: stage counts and times, and TASO's table rediscovered.

    python -m benchmarks.generate [--max-ops 3] [--inputs 4] [--seed 0] [--out /tmp/generated_rules.json]

Runs `jaxgraph.generate` (both worlds: matrices with matmul, images with 3x3 stride-1 conv2d; add, mul, relu,
concat and split in both) from scratch and prints, per world, the count at each stage (graphs, fingerprinted
tensors, candidates, refuted, proved, dropped by each pruning stage, rejected by the loader, rules) and the
seconds per stage. Then, for each of TASO's generated xfers in `jaxgraph/data/taso_rules.json` (and the ones
that file excludes, with its reasons), whether the generated table contains it up to renaming of inputs and
commutativity of add and mul, or the first stage that loses it; and how many generated rules TASO's table lacks.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from jaxgraph.generate import Config, generate, op_kinds
from jaxgraph.generate.enumerate import Terms, World
from jaxgraph.generate.known import explain, intern_entry
from jaxgraph.generate.pipeline import STAGES
from jaxgraph.generate.prune import canonical
from jaxgraph.pattern_data import DATA_FILE, excluded_xfers


def _rank(raw: dict) -> int:
    ops = [o for side in ("src", "dst") for o in raw[side]]
    if any(o["op"] == "conv2d" for o in ops):
        return 4
    ranks = [o["attrs"]["rank"] for o in ops if o["op"] == "concat"]
    return ranks[0] if ranks else 2


def known_answers(results, config: Config) -> tuple[dict[int, str], int]:
    """TASO xfer -> 'found' or why not; and the number of generated rules TASO's table lacks."""
    table = json.loads(Path(DATA_FILE).read_text())["rules"]
    by_rank = {r.rank: r for r in results}
    verdict, taso_keys = {}, {rank: set() for rank in by_rank}
    for raw in table:
        rank = _rank(raw)
        if rank not in by_rank:
            verdict[raw["xfer"]] = f"rank {rank} not generated"
            continue
        terms = Terms(World(rank, config.inputs), op_kinds(config.ops, rank))
        verdict[raw["xfer"]] = explain(raw, terms, config.max_ops, by_rank[rank].stages)
        try:
            taso_keys[rank].add(canonical(intern_entry(raw, terms), terms))
        except (ValueError, KeyError):
            pass
    new = sum(len(r.stages["kept"] - taso_keys[r.rank]) for r in results)
    return verdict, new


def main() -> None:
    """Generate from scratch, print the stage table and the known-answer report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-ops", type=int, default=3)
    parser.add_argument("--inputs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/generated_rules.json"))
    args = parser.parse_args()
    config = Config(max_ops=args.max_ops, inputs=args.inputs, seed=args.seed)
    start = time.perf_counter()
    results = generate(config, args.out, resume=False)
    total = time.perf_counter() - start
    print("| rank | " + " | ".join(STAGES) + " |")
    print("|---" * (len(STAGES) + 1) + "|")
    for r in results:
        print(f"| {r.rank} | " + " | ".join(str(r.counts[s]) for s in STAGES) + " |")
    print("\n| rank | " + " | ".join(results[0].seconds) + " | total s |")
    print("|---" * (len(results[0].seconds) + 2) + "|")
    for r in results:
        print(f"| {r.rank} | " + " | ".join(f"{v:.1f}" for v in r.seconds.values())
              + f" | {sum(r.seconds.values()):.1f} |")
    print(f"\nwall time, both worlds: {total:.1f} s; rules written: {sum(r.counts['rules'] for r in results)}")

    verdict, new = known_answers(results, config)
    for xfer, reason in excluded_xfers().items():
        verdict[xfer] = f"excluded from the shipped table: {reason[:60]}..."
    found = [x for x, v in verdict.items() if v == "found"]
    expressible = [x for x, v in verdict.items() if not v.startswith(("not expressible", "more than", "excluded",
                                                                       "disconnected", "rank"))]
    print(f"\nTASO's generated xfers: {len(verdict)}; expressible in the worlds: {len(expressible)}; rediscovered: "
          f"{len(found)} ({100 * len(found) / max(len(expressible), 1):.1f}% of the expressible)")
    for reason, count in Counter(v for v in verdict.values() if v != "found").most_common():
        xfers = sorted(x for x, v in verdict.items() if v == reason)
        print(f"  missing {count}: {reason}: xfers {xfers}")
    print(f"generated rules TASO's table lacks (up to renaming and commutativity): {new}")


if __name__ == "__main__":
    main()
