"""ONNX op -> IR ops, one converter per ONNX op: `converter(importer, node, attrs)` returns the node's outputs
(IR tensors, NumPy constants, or None for an unused output), or None when this use of the op has no IR form
and the node is carried opaque instead. `IMPORTERS` holds the default domain's converters,
`CONTRIB_IMPORTERS` onnxruntime's (FusedConv, which `to_onnx` writes)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from jaxgraph._opaque import window_padding
from jaxgraph.onnx_io.spec import FUSED_ACTIVATIONS, onnx_module

if TYPE_CHECKING:
    from jaxgraph.onnx_io.importer import Importer


def _window(attrs: dict[str, Any], kernel: Sequence[int], spatial: Sequence[int]) -> dict | None:
    """strides and explicit pads (top, left, bottom, right) of a 2-D undilated window; None otherwise."""
    if len(kernel) != 2 or any(d != 1 for d in attrs.get("dilations", [1, 1])):
        return None
    strides = list(attrs.get("strides", [1, 1]))
    (top, bottom), (left, right) = window_padding(attrs, spatial, kernel, strides, [1, 1])
    return dict(stride=tuple(strides), pads=(top, left, bottom, right))


def _conv(imp: Importer, node, attrs, activation: str = "none"):
    x = imp.tensor(node.input[0])
    kernel = attrs.get("kernel_shape") or imp.shape(node.input[1])[2:]
    window = _window(attrs, kernel, imp.b.shape(x)[2:])
    if window is None:
        return None
    inputs = [x] + [imp.tensor(name) for name in node.input[1:3] if name]
    return [imp.b.add("conv2d", inputs, node.name, groups=attrs.get("group", 1), activation=activation, **window)]


def _fused_conv(imp: Importer, node, attrs):
    """onnxruntime's com.microsoft.FusedConv (what `to_onnx` writes for a convolution with a fused activation)."""
    activation = FUSED_ACTIVATIONS.get(attrs.get("activation", ""))
    if activation is None or (len(node.input) > 3 and node.input[3]):
        return None
    window_attrs = {k: v for k, v in attrs.items() if k not in ("activation", "activation_params")}
    return _conv(imp, node, window_attrs, activation)


def _pool(op: str) -> Callable:
    def convert(imp: Importer, node, attrs):
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


def _reduce_mean(imp: Importer, node, attrs):
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
    def convert(imp: Importer, node, attrs):
        x = imp.tensor(node.input[0])
        if len(imp.b.shape(x)) != 4:
            return None
        return [imp.b.add(op, [x], node.name, kernel=imp.b.shape(x)[2:], stride=(1, 1))]
    return convert


def _unary(op: str) -> Callable:
    return lambda imp, node, attrs: [imp.b.add(op, [imp.tensor(node.input[0])], node.name)]


def _binary(op: str) -> Callable:
    return lambda imp, node, attrs: [imp.b.add(op, [imp.tensor(n) for n in node.input], node.name)]


def _float_constant(imp: Importer, name: str) -> np.ndarray | None:
    value = imp.constants.get(name)
    return value if value is not None and np.issubdtype(value.dtype, np.floating) else None


def _sub(imp: Importer, node, attrs):
    """x - c as x + (-c); anything else stays an opaque Sub."""
    value = _float_constant(imp, node.input[1])
    if value is None:
        return None
    imp.constants[f"{node.input[1]}.neg"] = -value
    return [imp.b.add("add", [imp.tensor(node.input[0]), imp.tensor(f"{node.input[1]}.neg")], node.name)]


def _div(imp: Importer, node, attrs):
    """x / c as x * (1 / c); anything else stays an opaque Div."""
    value = _float_constant(imp, node.input[1])
    if value is None:
        return None
    imp.constants[f"{node.input[1]}.reciprocal"] = (1.0 / value.astype(np.float64)).astype(value.dtype)
    return [imp.b.add("mul", [imp.tensor(node.input[0]), imp.tensor(f"{node.input[1]}.reciprocal")], node.name)]


def _sum(imp: Importer, node, attrs):
    total = imp.tensor(node.input[0])
    for k, name in enumerate(node.input[1:]):
        total = imp.b.add("add", [total, imp.tensor(name)], f"{node.name}.{k}" if node.name else "")
    return [total]


