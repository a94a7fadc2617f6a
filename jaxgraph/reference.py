"""NumPy reference interpreter: the independent twin of the JAX executor, and the constant folder.

It needs no compilation, so tests can run hundreds of rewritten graphs in seconds, and it computes
in float64 by default, so a rewrite is compared against ground truth rather than against float32
rounding. Weight-only subgraphs are folded with it (offline weight preprocessing, as TASO does).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np
import scipy.special
from numpy.lib.stride_tricks import sliding_window_view

from jaxgraph import _opaque as opaque
from jaxgraph.graph import Graph, Node, Ref

_FOLDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _activate(y: np.ndarray, activation: str) -> np.ndarray:
    if activation == "relu":
        return np.maximum(y, 0)
    if activation == "sigmoid":
        return 1 / (1 + np.exp(-y))
    if activation == "tanh":
        return np.tanh(y)
    return y


def _windows(x: np.ndarray, kernel, stride, pads, fill: float) -> np.ndarray:
    """[N, C, H, W] -> [N, C, Ho, Wo, kh, kw] views of the padded input."""
    pt, pl, pb, pr = pads
    if pt or pl or pb or pr:
        padded = np.full(x.shape[:2] + (x.shape[2] + pt + pb, x.shape[3] + pl + pr), fill, x.dtype)
        padded[:, :, pt:pt + x.shape[2], pl:pl + x.shape[3]] = x
        x = padded
    return sliding_window_view(x, tuple(kernel), axis=(2, 3))[:, :, ::stride[0], ::stride[1]]


def _channel(v: np.ndarray, rank: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (rank - 2))


def _conv2d(a, x, w, b=None):
    """im2col: [N, g, Ho*Wo, c*kh*kw] @ [g, c*kh*kw, o/g] per group."""
    n, c = x.shape[:2]
    o, groups = w.shape[0], a["groups"]
    win = _windows(x, w.shape[2:], a["stride"], a["pads"], 0.0)
    ho, wo = win.shape[2:4]
    cols = win.reshape(n, groups, c // groups, ho, wo, -1).transpose(0, 1, 3, 4, 2, 5).reshape(n, groups, ho * wo, -1)
    kernels = w.reshape(groups, o // groups, -1).transpose(0, 2, 1)
    y = np.matmul(cols, kernels).transpose(0, 1, 3, 2).reshape(n, o, ho, wo)
    return _activate(y if b is None else y + _channel(b, 4), a["activation"])


def _pool(a, x, reduce: Callable, fill: float):
    return reduce(_windows(x, a["kernel"], a["stride"], a["pads"], fill), axis=(-2, -1))


def _avgpool2d(a, x):
    total = _pool(a, x, np.sum, 0.0)
    if a["count_include_pad"]:
        return total / math.prod(a["kernel"])
    return total / _pool(a, np.ones((1, 1) + x.shape[2:], x.dtype), np.sum, 0.0)


def _batchnorm(a, x, scale, bias, mean, var):
    factor = scale / np.sqrt(var + a["eps"])
    return (x - _channel(mean, x.ndim)) * _channel(factor, x.ndim) + _channel(bias, x.ndim)


def _softmax(a, x):
    e = np.exp(x - x.max(axis=a["axis"], keepdims=True))
    return e / e.sum(axis=a["axis"], keepdims=True)


def _split(a, x):
    return tuple(np.split(x, np.cumsum(a["sizes"])[:-1], axis=a["axis"]))


def _enlarge(a, w):
    dh, dw = (a["kernel"][0] - w.shape[2]) // 2, (a["kernel"][1] - w.shape[3]) // 2
    return np.pad(w, ((0, 0), (0, 0), (dh, dh), (dw, dw)))


def _merge_gconv(a, w):
    groups, count = a["groups"], a["count"]
    out, cin = w.shape[:2]
    per_group = out // groups
    merged = np.zeros((out, cin * count) + w.shape[2:], w.dtype)
    for o in range(out):
        slot = (o // per_group) % count
        merged[o, slot * cin:(slot + 1) * cin] = w[o]
    return merged


def _bn_fold_weight(a, w, scale, var):
    return w * (scale / np.sqrt(var + a["eps"])).reshape((-1,) + (1,) * (w.ndim - 1))


def _bn_fold_bias(a, scale, bias, mean, var, conv_bias=None):
    shift = -mean if conv_bias is None else conv_bias - mean
    return shift * scale / np.sqrt(var + a["eps"]) + bias


def _layernorm(a, x, scale, bias):
    axes = tuple(range(a["axis"] % x.ndim, x.ndim))
    centred = x - x.mean(axis=axes, keepdims=True)
    return centred / np.sqrt((centred ** 2).mean(axis=axes, keepdims=True) + a["eps"]) * scale + bias


KERNELS: Mapping[str, Callable[..., Any]] = MappingProxyType({
    "conv2d": _conv2d,
    "matmul": lambda a, x, y: _activate(np.matmul(x, y), a["activation"]),
    "add": lambda a, x, y: x + y,
    "mul": lambda a, x, y: x * y,
    "relu": lambda a, x: np.maximum(x, 0),
    "sigmoid": lambda a, x: 1 / (1 + np.exp(-x)),
    "tanh": lambda a, x: np.tanh(x),
    "batchnorm": _batchnorm,
    "maxpool2d": lambda a, x: _pool(a, x, np.max, -np.inf),
    "avgpool2d": _avgpool2d,
    "concat": lambda a, *xs: np.concatenate(xs, axis=a["axis"]),
    "split": _split,
    "transpose": lambda a, x: np.transpose(x, a["perm"]),
    "reshape": lambda a, x: np.reshape(x, a["shape"]),
    "softmax": _softmax,
    "layernorm": _layernorm,
    "gelu": lambda a, x: 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2))),
    "clip": lambda a, x: np.minimum(np.maximum(x, a["min"]), a["max"]),
    "opaque": opaque.reference_kernel,
    "enlarge": _enlarge,
    "merge_gconv": _merge_gconv,
    "bn_fold_weight": _bn_fold_weight,
    "bn_fold_bias": _bn_fold_bias,
})


def _run(node: Node, args: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    out = KERNELS[node.op](node.attrs, *args)
    return out if isinstance(out, tuple) else (out,)


def execute_reference(graph: Graph, inputs: Mapping[str, object], dtype=np.float64) -> dict[str, np.ndarray]:
    """Run `graph` in NumPy (float64 by default); inputs and outputs by name."""
    checked = graph.check_inputs(inputs)
    values: dict[Ref, np.ndarray] = {}
    for node_id in graph.order:
        node = graph.nodes[node_id]
        if node.op == "input":
            out: tuple[np.ndarray, ...] = (checked[node.name].astype(dtype),)
        elif node.op == "weight":
            out = (node.value.astype(dtype),)
        else:
            out = _run(node, [values[r] for r in node.inputs])
        for k, value in enumerate(out):
            values[Ref(node_id, k)] = value
    return {name: values[r] for name, r in zip(graph.output_names, graph.outputs)}


def fold_constants(graph: Graph) -> Graph:
    """Replace every constant subgraph by weight nodes (computed here in float64, stored float32).

    Node ids are kept, so the folded graph lines up with the original; a folded weight keeps its
    node's name or is called `folded_<id>`. A constant op with several outputs (a split of weights)
    becomes one weight per output that is used.
    """
    if graph in _FOLDED:
        return _FOLDED[graph]
    if all(n.op == "weight" or not n.constant for n in graph.nodes.values()):
        _FOLDED[graph] = graph
        return graph
    nodes = dict(graph.nodes)
    values: dict[int, tuple[np.ndarray, ...]] = {}
    renamed: dict[Ref, Ref] = {}
    next_id = max(graph.nodes) + 1
    for node_id in graph.order:
        node = graph.nodes[node_id]
        if node.constant:
            values[node_id] = (node.value.astype(np.float64),) if node.op == "weight" else \
                _run(node, [values[r.node][r.index] for r in node.inputs])
        if not node.constant or node.op == "weight":
            continue
        for k, value in enumerate(values[node_id]):
            stored = np.asarray(value, dtype=np.float32)
            stored.setflags(write=False)
            target = node_id if k == 0 else next_id
            next_id += target != node_id
            suffix = "" if len(node.shapes) == 1 else f":{k}"
            nodes[target] = replace(node, op="weight", inputs=(), attrs=MappingProxyType({}), shapes=(stored.shape,),
                                    name=(node.name or f"folded_{node_id}") + suffix, value=stored)
            renamed[Ref(node_id, k)] = Ref(target)
    for node_id, node in list(nodes.items()):
        if not node.constant and any(r in renamed for r in node.inputs):
            nodes[node_id] = replace(node, inputs=tuple(renamed.get(r, r) for r in node.inputs))
    outputs = [renamed.get(r, r) for r in graph.outputs]
    live: set[int] = set(graph.inputs)
    stack = [r.node for r in outputs]
    while stack:
        node_id = stack.pop()
        if node_id not in live:
            live.add(node_id)
            stack.extend(r.node for r in nodes[node_id].inputs)
    folded = Graph.from_nodes({i: n for i, n in nodes.items() if i in live}, graph.inputs, outputs,
                              graph.output_names)
    _FOLDED[graph] = folded
    return folded
