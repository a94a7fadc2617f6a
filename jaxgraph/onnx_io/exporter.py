"""IR -> ONNX: `to_onnx` folds weight-only subgraphs into initializers and writes each remaining IR node with
its writer from `_export_ops`, under unique tensor and node names; `save_onnx` writes the model to a file."""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from jaxgraph.graph import Graph, Ref
from jaxgraph.onnx_io._export_ops import EXPORTERS, export_conv, export_opaque
from jaxgraph.onnx_io.spec import CONTRIB, IR_VERSION, OPSET, TARGETS, onnx_module
from jaxgraph.reference import fold_constants


class _Names:
    """Unique ONNX names (tensor names, and separately node names)."""

    def __init__(self, reserved: Sequence[str]) -> None:
        self.used = set(reserved)

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name


def to_onnx(graph: Graph, opset: int | None = None, ir_version: int = IR_VERSION, name: str = "jaxgraph",
            target: str = "onnxruntime"):
    """The graph as an ONNX `ModelProto` (weight-only subgraphs folded into initializers).

    `opset` defaults to `OPSET`, or to a later one that an opaque node was imported at (Gelu at 20).

    A convolution with a fused activation has no standard ONNX op: for `target="onnxruntime"` it is written
    as onnxruntime's `com.microsoft.FusedConv` (which `load_onnx` reads back as one node, so the file holds
    what the search counted); for `target="onnx"` only standard ops are written (Conv, then the activation).
    Opaque nodes are written back verbatim.
    """
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    onnx = onnx_module()
    if opset is None:
        opset = max([OPSET] + [n.attrs["opset"] for n in graph.nodes.values()
                               if n.op == "opaque" and n.attrs["domain"] == ""])
    from onnx import TensorProto, helper, numpy_helper

    g = fold_constants(graph)
    names = _Names(list(g.input_names) + list(g.output_names))
    tensor: dict[Ref, str] = {}
    initializers, nodes = [], []
    domains: set[str] = set()

    def constant(base: str, value: np.ndarray) -> str:
        """A new initializer (shapes and split sizes) with a unique name derived from `base`."""
        const_name = names.fresh(base)
        initializers.append(numpy_helper.from_array(value, const_name))
        return const_name

    for node_id in g.inputs:
        tensor[Ref(node_id)] = g.nodes[node_id].name
    for out_name, ref in zip(g.output_names, g.outputs):
        node = g.nodes[ref.node]
        if ref not in tensor and node.op not in ("input", "weight"):
            tensor[ref] = out_name  # the producing op writes the output name directly
    for node_id in g.order:
        node = g.nodes[node_id]
        if node.op == "input":
            continue
        if node.op == "weight":
            tensor[Ref(node_id)] = names.fresh(node.name)
            initializers.append(numpy_helper.from_array(np.asarray(node.value, np.float32), tensor[Ref(node_id)]))
            continue
        if node.op not in EXPORTERS and node.op != "opaque":
            raise ValueError(f"node {node.name or node_id} ({node.op}) has non-constant inputs and no ONNX equivalent")
        base = f"{node.name or node.op}_{node_id}"
        outputs = [tensor.get(Ref(node_id, k)) or names.fresh(base + (f":{k}" if k else ""))
                   for k in range(len(node.shapes))]
        for k, out in enumerate(outputs):
            tensor[Ref(node_id, k)] = out
        inputs = [tensor[r] for r in node.inputs]
        label = node.name or f"{node.op}_{node_id}"
        if node.op == "opaque":
            nodes.append(export_opaque(node, inputs, outputs, label, constant, opset))
            domains.add(node.attrs["domain"])
        elif node.op == "conv2d" and node.attrs["activation"] != "none" and target == "onnxruntime":
            nodes.extend(export_conv(node, inputs, outputs, label, names, constant, helper, fused=True))
            domains.add(CONTRIB)
        else:
            nodes.extend(EXPORTERS[node.op](node, inputs, outputs, label, names, constant, helper))
    graph_outputs = []
    for out_name, ref in zip(g.output_names, g.outputs):
        if tensor[ref] != out_name:
            nodes.append(helper.make_node("Identity", [tensor[ref]], [out_name], name=f"{out_name}.identity"))
        graph_outputs.append(helper.make_tensor_value_info(out_name, TensorProto.FLOAT, g.shape(ref)))
    graph_inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in g.input_shapes.items()]
    node_names = _Names([])
    for onnx_node in nodes:  # onnxruntime refuses a file whose node names repeat
        onnx_node.name = node_names.fresh(onnx_node.name)
    onnx_graph = helper.make_graph(nodes, name, graph_inputs, graph_outputs, initializers)
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in sorted(domains - {""})]
    model = helper.make_model(onnx_graph, opset_imports=opsets, producer_name="jaxgraph")
    model.ir_version = ir_version
    onnx.checker.check_model(model)
    return model


def save_onnx(graph: Graph, path: str | os.PathLike, opset: int | None = None, ir_version: int = IR_VERSION,
              target: str = "onnxruntime") -> None:
    """Write `graph` as an ONNX file (see `to_onnx`)."""
    onnx = onnx_module()
    onnx.save(to_onnx(graph, opset, ir_version, target=target), os.fspath(path))

