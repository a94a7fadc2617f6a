"""Recognize LayerNorm and GELU written out op by op (as exporters at opsets < 17 / < 20 do) and replace
them by the IR's `layernorm` and `gelu`, so that backend fusion models and rules see them.

GELU: x * 0.5 * (1 + erf(x / sqrt(2))) in any association of the two products (the division arrives as a
multiplication by 1 / sqrt(2), see `onnx_io`). LayerNorm: d = x - mean(x); d / sqrt(mean(d^2) + eps) *
gamma + beta over trailing axes, with gamma and beta shaped like those axes. Every intermediate must have
one consumer and not be a graph output, so the replaced nodes compute nothing else.
"""

from __future__ import annotations

import math

from jaxgraph._opaque import decode_attributes
from jaxgraph.graph import Graph, Node, Patch, Ref

_RTOL = 1e-5


def _sole_consumer(graph: Graph, node_id: int) -> int | None:
    uses = graph.uses(node_id)
    if len(uses) != 1 or node_id in graph.output_nodes:
        return None
    return uses[0].node


def _scalar(graph: Graph, ref: Ref) -> float | None:
    node = graph.nodes[ref.node]
    if node.op != "weight" or node.value is None or node.value.size != 1:
        return None
    return float(node.value.reshape(()))


def _is(node: Node, op_type: str) -> bool:
    return node.op == "opaque" and node.attrs["op_type"] == op_type and node.attrs["domain"] == ""


def _split_scalar(graph: Graph, node: Node, value: float) -> Ref | None:
    """For a binary node with a scalar weight close to `value`: its other input."""
    for k in (0, 1):
        scalar = _scalar(graph, node.inputs[1 - k])
        if scalar is not None and math.isclose(scalar, value, rel_tol=_RTOL):
            return node.inputs[k]
    return None


def _gelu_at(graph: Graph, erf_id: int) -> tuple[Ref, int] | None:
    """(x, output node) of a GELU around the Erf node `erf_id`."""
    erf = graph.nodes[erf_id]
    scaled = graph.nodes[erf.inputs[0].node]
    if scaled.op != "mul" or _sole_consumer(graph, erf.inputs[0].node) != erf_id:
        return None
    x = _split_scalar(graph, scaled, 1 / math.sqrt(2))
    shift_id = _sole_consumer(graph, erf_id)
    if x is None or shift_id is None or graph.nodes[shift_id].op != "add":
        return None
    if _split_scalar(graph, graph.nodes[shift_id], 1.0) != Ref(erf_id):
        return None
    product_id = _sole_consumer(graph, shift_id)
    if product_id is None or graph.nodes[product_id].op != "mul":
        return None
    product = graph.nodes[product_id]
    other = product.inputs[1] if product.inputs[0] == Ref(shift_id) else product.inputs[0]
    half_of = _split_scalar(graph, graph.nodes[other.node], 0.5) if graph.nodes[other.node].op == "mul" else None
    if other == x or math.isclose(_scalar(graph, other) or 0.0, 0.5, rel_tol=_RTOL):
        last_id = _sole_consumer(graph, product_id)  # (x * (1 + erf)) * 0.5 or x * (0.5 * (1 + erf))
        if last_id is None or graph.nodes[last_id].op != "mul":
            return None
        expected = 0.5 if other == x else None
        last = graph.nodes[last_id]
        if expected is not None and _split_scalar(graph, last, 0.5) != Ref(product_id):
            return None
        if expected is None and set(last.inputs) != {x, Ref(product_id)}:
            return None
        return x, last_id
    if half_of == x and _sole_consumer(graph, other.node) == product_id:  # (x * 0.5) * (1 + erf)
        return x, product_id
    return None


def _trailing_axes(node: Node, rank: int) -> int | None:
    """The first axis if a keepdims ReduceMean reduces exactly the trailing axes."""
    attrs = decode_attributes(node.attrs["attributes"])
    axes = sorted(a % rank for a in attrs.get("axes", ()))
    if not axes or attrs.get("keepdims", 1) != 1 or len(node.inputs) != 1 or axes != list(range(axes[0], rank)):
        return None
    return axes[0]


