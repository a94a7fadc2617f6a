"""ONNX import and export (needs the `onnx` extra).

`load_onnx` maps a float32 ONNX inference graph onto the IR: constant subgraphs (shape arithmetic on
static shapes included) are folded with `onnx.reference`, decomposed LayerNorm and GELU become the IR's
ops, and an op the IR lacks is carried as an opaque node (`jaxgraph.opaque`) unless `strict=True`. An op
that cannot be carried (no shape inference, no implementation) raises `ValueError` naming it with its
domain. `save_onnx` writes opset 17 with an explicit IR version that onnxruntime reads, keeps the input
and output names, folds weight-only subgraphs into initializers, writes opaque nodes back verbatim, and
writes fused conv activations as onnxruntime's FusedConv (or, for `target="onnx"`, as two standard ops).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from jaxgraph.graph import Graph, GraphBuilder, Ref
from jaxgraph.opaque import decode_constant, window_padding
from jaxgraph.opaque import onnx_node as opaque_node
from jaxgraph.recognize import recognize_patterns
from jaxgraph.reference import fold_constants

OPSET = 17
IR_VERSION = 8  # onnx 1.23 defaults to IR 14, which onnxruntime 1.31 rejects; 8 is read by onnxruntime >= 1.10
_ACTIVATION_OPS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh"}
TARGETS = ("onnxruntime", "onnx")  # the runtime a saved file is for: onnxruntime may use its contrib ops


def _onnx():
    try:
        import onnx
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("ONNX support needs the extra: pip install 'jax-research-systems[onnx]'") from error
    return onnx


# ---------------------------------------------------------------- import

_DEFAULT_DOMAINS = ("", "ai.onnx")
_CONTRIB = "com.microsoft"
_FUSED_ACTIVATIONS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}


class _Importer:
    """Walks an ONNX graph in order. A node whose inputs are all constant (or a Shape of a tensor, whose
    shape is static) is folded at once with `onnx.reference`; the rest become IR ops where the IR has the
    op, and opaque nodes otherwise (rejected in strict mode)."""

    def __init__(self, model, input_shapes: Mapping[str, Sequence[int]], strict: bool) -> None:
        onnx = _onnx()
        from onnx import numpy_helper

        self.graph = model.graph
        self.opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
        self.opset = self.opsets.get("", OPSET)
        self.strict = strict
        self.b = GraphBuilder()
        self.tensors: dict[str, Ref] = {}
        self.constants: dict[str, np.ndarray] = {n.name: numpy_helper.to_array(n) for n in self.graph.initializer}
        self.consumed = {name for n in self.graph.node for name in n.input} | {o.name for o in self.graph.output}
        self._materialized: dict[str, Ref] = {}
        self.slices: dict[tuple[str, int], tuple[Ref, ...]] = {}  # shared splits of Gather
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
                value = self.constants[name]
                if not np.issubdtype(value.dtype, np.floating):
                    raise ValueError(f"constant {name!r} ({value.dtype}) is used as a float32 tensor")
                self._materialized[name] = self.b.weight(name, value.astype(np.float32))
            return self._materialized[name]
        raise ValueError(f"tensor {name!r} is used before it is produced")

    def constant(self, name: str, what: str) -> np.ndarray:
        if name not in self.constants:
            raise ValueError(f"{what} must be a constant (initializer or Constant), got computed tensor {name!r}")
        return self.constants[name]

    def shape(self, name: str) -> tuple[int, ...]:
        return self.constants[name].shape if name in self.constants else self.b.shape(self.tensor(name))

    def run(self) -> Graph:
        for node in self.graph.node:
            attrs = {a.name: self._onnx.helper.get_attribute_value(a) for a in node.attribute}
            attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
            try:
                outputs = self.convert(node, attrs)
            except ValueError as error:
                raise ValueError(f"ONNX node {node.name or node.output[0]!r} ({_op_label(node)}): {error}") from None
            for name, value in zip(node.output, outputs):
                if value is None:
                    continue
                if isinstance(value, np.ndarray):
                    self.constants[name] = value
                else:
                    self.tensors[name] = value
        graph = self.b.build({o.name: self.tensor(o.name) for o in self.graph.output})
        return recognize_patterns(graph)

    def convert(self, node, attrs: dict[str, Any]) -> list:
        """The node's outputs: NumPy arrays (folded constants), IR tensors, or None (unused outputs)."""
        domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
        present = [name for name in node.input if name]
        if domain == "" and node.op_type in ("Shape", "Size") and present[0] in self.tensors:
            return [self._static_shape(node, attrs)]
        if domain == "" and all(name in self.constants for name in present):
            return self._fold(node)
        table = _IMPORTERS if domain == "" else _CONTRIB_IMPORTERS if domain == _CONTRIB else {}
        if node.op_type in table:
            outputs = table[node.op_type](self, node, attrs)
            if outputs is not None:
                return outputs
        if self.strict:
            raise ValueError(f"strict mode: {_op_label(node)} with these attributes and inputs has no native IR op")
        return self._opaque(node, domain)

    def _static_shape(self, node, attrs) -> np.ndarray:
        shape = self.b.shape(self.tensors[node.input[0]])
        if node.op_type == "Size":
            return np.asarray(math.prod(shape), np.int64)
        start, end = attrs.get("start", 0), attrs.get("end", len(shape))
        return np.asarray(shape[start:end], np.int64)

    def _fold(self, node) -> list[np.ndarray]:
        """Evaluate a node on constants with onnx.reference (the ONNX specification's own implementation)."""
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        graph = helper.make_graph([node], "fold", [helper.make_empty_tensor_value_info(n) for n in node.input if n],
                                  [helper.make_empty_tensor_value_info(n) for n in node.output if n])
        opsets = [helper.make_opsetid(domain, version) for domain, version in {**self.opsets, "": self.opset}.items()]
        try:
            evaluator = ReferenceEvaluator(helper.make_model(graph, opset_imports=opsets))
            values = evaluator.run(None, {name: self.constants[name] for name in node.input if name})
        except Exception as error:  # onnx.reference raises its own exception types
            raise ValueError(f"constant folding failed: {error}") from None
        return [np.asarray(v) for v in values]

    def _opaque(self, node, domain: str) -> list[Ref | None]:
        """Carry the node verbatim (upgraded to the export opset), with output shapes from ONNX shape inference."""
        onnx = self._onnx
        from onnx import numpy_helper

        node, version, moved = _upgrade(node, domain, self.opsets, self.constants)
        self.constants.update(moved)
        outputs = list(node.output)
        while outputs and (not outputs[-1] or outputs[-1] not in self.consumed):
            outputs.pop()
        if not outputs or "" in outputs:
            raise ValueError("an opaque node needs its used outputs to come first")
        slots, refs, types, data = [], [], {}, {}
        for name in node.input:
            if not name:
                slots.append(None)
                continue
            value = self.constants.get(name)
            if value is not None and not np.issubdtype(value.dtype, np.floating):
                tensor = numpy_helper.from_array(value, name)
                slots.append(tensor.SerializeToString())
                data[name] = tensor
                types[name] = onnx.helper.make_tensor_type_proto(tensor.data_type, value.shape)
                continue
            slots.append(len(refs))
            refs.append(self.tensor(name))
            types[name] = onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, self.b.shape(refs[-1]))
        attrs = dict(op_type=node.op_type, domain=domain, opset=version,
                     attributes=tuple(a.SerializeToString() for a in node.attribute), slots=tuple(slots),
                     input_shapes=tuple(self.b.shape(r) for r in refs))
        shapes = _infer_output_shapes(node, domain, version, types, data, outputs)
        if shapes is None:
            shapes = _jax_output_shapes(attrs, refs, self.b, len(outputs))
        return list(self.b.add_outputs("opaque", refs, node.name, **attrs, shapes=tuple(shapes)))


