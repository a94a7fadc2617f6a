"""Memory of stating a generated table in egglog: one parsed program against one parse per command.

    python -m benchmarks.saturation_memory --rules results/generated_rules.json [--counts 100,300,600,0]
        [--joined-up-to 600]

egglog's Python bindings copy a parsed program's whole text into the span of every command and expression they
return, so declaring n rules as one program takes memory quadratic in n; `jaxgraph.saturation` parses each command
on its own. Each row declares the file's first n rules (`pattern_rule`, after `declarations`; 0: all of them) in a
fresh process, both ways (one program only up to `--joined-up-to` rules: beyond, it outgrows the machine), and
prints the growth of that process's peak resident memory and its CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import time
from pathlib import Path

from jaxsched.common import machine_description


def declare(path: str, count: int, joined: bool) -> tuple[float, float]:
    """(peak memory growth in MB, CPU seconds) of declaring the first `count` rules of `path` (0: all) in one
    egglog e-graph, as one program (`joined`) or one parse per command."""
    from egglog import bindings

    from jaxgraph import declarations, parse_pattern, pattern_rule, run_programs

    entries = json.loads(Path(path).read_text())["rules"]
    programs = declarations([pattern_rule(parse_pattern(e)) for e in entries[:count or len(entries)]])
    egraph = bindings.EGraph()
    before, start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.process_time()
    if joined:
        egraph.run_program(*egraph.parse_program("\n".join(programs)))
    else:
        run_programs(egraph, programs)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024, time.process_time() - start


def fresh(path: str, count: int, joined: bool) -> tuple[float, float]:
    """`declare` in a fresh process (its peak memory is this declaration's alone)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(declare, (path, count, joined))


def main() -> None:
    """Print one row per rule count: memory and CPU time of both ways of declaring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=Path, required=True, help="a generated pattern file")
    parser.add_argument("--counts", default="100,300,600,0", help="rule counts, comma-separated (0: the whole file)")
    parser.add_argument("--joined-up-to", type=int, default=600, help="most rules declared as one program")
    args = parser.parse_args()
    if not args.rules.is_file():
        parser.exit(2, f"error: pattern file {args.rules} does not exist\n")
    total = len(json.loads(args.rules.read_text())["rules"])
    print(f"machine: {machine_description(load=True)}")
    print("| rules | one program: peak memory growth, CPU | one parse per command: peak memory growth, CPU |")
    print("|---|---|---|")
    for count in (int(c) for c in args.counts.split(",")):
        n = count or total
        cells = []
        for joined in (True, False):
            if joined and n > args.joined_up_to:
                cells.append("not run")
                continue
            grown, seconds = fresh(str(args.rules), count, joined)
            cells.append(f"{grown:,.0f} MB, {seconds:.2f} s")
        print(f"| {n:,} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
