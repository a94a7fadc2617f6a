"""Opaque nodes: ONNX ops that no rewrite touches, carried through the IR verbatim.

An `opaque` node keeps what the exporter needs to write the ONNX node back unchanged (its type, domain,
serialized attributes, and per ONNX input either an IR input, a constant, or nothing) plus the output
shapes inferred at import. Rules match op names, so they never match an opaque node. `execute` runs the
op types in `KERNELS` (JAX implementations of the ONNX operator specifications at opset 17) and names
the op it cannot run; the NumPy reference runs every op through `onnx.reference` (an implementation
nobody here wrote), which makes it an independent twin.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

Shape = tuple[int, ...]
PRECISION = lax.Precision.HIGHEST

# slots: one entry per ONNX input: None (absent), an int (that IR input), or bytes (a serialized constant)
DEFAULTS = dict(op_type="", domain="", opset=17, attributes=(), slots=(), input_shapes=(), shapes=())


def label(attrs: Mapping[str, Any]) -> str:
    """`Op` or `domain.Op`, as errors name it."""
    return f"{attrs['domain']}.{attrs['op_type']}" if attrs["domain"] not in ("", "ai.onnx") else attrs["op_type"]


def infer(attrs: Mapping[str, Any], shapes: Sequence[Shape]) -> tuple[Shape, ...]:
    """The output shapes recorded at import, after checking that the inputs still have the imported shapes."""
    expected = tuple(tuple(s) for s in attrs["input_shapes"])
    if tuple(tuple(s) for s in shapes) != expected:
        raise ValueError(f"opaque {label(attrs)} was imported with input shapes {list(expected)}, got {list(shapes)}")
    if not attrs["shapes"]:
        raise ValueError(f"opaque {label(attrs)} has no outputs")
    return tuple(tuple(s) for s in attrs["shapes"])


@functools.lru_cache(maxsize=4096)
def decode_attributes(attributes: tuple[bytes, ...]) -> dict[str, Any]:
    """Serialized AttributeProtos -> {name: Python value}."""
    from onnx import AttributeProto, helper

    decoded = {}
    for raw in attributes:
        proto = AttributeProto.FromString(raw)
        value = helper.get_attribute_value(proto)
        decoded[proto.name] = value.decode() if isinstance(value, bytes) else value
    return decoded


@functools.lru_cache(maxsize=4096)
def decode_constant(raw: bytes) -> np.ndarray:
    from onnx import TensorProto, numpy_helper

    value = numpy_helper.to_array(TensorProto.FromString(raw))
    value.setflags(write=False)
    return value


def _arguments(attrs: Mapping[str, Any], inputs: Sequence[Any]) -> list[Any]:
    """Per ONNX input: the IR input, the constant, or None."""
    return [None if s is None else inputs[s] if isinstance(s, int) else decode_constant(s) for s in attrs["slots"]]


def jax_kernel(attrs: Mapping[str, Any], *inputs: jax.Array) -> tuple[jax.Array, ...]:
    """Run an opaque node in JAX; ValueError naming the op if there is no JAX implementation."""
    kernel = KERNELS.get(attrs["op_type"]) if attrs["domain"] in ("", "ai.onnx") else None
    if kernel is None:
        raise ValueError(f"execute cannot run ONNX op {label(attrs)}: jaxgraph has no JAX implementation of it")
    out = kernel(decode_attributes(attrs["attributes"]), *_arguments(attrs, inputs))
    out = out if isinstance(out, tuple) else (out,)
    return tuple(out[: len(attrs["shapes"])])


def onnx_node(attrs: Mapping[str, Any], inputs: Sequence[str], outputs: Sequence[str], name: str):
    """The ONNX NodeProto of an opaque node, given tensor names for its ONNX inputs and outputs."""
    from onnx import AttributeProto, helper

    node = helper.make_node(attrs["op_type"], list(inputs), list(outputs), name=name,
                            domain=attrs["domain"] or None)
    node.attribute.extend(AttributeProto.FromString(raw) for raw in attrs["attributes"])
    return node


def _reference_lrn(a, x):
    """NumPy LRN, channel by channel (onnx 1.23's reference loops over the batch axis instead)."""
    size = a["size"]
    square_sum = np.zeros_like(x)
    for c in range(x.shape[1]):
        low, high = max(0, c - (size - 1) // 2), min(x.shape[1], c + -(-(size - 1) // 2) + 1)
        square_sum[:, c] = np.sum(x[:, low:high] ** 2, axis=1)
    return (x / (a.get("bias", 1.0) + a.get("alpha", 1e-4) / size * square_sum) ** a.get("beta", 0.75),)


def _reference_gelu(a, x):
    """NumPy GELU (onnx.reference runs Gelu only as an expanded function)."""
    if a.get("approximate", "none") == "tanh":
        return (0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),)
    import scipy.special

    return (0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2))),)