def _op_label(node) -> str:
    return node.op_type if node.domain in _DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"


def _schema(op_type: str, version: int, domain: str):
    import onnx

    try:
        return onnx.defs.get_schema(op_type, version, domain)
    except onnx.defs.SchemaError:
        return None


def _upgrade(node, domain: str, opsets: Mapping[str, int], constants: Mapping[str, np.ndarray]):
    """The node in the export opset's form (onnx.version_converter on a one-node model), its domain version,
    and its constant inputs after the conversion (renamed apart from the model's tensors).

    Opaque nodes are written back into an opset-`OPSET` file, so one from an older opset must mean there
    what it meant in the source (Pad, Clip, Squeeze, Slice and the reductions moved attributes to inputs).
    A node from a newer opset keeps it, and the file is written at that opset (see `to_onnx`)."""
    source = opsets.get(domain, 1)
    if domain != "":
        return node, source, {}
    old, new = _schema(node.op_type, source, ""), _schema(node.op_type, OPSET, "")
    if source >= OPSET or old is None or new is None or old.since_version == new.since_version:
        return node, max(source, OPSET) if new is not None else source, {}
    from onnx import helper, numpy_helper, version_converter

    given = [numpy_helper.from_array(np.asarray(constants[n]), n) for n in node.input if n in constants]
    values = [helper.make_empty_tensor_value_info(n) for n in node.input if n and n not in constants]
    outs = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
    model = helper.make_model(helper.make_graph([node], "upgrade", values, outs, given),
                              opset_imports=[helper.make_opsetid("", source)])
    try:
        converted = version_converter.convert_version(model, OPSET).graph
    except Exception as error:  # the converter raises RuntimeError and friends
        raise ValueError(f"cannot carry {node.op_type} from opset {source} to {OPSET}: {error}") from None
    main = [n for n in converted.node if n.op_type != "Constant"]
    if len(main) != 1:
        raise ValueError(f"cannot carry {node.op_type} from opset {source} to {OPSET} as one node")
    moved = {n.output[0]: numpy_helper.to_array(a.t) for n in converted.node if n.op_type == "Constant"
             for a in n.attribute if a.name == "value"}
    moved.update((i.name, numpy_helper.to_array(i)) for i in converted.initializer)
    upgraded = main[0]
    renamed = {name: f"{node.output[0]}.opset{OPSET}.{name}" for name in moved}
    upgraded.input[:] = [renamed.get(name, name) for name in upgraded.input]
    return upgraded, OPSET, {renamed[name]: value for name, value in moved.items()}


