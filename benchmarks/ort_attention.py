"""Probe: what onnxruntime's contrib `com.microsoft.Attention` would buy on the BERT builder under ORT_ENABLE_ALL.

    python benchmarks/ort_attention.py [--layers 2] [--repeats 20]

onnxruntime's own optimizer (ORT_ENABLE_ALL) turns the exported `jaxgraph.bert` into Gemm, FusedMatMul,
SkipLayerNormalization and Gelu kernels but leaves the attention block as Reshape/Transpose/MatMul/Softmax;
`onnxruntime.transformers.optimizer` does not fuse it either. This rewrites each layer's self-attention
(Q/K/V projections with biases, head split, scaled softmax attention, head merge) of the exported model
by hand into one `Attention` node (Q/K/V weights and biases concatenated), checks the outputs, and times
both models in alternation (wall and process CPU time, 95% intervals): the upper bound of what a
jaxgraph rule writing that contrib op could gain.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from jaxgraph import bert, ort_session, to_onnx
from jaxsched.common import compare


def with_contrib_attention(model, layers: int, heads: int):
    """The exported BERT builder with every layer's self-attention block as one com.microsoft.Attention."""
    from onnx import helper, numpy_helper

    graph = model.graph
    weights = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    by_name = {node.name: node for node in graph.node}
    fused, dropped = {}, set()
    for i in range(layers):
        prefix = f"encoder.layer.{i}.attention.self"
        parts = ("query", "key", "value")
        for suffix, axis in (("weight", 1), ("bias", 0)):
            stacked = np.concatenate([weights[f"{prefix}.{p}.{suffix}"] for p in parts], axis)
            graph.initializer.append(numpy_helper.from_array(stacked, f"{prefix}.qkv.{suffix}"))
        x, out = by_name[f"{prefix}.query"].input[0], by_name[f"{prefix}.flatten"].output[0]
        fused[f"{prefix}.query"] = helper.make_node("Attention", [x, f"{prefix}.qkv.weight", f"{prefix}.qkv.bias"],
                                                    [out], name=f"{prefix}.attention", domain="com.microsoft",
                                                    num_heads=heads)
        dropped |= {name for name in by_name if name.startswith(prefix + ".")}
    nodes = [fused.get(node.name) or node for node in graph.node if node.name in fused or node.name not in dropped]
    del graph.node[:]
    graph.node.extend(nodes)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    graph = bert(layers=args.layers, heads=args.heads)
    original = ort_session(to_onnx(graph))
    fused = ort_session(with_contrib_attention(to_onnx(graph), args.layers, args.heads))
    feeds = {"x": np.random.default_rng(0).standard_normal(graph.input_shapes["x"], dtype=np.float32)}
    expected, actual = original.run(None, feeds)[0], fused.run(None, feeds)[0]
    print(f"BERT builder, {args.layers} layers, {graph.input_shapes['x']}; load average {os.getloadavg()[0]:.1f}")
    print(f"largest output difference {np.abs(actual - expected).max() / np.abs(expected).max():.1e}")
    for clock in ("wall", "cpu"):
        c = compare(lambda: original.run(None, feeds), lambda: fused.run(None, feeds), repeats=args.repeats,
                    clock=clock)
        print(f"{clock}: original {c.baseline_ms:.1f} ms, contrib Attention {c.candidate_ms:.1f} ms, "
              f"speedup {c.ratio:.3f}x [{c.low:.3f}, {c.high:.3f}]")


if __name__ == "__main__":
    main()
