"""TASO-style graph substitutions: each rule finds every location where it applies and rewrites one.

A location is a tuple of node ids whose first entry is the rule's *root* (a node of `root_op`);
`match_at(graph, root)` yields every location rooted there. Every node a match reads lies within
`radius` undirected hops of the root, which is what lets `LocationIndex` re-match only around a
rewrite. All rules are checked by running both sides on random inputs (tests/jaxgraph/test_rules.py),
the numerical counterpart of TASO's Z3 proofs.

`RULES` is the xfer list of the RL environment; ids 0-17 coincide with TASO's hand-written xfers 0-17
and every rule records the TASO ids it implements (`taso_ids`; see docs/jaxgraph.md).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Iterator

from jaxgraph.graph import Delta, Graph, Node, Patch, Ref

Location = tuple[int, ...]


class Rule(ABC):
    """A pattern and its replacement."""

    root_op: str
    radius: int
    max_node_growth: int  # upper bounds on nodes/edges a rewrite adds, for fixed-capacity layouts
    max_edge_growth: int

    @property
    @abstractmethod
    def taso_ids(self) -> tuple[int, ...]:
        """TASO xfer ids (0-150, see reference/taso_substitutions.txt) this rule implements."""

    @property
    def name(self) -> str:
        return repr(self)

    @abstractmethod
    def match_at(self, graph: Graph, root: int) -> Iterator[Location]:
        """Every location rooted at node `root`, a node of `root_op` (an empty iterator if none)."""

    @abstractmethod
    def build(self, patch: Patch, location: Location) -> None:
        """Write the replacement of `location` into `patch`."""

    def find(self, graph: Graph) -> list[Location]:
        """Every location in `graph`, sorted."""
        return sorted(loc for root in graph.by_op.get(self.root_op, ()) for loc in self.match_at(graph, root))

    def rewrite(self, graph: Graph, location: Location, check: bool = True) -> tuple[Graph, Delta]:
        """Apply at `location`; returns the new graph and what changed. ValueError if it does not match."""
        location = tuple(location)
        if check and (not location or location[0] not in graph.nodes
                      or graph.nodes[location[0]].op != self.root_op
                      or location not in set(self.match_at(graph, location[0]))):
            raise ValueError(f"{self.name} does not apply at location {location}")
        patch = Patch(graph)
        self.build(patch, location)
        return patch.commit()

    def apply(self, graph: Graph, location: Location) -> Graph:
        """The graph rewritten at `location`."""
        return self.rewrite(graph, location)[0]


# ---------------------------------------------------------------- matching helpers


def _producer(graph: Graph, ref: Ref) -> tuple[int, Node]:
    return ref.node, graph.nodes[ref.node]


def _sole_use(graph: Graph, node_id: int) -> bool:
    """The node's output feeds exactly one op and is not a graph output (so the node can go)."""
    return len(graph.uses(node_id)) == 1 and node_id not in graph.output_nodes


def _stride(conv: Node) -> int | None:
    sh, sw = conv.attrs["stride"]
    return sh if sh == sw else None