def _infer_output_shapes(node, domain: str, version: int, types: dict, data: dict, outputs: list[str]):
    """Static float32 output shapes from ONNX shape inference; None if it has no schema or no answer."""
    onnx = _onnx()
    schema = _schema(node.op_type, version, domain)
    if schema is None:
        return None
    try:
        inferred = onnx.shape_inference.infer_node_outputs(
            schema, node, types, data, opset_imports=[onnx.helper.make_opsetid(domain, version)])
    except Exception:  # inference errors come as InferenceError, ValidationError or RuntimeError
        return None
    shapes = []
    for name in outputs:
        if name not in inferred or not inferred[name].tensor_type.HasField("shape"):
            return None
        tensor_type = inferred[name].tensor_type
        if tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise ValueError(f"output {name!r} is {onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)}, "
                             "but the IR computes in float32")
        dims = tensor_type.shape.dim
        if not all(d.HasField("dim_value") for d in dims):
            return None
        shapes.append(tuple(int(d.dim_value) for d in dims))
    return shapes


def _jax_output_shapes(attrs, refs, builder: GraphBuilder, count: int):
    """Output shapes from the JAX implementation (jax.eval_shape); ValueError if the op is unsupported."""
    import jax

    from jaxgraph.opaque import KERNELS, jax_kernel, label

    if attrs["domain"] != "" or attrs["op_type"] not in KERNELS:
        raise ValueError(f"unsupported ONNX op {label(attrs)}: no ONNX shape inference answer and no JAX "
                         "implementation")
    frozen = {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
    specs = [jax.ShapeDtypeStruct(builder.shape(r), np.float32) for r in refs]
    out = jax.eval_shape(lambda *xs: jax_kernel(frozen, *xs), *specs)
    return [tuple(o.shape) for o in out[:count]]


def _window(attrs: dict[str, Any], kernel: Sequence[int], spatial: Sequence[int]) -> dict | None:
    """strides and explicit pads (top, left, bottom, right) of a 2-D undilated window; None otherwise."""
    if len(kernel) != 2 or any(d != 1 for d in attrs.get("dilations", [1, 1])):
        return None
    strides = list(attrs.get("strides", [1, 1]))
    (top, bottom), (left, right) = window_padding(attrs, spatial, kernel, strides, [1, 1])
    return dict(stride=tuple(strides), pads=(top, left, bottom, right))


def _conv(imp: _Importer, node, attrs, activation: str = "none"):
    x = imp.tensor(node.input[0])
    kernel = attrs.get("kernel_shape") or imp.shape(node.input[1])[2:]
    window = _window(attrs, kernel, imp.b.shape(x)[2:])
    if window is None:
        return None
    inputs = [x] + [imp.tensor(name) for name in node.input[1:3] if name]
    return [imp.b.add("conv2d", inputs, node.name, groups=attrs.get("group", 1), activation=activation, **window)]


def _fused_conv(imp: _Importer, node, attrs):
    """onnxruntime's com.microsoft.FusedConv (what `to_onnx` writes for a convolution with a fused activation)."""
    activation = _FUSED_ACTIVATIONS.get(attrs.get("activation", ""))
    if activation is None or (len(node.input) > 3 and node.input[3]):
        return None
    window_attrs = {k: v for k, v in attrs.items() if k not in ("activation", "activation_params")}
    return _conv(imp, node, window_attrs, activation)


def _pool(op: str) -> Callable:
    def convert(imp: _Importer, node, attrs):
        x = imp.tensor(node.input[0])
        if len(node.output) > 1 and node.output[1] in imp.consumed:
            return None
        include_pad = bool(attrs.get("count_include_pad", 0))
        if include_pad and attrs.get("ceil_mode", 0):
            return None  # the ceil-mode overhang is not counted, the declared padding is
        kernel = attrs["kernel_shape"]
        window = _window(attrs, kernel, imp.b.shape(x)[2:])
        if window is None:
            return None
        extra = {"count_include_pad": include_pad} if op == "avgpool2d" else {}
        return [imp.b.add(op, [x], node.name, kernel=tuple(kernel), **window, **extra)]
    return convert


def _reduce_mean(imp: _Importer, node, attrs):
    """ReduceMean over the spatial axes of an NCHW tensor (how the dynamo exporter writes adaptive average
    pooling to 1x1) is a global average pool; any other ReduceMean stays opaque."""
    x = imp.tensor(node.input[0])
    shape = imp.b.shape(x)
    axes = _axes(imp, node, attrs)
    if len(shape) != 4 or sorted(a % 4 for a in axes) != [2, 3]:
        return None
    pooled = imp.b.add("avgpool2d", [x], node.name, kernel=shape[2:], stride=(1, 1))
    if attrs.get("keepdims", 1):
        return [pooled]
    return [imp.b.add("reshape", [pooled], f"{node.name or node.output[0]}.squeeze", shape=shape[:2])]


def _global_pool(op: str) -> Callable:
    def convert(imp: _Importer, node, attrs):
        x = imp.tensor(node.input[0])
        if len(imp.b.shape(x)) != 4:
            return None
        return [imp.b.add(op, [x], node.name, kernel=imp.b.shape(x)[2:], stride=(1, 1))]
    return convert


def _unary(op: str) -> Callable:
    return lambda imp, node, attrs: [imp.b.add(op, [imp.tensor(node.input[0])], node.name)]


def _binary(op: str) -> Callable:
    return lambda imp, node, attrs: [imp.b.add(op, [imp.tensor(n) for n in node.input], node.name)]


def _float_constant(imp: _Importer, name: str) -> np.ndarray | None:
    value = imp.constants.get(name)
    return value if value is not None and np.issubdtype(value.dtype, np.floating) else None


def _sub(imp: _Importer, node, attrs):
    """x - c as x + (-c); anything else stays an opaque Sub."""
    value = _float_constant(imp, node.input[1])
    if value is None:
        return None
    imp.constants[f"{node.input[1]}.neg"] = -value
    return [imp.b.add("add", [imp.tensor(node.input[0]), imp.tensor(f"{node.input[1]}.neg")], node.name)]


def _div(imp: _Importer, node, attrs):
    """x / c as x * (1 / c); anything else stays an opaque Div."""
    value = _float_constant(imp, node.input[1])
    if value is None:
        return None
    imp.constants[f"{node.input[1]}.reciprocal"] = (1.0 / value.astype(np.float64)).astype(value.dtype)
    return [imp.b.add("mul", [imp.tensor(node.input[0]), imp.tensor(f"{node.input[1]}.reciprocal")], node.name)]


def _sum(imp: _Importer, node, attrs):
    total = imp.tensor(node.input[0])
    for k, name in enumerate(node.input[1:]):
        total = imp.b.add("add", [total, imp.tensor(name)], f"{node.name}.{k}" if node.name else "")
    return [total]


def _clip(imp: _Importer, node, attrs):
    if imp.opset < 11:
        low, high = attrs.get("min", -np.inf), attrs.get("max", np.inf)
    else:
        bounds = [node.input[k] if len(node.input) > k else "" for k in (1, 2)]
        if any(name and name not in imp.constants for name in bounds):
            return None
        low, high = (float(imp.constants[name].reshape(-1)[0]) if name else default
                     for name, default in zip(bounds, (-np.inf, np.inf)))
    return [imp.b.add("clip", [imp.tensor(node.input[0])], node.name, min=float(low), max=float(high))]


def _matmul(imp: _Importer, node, attrs):
    shapes = [imp.shape(n) for n in node.input]
    if min(len(s) for s in shapes) < 2 or (len(shapes[1]) > 2 and shapes[0][:-2] != shapes[1][:-2]):
        return None  # vectors and broadcast batch dimensions stay opaque
    return [imp.b.add("matmul", [imp.tensor(n) for n in node.input], node.name)]


def _gemm(imp: _Importer, node, attrs):
    a, b = node.input[:2]
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    has_c = len(node.input) > 2 and node.input[2]
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
    if has_c:
        c = node.input[2]
        if beta != 1.0 and c in imp.constants:
            imp.constants[f"{c}.beta"] = imp.constants[c] * beta
            c = f"{c}.beta"
        bias = imp.tensor(c)
        if beta != 1.0 and c not in imp.constants:
            beta_weight = imp.b.weight(f"{node.name}.beta", np.full((1,), beta, np.float32))
            bias = imp.b.add("mul", [bias, beta_weight], f"{node.name}.beta")
        y = imp.b.add("add", [y, bias], f"{node.name}.bias")
    return [y]


def _batchnorm(imp: _Importer, node, attrs):
    if attrs.get("training_mode", 0) or any(n in imp.consumed for n in node.output[1:] if n):
        return None
    if len(imp.shape(node.input[0])) < 2:
        return None
    return [imp.b.add("batchnorm", [imp.tensor(n) for n in node.input[:5]], node.name, eps=attrs.get("epsilon", 1e-5))]


def _layernorm(imp: _Importer, node, attrs):
    if any(n in imp.consumed for n in node.output[1:] if n):
        return None  # Mean and InvStdDev outputs
    shape = imp.shape(node.input[0])
    axis = attrs.get("axis", -1) % len(shape)
    scale = imp.tensor(node.input[1])
    if imp.b.shape(scale) != shape[axis:]:
        return None
    if len(node.input) > 2 and node.input[2]:
        bias = imp.tensor(node.input[2])
    else:
        bias = imp.b.weight(f"{node.name or node.output[0]}.zero_bias", np.zeros(shape[axis:], np.float32))
    if imp.b.shape(bias) != shape[axis:]:
        return None
    return [imp.b.add("layernorm", [imp.tensor(node.input[0]), scale, bias], node.name, axis=axis,
                      eps=attrs.get("epsilon", 1e-5))]


def _gelu(imp: _Importer, node, attrs):
    if attrs.get("approximate", "none") != "none":
        return None
    return [imp.b.add("gelu", [imp.tensor(node.input[0])], node.name)]


def _cast(imp: _Importer, node, attrs):
    onnx = imp._onnx
    return [imp.tensor(node.input[0])] if attrs["to"] == onnx.TensorProto.FLOAT else None


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
    """Softmax; before opset 13 it normalizes over the flattened trailing axes: reshape, softmax, reshape back."""
    x = imp.tensor(node.input[0])
    shape = imp.b.shape(x)
    axis = attrs.get("axis", -1 if imp.opset >= 13 else 1) % len(shape)
    if imp.opset >= 13 or axis == len(shape) - 1:
        return [imp.b.add("softmax", [x], node.name, axis=axis)]
    label = node.name or node.output[0]
    flat = imp.b.add("reshape", [x], f"{label}.flatten", shape=(math.prod(shape[:axis]), math.prod(shape[axis:])))
    y = imp.b.add("softmax", [flat], node.name, axis=1)
    return [imp.b.add("reshape", [y], f"{label}.unflatten", shape=shape)]


_MAX_GATHER_SPLIT = 16


def _gather(imp: _Importer, node, attrs):
    """Picking one slice with a constant index (how the dynamo exporter separates Q, K and V): the slices of
    one tensor come from one shared split into size-1 parts, then a reshape drops the axis for a scalar
    index. Any other Gather stays opaque."""
    indices = imp.constants.get(node.input[1])
    shape = imp.shape(node.input[0])
    axis = attrs.get("axis", 0) % len(shape)
    if indices is None or indices.size != 1 or indices.ndim > 1 or shape[axis] > _MAX_GATHER_SPLIT:
        return None
    key = (node.input[0], axis)
    if key not in imp.slices:
        imp.slices[key] = imp.b.add_outputs("split", [imp.tensor(node.input[0])], f"{node.name}.split", axis=axis,
                                            sizes=(1,) * shape[axis])
    part = imp.slices[key][int(indices.reshape(())) % shape[axis]]
    if indices.ndim == 1:
        return [part]
    return [imp.b.add("reshape", [part], node.name, shape=shape[:axis] + shape[axis + 1:])]


def _identity(imp: _Importer, node, attrs):
    """Identity, and Dropout at inference: the input passes through; a used mask is all true."""
    outputs = [imp.tensor(node.input[0])]
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
        outputs.append(np.ones(imp.shape(node.input[0]), bool))
    return outputs


_IMPORTERS: dict[str, Callable] = {
    "Conv": _conv, "MatMul": _matmul, "Gemm": _gemm, "Add": _binary("add"), "Mul": _binary("mul"), "Sub": _sub,
    "Div": _div, "Sum": _sum, "Relu": _unary("relu"), "Sigmoid": _unary("sigmoid"), "Tanh": _unary("tanh"),
    "Clip": _clip, "Gelu": _gelu, "ReduceMean": _reduce_mean, "BatchNormalization": _batchnorm,
    "LayerNormalization": _layernorm,
    "MaxPool": _pool("maxpool2d"), "AveragePool": _pool("avgpool2d"),
    "GlobalAveragePool": _global_pool("avgpool2d"), "GlobalMaxPool": _global_pool("maxpool2d"),
    "Concat": _concat, "Split": _split, "Transpose": _transpose, "Reshape": _reshape, "Flatten": _flatten,
    "Squeeze": _squeeze, "Unsqueeze": _unsqueeze, "Softmax": _softmax, "Identity": _identity,
    "Dropout": _identity, "Cast": _cast, "Gather": _gather,
}
_CONTRIB_IMPORTERS: dict[str, Callable] = {"FusedConv": _fused_conv}


def load_onnx(model: str | os.PathLike | Any, input_shapes: Mapping[str, Sequence[int]] | None = None, *,
              strict: bool = False) -> Graph:
    """Read an ONNX model (path or `ModelProto`) into a `Graph`.

    `input_shapes` fixes symbolic input dimensions (e.g. a dynamic batch). Constant subgraphs (including
    shape computations on static shapes) are folded; decomposed LayerNorm and GELU become the IR's ops;
    ops the IR lacks are carried as opaque nodes, or rejected with `strict=True`. Raises `ValueError`
    naming the node (and the op with its domain) that cannot be imported.
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
    return _Importer(model, input_shapes or {}, strict).run()


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
    onnx = _onnx()
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
        if node.op not in _EXPORTERS and node.op != "opaque":
            raise ValueError(f"node {node.name or node_id} ({node.op}) has non-constant inputs and no ONNX equivalent")
        base = f"{node.name or node.op}_{node_id}"
        outputs = [tensor.get(Ref(node_id, k)) or names.fresh(base + (f":{k}" if k else ""))
                   for k in range(len(node.shapes))]
        for k, out in enumerate(outputs):
            tensor[Ref(node_id, k)] = out
        inputs = [tensor[r] for r in node.inputs]
        label = node.name or f"{node.op}_{node_id}"
        if node.op == "opaque":
            nodes.append(_export_opaque(node, inputs, outputs, label, constant, opset))
            domains.add(node.attrs["domain"])
        elif node.op == "conv2d" and node.attrs["activation"] != "none" and target == "onnxruntime":
            nodes.extend(_export_conv(node, inputs, outputs, label, names, constant, helper, fused=True))
            domains.add(_CONTRIB)
        else:
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
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in sorted(domains - {""})]
    model = helper.make_model(onnx_graph, opset_imports=opsets, producer_name="jaxgraph")
    model.ir_version = ir_version
    onnx.checker.check_model(model)
    return model


def save_onnx(graph: Graph, path: str | os.PathLike, opset: int | None = None, ir_version: int = IR_VERSION,
              target: str = "onnxruntime") -> None:
    """Write `graph` as an ONNX file (see `to_onnx`)."""
    onnx = _onnx()
    onnx.save(to_onnx(graph, opset, ir_version, target=target), os.fspath(path))


def _export_opaque(node, inputs, outputs, label, constant, opset: int):
    """The imported ONNX node, verbatim; its constant inputs become initializers."""
    attrs = node.attrs
    if attrs["domain"] == "" and attrs["opset"] != opset:
        old, new = _schema(attrs["op_type"], attrs["opset"], ""), _schema(attrs["op_type"], opset, "")
        if old is None or new is None or old.since_version != new.since_version:
            raise ValueError(f"opaque {attrs['op_type']} was imported at opset {attrs['opset']} and changed "
                             f"meaning by opset {opset}; export at opset {attrs['opset']}")
    names = [("" if slot is None else inputs[slot] if isinstance(slot, int)
              else constant(f"{label}.const{k}", decode_constant(slot))) for k, slot in enumerate(attrs["slots"])]
    return opaque_node(attrs, names, outputs, label)


def _with_activation(op_type: str):
    def export(node, inputs, outputs, label, names, constant, helper, **attrs):
        activation = node.attrs["activation"]
        if activation == "none":
            return [helper.make_node(op_type, inputs, outputs, name=label, **attrs)]
        raw = names.fresh(f"{label}.pre_{activation}")
        return [helper.make_node(op_type, inputs, [raw], name=label, **attrs),
                helper.make_node(_ACTIVATION_OPS[activation], [raw], outputs, name=f"{label}.{activation}")]
    return export


def _export_conv(node, inputs, outputs, label, names, constant, helper, fused: bool = False):
    a = node.attrs
    window = dict(strides=list(a["stride"]), pads=list(a["pads"]), group=a["groups"])
    if fused:
        activation = next(k for k, v in _FUSED_ACTIVATIONS.items() if v == a["activation"])
        return [helper.make_node("FusedConv", inputs, outputs, name=label, domain=_CONTRIB, activation=activation,
                                 **window)]
    return _with_activation("Conv")(node, inputs, outputs, label, names, constant, helper, **window)


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