def _layernorm_at(graph: Graph, mean_id: int) -> tuple[Ref, Ref, Ref, int, float, int] | None:
    """(x, gamma, beta, axis, eps, output node) of a LayerNorm whose first ReduceMean is `mean_id`."""
    mean = graph.nodes[mean_id]
    x = mean.inputs[0]
    rank = len(graph.shape(x))
    axis = _trailing_axes(mean, rank)
    diff_id = _sole_consumer(graph, mean_id)
    if axis is None or diff_id is None or not _is(graph.nodes[diff_id], "Sub"):
        return None
    if graph.nodes[diff_id].inputs != (x, Ref(mean_id)) or diff_id in graph.output_nodes:
        return None
    users = {graph.nodes[u.node].op if graph.nodes[u.node].op != "opaque" else graph.nodes[u.node].attrs["op_type"]:
             u.node for u in graph.uses(diff_id)}
    square_id, divide_id = users.get("Pow", users.get("mul")), users.get("Div")
    if len(graph.uses(diff_id)) not in (2, 3) or square_id is None or divide_id is None:
        return None
    square = graph.nodes[square_id]
    if _is(square, "Pow"):
        if square.inputs[0] != Ref(diff_id) or _scalar(graph, square.inputs[1]) != 2.0:
            return None
    elif square.inputs != (Ref(diff_id), Ref(diff_id)) or len(graph.uses(diff_id)) != 3:
        return None
    variance_id = _sole_consumer(graph, square_id)
    if variance_id is None or not _is(graph.nodes[variance_id], "ReduceMean"):
        return None
    if _trailing_axes(graph.nodes[variance_id], rank) != axis:
        return None
    shifted_id = _sole_consumer(graph, variance_id)
    if shifted_id is None or graph.nodes[shifted_id].op != "add":
        return None
    shifted = graph.nodes[shifted_id]
    k = 0 if shifted.inputs[1] == Ref(variance_id) else 1
    eps = _scalar(graph, shifted.inputs[k])
    root_id = _sole_consumer(graph, shifted_id)
    if eps is None or root_id is None or not _is(graph.nodes[root_id], "Sqrt"):
        return None
    if _sole_consumer(graph, root_id) != divide_id or graph.nodes[divide_id].inputs != (Ref(diff_id), Ref(root_id)):
        return None
    scale_id = _sole_consumer(graph, divide_id)
    if scale_id is None or graph.nodes[scale_id].op != "mul":
        return None
    trailing = graph.shape(x)[axis:]
    gamma = next((r for r in graph.nodes[scale_id].inputs if r != Ref(divide_id)), None)
    bias_id = _sole_consumer(graph, scale_id)
    if gamma is None or graph.nodes[gamma.node].op != "weight" or graph.shape(gamma) != trailing or bias_id is None:
        return None
    bias = graph.nodes[bias_id]
    beta = next((r for r in bias.inputs if r != Ref(scale_id)), None)
    if bias.op != "add" or beta is None or graph.nodes[beta.node].op != "weight" or graph.shape(beta) != trailing:
        return None
    return x, gamma, beta, axis, eps, bias_id


def recognize_patterns(graph: Graph) -> Graph:
    """The graph with every decomposed GELU and LayerNorm replaced by one native op."""
    changed = True
    while changed:
        changed = False
        for node_id, node in graph.nodes.items():
            patch = Patch(graph)
            if _is(node, "Erf") and (found := _gelu_at(graph, node_id)):
                x, out = found
                patch.replace(Ref(out), patch.add("gelu", [x]))
            elif _is(node, "ReduceMean") and (found := _layernorm_at(graph, node_id)):
                x, gamma, beta, axis, eps, out = found
                patch.replace(Ref(out), patch.add("layernorm", [x, gamma, beta], axis=axis, eps=eps))
            else:
                continue
            patch.remove(out)
            graph, _ = patch.commit()
            changed = True
            break
    return graph
