"""jaxgraph on models nobody here wrote: does each load, optimize, save, and still compute the same?

    python benchmarks/onnx_import.py [--zoo squeezenet,resnet50] [--no-torch]

For the nine light model-zoo CNNs in the onnx wheel (seeded random weights) and the torch exports in
tests/data, it loads the file (`load_onnx`), runs `greedy` (TASO's roofline cost), writes the result
(`to_onnx`, target onnxruntime) and compares onnxruntime's outputs on the saved file with onnxruntime's
outputs on the original (no graph optimizations), and checks that the reloaded file costs what the
search claimed under the taso, onnxruntime and xla backends. Prints one markdown table row per model:
ONNX nodes, IR ops after import (opaque ones among them), IR ops after greedy, the largest output
error relative to the largest output, and the load and greedy times.
"""

from __future__ import annotations

import argparse
import glob
import os
import time

import numpy as np
import onnx
import onnxruntime as ort

from jaxgraph import (
    ONNXRUNTIME,
    TASO,
    XLA,
    ZOO_MODELS,
    Roofline,
    cost,
    greedy,
    load_onnx,
    to_onnx,
    with_random_weights,
    zoo_path,
)

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data")
TRANSFORMER_SHAPES = {"x": [1, 8, 32]}


def run(model, inputs, optimize: bool) -> list[np.ndarray]:
    options = ort.SessionOptions()
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def row(label: str, model, shapes=None) -> str:
    start = time.perf_counter()
    graph = load_onnx(model, shapes)
    loaded = time.perf_counter()
    optimized = greedy(graph).graph
    searched = time.perf_counter()
    saved = to_onnx(optimized)
    rng = np.random.default_rng(1)
    inputs = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in graph.input_shapes.items()}
    want, got = run(model, inputs, optimize=False), run(saved, inputs, optimize=True)
    error = max(float(np.abs(g - w).max() / max(np.abs(w).max(), 1e-30)) for g, w in zip(got, want))
    reloaded = load_onnx(saved)
    same_cost = all(abs(cost(reloaded, Roofline(backend=b)) / cost(optimized, Roofline(backend=b)) - 1) < 1e-9
                    for b in (TASO, ONNXRUNTIME, XLA))
    opaque = graph.op_counts.get("opaque", 0)
    return (f"| {label} | {len(model.graph.node)} | {graph.num_ops} ({opaque}) | {optimized.num_ops} | "
            f"{error:.1e} | {'yes' if same_cost else 'NO'} | {loaded - start:.2f} | {searched - loaded:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=",".join(ZOO_MODELS), help="comma-separated zoo models ('' for none)")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch exports in tests/data")
    args = parser.parse_args()
    print("| model | ONNX nodes | IR ops (opaque) | after greedy | max rel. error vs onnxruntime | "
          "reloaded cost = claimed | load s | greedy s |")
    print("|---|---|---|---|---|---|---|---|")
    for name in filter(None, args.zoo.split(",")):
        print(row(f"zoo {name}", with_random_weights(onnx.load(zoo_path(name)))), flush=True)
    if not args.no_torch:
        for path in sorted(glob.glob(os.path.join(DATA, "*.onnx"))):
            model = onnx.load(path)
            if any(n.op_type == "ConstantOfShape" for n in model.graph.node):
                model = with_random_weights(model)
            label = os.path.basename(path)[:-5]
            print(row(f"torch {label}", model, TRANSFORMER_SHAPES if label.startswith(("bert", "transformer"))
                      else None), flush=True)


if __name__ == "__main__":
    main()