_REFERENCE_OVERRIDES = {"LRN": _reference_lrn, "Gelu": _reference_gelu}


def reference_kernel(attrs: Mapping[str, Any], *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Run an opaque node with `onnx.reference` (NumPy), at the dtype of its inputs (NumPy code of our own
    for the ops where onnx.reference is wrong or missing)."""
    from onnx.reference import ReferenceEvaluator

    if attrs["domain"] == "" and attrs["op_type"] in _REFERENCE_OVERRIDES:
        return _REFERENCE_OVERRIDES[attrs["op_type"]](decode_attributes(attrs["attributes"]),
                                                      *_arguments(attrs, inputs))

    names = [f"i{k}" if s is not None else "" for k, s in enumerate(attrs["slots"])]
    outputs = [f"o{k}" for k in range(len(attrs["shapes"]))]
    node = onnx_node(attrs, names, outputs, "reference")
    feeds = {n: np.asarray(v) for n, v in zip(names, _arguments(attrs, inputs)) if n}
    opsets = {"": attrs["opset"]} if attrs["domain"] in ("", "ai.onnx") else {"": 17, attrs["domain"]: attrs["opset"]}
    try:
        evaluator = ReferenceEvaluator(node, opsets=opsets)
    except Exception as error:  # onnx.reference raises its own types for ops it lacks
        raise ValueError(f"onnx.reference cannot run ONNX op {label(attrs)}: {error}") from None
    return tuple(evaluator.run(None, feeds))


# ---------------------------------------------------------------- JAX implementations (ONNX opset 17)


def _broadcast(*xs: jax.Array) -> list[jax.Array]:
    """Explicit multidirectional broadcasting (the project runs JAX with rank promotion off)."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in xs))
    return [jnp.broadcast_to(jnp.asarray(x), shape) for x in xs]


def _binary(fn: Callable) -> Callable:
    return lambda a, x, y: fn(*_broadcast(x, y))


def _variadic(fn: Callable) -> Callable:
    return lambda a, *xs: functools.reduce(fn, _broadcast(*xs))


def _axes_list(axes, rank: int) -> tuple[int, ...]:
    return tuple(sorted(int(d) % rank for d in axes))


def _reduce(fn: Callable) -> Callable:
    """A reduction whose axes come from the attribute (ReduceMean before opset 18) or the input."""
    def kernel(a, x, axes=None):
        axes = list(axes) if axes is not None else a.get("axes")
        if not axes:
            if a.get("noop_with_empty_axes", 0):
                return x
            axes = range(x.ndim)
        return fn(x, axis=_axes_list(axes, x.ndim), keepdims=bool(a.get("keepdims", 1)))
    return kernel


def _slice(a, x, starts, ends, axes=None, steps=None):
    axes = list(range(len(starts))) if axes is None else [int(d) % x.ndim for d in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(axes, starts, ends, steps):
        dim = x.shape[axis]
        start, end = int(start) + dim * (start < 0), int(end) + dim * (end < 0)
        if step > 0:
            index[axis] = slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
        else:
            end = min(max(end, -1), dim - 1)
            index[axis] = slice(min(max(start, 0), dim - 1), None if end < 0 else end, step)
    return x[tuple(index)]


def _gather(a, x, indices):
    axis = a.get("axis", 0) % x.ndim
    indices = np.where(indices < 0, indices + x.shape[axis], indices)
    return jnp.take(x, indices, axis=axis)


def _pad(a, x, pads, value=None, axes=None):
    rank = x.ndim
    axes = list(range(rank)) if axes is None else [int(d) % rank for d in axes]
    widths = [(0, 0)] * rank
    for k, axis in enumerate(axes):
        widths[axis] = (int(pads[k]), int(pads[k + len(axes)]))
    mode = a.get("mode", "constant")
    if mode == "constant":
        fill = jnp.zeros((), x.dtype) if value is None else jnp.reshape(value, ()).astype(x.dtype)
        return lax.pad(x, fill, [(lo, hi, 0) for lo, hi in widths])
    return jnp.pad(x, widths, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])


def _prelu(a, x, slope):
    x, slope = _broadcast(x, slope)
    return jnp.where(x >= 0, x, slope * x)


def window_padding(a, spatial: Sequence[int], kernel: Sequence[int], strides, dilations) -> list[tuple[int, int]]:
    """Explicit (begin, end) padding per spatial axis, from pads or auto_pad, with ceil_mode as extra end padding."""
    auto_pad = a.get("auto_pad", "NOTSET")
    effective = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s in zip(spatial, effective, strides):
            total = max((math.ceil(size / s) - 1) * s + k - size, 0)
            small, large = total // 2, total - total // 2
            pads.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
        return pads
    flat = [0] * (2 * len(spatial)) if auto_pad == "VALID" else list(a.get("pads", [0] * (2 * len(spatial))))
    pads = [(flat[i], flat[i + len(spatial)]) for i in range(len(spatial))]
    if a.get("ceil_mode", 0):
        pads = [(lo, hi + ceil_extra(size, k, s, lo, hi)) for (lo, hi), size, k, s in zip(pads, spatial, effective,
                                                                                          strides)]
    return pads


def ceil_extra(size: int, kernel: int, stride: int, begin: int, end: int) -> int:
    """End padding that makes floor-mode pooling give ceil_mode=1's output size (ONNX/PyTorch: the last
    window must start inside the input or its begin padding)."""
    span = size + begin + end - kernel
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + begin:
        out -= 1
    return max((out - 1) * stride - span, 0)


def _conv(a, x, w, b=None):
    spatial = x.shape[2:]
    kernel = w.shape[2:]
    strides = tuple(a.get("strides", [1] * len(kernel)))
    dilations = tuple(a.get("dilations", [1] * len(kernel)))
    y = lax.conv_general_dilated(x, w, strides, window_padding(a, spatial, kernel, strides, dilations),
                                 rhs_dilation=dilations, feature_group_count=a.get("group", 1), precision=PRECISION)
    if b is not None:
        y = y + jnp.reshape(b, (1, -1) + (1,) * len(kernel))
    return y


def _conv_transpose(a, x, w, b=None):
    """y = conv(x dilated by the strides, the kernel flipped with in/out swapped per group)."""
    rank = x.ndim - 2
    kernel, groups = w.shape[2:], a.get("group", 1)
    strides = tuple(a.get("strides", [1] * rank))
    dilations = tuple(a.get("dilations", [1] * rank))
    extra = list(a.get("output_padding", [0] * rank))
    effective = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if "output_shape" in a:
        totals = [s * (n - 1) + e + k - o for s, n, e, k, o in zip(strides, x.shape[2:], extra, effective,
                                                                     a["output_shape"][-rank:])]
        upper = a.get("auto_pad", "NOTSET") != "SAME_LOWER"
        pads = [(t - t // 2, t // 2) if not upper else (t // 2, t - t // 2) for t in totals]
    elif a.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        totals = [s * (n - 1) + e + k - n * s for s, n, e, k in zip(strides, x.shape[2:], extra, effective)]
        upper = a["auto_pad"] == "SAME_UPPER"
        pads = [(t // 2, t - t // 2) if upper else (t - t // 2, t // 2) for t in totals]
    else:
        flat = list(a.get("pads", [0] * (2 * rank)))
        pads = [(flat[i], flat[i + rank]) for i in range(rank)]
    cin, cout_g = w.shape[:2]
    flipped = jnp.flip(w, axis=tuple(range(2, w.ndim)))
    grouped = jnp.reshape(flipped, (groups, cin // groups, cout_g) + kernel)
    swapped = jnp.reshape(jnp.swapaxes(grouped, 1, 2), (groups * cout_g, cin // groups) + kernel)
    padding = [(k - 1 - lo, k - 1 - hi + e) for k, (lo, hi), e in zip(effective, pads, extra)]
    y = lax.conv_general_dilated(x, swapped, (1,) * rank, padding, lhs_dilation=strides, rhs_dilation=dilations,
                                 feature_group_count=groups, precision=PRECISION)
    if b is not None:
        y = y + jnp.reshape(b, (1, -1) + (1,) * rank)
    return y


def _pool(kind: str) -> Callable:
    def kernel(a, x):
        kernel_shape = tuple(a["kernel_shape"])
        rank = len(kernel_shape)
        strides = tuple(a.get("strides", [1] * rank))
        dilations = tuple(a.get("dilations", [1] * rank))
        padding = [(0, 0), (0, 0)] + window_padding(a, x.shape[2:], kernel_shape, strides, dilations)
        window, step, dilation = (1, 1) + kernel_shape, (1, 1) + strides, (1, 1) + dilations
        if kind == "max":
            return lax.reduce_window(x, -jnp.inf, lax.max, window, step, padding, window_dilation=dilation)
        total = lax.reduce_window(x, 0.0, lax.add, window, step, padding, window_dilation=dilation)
        ones = jnp.ones((1, 1) + x.shape[2:], x.dtype)
        if a.get("count_include_pad", 0):  # padding counts, ceil-mode overhang does not
            declared = [(0, 0), (0, 0)] + window_padding({**a, "ceil_mode": 0}, x.shape[2:], kernel_shape,
                                                          strides, dilations)
            ones = lax.pad(ones, jnp.ones((), x.dtype), [(lo, hi, 0) for lo, hi in declared])
            padding = [(lo - d_lo, hi - d_hi) for (lo, hi), (d_lo, d_hi) in zip(padding, declared)]
        count = lax.reduce_window(ones, 0.0, lax.add, window, step, padding, window_dilation=dilation)
        return total / count
    return kernel


def _instance_norm(a, x, scale, bias):
    axes = tuple(range(2, x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean) * lax.rsqrt(var + a.get("epsilon", 1e-5)) * jnp.reshape(scale, shape) + jnp.reshape(bias, shape)


def _lrn(a, x):
    size = a["size"]
    squares = jnp.square(x)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    window = (1, size) + (1,) * (x.ndim - 2)
    padding = [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2)
    total = lax.reduce_window(squares, 0.0, lax.add, window, (1,) * x.ndim, padding)
    return x / jnp.power(a.get("bias", 1.0) + a.get("alpha", 1e-4) / size * total, a.get("beta", 0.75))


def _expand(a, x, shape):
    return jnp.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(int(d) for d in shape)))


def _where(a, condition, x, y):
    condition, x, y = _broadcast(condition, x, y)
    return jnp.where(condition, x, y)


def _clip(a, x, low=None, high=None):
    low = -jnp.inf if low is None else jnp.reshape(low, ())
    high = jnp.inf if high is None else jnp.reshape(high, ())
    return jnp.minimum(jnp.maximum(x, low), high)


def _mod(a, x, y):
    x, y = _broadcast(x, y)
    return jnp.fmod(x, y) if a.get("fmod", 0) else jnp.mod(x, y)


KERNELS: Mapping[str, Callable[..., Any]] = {
    "Erf": lambda a, x: jax.scipy.special.erf(x),
    "Exp": lambda a, x: jnp.exp(x),
    "Log": lambda a, x: jnp.log(x),
    "Neg": lambda a, x: -x,
    "Abs": lambda a, x: jnp.abs(x),
    "Sqrt": lambda a, x: jnp.sqrt(x),
    "Reciprocal": lambda a, x: 1.0 / x,
    "Pow": _binary(jnp.power),
    "Sub": _binary(jnp.subtract),
    "Div": _binary(jnp.divide),
    "Min": _variadic(jnp.minimum),
    "Max": _variadic(jnp.maximum),
    "Mod": _mod,
    "Where": _where,
    "Clip": _clip,
    "Slice": _slice,
    "Gather": _gather,
    "Pad": _pad,
    "Tile": lambda a, x, repeats: jnp.tile(x, tuple(int(r) for r in repeats)),
    "Expand": _expand,
    "PRelu": _prelu,
    "LeakyRelu": lambda a, x: jnp.where(x >= 0, x, a.get("alpha", 0.01) * x),
    "Elu": lambda a, x: jax.nn.elu(x, a.get("alpha", 1.0)),
    "Softplus": lambda a, x: jax.nn.softplus(x),
    "HardSigmoid": lambda a, x: jnp.clip(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0.0, 1.0),
    "Gelu": lambda a, x: jax.nn.gelu(x, approximate=a.get("approximate", "none") == "tanh"),
    "ReduceMean": _reduce(jnp.mean),
    "ReduceMax": _reduce(jnp.max),
    "ReduceMin": _reduce(jnp.min),
    "ReduceSum": _reduce(jnp.sum),
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "MaxPool": _pool("max"),
    "AveragePool": _pool("avg"),
    "InstanceNormalization": _instance_norm,
    "LRN": _lrn,
}
