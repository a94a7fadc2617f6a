"""The operator set of the IR: attributes, shape inference and the JAX kernel of every op.

Tensors are float32 and image tensors are NCHW (convolution weights OIHW), as in ONNX and TASO.
Shape functions raise `ValueError` with a message that the graph layer prefixes with the node's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
from jax import lax

from jaxgraph import _opaque as opaque

Shape = tuple[int, ...]
ACTIVATIONS = ("none", "relu", "sigmoid", "tanh")
PRECISION = lax.Precision.HIGHEST  # float32 accumulation on every backend, so rewrites compare at rtol 1e-4


@dataclass(frozen=True)
class OpSpec:
    """What an op is: its arity, attribute defaults, shape function and JAX implementation."""

    name: str
    min_inputs: int
    max_inputs: int | None  # None: variadic
    defaults: Mapping[str, Any]
    infer: Callable[[Mapping[str, Any], Sequence[Shape]], tuple[Shape, ...]]
    impl: Callable[..., Any] | None  # JAX kernel (attrs, *inputs) -> array or tuple; None for leaves
    layout_only: bool = False  # reshape/transpose/split: free in TASO's cost model


# ---------------------------------------------------------------- shape helpers


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def broadcast_shapes(a: Shape, b: Shape) -> Shape:
    """NumPy broadcasting of two shapes, or ValueError."""
    rank = max(len(a), len(b))
    a1 = (1,) * (rank - len(a)) + tuple(a)
    b1 = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(a1, b1):
        _require(x == y or x == 1 or y == 1, f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _pooled(size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, what: str) -> int:
    out = (size + pad_begin + pad_end - kernel) // stride + 1
    _require(out >= 1, f"{what} window {kernel} with padding ({pad_begin}, {pad_end}) does not fit size {size}")
    return out


def _window_attrs(attrs: Mapping[str, Any]) -> tuple[int, int, int, int, int, int]:
    sh, sw = attrs["stride"]
    pt, pl, pb, pr = attrs["pads"]
    _require(sh >= 1 and sw >= 1, f"strides must be positive, got {attrs['stride']}")
    _require(min(pt, pl, pb, pr) >= 0, f"pads must be non-negative, got {attrs['pads']}")
    return sh, sw, pt, pl, pb, pr


def _normalize_axis(axis: int, rank: int) -> int:
    _require(-rank <= axis < rank, f"axis {axis} out of range for rank {rank}")
    return axis % rank


# ---------------------------------------------------------------- shape functions


def _infer_conv2d(attrs, shapes):
    x, w = shapes[0], shapes[1]
    _require(len(x) == 4, f"conv2d input must be NCHW, got shape {x}")
    _require(len(w) == 4, f"conv2d weight must be OIHW, got shape {w}")
    groups = attrs["groups"]
    _require(groups >= 1 and x[1] % groups == 0 and w[0] % groups == 0,
             f"groups={groups} must divide input channels {x[1]} and output channels {w[0]}")
    _require(w[1] * groups == x[1], f"weight {w} expects {w[1] * groups} input channels, input has {x[1]}")
    if len(shapes) == 3:
        _require(shapes[2] == (w[0],), f"bias must have shape ({w[0]},), got {shapes[2]}")
    _require(attrs["activation"] in ACTIVATIONS, f"unknown activation {attrs['activation']!r}")
    sh, sw, pt, pl, pb, pr = _window_attrs(attrs)
    return ((x[0], w[0], _pooled(x[2], w[2], sh, pt, pb, "conv2d"), _pooled(x[3], w[3], sw, pl, pr, "conv2d")),)


def _infer_matmul(attrs, shapes):
    a, b = shapes
    _require(len(a) >= 2 and len(b) >= 2, f"matmul needs rank >= 2 operands, got {a} and {b}")
    _require(a[-1] == b[-2], f"matmul inner dimensions differ: {a} @ {b}")
    _require(len(b) == 2 or a[:-2] == b[:-2], f"matmul batch dimensions differ: {a} @ {b}")
    _require(attrs["activation"] in ACTIVATIONS, f"unknown activation {attrs['activation']!r}")
    return (a[:-1] + (b[-1],),)


def _infer_elementwise(attrs, shapes):
    return (broadcast_shapes(shapes[0], shapes[1]),)


def _infer_same(attrs, shapes):
    return (shapes[0],)


def _infer_batchnorm(attrs, shapes):
    x = shapes[0]
    _require(len(x) >= 2, f"batchnorm input needs a channel axis, got {x}")
    for param in shapes[1:]:
        _require(param == (x[1],), f"batchnorm parameters must have shape ({x[1]},), got {param}")
    return (x,)


def _infer_pool(attrs, shapes):
    x = shapes[0]
    _require(len(x) == 4, f"pooling input must be NCHW, got {x}")
    kh, kw = attrs["kernel"]
    sh, sw, pt, pl, pb, pr = _window_attrs(attrs)
    return ((x[0], x[1], _pooled(x[2], kh, sh, pt, pb, "pool"), _pooled(x[3], kw, sw, pl, pr, "pool")),)


def _infer_concat(attrs, shapes):
    rank = len(shapes[0])
    axis = _normalize_axis(attrs["axis"], rank)
    for s in shapes[1:]:
        _require(len(s) == rank and all(s[i] == shapes[0][i] for i in range(rank) if i != axis),
                 f"concat on axis {axis} of mismatched shapes {list(shapes)}")
    return (shapes[0][:axis] + (sum(s[axis] for s in shapes),) + shapes[0][axis + 1:],)


def _infer_split(attrs, shapes):
    x = shapes[0]
    axis = _normalize_axis(attrs["axis"], len(x))
    sizes = attrs["sizes"]
    _require(len(sizes) >= 1 and min(sizes) >= 1 and sum(sizes) == x[axis],
             f"split sizes {sizes} do not partition dimension {x[axis]} of {x}")
    return tuple(x[:axis] + (n,) + x[axis + 1:] for n in sizes)


def _infer_transpose(attrs, shapes):
    x, perm = shapes[0], tuple(attrs["perm"])
    _require(sorted(perm) == list(range(len(x))), f"perm {perm} is not a permutation of {len(x)} axes")
    return (tuple(x[p] for p in perm),)


def _infer_reshape(attrs, shapes):
    x, target = shapes[0], tuple(attrs["shape"])
    _require(all(d >= 1 for d in target) and math.prod(target) == math.prod(x),
             f"cannot reshape {x} to {target}")
    return (target,)


def _infer_softmax(attrs, shapes):
    _normalize_axis(attrs["axis"], len(shapes[0]))
    return (shapes[0],)


def _infer_enlarge(attrs, shapes):
    w = shapes[0]
    _require(len(w) == 4, f"enlarge needs an OIHW weight, got {w}")
    kh, kw = attrs["kernel"]
    _require(kh >= w[2] and kw >= w[3] and (kh - w[2]) % 2 == 0 and (kw - w[3]) % 2 == 0,
             f"cannot centre a {w[2]}x{w[3]} kernel in {kh}x{kw}")
    return (w[:2] + (kh, kw),)


def _infer_merge_gconv(attrs, shapes):
    w = shapes[0]
    groups, count = attrs["groups"], attrs["count"]
    _require(len(w) == 4 and groups % count == 0 and w[0] % groups == 0,
             f"cannot merge {count} of {groups} groups of weight {w}")
    return ((w[0], w[1] * count, w[2], w[3]),)


def _infer_bn_fold_weight(attrs, shapes):
    w, scale, var = shapes
    _require(scale == (w[0],) and var == (w[0],), f"batchnorm parameters {scale}, {var} do not match weight {w}")
    return (w,)


def _infer_bn_fold_bias(attrs, shapes):
    _require(all(s == shapes[0] and len(s) == 1 for s in shapes), f"batchnorm parameters differ: {list(shapes)}")
    return (shapes[0],)


# ---------------------------------------------------------------- kernels


def activate(y: jax.Array, activation: str) -> jax.Array:
    """Apply a fused activation."""
    if activation == "relu":
        return jax.nn.relu(y)
    if activation == "sigmoid":
        return jax.nn.sigmoid(y)
    if activation == "tanh":
        return jnp.tanh(y)
    return y


def _channel_vector(v: jax.Array, rank: int) -> jax.Array:
    """[C] -> [1, C, 1, ...] so it broadcasts on axis 1 without rank promotion."""
    return jnp.reshape(v, (1, v.shape[0]) + (1,) * (rank - 2))


def _conv2d(attrs, x, w, b=None):
    pt, pl, pb, pr = attrs["pads"]
    y = lax.conv_general_dilated(
        x, w, window_strides=tuple(attrs["stride"]), padding=((pt, pb), (pl, pr)),
        dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=attrs["groups"], precision=PRECISION)
    if b is not None:
        y = y + _channel_vector(b, 4)
    return activate(y, attrs["activation"])


def _matmul(attrs, a, b):
    return activate(jnp.matmul(a, b, precision=PRECISION), attrs["activation"])


def _broadcast_pair(a, b):
    shape = broadcast_shapes(a.shape, b.shape)
    return jnp.broadcast_to(a, shape), jnp.broadcast_to(b, shape)


def _add(attrs, a, b):
    a, b = _broadcast_pair(a, b)
    return a + b


def _mul(attrs, a, b):
    a, b = _broadcast_pair(a, b)
    return a * b


def _batchnorm(attrs, x, scale, bias, mean, var):
    factor = scale * lax.rsqrt(var + attrs["eps"])
    return (x - _channel_vector(mean, x.ndim)) * _channel_vector(factor, x.ndim) + _channel_vector(bias, x.ndim)


def _pool_padding(attrs):
    pt, pl, pb, pr = attrs["pads"]
    return ((0, 0), (0, 0), (pt, pb), (pl, pr))


def _maxpool2d(attrs, x):
    window, strides = (1, 1) + tuple(attrs["kernel"]), (1, 1) + tuple(attrs["stride"])
    return lax.reduce_window(x, -jnp.inf, lax.max, window, strides, _pool_padding(attrs))


def _avgpool2d(attrs, x):
    window, strides = (1, 1) + tuple(attrs["kernel"]), (1, 1) + tuple(attrs["stride"])
    padding = _pool_padding(attrs)
    total = lax.reduce_window(x, 0.0, lax.add, window, strides, padding)
    if attrs["count_include_pad"]:
        return total / float(math.prod(attrs["kernel"]))
    ones = jnp.ones((1, 1) + x.shape[2:], x.dtype)
    count = lax.reduce_window(ones, 0.0, lax.add, window, strides, padding)
    return total / count


def _concat(attrs, *xs):
    return jnp.concatenate(xs, axis=attrs["axis"])


def _split(attrs, x):
    bounds, start = [], 0
    for n in attrs["sizes"][:-1]:
        start += n
        bounds.append(start)
    return tuple(jnp.split(x, bounds, axis=attrs["axis"]))


def _enlarge(attrs, w):
    dh, dw = (attrs["kernel"][0] - w.shape[2]) // 2, (attrs["kernel"][1] - w.shape[3]) // 2
    return jnp.pad(w, ((0, 0), (0, 0), (dh, dh), (dw, dw)))


def _merge_gconv(attrs, w):
    groups, count = attrs["groups"], attrs["count"]
    out, cin, kh, kw = w.shape
    grouped = jnp.reshape(w, (groups, out // groups, cin, kh, kw))
    place = jax.nn.one_hot(jnp.arange(groups) % count, count, dtype=w.dtype)  # [groups, count]
    merged = jnp.einsum("goikl,gp->gopikl", grouped, place, precision=PRECISION)
    return jnp.reshape(merged, (out, count * cin, kh, kw))


def _bn_fold_weight(attrs, w, scale, var):
    factor = scale * lax.rsqrt(var + attrs["eps"])
    return w * jnp.reshape(factor, (w.shape[0],) + (1,) * (w.ndim - 1))


def _bn_fold_bias(attrs, scale, bias, mean, var, conv_bias=None):
    shift = -mean if conv_bias is None else conv_bias - mean
    return shift * scale * lax.rsqrt(var + attrs["eps"]) + bias


# ---------------------------------------------------------------- transformer and MobileNet ops
# layernorm (ONNX LayerNormalization: normalize over axes axis..rank-1, then scale and shift), gelu (exact,
# erf form) and clip (ReLU6 = clip(x, 0, 6)): what the faithful BERT and MobileNetV2 builders need.


def _infer_layernorm(attrs, shapes):
    x = shapes[0]
    axis = _normalize_axis(attrs["axis"], len(x))
    for param in shapes[1:]:
        _require(param == x[axis:], f"layernorm scale and bias must have shape {x[axis:]}, got {param}")
    return (x,)


def _layernorm(attrs, x, scale, bias):
    axes = tuple(range(_normalize_axis(attrs["axis"], x.ndim), x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    lead = (1,) * (x.ndim - scale.ndim)
    return (x - mean) * lax.rsqrt(var + attrs["eps"]) * jnp.reshape(scale, lead + scale.shape) + jnp.reshape(
        bias, lead + bias.shape)


def _infer_clip(attrs, shapes):
    _require(attrs["min"] <= attrs["max"], f"clip bounds must satisfy min <= max, got {attrs['min']}, {attrs['max']}")
    return (shapes[0],)


_TRANSFORMER_OPS = (
    ("layernorm", (3, 3), _infer_layernorm, _layernorm, dict(axis=-1, eps=1e-5)),
    ("gelu", (1, 1), _infer_same, lambda attrs, x: jax.nn.gelu(x, approximate=False), {}),
    ("clip", (1, 1), _infer_clip, lambda attrs, x: jnp.clip(x, attrs["min"], attrs["max"]), dict(min=0.0, max=6.0)),
)


def _spec(name, arity, infer, impl, layout_only=False, **defaults):
    low, high = arity
    return OpSpec(name, low, high, MappingProxyType(defaults), infer, impl, layout_only)


_WINDOW = dict(stride=(1, 1), pads=(0, 0, 0, 0))

OPS: Mapping[str, OpSpec] = MappingProxyType({s.name: s for s in (
    _spec("input", (0, 0), None, None),
    _spec("weight", (0, 0), None, None),
    _spec("conv2d", (2, 3), _infer_conv2d, _conv2d, groups=1, activation="none", **_WINDOW),
    _spec("matmul", (2, 2), _infer_matmul, _matmul, activation="none"),
    _spec("add", (2, 2), _infer_elementwise, _add),
    _spec("mul", (2, 2), _infer_elementwise, _mul),
    _spec("relu", (1, 1), _infer_same, lambda attrs, x: jax.nn.relu(x)),
    _spec("sigmoid", (1, 1), _infer_same, lambda attrs, x: jax.nn.sigmoid(x)),
    _spec("tanh", (1, 1), _infer_same, lambda attrs, x: jnp.tanh(x)),
    _spec("batchnorm", (5, 5), _infer_batchnorm, _batchnorm, eps=1e-5),
    _spec("maxpool2d", (1, 1), _infer_pool, _maxpool2d, kernel=(1, 1), **_WINDOW),
    _spec("avgpool2d", (1, 1), _infer_pool, _avgpool2d, kernel=(1, 1), count_include_pad=False, **_WINDOW),
    _spec("concat", (1, None), _infer_concat, _concat, axis=1),
    _spec("split", (1, 1), _infer_split, _split, True, axis=1, sizes=()),
    _spec("transpose", (1, 1), _infer_transpose, lambda attrs, x: jnp.transpose(x, attrs["perm"]), True, perm=()),
    _spec("reshape", (1, 1), _infer_reshape, lambda attrs, x: jnp.reshape(x, attrs["shape"]), True, shape=()),
    _spec("softmax", (1, 1), _infer_softmax, lambda attrs, x: jax.nn.softmax(x, axis=attrs["axis"]), axis=-1),
    *(_spec(name, arity, infer, impl, **defaults) for name, arity, infer, impl, defaults in _TRANSFORMER_OPS),
    # An ONNX op that no rule touches, carried verbatim (see jaxgraph._opaque).
    _spec("opaque", (0, None), opaque.infer, opaque.jax_kernel, **opaque.DEFAULTS),
    # Weight-only ops created by substitutions; free once their inputs are constants.
    _spec("enlarge", (1, 1), _infer_enlarge, _enlarge, kernel=(1, 1)),
    _spec("merge_gconv", (1, 1), _infer_merge_gconv, _merge_gconv, groups=1, count=2),
    _spec("bn_fold_weight", (3, 3), _infer_bn_fold_weight, _bn_fold_weight, eps=1e-5),
    _spec("bn_fold_bias", (4, 5), _infer_bn_fold_bias, _bn_fold_bias, eps=1e-5),
)})

OP_TYPES: tuple[str, ...] = tuple(OPS)  # fixed order: the one-hot encoding of the RL observation


def normalize_attrs(op: str, attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """Fill defaults, reject unknown attribute names, and turn lists into tuples (hashable)."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; known ops: {', '.join(OP_TYPES)}")
    defaults = OPS[op].defaults
    unknown = sorted(set(attrs) - set(defaults))
    if unknown:
        raise ValueError(f"op {op!r} has no attribute(s) {unknown}; it takes {sorted(defaults)}")
    merged = {**defaults, **attrs}
    return MappingProxyType({k: tuple(v) if isinstance(v, list) else v for k, v in sorted(merged.items())})
