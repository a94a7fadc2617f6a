"""The rule generator on TASO's operator set and size bound: stage counts and times, and TASO's table rediscovered.

    python -m benchmarks.generate [--max-ops 3] [--inputs 4] [--seed 0] [--worlds bias3,bias1]
        [--out results/generated_rules.json] [--resume]

Runs `jaxgraph.generate` (both worlds: matrices with matmul, images with 3x3 stride-1 conv2d; add, mul, relu, concat
and split in both; `--worlds`: also the extra worlds of biased convs) from scratch and prints, per world, the count
at each stage (graphs, fingerprinted tensors, candidates, refuted, proved, dropped by each pruning stage, wrong at
generic shapes, rejected by the loader, rules), the seconds per stage and each dropped rule with its reason. Then,
for each of TASO's generated xfers in `jaxgraph/data/taso_rules.json` (and the ones that file excludes, with its
reasons), whether the generated table contains it up to renaming of inputs and commutativity of add and mul, or the
first stage that loses it; and how many generated rules TASO's table lacks.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from jaxgraph import excluded_xfers
from jaxgraph.generate import STAGES, Config, describe, generate, known_answers


def _name(result) -> str:
    return result.world or f"rank {result.rank}"


def main() -> None:
    """Generate from scratch, print the stage table and the known-answer report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-ops", type=int, default=3)
    parser.add_argument("--inputs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worlds", default="", help="extra worlds (jaxgraph.generate.EXTRA_WORLDS), comma-separated")
    parser.add_argument("--out", type=Path, default=Path("results/generated_rules.json"))
    parser.add_argument("--resume", action="store_true", help="reuse worlds checkpointed by an earlier run (their "
                        "stage times are the earlier run's)")
    args = parser.parse_args()
    config = Config(max_ops=args.max_ops, inputs=args.inputs, seed=args.seed,
                    worlds=tuple(w for w in args.worlds.split(",") if w))
    start, cpu = time.perf_counter(), time.process_time()
    results = generate(config, args.out, resume=args.resume)
    total, cpu = time.perf_counter() - start, time.process_time() - cpu
    print("| world | " + " | ".join(STAGES) + " |")
    print("|---" * (len(STAGES) + 1) + "|")
    for r in results:
        print(f"| {_name(r)} | " + " | ".join(str(r.counts[s]) for s in STAGES) + " |")
    for title, field in (("wall", "seconds"), ("CPU", "cpu_seconds")):
        stages = list(getattr(results[0], field))
        print(f"\n| world ({title} s) | " + " | ".join(stages) + " | total |")
        print("|---" * (len(stages) + 2) + "|")
        for r in results:
            times = getattr(r, field)
            cells = " | ".join(f"{times[s]:.1f}" for s in stages)
            print(f"| {_name(r)} | {cells} | {sum(times.values()):.1f} |")
    for r in results:
        for raw, reason in r.rejected:
            print(f"{_name(r)} dropped: {describe(raw)}: {reason.split(' on input shapes')[0]}")
    written = len(set().union(*(set(r.keys) for r in results)))
    print(f"\nall worlds: wall {total:.1f} s, CPU time of this process {cpu:.1f} s (all threads; on a shared "
          f"machine the CPU time, not the wall time, is what 2 free cores would need at most); rules written: "
          f"{written}")

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
