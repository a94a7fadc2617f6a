"""Command line: `python -m jaxgraph.generate --ops matmul,conv2d,add,mul,relu,concat,split --max-ops 3 --out
rules.json --seed 0`. Prints the stage counts per world; bad input prints one line and exits 2."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jaxgraph.generate.enumerate import TASO_OPS
from jaxgraph.generate.pipeline import STAGES, Config, generate


def _progress():
    from tqdm import tqdm

    bars: dict[str, tqdm] = {}

    def update(stage: str, step: int, total: int) -> None:
        if stage not in bars:
            for bar in bars.values():
                bar.close()
            bars[stage] = tqdm(total=total or None, desc=stage, unit=" items", leave=False, file=sys.stderr)
        bars[stage].update(step)

    return update


def main(argv: list[str] | None = None) -> int:
    """Generate, verify and prune rules, write the pattern file, print the counts."""
    parser = argparse.ArgumentParser(prog="python -m jaxgraph.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=",".join(TASO_OPS), help="comma-separated IR ops (default: TASO's set)")
    parser.add_argument("--max-ops", type=int, default=3)
    parser.add_argument("--inputs", type=int, default=4, help="input tensors per world")
    parser.add_argument("--ranks", default="2,4", help="worlds: 2 (matrices) and/or 4 (images)")
    parser.add_argument("--worlds", default="", help="extra worlds, comma-separated: bias3 and/or bias1 (biased "
                        "convs, 3x3 or 1x1, stride 1 and 2, SAME/VALID/HALF)")
    parser.add_argument("--max-outputs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--fresh", action="store_true", help="ignore and replace an existing checkpoint")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        ranks = tuple(int(r) for r in args.ranks.split(","))
        config = Config(tuple(o.strip() for o in args.ops.split(",") if o.strip()), args.max_ops, args.inputs,
                        ranks, args.max_outputs, args.seed, tuple(w for w in args.worlds.split(",") if w))
        if not args.out.parent.is_dir():
            raise ValueError(f"output folder {args.out.parent} does not exist")
        results = generate(config, args.out, None if args.quiet else _progress(), resume=not args.fresh)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("world | " + " | ".join(STAGES) + " | seconds")
    for r in results:
        print(f"{r.world or f'rank {r.rank}'} | " + " | ".join(str(r.counts.get(s, 0)) for s in STAGES)
              + f" | {sum(r.seconds.values()):.1f}")
    print(f"wrote {sum(r.counts['rules'] for r in results)} rules to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