def _clip(imp: Importer, node, attrs):
    if imp.opset < 11:
        low, high = attrs.get("min", -np.inf), attrs.get("max", np.inf)
    else:
        bounds = [node.input[k] if len(node.input) > k else "" for k in (1, 2)]
        if any(name and name not in imp.constants for name in bounds):
            return None
        low, high = (float(imp.constants[name].reshape(-1)[0]) if name else default
                     for name, default in zip(bounds, (-np.inf, np.inf)))
    return [imp.b.add("clip", [imp.tensor(node.input[0])], node.name, min=float(low), max=float(high))]


def _matmul(imp: Importer, node, attrs):
    shapes = [imp.shape(n) for n in node.input]
    if min(len(s) for s in shapes) < 2 or (len(shapes[1]) > 2 and shapes[0][:-2] != shapes[1][:-2]):
        return None  # vectors and broadcast batch dimensions stay opaque
    return [imp.b.add("matmul", [imp.tensor(n) for n in node.input], node.name)]


def _gemm(imp: Importer, node, attrs):
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


def _batchnorm(imp: Importer, node, attrs):
    if attrs.get("training_mode", 0) or any(n in imp.consumed for n in node.output[1:] if n):
        return None
    if len(imp.shape(node.input[0])) < 2:
        return None
    return [imp.b.add("batchnorm", [imp.tensor(n) for n in node.input[:5]], node.name, eps=attrs.get("epsilon", 1e-5))]


def _layernorm(imp: Importer, node, attrs):
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


def _gelu(imp: Importer, node, attrs):
    if attrs.get("approximate", "none") != "none":
        return None
    return [imp.b.add("gelu", [imp.tensor(node.input[0])], node.name)]


def _cast(imp: Importer, node, attrs):
    return [imp.tensor(node.input[0])] if attrs["to"] == onnx_module().TensorProto.FLOAT else None


def _concat(imp: Importer, node, attrs):
    return [imp.b.add("concat", [imp.tensor(n) for n in node.input], node.name, axis=attrs["axis"])]


def _split(imp: Importer, node, attrs):
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


def _transpose(imp: Importer, node, attrs):
    x = imp.tensor(node.input[0])
    perm = attrs.get("perm", list(reversed(range(len(imp.b.shape(x))))))
    return [imp.b.add("transpose", [x], node.name, perm=tuple(perm))]


def _reshape_to(imp: Importer, node, target: Sequence[int]):
    return [imp.b.add("reshape", [imp.tensor(node.input[0])], node.name, shape=tuple(int(d) for d in target))]


def _reshape(imp: Importer, node, attrs):
    source = imp.shape(node.input[0])
    target = [source[i] if d == 0 and not attrs.get("allowzero", 0) else int(d)
              for i, d in enumerate(imp.constant(node.input[1], "Reshape shape").tolist())]
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        target[target.index(-1)] = math.prod(source) // max(known, 1)
    return _reshape_to(imp, node, target)


def _flatten(imp: Importer, node, attrs):
    source = imp.shape(node.input[0])
    axis = attrs.get("axis", 1) % (len(source) + 1)
    return _reshape_to(imp, node, (math.prod(source[:axis]), math.prod(source[axis:])))


def _axes(imp: Importer, node, attrs) -> list[int]:
    if len(node.input) > 1 and node.input[1]:
        return imp.constant(node.input[1], "axes").tolist()
    return list(attrs.get("axes", []))


def _squeeze(imp: Importer, node, attrs):
    source = imp.shape(node.input[0])
    axes = [a % len(source) for a in _axes(imp, node, attrs)] or [i for i, d in enumerate(source) if d == 1]
    return _reshape_to(imp, node, [d for i, d in enumerate(source) if i not in axes])


def _unsqueeze(imp: Importer, node, attrs):
    target = list(imp.shape(node.input[0]))
    rank = len(target) + len(_axes(imp, node, attrs))
    for axis in sorted(a % rank for a in _axes(imp, node, attrs)):
        target.insert(axis, 1)
    return _reshape_to(imp, node, target)


def _softmax(imp: Importer, node, attrs):
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


def _gather(imp: Importer, node, attrs):
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


def _identity(imp: Importer, node, attrs):
    """Identity, and Dropout at inference: the input passes through; a used mask is all true."""
    outputs = [imp.tensor(node.input[0])]
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
        outputs.append(np.ones(imp.shape(node.input[0]), bool))
    return outputs


IMPORTERS: dict[str, Callable] = {
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
CONTRIB_IMPORTERS: dict[str, Callable] = {"FusedConv": _fused_conv}

