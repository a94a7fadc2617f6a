"""Command line: optimize an ONNX model with TASO search or greedy descent, then check it with onnxruntime.

    python -m jaxgraph.optimize model.onnx -o optimized.onnx --method taso --budget 1000

Prints the cost before and after and the search time, writes the optimized model, runs both models in
onnxruntime (CPU) on the same random inputs and fails (exit status 1) if their outputs differ beyond
rtol 1e-4, and reports the measured latency of both. Every argument is checked before any work; bad
input (a missing or unreadable model, an op it cannot import, `-o` naming the input) prints one line
and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from jaxgraph.arguments import integer, number
from jaxgraph.cost import MeasuredCost, Roofline, cost
from jaxgraph.onnx_io import load_onnx, save_onnx
from jaxgraph.search import greedy, taso_search

PROG = "python -m jaxgraph.optimize"


class BadInput(Exception):
    """A problem with the command line or the files it names: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise BadInput(message)


def _input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    name, _, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not name or not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=D1,D2,... with positive dimensions, got {text!r}")
    return name, shape


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="input ONNX model")
    parser.add_argument("-o", "--output", required=True, help="where to write the optimized ONNX model")
    parser.add_argument("--method", choices=("taso", "greedy"), default="taso")
    parser.add_argument("--alpha", type=float, default=1.05,
                        help="TASO: keep graphs cheaper than alpha x best (>= 1)")
    parser.add_argument("--budget", type=int, default=1000, help="TASO: graphs to expand")
    parser.add_argument("--cost", choices=("roofline", "measured"), default="roofline",
                        help="analytic roofline (deterministic) or per-op JAX timings on this device (cached)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="measured costs: elapsed time, or process CPU time (steadier on a shared CPU)")
    parser.add_argument("--input-shape", type=_input_shape, action="append", default=[], metavar="NAME=D1,D2,...",
                        help="fix a symbolic input dimension")
    parser.add_argument("--repeats", type=int, default=20,
                        help="onnxruntime timing repeats")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true")
    return parser


def _check_arguments(args: argparse.Namespace) -> None:
    """Everything that can be checked before loading: ranges and the two paths."""
    try:
        number("--alpha", args.alpha, 1.0, finite=False)
        for name, low in (("budget", 1), ("repeats", 1), ("seed", 0)):
            integer(f"--{name}", getattr(args, name), low)
    except ValueError as error:
        raise BadInput(str(error)) from None
    source, target = Path(args.model), Path(args.output)
    if not source.is_file():
        raise BadInput(f"no ONNX model at {source}" if not source.exists() else f"{source} is not a file")
    if target.exists() and (target.is_dir() or target.samefile(source)):
        raise BadInput(f"-o {target} is {'a directory' if target.is_dir() else 'the input model'}; "
                       "name a new file for the optimized model")
    if not target.resolve().parent.is_dir():
        raise BadInput(f"-o {target}: directory {target.resolve().parent} does not exist")
    names = [name for name, _ in args.input_shape]
    if len(set(names)) != len(names):
        raise BadInput(f"--input-shape names an input twice: {names}")


def _session(path: str | os.PathLike):
    import onnxruntime

    return onnxruntime.InferenceSession(os.fspath(path), providers=["CPUExecutionProvider"])


def _load(args: argparse.Namespace):
    """The model as a graph and as an onnxruntime session; BadInput for anything either cannot read."""
    shapes = dict(args.input_shape)
    try:
        graph = load_onnx(args.model, shapes)
    except (ValueError, OSError) as error:
        raise BadInput(f"{args.model}: {error}") from None
    except Exception as error:  # noqa: BLE001 - the ONNX parser's own errors on a file that is not a model
        raise BadInput(f"{args.model} is not an ONNX model ({type(error).__name__}: {error})") from None
    unknown = sorted(set(shapes) - set(graph.input_names))
    if unknown:
        raise BadInput(f"--input-shape names {unknown}, which are not inputs of {args.model} "
                       f"(inputs: {list(graph.input_names)})")
    if not graph.outputs:
        raise BadInput(f"{args.model} has no outputs: nothing to optimize")
    try:
        session = _session(args.model)
    except Exception as error:  # noqa: BLE001 - onnxruntime refusing the input model is bad input
        raise BadInput(f"{args.model}: onnxruntime cannot run it: {str(error).splitlines()[0]}") from None
    return graph, session


def _latencies_ms(sessions, feeds, repeats: int) -> list[float]:
    """Median latency of each session, timed in alternation so load drift hits all of them alike."""
    for session in sessions:
        session.run(None, feeds)
    times: list[list[float]] = [[] for _ in sessions]
    for _ in range(repeats):
        for session, bucket in zip(sessions, times):
            start = time.perf_counter()
            session.run(None, feeds)
            bucket.append(time.perf_counter() - start)
    return [1e3 * statistics.median(bucket) for bucket in times]


def run(args: argparse.Namespace) -> int:
    """Optimize, save, check and time (arguments already parsed); BadInput for bad input."""
    _check_arguments(args)
    graph, original = _load(args)
    model = Roofline() if args.cost == "roofline" else MeasuredCost(clock=args.clock)
    before = cost(graph, model)
    print(f"loaded {args.model}: {graph.num_ops} ops, cost {before:.4f} ms ({args.cost})")
    if args.method == "taso":
        result = taso_search(graph, args.alpha, args.budget, cost_model=model, progress=not args.no_progress)
    else:
        result = greedy(graph, cost_model=model, progress=not args.no_progress)
    print(f"{args.method}: cost {result.initial_cost:.4f} -> {result.cost:.4f} ms ({result.speedup:.3f}x), "
          f"{len(result.history)} rewrites, {result.graph.num_ops} ops, search {result.seconds:.2f} s")
    save_onnx(result.graph, args.output)
    print(f"wrote {args.output}")

    rng = np.random.default_rng(args.seed)
    feeds = {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in graph.input_shapes.items()}
    optimized = _session(args.output)
    names = [o.name for o in original.get_outputs()]
    expected = dict(zip(names, original.run(None, feeds)))
    actual = dict(zip([o.name for o in optimized.get_outputs()], optimized.run(None, feeds)))
    worst = max(float(np.max(np.abs(actual[n] - expected[n])) / max(float(np.max(np.abs(expected[n]))), 1e-30))
                for n in names)
    same = set(actual) == set(expected) and worst <= 1e-4
    print(f"onnxruntime check: max relative difference {worst:.2e} -> {'OK' if same else 'MISMATCH'}")
    t0, t1 = _latencies_ms([original, optimized], feeds, args.repeats)
    print(f"onnxruntime CPU latency: original {t0:.3f} ms, optimized {t1:.3f} ms ({t0 / t1:.3f}x)")
    return 0 if same else 1


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status (2 with one line on stderr for bad input)."""
    try:
        return run(_parser().parse_args(argv))
    except BadInput as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
