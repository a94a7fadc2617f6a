"""ONNX import and export (needs the `onnx` extra).

`load_onnx` maps a float32 ONNX inference graph onto the IR; an op it does not support raises
`ValueError` listing every unsupported op type (TASO silently dropped them). `save_onnx` writes opset
17 with an explicit IR version that onnxruntime reads, keeps the input and output names, folds
weight-only subgraphs into initializers, and unfuses fused activations into separate ops.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from jaxgraph.graph import Graph, GraphBuilder, Ref
from jaxgraph.reference import fold_constants

OPSET = 17
IR_VERSION = 8  # onnx 1.23 defaults to IR 14, which onnxruntime 1.31 rejects; 8 is read by onnxruntime >= 1.10
_ACTIVATION_OPS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh"}


def _onnx():
    try:
        import onnx
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("ONNX support needs the extra: pip install 'jax-research-systems[onnx]'") from error
    return onnx


# ---------------------------------------------------------------- import


class _Importer:
    """Walks an ONNX graph, keeping constants as NumPy arrays until an op consumes them as tensors."""

    def __init__(self, model, input_shapes: Mapping[str, Sequence[int]]) -> None:
        onnx = _onnx()
        from onnx import numpy_helper

        self.graph = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), OPSET)
        self.b = GraphBuilder()
        self.tensors: dict[str, Ref] = {}
        self.constants: dict[str, np.ndarray] = {n.name: numpy_helper.to_array(n) for n in self.graph.initializer}
        self._materialized: dict[str, Ref] = {}
        self._onnx = onnx
        for value in self.graph.input:
            if value.name in self.constants:
                continue
            dims = value.type.tensor_type.shape.dim
            shape = tuple(input_shapes.get(value.name, [d.dim_value if d.HasField("dim_value") else 0 for d in dims]))
            if not shape or min(shape) < 1:
                raise ValueError(f"input {value.name!r} has symbolic or unknown dimensions {shape}; "
                                 f"pass input_shapes={{{value.name!r}: (...)}}")
            if value.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
                raise ValueError(f"input {value.name!r} is not float32")
            self.tensors[value.name] = self.b.input(value.name, shape)

    def tensor(self, name: str) -> Ref:
        if name in self.tensors:
            return self.tensors[name]
        if name in self.constants:
            if name not in self._materialized:
                self._materialized[name] = self.b.weight(name, self.constants[name].astype(np.float32))
            return self._materialized[name]
        raise ValueError(f"tensor {name!r} is used before it is produced")

    def constant(self, name: str, what: str) -> np.ndarray:
        if name not in self.constants:
            raise ValueError(f"{what} must be a constant (initializer or Constant), got computed tensor {name!r}")
        return self.constants[name]

    def shape(self, name: str) -> tuple[int, ...]:
        return self.constants[name].shape if name in self.constants else self.b.shape(self.tensor(name))

    def run(self) -> Graph:
        unsupported = sorted({n.op_type for n in self.graph.node if n.op_type not in _IMPORTERS or n.domain
                              not in ("", "ai.onnx")})
        if unsupported:
            raise ValueError(f"unsupported ONNX ops: {', '.join(unsupported)}")
        for node in self.graph.node:
            attrs = {a.name: self._onnx.helper.get_attribute_value(a) for a in node.attribute}
            try:
                outputs = _IMPORTERS[node.op_type](self, node, attrs)
            except ValueError as error:
                raise ValueError(f"ONNX node {node.name or node.output[0]!r} ({node.op_type}): {error}") from None
            for name, value in zip(node.output, outputs):
                if isinstance(value, np.ndarray):
                    self.constants[name] = value
                else:
                    self.tensors[name] = value
        return self.b.build({o.name: self.tensor(o.name) for o in self.graph.output})


def _window(attrs: dict[str, Any], kernel: Sequence[int], spatial: Sequence[int]) -> dict:
    """strides and explicit pads (top, left, bottom, right) from ONNX window attributes."""
    if any(d != 1 for d in attrs.get("dilations", [1, 1])):
        raise ValueError("dilated windows are not supported")
    if len(kernel) != 2:
        raise ValueError(f"only 2-D windows are supported, got kernel {list(kernel)}")
    strides = list(attrs.get("strides", [1, 1]))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s in zip(spatial, kernel, strides):
            total = max((math.ceil(size / s) - 1) * s + k - size, 0)
            small, large = total // 2, total - total // 2
            pads.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
        pads = [pads[0][0], pads[1][0], pads[0][1], pads[1][1]]
    elif auto_pad == "VALID":
        pads = [0, 0, 0, 0]
    else:
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
    if attrs.get("ceil_mode", 0):
        for axis, (size, k, s) in enumerate(zip(spatial, kernel, strides)):
            total = size + pads[axis] + pads[axis + 2] - k
            if total % s:
                raise ValueError("ceil_mode=1 changes the output shape here, which is not supported")
    return dict(stride=tuple(strides), pads=tuple(pads))


def _conv(imp: _Importer, node, attrs):
    x = imp.tensor(node.input[0])
    kernel = attrs.get("kernel_shape") or imp.shape(node.input[1])[2:]
    inputs = [x] + [imp.tensor(name) for name in node.input[1:] if name]
    window = _window(attrs, kernel, imp.b.shape(x)[2:])
    return [imp.b.add("conv2d", inputs, node.name, groups=attrs.get("group", 1), **window)]


def _pool(op: str) -> Callable:
    def convert(imp: _Importer, node, attrs):
        x = imp.tensor(node.input[0])
        if len(node.output) > 1 and node.output[1]:
            raise ValueError("the Indices output of MaxPool is not supported")
        kernel = attrs["kernel_shape"]
        extra = {"count_include_pad": bool(attrs.get("count_include_pad", 0))} if op == "avgpool2d" else {}
        window = _window(attrs, kernel, imp.b.shape(x)[2:])
        return [imp.b.add(op, [x], node.name, kernel=tuple(kernel), **window, **extra)]
    return convert


def _global_pool(op: str) -> Callable:
    def convert(imp: _Importer, node, attrs):
        x = imp.tensor(node.input[0])
        return [imp.b.add(op, [x], node.name, kernel=imp.b.shape(x)[2:], stride=(1, 1))]
    return convert


def _unary(op: str) -> Callable:
    return lambda imp, node, attrs: [imp.b.add(op, [imp.tensor(node.input[0])], node.name)]


def _binary(op: str, fold: Callable) -> Callable:
    def convert(imp: _Importer, node, attrs):
        a, b = node.input
        if a in imp.constants and b in imp.constants:
            return [fold(imp.constants[a], imp.constants[b])]
        return [imp.b.add(op, [imp.tensor(a), imp.tensor(b)], node.name)]
    return convert


def _matmul(imp: _Importer, node, attrs):
    return [imp.b.add("matmul", [imp.tensor(n) for n in node.input], node.name)]


def _gemm(imp: _Importer, node, attrs):
    a, b = node.input[:2]
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    x = imp.tensor(a)
    if attrs.get("transA", 0):
        x = imp.b.add("transpose", [x], f"{node.name}.transA", perm=(1, 0))
    if b in imp.constants:
        weight = imp.constants[b].T if attrs.get("transB", 0) else imp.constants[b]
        key = f"{b}.T" if attrs.get("transB", 0) else b
        imp.constants.setdefault(key, np.ascontiguousarray(weight))
        w = imp.tensor(key)
    else:
        w = imp.tensor(b)
        if attrs.get("transB", 0):
            w = imp.b.add("transpose", [w], f"{node.name}.transB", perm=(1, 0))
    y = imp.b.add("matmul", [x, w], node.name)
    if alpha != 1.0:
        scale = imp.b.weight(f"{node.name}.alpha", np.full((1,), alpha, np.float32))
        y = imp.b.add("mul", [y, scale], f"{node.name}.alpha")
    if len(node.input) > 2 and node.input[2]:
        c = node.input[2]
        if beta != 1.0:
            imp.constants[f"{c}.beta"] = imp.constant(c, "Gemm C with beta != 1") * beta
            c = f"{c}.beta"
        y = imp.b.add("add", [y, imp.tensor(c)], f"{node.name}.bias")
    return [y]


def _batchnorm(imp: _Importer, node, attrs):
    if attrs.get("training_mode", 0):
        raise ValueError("training_mode=1 is not supported")
    return [imp.b.add("batchnorm", [imp.tensor(n) for n in node.input[:5]], node.name, eps=attrs.get("epsilon", 1e-5))]


def _concat(imp: _Importer, node, attrs):
    return [imp.b.add("concat", [imp.tensor(n) for n in node.input], node.name, axis=attrs["axis"])]


def _split(imp: _Importer, node, attrs):
    x = imp.tensor(node.input[0])
    shape = imp.b.shape(x)
    axis = attrs.get("axis", 0) % len(shape)
    if len(node.input) > 1 and node.input[1]:
        sizes = imp.constant(node.input[1], "Split sizes").tolist()
    elif "split" in attrs:
        sizes = list(attrs["split"])
    else:
        parts = attrs.get("num_outputs", len(node.output))
        chunk = -(-shape[axis] // parts)
        sizes = [chunk] * (parts - 1) + [shape[axis] - chunk * (parts - 1)]
    return list(imp.b.add_outputs("split", [x], node.name, axis=axis, sizes=tuple(int(s) for s in sizes)))


def _transpose(imp: _Importer, node, attrs):
    x = imp.tensor(node.input[0])
    perm = attrs.get("perm", list(reversed(range(len(imp.b.shape(x))))))
    return [imp.b.add("transpose", [x], node.name, perm=tuple(perm))]


def _reshape_to(imp: _Importer, node, target: Sequence[int]):
    if node.input[0] in imp.constants:
        return [imp.constants[node.input[0]].reshape(target)]
    return [imp.b.add("reshape", [imp.tensor(node.input[0])], node.name, shape=tuple(int(d) for d in target))]


def _reshape(imp: _Importer, node, attrs):
    source = imp.shape(node.input[0])
    target = [source[i] if d == 0 and not attrs.get("allowzero", 0) else int(d)
              for i, d in enumerate(imp.constant(node.input[1], "Reshape shape").tolist())]
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        target[target.index(-1)] = math.prod(source) // max(known, 1)
    return _reshape_to(imp, node, target)


def _flatten(imp: _Importer, node, attrs):
    source = imp.shape(node.input[0])
    axis = attrs.get("axis", 1) % (len(source) + 1)
    return _reshape_to(imp, node, (math.prod(source[:axis]), math.prod(source[axis:])))


def _axes(imp: _Importer, node, attrs) -> list[int]:
    if len(node.input) > 1 and node.input[1]:
        return imp.constant(node.input[1], "axes").tolist()
    return list(attrs.get("axes", []))


def _squeeze(imp: _Importer, node, attrs):
    source = imp.shape(node.input[0])
    axes = [a % len(source) for a in _axes(imp, node, attrs)] or [i for i, d in enumerate(source) if d == 1]
    return _reshape_to(imp, node, [d for i, d in enumerate(source) if i not in axes])


def _unsqueeze(imp: _Importer, node, attrs):
    target = list(imp.shape(node.input[0]))
    rank = len(target) + len(_axes(imp, node, attrs))
    for axis in sorted(a % rank for a in _axes(imp, node, attrs)):
        target.insert(axis, 1)
    return _reshape_to(imp, node, target)


def _softmax(imp: _Importer, node, attrs):
    x = imp.tensor(node.input[0])
    rank = len(imp.b.shape(x))
    axis = attrs.get("axis", -1 if imp.opset >= 13 else 1) % rank
    if imp.opset < 13 and axis != rank - 1:
        raise ValueError("Softmax before opset 13 flattens the trailing axes; only the last axis is supported")
    return [imp.b.add("softmax", [x], node.name, axis=axis)]


def _identity(imp: _Importer, node, attrs):
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
        raise ValueError("the mask output of Dropout is not supported")
    name = node.input[0]
    return [imp.constants[name] if name in imp.constants else imp.tensor(name)]


def _constant(imp: _Importer, node, attrs):
    from onnx import numpy_helper

    if "value" not in attrs:
        raise ValueError(f"only the 'value' form of Constant is supported, got {sorted(attrs)}")
    return [numpy_helper.to_array(attrs["value"])]


_IMPORTERS: dict[str, Callable] = {
    "Conv": _conv, "MatMul": _matmul,
    "Gemm": _gemm, "Add": _binary("add", np.add), "Mul": _binary("mul", np.multiply),
    "Relu": _unary("relu"), "Sigmoid": _unary("sigmoid"), "Tanh": _unary("tanh"),
    "BatchNormalization": _batchnorm, "MaxPool": _pool("maxpool2d"), "AveragePool": _pool("avgpool2d"),
    "GlobalAveragePool": _global_pool("avgpool2d"), "GlobalMaxPool": _global_pool("maxpool2d"),
    "Concat": _concat, "Split": _split, "Transpose": _transpose, "Reshape": _reshape, "Flatten": _flatten,
    "Squeeze": _squeeze, "Unsqueeze": _unsqueeze, "Softmax": _softmax, "Identity": _identity,
    "Dropout": _identity, "Constant": _constant,
}


def load_onnx(model: str | os.PathLike | Any, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """Read an ONNX model (path or `ModelProto`) into a `Graph`.

    `input_shapes` fixes symbolic input dimensions (e.g. a dynamic batch). Raises `ValueError` listing
    unsupported ops, or naming the node whose attributes or shapes are not supported.
    """
    onnx = _onnx()
    source = "the given ModelProto"
    if isinstance(model, (str, os.PathLike)):
        source = os.fspath(model)
        if not os.path.isfile(source):
            raise FileNotFoundError(f"no ONNX model at {source}")
        with open(source, "rb") as file:
            data = file.read()
        if not data:
            raise ValueError(f"{source} is empty, not an ONNX model")
        try:
            model = onnx.load_from_string(data)
        except Exception as error:  # protobuf's DecodeError and friends: the bytes are not a ModelProto
            raise ValueError(f"{source} is not an ONNX model (or is damaged): {error}") from None
    _check_model_header(model, source)
    return _Importer(model, input_shapes or {}).run()


def _check_model_header(model, source: str) -> None:
    """Raise ValueError unless `model` names its default-domain opset and has a graph with outputs.

    A truncated file can still parse as a ModelProto that lost its trailing fields (protobuf writes
    `opset_import` last); guessing the opset would silently change op semantics (Softmax's axis)."""
    if not any(o.domain in ("", "ai.onnx") for o in model.opset_import):
        raise ValueError(f"{source} declares no ai.onnx opset (a truncated or damaged file?)")
    if not model.HasField("graph") or not model.graph.output:
        raise ValueError(f"{source} has no graph outputs (a truncated or damaged file?)")


# ---------------------------------------------------------------- export


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


def to_onnx(graph: Graph, opset: int = OPSET, ir_version: int = IR_VERSION, name: str = "jaxgraph"):
    """The graph as an ONNX `ModelProto` (weight-only subgraphs folded into initializers)."""
    onnx = _onnx()
    from onnx import TensorProto, helper, numpy_helper

    g = fold_constants(graph)
    names = _Names(list(g.input_names) + list(g.output_names))
    tensor: dict[Ref, str] = {}
    initializers, nodes = [], []

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
        if node.op not in _EXPORTERS:
            raise ValueError(f"node {node.name or node_id} ({node.op}) has non-constant inputs and no ONNX equivalent")
        base = f"{node.name or node.op}_{node_id}"
        outputs = [tensor.get(Ref(node_id, k)) or names.fresh(base + (f":{k}" if k else ""))
                   for k in range(len(node.shapes))]
        for k, out in enumerate(outputs):
            tensor[Ref(node_id, k)] = out
        inputs = [tensor[r] for r in node.inputs]
        label = node.name or f"{node.op}_{node_id}"
        nodes.extend(_EXPORTERS[node.op](node, inputs, outputs, label, names, constant, helper))
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
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="jaxgraph")
    model.ir_version = ir_version
    onnx.checker.check_model(model)
    return model