def padding_mode(graph: Graph, conv: Node) -> str | None:
    """TASO's padding classes: VALID (no padding), SAME (output = ceil(input / stride)), else None."""
    if not any(conv.attrs["pads"]):
        return "VALID"
    (sh, sw), x, y = conv.attrs["stride"], graph.shape(conv.inputs[0]), conv.shape
    if y[2] == -(-x[2] // sh) and y[3] == -(-x[3] // sw):
        return "SAME"
    return None


def _centred(conv: Node, graph: Graph) -> bool:
    """Odd kernel with (k - 1) / 2 padding on each side, so it can be centred in a larger kernel."""
    kh, kw = graph.shape(conv.inputs[1])[2:]
    return kh % 2 == 1 and kw % 2 == 1 and conv.attrs["pads"] == ((kh - 1) // 2, (kw - 1) // 2) * 2


def _constant_inputs(graph: Graph, node: Node, start: int) -> bool:
    return all(graph.nodes[r.node].constant for r in node.inputs[start:])


_PADDINGS = ("SAME", "VALID")
_ACTIVATIONS = ("none", "relu")


def _hand_written_id(stride: int, padding: str, kind: int) -> int:
    """TASO's ids 0-11: for stride in (1, 2), padding in (SAME, VALID): conv_relu, conv_batch, conv_mul."""
    return 6 * (stride - 1) + 3 * _PADDINGS.index(padding) + kind


# ---------------------------------------------------------------- fusions into a convolution (TASO 0-11)


@dataclass(frozen=True)
class _ConvFusion(Rule):
    """Shared matching for `conv -> op` fusions: the conv has no activation, the given stride and padding
    class, and no other consumer."""

    stride: int
    padding: str
    radius = 1

    def _conv(self, graph: Graph, ref: Ref) -> tuple[int, Node] | None:
        conv_id, conv = _producer(graph, ref)
        if (conv.op == "conv2d" and conv.attrs["activation"] == "none" and _stride(conv) == self.stride
                and padding_mode(graph, conv) == self.padding and _sole_use(graph, conv_id)):
            return conv_id, conv
        return None


@dataclass(frozen=True)
class FuseConvRelu(_ConvFusion):
    """relu(conv(x, w)) -> conv(x, w, activation=relu). TASO 0/3/6/9 (and generated 82 = rule 64)."""

    root_op = "relu"
    max_node_growth = 0
    max_edge_growth = 0

    @property
    def taso_ids(self) -> tuple[int, ...]:
        own = _hand_written_id(self.stride, self.padding, 0)
        return (own, 82) if own == 0 else (own,)

    def match_at(self, graph, root):
        found = self._conv(graph, graph.nodes[root].inputs[0])
        if found:
            yield root, found[0]

    def build(self, patch, location):
        relu, conv_id = location
        conv = patch.node(conv_id)
        fused = patch.add("conv2d", conv.inputs, **{**conv.attrs, "activation": "relu"})
        patch.replace(Ref(relu), fused)
        patch.remove(relu, conv_id)


@dataclass(frozen=True)
class FuseConvBatchNorm(_ConvFusion):
    """batchnorm(conv(x, w [, b])) -> conv(x, w * s, (b - mean) * s + beta), s = gamma / sqrt(var + eps).

    TASO 1/4/7/10. TASO adds the folded bias with a separate broadcast add; our conv takes a bias.
    """

    root_op = "batchnorm"
    max_node_growth = 1
    max_edge_growth = 3

    @property
    def taso_ids(self) -> tuple[int, ...]:
        return (_hand_written_id(self.stride, self.padding, 1),)

    def match_at(self, graph, root):
        bn = graph.nodes[root]
        found = self._conv(graph, bn.inputs[0])
        if found and len(bn.shape) == 4 and _constant_inputs(graph, bn, 1):
            yield root, found[0]

    def build(self, patch, location):
        bn_id, conv_id = location
        bn, conv = patch.node(bn_id), patch.node(conv_id)
        x, w, *bias = conv.inputs
        scale, shift, mean, var = bn.inputs[1:]
        eps = bn.attrs["eps"]
        weight = patch.add("bn_fold_weight", [w, scale, var], eps=eps)
        folded_bias = patch.add("bn_fold_bias", [scale, shift, mean, var, *bias], eps=eps)
        patch.replace(Ref(bn_id), patch.add("conv2d", [x, weight, folded_bias], **conv.attrs))
        patch.remove(bn_id, conv_id)


@dataclass(frozen=True)
class FuseConvMul(_ConvFusion):
    """conv(x, w [, b]) * c -> conv(x, w * c, b * c) for a constant scalar or per-channel c. TASO 2/5/8/11."""

    root_op = "mul"
    max_node_growth = 3
    max_edge_growth = 4

    @property
    def taso_ids(self) -> tuple[int, ...]:
        return (_hand_written_id(self.stride, self.padding, 2),)

    def match_at(self, graph, root):
        mul = graph.nodes[root]
        for side in (0, 1):
            found = self._conv(graph, mul.inputs[side])
            factor = mul.inputs[1 - side]
            if found and graph.nodes[factor.node].constant and mul.shape == found[1].shape:
                shape = (1,) * (4 - len(graph.shape(factor))) + graph.shape(factor)
                if len(shape) == 4 and shape[0] == 1 and shape[1] in (1, found[1].shape[1]) and shape[2:] == (1, 1):
                    yield root, found[0]

    def build(self, patch, location):
        mul_id, conv_id = location
        mul, conv = patch.node(mul_id), patch.node(conv_id)
        factor = mul.inputs[1] if mul.inputs[0].node == conv_id else mul.inputs[0]
        count = math.prod(patch.shape(factor))  # 1 or the number of output channels
        x, w, *bias = conv.inputs
        inputs = [x, patch.add("mul", [w, patch.add("reshape", [factor], shape=(count, 1, 1, 1))])]
        if bias:
            inputs.append(patch.add("mul", [bias[0], patch.add("reshape", [factor], shape=(count,))]))
        patch.replace(Ref(mul_id), patch.add("conv2d", inputs, **conv.attrs))
        patch.remove(mul_id, conv_id)


# ---------------------------------------------------------------- merging convolutions


def _sibling_convs(graph: Graph, root: int) -> Iterator[tuple[Node, int, Node]]:
    """Convs reading the same input tensor as conv `root`, with larger ids (each pair once)."""
    conv = graph.nodes[root]
    if conv.op != "conv2d":
        return
    for use in graph.uses(conv.inputs[0].node):
        other = graph.nodes[use.node]
        if (use.node > root and use.input_index == 0 and other.op == "conv2d"
                and other.inputs[0] == conv.inputs[0]):
            yield conv, use.node, other


def _mergeable(graph: Graph, a: Node, b: Node, activation: str) -> bool:
    return (a.attrs["groups"] == b.attrs["groups"] == 1 and a.attrs["stride"] == b.attrs["stride"]
            and a.attrs["activation"] == b.attrs["activation"] == activation
            and len(a.inputs) == len(b.inputs) and _constant_inputs(graph, a, 1) and _constant_inputs(graph, b, 1))


@dataclass(frozen=True)
class MergeConvs(Rule):
    """Two convs on the same input -> one conv over concatenated weights, then split.

    `enlarge=True` (TASO 12/13, enlarge_merge_convs): the kernels differ; both are zero-padded to the
    larger size first, which needs centred ("same") padding; TASO restricts this to stride 1, any
    common stride is equivalent. `enlarge=False`: equal kernels and padding (TASO 145 without
    activation; with ReLU TASO has only the concat form, 146).
    """

    activation: str
    enlarge: bool
    root_op = "conv2d"
    radius = 3
    max_node_growth = 5
    max_edge_growth = 7

    @property
    def taso_ids(self) -> tuple[int, ...]:
        if self.enlarge:
            return (12 + _ACTIVATIONS.index(self.activation),)
        return (145,) if self.activation == "none" else ()

    def match_at(self, graph, root):
        for a, other_id, b in _sibling_convs(graph, root):
            if not _mergeable(graph, a, b, self.activation):
                continue
            ka, kb = graph.shape(a.inputs[1])[2:], graph.shape(b.inputs[1])[2:]
            if self.enlarge:
                ok = ka != kb and _centred(a, graph) and _centred(b, graph) and a.shape[2:] == b.shape[2:]
            else:
                ok = ka == kb and a.attrs["pads"] == b.attrs["pads"]
            if ok:
                yield root, other_id

    def build(self, patch, location):
        a, b = (patch.node(i) for i in location)
        kernels = [patch.shape(n.inputs[1])[2:] for n in (a, b)]
        kernel = (max(k[0] for k in kernels), max(k[1] for k in kernels))
        weights = [n.inputs[1] if k == kernel else patch.add("enlarge", [n.inputs[1]], kernel=kernel)
                   for n, k in zip((a, b), kernels)]
        inputs = [a.inputs[0], patch.add("concat", weights, axis=0)]
        if len(a.inputs) == 3:
            inputs.append(patch.add("concat", [a.inputs[2], b.inputs[2]], axis=0))
        pads = ((kernel[0] - 1) // 2, (kernel[1] - 1) // 2) * 2 if self.enlarge else a.attrs["pads"]
        merged = patch.add("conv2d", inputs, **{**a.attrs, "pads": pads})
        parts = patch.add_outputs("split", [merged], axis=1, sizes=(a.shape[1], b.shape[1]))
        for node_id, part in zip(location, parts):
            patch.replace(Ref(node_id), part)
        patch.remove(*location)


@dataclass(frozen=True)
class MergeGroupConvs(Rule):
    """conv(x, w, groups=g) -> conv(x, merge_gconv(w), groups=g/2): pairs of groups share a dense block.

    TASO 14-17 (merge_group_convs at stride 1/2, activation none/relu, SAME padding).
    """

    stride: int
    activation: str
    root_op = "conv2d"
    radius = 1
    max_node_growth = 1
    max_edge_growth = 1

    @property
    def taso_ids(self) -> tuple[int, ...]:
        return (14 + 2 * (self.stride - 1) + _ACTIVATIONS.index(self.activation),)

    def match_at(self, graph, root):
        conv = graph.nodes[root]
        groups = conv.attrs["groups"]
        if (groups >= 2 and groups % 2 == 0 and _stride(conv) == self.stride
                and conv.attrs["activation"] == self.activation and padding_mode(graph, conv) == "SAME"
                and _constant_inputs(graph, conv, 1)):
            yield (root,)

    def build(self, patch, location):
        (conv_id,) = location
        conv = patch.node(conv_id)
        groups = conv.attrs["groups"]
        x, w, *bias = conv.inputs
        merged = patch.add("merge_gconv", [w], groups=groups, count=2)
        patch.replace(Ref(conv_id), patch.add("conv2d", [x, merged, *bias], **{**conv.attrs, "groups": groups // 2}))
        patch.remove(conv_id)


@dataclass(frozen=True)
class MergeConvsIntoAdd(Rule):
    """conv(x1, w1) + conv(x2, w2) -> conv(concat(x1, x2), concat(w1, w2)) along channels. TASO 116."""

    root_op = "add"
    radius = 2
    max_node_growth = 1
    max_edge_growth = 3

    @property
    def taso_ids(self) -> tuple[int, ...]:
        return (116,)

    def match_at(self, graph, root):
        add = graph.nodes[root]
        (a_id, a), (b_id, b) = (_producer(graph, r) for r in add.inputs)
        if (a_id != b_id and a.op == b.op == "conv2d" and _mergeable(graph, a, b, "none")
                and a.attrs["pads"] == b.attrs["pads"] and a.shape == b.shape == add.shape
                and graph.shape(a.inputs[1])[2:] == graph.shape(b.inputs[1])[2:]
                and graph.shape(a.inputs[0])[2:] == graph.shape(b.inputs[0])[2:]
                and _sole_use(graph, a_id) and _sole_use(graph, b_id)):
            yield root, a_id, b_id

    def build(self, patch, location):
        add_id, a_id, b_id = location
        a, b = patch.node(a_id), patch.node(b_id)
        inputs = [patch.add("concat", [a.inputs[0], b.inputs[0]], axis=1),
                  patch.add("concat", [a.inputs[1], b.inputs[1]], axis=1)]
        if len(a.inputs) == 3:
            inputs.append(patch.add("add", [a.inputs[2], b.inputs[2]]))
        patch.replace(Ref(add_id), patch.add("conv2d", inputs, **a.attrs))
        patch.remove(add_id, a_id, b_id)


# ---------------------------------------------------------------- matmul identities


@dataclass(frozen=True)
class MergeMatmuls(Rule):
    """x @ A, x @ B -> split(x @ concat(A, B)) for constant A, B (TASO 95; the Q/K/V merge behind BERT's gains)."""

    root_op = "matmul"
    radius = 3
    max_node_growth = 1
    max_edge_growth = 1

    @property
    def taso_ids(self) -> tuple[int, ...]:
        return (95,)

    def match_at(self, graph, root):
        a = graph.nodes[root]
        if len(graph.shape(a.inputs[1])) != 2 or not _constant_inputs(graph, a, 1):
            return
        for use in graph.uses(a.inputs[0].node):
            b = graph.nodes[use.node]
            if (use.node > root and use.input_index == 0 and b.op == "matmul" and b.inputs[0] == a.inputs[0]
                    and b.attrs == a.attrs and len(graph.shape(b.inputs[1])) == 2 and _constant_inputs(graph, b, 1)):
                yield root, use.node

    def build(self, patch, location):
        a, b = (patch.node(i) for i in location)
        merged = patch.add("matmul", [a.inputs[0], patch.add("concat", [a.inputs[1], b.inputs[1]], axis=1)],
                           **a.attrs)
        parts = patch.add_outputs("split", [merged], axis=len(a.shape) - 1, sizes=(a.shape[-1], b.shape[-1]))
        for node_id, part in zip(location, parts):
            patch.replace(Ref(node_id), part)
        patch.remove(*location)


@dataclass(frozen=True)
class AssociateMatmul(Rule):
    """(x @ A) @ B -> x @ (A @ B) for 2-D A, B; free when A and B are weights. TASO 18."""

    root_op = "matmul"
    radius = 1
    max_node_growth = 0
    max_edge_growth = 0

    @property
    def taso_ids(self) -> tuple[int, ...]:
        return (18,)

    def match_at(self, graph, root):
        outer = graph.nodes[root]
        inner_id, inner = _producer(graph, outer.inputs[0])
        if (inner.op == "matmul" and inner.attrs["activation"] == "none" and _sole_use(graph, inner_id)
                and len(graph.shape(inner.inputs[1])) == 2 and len(graph.shape(outer.inputs[1])) == 2):
            yield root, inner_id

    def build(self, patch, location):
        outer_id, inner_id = location
        outer, inner = patch.node(outer_id), patch.node(inner_id)
        product = patch.add("matmul", [inner.inputs[1], outer.inputs[1]])
        patch.replace(Ref(outer_id), patch.add("matmul", [inner.inputs[0], product], **outer.attrs))
        patch.remove(outer_id, inner_id)


# ---------------------------------------------------------------- relu / concat / split identities


@dataclass(frozen=True)
class ConcatOfRelus(Rule):
    """concat(relu(a), relu(b), ...) -> relu(concat(a, b, ...)), any axis and arity.

    TASO 87/98/112/137 are its two-input cases (2-D and 4-D, axis 0 and 1).
    """

    root_op = "concat"
    radius = 1
    max_node_growth = 0
    max_edge_growth = 0

    @property
    def taso_ids(self) -> tuple[int, ...]:
        return (87, 98, 112, 137)

    def match_at(self, graph, root):
        relus = [r.node for r in graph.nodes[root].inputs]
        if len(relus) >= 2 and all(graph.nodes[i].op == "relu" and _sole_use(graph, i) for i in relus):
            yield (root, *relus)

    def build(self, patch, location):
        concat_id, *relus = location
        joined = patch.add("concat", [patch.node(i).inputs[0] for i in relus], **patch.node(concat_id).attrs)
        patch.replace(Ref(concat_id), patch.add("relu", [joined]))
        patch.remove(*location)


@dataclass(frozen=True)
class SplitConcat(Rule):
    """concat(split(x)) -> x when the concat rejoins all parts in order on the split axis.

    No TASO id: TASO reaches the same graphs with concat-form rules (94, 143, 146) that merge and
    re-join in one step; here merges always split and this rule removes the split-concat pair.
    """

    root_op = "concat"
    radius = 1
    max_node_growth = 0
    max_edge_growth = 0

    @property
    def taso_ids(self) -> tuple[int, ...]:
        return ()

    def match_at(self, graph, root):
        concat = graph.nodes[root]
        split_id = concat.inputs[0].node
        split = graph.nodes[split_id]
        rank = len(concat.shape)
        if (split.op == "split" and concat.inputs == tuple(Ref(split_id, k) for k in range(len(split.shapes)))
                and concat.attrs["axis"] % rank == split.attrs["axis"] % rank):
            yield root, split_id

    def build(self, patch, location):
        concat_id, split_id = location
        patch.replace(Ref(concat_id), patch.node(split_id).inputs[0])
        patch.remove(concat_id)


RULES: tuple[Rule, ...] = (
    *(rule(stride, padding) for stride in (1, 2) for padding in _PADDINGS
      for rule in (FuseConvRelu, FuseConvBatchNorm, FuseConvMul)),
    *(MergeConvs(activation, enlarge=True) for activation in _ACTIVATIONS),
    *(MergeGroupConvs(stride, activation) for stride in (1, 2) for activation in _ACTIVATIONS),
    *(MergeConvs(activation, enlarge=False) for activation in _ACTIVATIONS),
    MergeConvsIntoAdd(),
    MergeMatmuls(),
    AssociateMatmul(),
    ConcatOfRelus(),
    SplitConcat(),
)
