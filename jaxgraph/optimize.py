"""Command line: optimize an ONNX model for the runtime that will run it, and never return a slower one.

    python -m jaxgraph.optimize model.onnx -o optimized.onnx [--target onnxruntime|jax] [--method taso|greedy]
        [--rules hand|taso]

Searches (with the hand-written rules, or `--rules taso`: TASO's full table) with a cost model for the target
(`--cost roofline`: the analytic model, which knows what the target fuses by itself; `measured`: kernel times
measured on the target, cached; `taso`: TASO's backend-agnostic additive model), checks the optimized model
against the original in onnxruntime on the same random inputs (exit status 1 if they differ beyond rtol 1e-4),
then times both end to end on the target with its own optimizations on (onnxruntime with ORT_ENABLE_ALL, or
the jitted JAX executor), in alternation, and writes the optimized model only if it is faster beyond noise
(the confidence interval of the speedup lies above 1) in two independent runs; otherwise it writes the
original and says so. Every argument is checked before any work; bad input (a missing or unreadable model, an
op it cannot import or run, `-o` naming the input) prints one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from jaxgraph.backends import ONNXRUNTIME, XLA
from jaxgraph.cost import CostModel, MeasuredCost, OrtCost, Roofline, cost, ort_session
from jaxgraph.execute import runner
from jaxgraph.onnx_io import load_onnx, to_onnx
from jaxgraph.patterns import taso_rules
from jaxgraph.rules import RULES
from jaxgraph.search import greedy, taso_search
from jaxsched.common.arguments import integer, number
from jaxsched.common.timing import compare

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
    parser.add_argument("--rules", choices=("hand", "taso"), default="hand",
                        help="the substitutions: the hand-written RULES, or TASO_RULES (those and TASO's generated "
                             "rules as data patterns, 141 of TASO's 151 xfers)")
    parser.add_argument("--target", choices=("onnxruntime", "jax"), default="onnxruntime",
                        help="the runtime that will run the model: its fusions shape the cost, and it times the result")
    parser.add_argument("--cost", choices=("roofline", "measured", "taso"), default="roofline",
                        help="analytic model of the target (deterministic), kernel times measured on the target "
                             "(cached), or TASO's backend-agnostic additive model")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="JAX measured costs: elapsed time, or process CPU time (steadier on a shared CPU)")
    parser.add_argument("--input-shape", type=_input_shape, action="append", default=[], metavar="NAME=D1,D2,...",
                        help="fix a symbolic input dimension")
    parser.add_argument("--repeats", type=int, default=20,
                        help="end-to-end timing rounds (original and optimized alternate)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true")
    return parser


def _check_arguments(args: argparse.Namespace) -> None:
    """Everything that can be checked before loading: ranges and the two paths."""
    try:
        number("--alpha", args.alpha, 1.0, finite=False)
        for name, low in (("budget", 1), ("repeats", 2), ("seed", 0)):
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
        session = ort_session(args.model)
    except Exception as error:  # noqa: BLE001 - onnxruntime refusing the input model is bad input
        raise BadInput(f"{args.model}: onnxruntime cannot run it: {str(error).splitlines()[0]}") from None
    return graph, session


def _cost_model(target: str, kind: str, clock: str) -> CostModel:
    backend = {"onnxruntime": ONNXRUNTIME, "jax": XLA}[target]
    if kind == "taso":
        return Roofline()
    if kind == "roofline":
        return Roofline(backend=backend)
    return OrtCost() if target == "onnxruntime" else MeasuredCost(clock=clock)


def _outputs(session, feeds) -> dict[str, np.ndarray]:
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def relative_difference(actual: dict, expected: dict) -> float:
    """The largest difference between two models' outputs (by name) relative to the largest expected
    magnitude, over outputs; inf if the names differ."""
    if set(actual) != set(expected):
        return math.inf
    return max(float(np.max(np.abs(actual[n] - expected[n]))) / max(float(np.max(np.abs(expected[n]))), 1e-30)
               for n in expected)


def _timers(args: argparse.Namespace, original_graph, optimized_graph, original, optimized, feeds):
    """Zero-argument calls running the original and the optimized model on the target."""
    if args.target == "onnxruntime":
        return (lambda: original.run(None, feeds)), (lambda: optimized.run(None, feeds))
    return runner(original_graph, feeds), runner(optimized_graph, feeds)


def run(args: argparse.Namespace) -> int:
    """Optimize, check, time and save (arguments already parsed); BadInput for bad input."""
    _check_arguments(args)
    graph, original = _load(args)
    model = _cost_model(args.target, args.cost, args.clock)
    before = cost(graph, model)
    rules = RULES if args.rules == "hand" else taso_rules()
    print(f"loaded {args.model}: {graph.num_ops} ops, cost {before:.4f} ms ({args.cost}, {model.backend.name}); "
          f"{len(rules)} rules")
    if args.method == "taso":
        result = taso_search(graph, args.alpha, args.budget, rules, cost_model=model, progress=not args.no_progress)
    else:
        result = greedy(graph, rules, cost_model=model, progress=not args.no_progress)
    print(f"{args.method}: cost {result.initial_cost:.4f} -> {result.cost:.4f} ms ({result.speedup:.3f}x), "
          f"{len(result.history)} rewrites, {result.graph.num_ops} ops, search {result.seconds:.2f} s")
    if not result.history:
        shutil.copyfile(args.model, args.output)
        print(f"no rewrite lowers the cost: wrote the original model to {args.output}")
        return 0

    rng = np.random.default_rng(args.seed)
    feeds = {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in graph.input_shapes.items()}
    candidate = to_onnx(result.graph)
    optimized = ort_session(candidate)
    worst = relative_difference(_outputs(optimized, feeds), _outputs(original, feeds))
    print(f"onnxruntime check: max relative difference {worst:.2e} -> {'OK' if worst <= 1e-4 else 'MISMATCH'}")
    if worst > 1e-4:
        print("not writing a model whose outputs differ from the original's")
        return 1
    original_run, optimized_run = _timers(args, graph, result.graph, original, optimized, feeds)
    where = "onnxruntime (ORT_ENABLE_ALL)" if args.target == "onnxruntime" else "JAX (jit)"
    faster = True
    for attempt in ("latency", "confirming latency"):  # a second, independent run guards against a noisy first
        timing = compare(original_run, optimized_run, repeats=args.repeats, warmup=3)
        print(f"{where} {attempt}: original {timing.baseline_ms:.3f} ms, optimized {timing.candidate_ms:.3f} ms, "
              f"speedup {timing.ratio:.3f}x (95% interval {timing.low:.3f}-{timing.high:.3f})")
        faster = timing.faster
        if not faster:
            break
    if faster:
        with open(args.output, "wb") as f:
            f.write(candidate.SerializeToString())
        print(f"wrote the optimized model to {args.output}")
    else:
        shutil.copyfile(args.model, args.output)
        print(f"kept the original: the optimized model is not faster beyond noise; wrote the original to "
              f"{args.output}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status (2 with one line on stderr for bad input)."""
    try:
        return run(_parser().parse_args(argv))
    except BadInput as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