def save_onnx(graph: Graph, path: str | os.PathLike, opset: int = OPSET, ir_version: int = IR_VERSION) -> None:
    """Write `graph` as an ONNX file (see `to_onnx`)."""
    onnx = _onnx()
    onnx.save(to_onnx(graph, opset, ir_version), os.fspath(path))


def _with_activation(op_type: str):
    def export(node, inputs, outputs, label, names, constant, helper, **attrs):
        activation = node.attrs["activation"]
        if activation == "none":
            return [helper.make_node(op_type, inputs, outputs, name=label, **attrs)]
        raw = names.fresh(f"{label}.pre_{activation}")
        return [helper.make_node(op_type, inputs, [raw], name=label, **attrs),
                helper.make_node(_ACTIVATION_OPS[activation], [raw], outputs, name=f"{label}.{activation}")]
    return export


def _export_conv(node, inputs, outputs, label, names, constant, helper):
    a = node.attrs
    return _with_activation("Conv")(node, inputs, outputs, label, names, constant, helper,
                                    strides=list(a["stride"]), pads=list(a["pads"]), group=a["groups"])


def _export_pool(op_type: str):
    def export(node, inputs, outputs, label, names, constant, helper):
        extra = {"count_include_pad": int(node.attrs["count_include_pad"])} if op_type == "AveragePool" else {}
        return [helper.make_node(op_type, inputs, outputs, name=label, kernel_shape=list(node.attrs["kernel"]),
                                 strides=list(node.attrs["stride"]), pads=list(node.attrs["pads"]), **extra)]
    return export


def _simple(op_type: str, **attr_map: str):
    def export(node, inputs, outputs, label, names, constant, helper):
        attrs = {onnx_name: node.attrs[ours] for onnx_name, ours in attr_map.items()}
        attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}
        return [helper.make_node(op_type, inputs, outputs, name=label, **attrs)]
    return export


def _export_split(node, inputs, outputs, label, names, constant, helper):
    sizes = constant(f"{label}.split", np.asarray(node.attrs["sizes"], np.int64))
    return [helper.make_node("Split", inputs + [sizes], outputs, name=label, axis=node.attrs["axis"])]


def _export_reshape(node, inputs, outputs, label, names, constant, helper):
    shape = constant(f"{label}.shape", np.asarray(node.attrs["shape"], np.int64))
    return [helper.make_node("Reshape", inputs + [shape], outputs, name=label)]


def _export_gelu(node, inputs, outputs, label, names, constant, helper):
    """x * 0.5 * (1 + erf(x / sqrt(2))), as torch exports GELU at opset < 20 (onnxruntime fuses it back)."""
    scaled, erf, shifted, product = (names.fresh(f"{label}.{part}") for part in ("div", "erf", "add", "mul"))
    sqrt2 = constant(f"{label}.sqrt2", np.asarray(math.sqrt(2.0), np.float32))
    one = constant(f"{label}.one", np.asarray(1.0, np.float32))
    half = constant(f"{label}.half", np.asarray(0.5, np.float32))
    return [helper.make_node("Div", [inputs[0], sqrt2], [scaled], name=f"{label}.div"),
            helper.make_node("Erf", [scaled], [erf], name=f"{label}.erf"),
            helper.make_node("Add", [erf, one], [shifted], name=f"{label}.add"),
            helper.make_node("Mul", [inputs[0], shifted], [product], name=f"{label}.mul"),
            helper.make_node("Mul", [product, half], outputs, name=label)]


def _export_clip(node, inputs, outputs, label, names, constant, helper):
    low = constant(f"{label}.min", np.asarray(node.attrs["min"], np.float32))
    high = constant(f"{label}.max", np.asarray(node.attrs["max"], np.float32))
    return [helper.make_node("Clip", inputs + [low, high], outputs, name=label)]


_EXPORTERS: dict[str, Callable] = {
    "conv2d": _export_conv, "matmul": _with_activation("MatMul"),
    "add": _simple("Add"), "mul": _simple("Mul"), "relu": _simple("Relu"), "sigmoid": _simple("Sigmoid"),
    "tanh": _simple("Tanh"), "batchnorm": _simple("BatchNormalization", epsilon="eps"),
    "maxpool2d": _export_pool("MaxPool"), "avgpool2d": _export_pool("AveragePool"),
    "concat": _simple("Concat", axis="axis"), "split": _export_split, "transpose": _simple("Transpose", perm="perm"),
    "reshape": _export_reshape, "softmax": _simple("Softmax", axis="axis"),
    "layernorm": _simple("LayerNormalization", axis="axis", epsilon="eps"), "gelu": _export_gelu,
    "clip": _export_clip,
}
