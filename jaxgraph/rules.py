"""TASO-style graph substitutions: each rule finds every location where it applies and rewrites one.

A rule is data plus two functions. The data: the op of its *root* node (`root_op`), the `radius` (every
node a match reads lies within that many undirected hops of the root, which is what lets
`LocationIndex` re-match only around a rewrite), the TASO xfer ids it implements, and upper bounds on
the nodes and edges a rewrite adds (for fixed-capacity layouts). The functions: `match_at(graph, root)`
yields every location rooted at `root` (a location is a tuple of node ids whose first entry is the
root) and `build(patch, location)` writes the replacement. A rule family is a pair of such functions
taking keyword parameters (stride, padding, activation, ...) bound by `make_rule`; adding a rule is
one `make_rule` call. All rules are checked by running both sides on random inputs
(tests/jaxgraph/test_rules.py), the numerical counterpart of TASO's Z3 proofs.

`RULES` is the xfer list of the RL environment; ids 0-17 coincide with TASO's hand-written xfers 0-17
and every rule records the TASO ids it implements (`taso_ids`; see docs/jaxgraph.md). These are the
hand-written families, each saying why it is not a pattern; TASO's generated rules are data
(`jaxgraph.patterns`, whose `TASO_RULES` extends `RULES`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from jaxgraph.graph import Delta, Graph, Node, Patch, Ref

Location = tuple[int, ...]
Matcher = Callable[[Graph, int], Iterable[Location]]
Builder = Callable[[Patch, Location], None]


@dataclass(frozen=True)
class Rule:
    """A pattern and its replacement: facts about the pattern, TASO ids, growth bounds, `match_at`, `build`.

    `family` and `params` name the rule (`name` reads like a constructor call, e.g.
    `FuseConvRelu(stride=1, padding='SAME')`); `match_at` and `build` already have the params bound. A build
    removes the nodes it replaces before it adds any, so a new node never shares (`Patch.add`) one that goes.
    """

    family: str
    params: tuple[tuple[str, Any], ...]
    root_op: str
    radius: int
    taso_ids: tuple[int, ...]  # TASO xfer ids (0-150, see reference/taso_substitutions.txt)
    max_node_growth: int  # upper bounds on nodes/edges a rewrite adds, for fixed-capacity layouts
    max_edge_growth: int
    match_at: Matcher = field(compare=False, repr=False)  # every location rooted at a node of `root_op`
    build: Builder = field(compare=False, repr=False)  # write the replacement of a location into a patch
    pattern: Any = field(default=None, compare=False, repr=False)  # a data rule's `pattern_data.Pattern`

    @property
    def name(self) -> str:
        return f"{self.family}({', '.join(f'{k}={v!r}' for k, v in self.params)})"

    def param(self, key: str) -> Any:
        """The value of one parameter of the rule's family."""
        return dict(self.params)[key]

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


def make_rule(family: str, root_op: str, radius: int, taso_ids: Iterable[int], growth: tuple[int, int],
              match_at: Callable[..., Iterable[Location]], build: Callable[..., None], **params: Any) -> Rule:
    """A `Rule` of a family: `match_at(graph, root, **params)` and `build(patch, location, **params)`
    get `params` bound; `growth` is (max added nodes, max added edges)."""
    return Rule(family, tuple(params.items()), root_op, radius, tuple(taso_ids), *growth,
                functools.partial(match_at, **params), functools.partial(build, **params))


# ---------------------------------------------------------------- matching helpers


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


def _siblings(graph: Graph, root: int) -> Iterator[tuple[Node, int, Node]]:
    """Nodes of the root's op reading the root's first input tensor as their first input, the root excepted.
    Each pair comes in both orders (TASO matches both mappings of a two-op pattern): which node's weights come
    first is then the agent's choice, never a tie broken by node ids, which a rewrite makes as content hashes.
    Where that tensor is constant, so are both nodes, and a constant weight of one could be computed from the other
    (their merge would then close a cycle): the weights must be leaves there (`_leaf_inputs`)."""
    node = graph.nodes[root]
    shared_constant = graph.nodes[node.inputs[0].node].constant
    for use in graph.uses(node.inputs[0].node):
        other = graph.nodes[use.node]
        if (use.node != root and use.input_index == 0 and other.op == node.op and other.inputs[0] == node.inputs[0]
                and (not shared_constant or (_leaf_inputs(graph, node.inputs[1:])
                                             and _leaf_inputs(graph, other.inputs[1:])))):
            yield node, use.node, other


def _leaf_inputs(graph: Graph, refs) -> bool:
    """Every tensor of `refs` is a graph input or a weight."""
    return all(graph.nodes[r.node].op in ("input", "weight") for r in refs)


_PADDINGS = ("SAME", "VALID")
_ACTIVATIONS = ("none", "relu")


def _hand_written_id(stride: int, padding: str, kind: int) -> int:
    """TASO's ids 0-11: for stride in (1, 2), padding in (SAME, VALID): conv_relu, conv_batch, conv_mul."""
    return 6 * (stride - 1) + 3 * _PADDINGS.index(padding) + kind


# ---------------------------------------------------------------- fusions into a convolution (TASO 0-11)


def _fusable_conv(graph: Graph, ref: Ref, stride: int, padding: str) -> int | None:
    """The conv producing `ref` if it has no activation, the given stride and padding class, and no
    other consumer."""
    conv = graph.nodes[ref.node]
    if (conv.op == "conv2d" and conv.attrs["activation"] == "none" and _stride(conv) == stride
            and padding_mode(graph, conv) == padding and _sole_use(graph, ref.node)):
        return ref.node
    return None


def _match_conv_relu(graph, root, *, stride, padding):
    conv_id = _fusable_conv(graph, graph.nodes[root].inputs[0], stride, padding)
    if conv_id is not None:
        yield root, conv_id


def _build_conv_relu(patch, location, **_):
    relu, conv_id = location
    conv = patch.node(conv_id)
    patch.remove(relu, conv_id)
    fused = patch.add("conv2d", conv.inputs, **{**conv.attrs, "activation": "relu"})
    patch.replace(Ref(relu), fused)


def _match_conv_batchnorm(graph, root, *, stride, padding):
    bn = graph.nodes[root]
    conv_id = _fusable_conv(graph, bn.inputs[0], stride, padding)
    if conv_id is not None and len(bn.shape) == 4 and _constant_inputs(graph, bn, 1):
        yield root, conv_id


def _build_conv_batchnorm(patch, location, **_):
    """batchnorm(conv(x, w [, b])) -> conv(x, w * s, (b - mean) * s + beta), s = gamma / sqrt(var + eps).
    TASO adds the folded bias with a separate broadcast add; our conv takes a bias."""
    bn_id, conv_id = location
    bn, conv = patch.node(bn_id), patch.node(conv_id)
    x, w, *bias = conv.inputs
    scale, shift, mean, var = bn.inputs[1:]
    eps = bn.attrs["eps"]
    patch.remove(bn_id, conv_id)
    weight = patch.add("bn_fold_weight", [w, scale, var], eps=eps)
    folded_bias = patch.add("bn_fold_bias", [scale, shift, mean, var, *bias], eps=eps)
    patch.replace(Ref(bn_id), patch.add("conv2d", [x, weight, folded_bias], **conv.attrs))


def _match_conv_mul(graph, root, *, stride, padding):
    """conv * c for a constant scalar or per-channel c (either operand order)."""
    mul = graph.nodes[root]
    for side in (0, 1):
        conv_id = _fusable_conv(graph, mul.inputs[side], stride, padding)
        factor = mul.inputs[1 - side]
        if conv_id is not None and graph.nodes[factor.node].constant and mul.shape == graph.nodes[conv_id].shape:
            shape = (1,) * (4 - len(graph.shape(factor))) + graph.shape(factor)
            if len(shape) == 4 and shape[0] == 1 and shape[1] in (1, mul.shape[1]) and shape[2:] == (1, 1):
                yield root, conv_id


def _build_conv_mul(patch, location, **_):
    """conv(x, w [, b]) * c -> conv(x, w * c, b * c)."""
    mul_id, conv_id = location
    mul, conv = patch.node(mul_id), patch.node(conv_id)
    factor = mul.inputs[1] if mul.inputs[0].node == conv_id else mul.inputs[0]
    count = math.prod(patch.shape(factor))  # 1 or the number of output channels
    x, w, *bias = conv.inputs
    patch.remove(mul_id, conv_id)
    inputs = [x, patch.add("mul", [w, patch.add("reshape", [factor], shape=(count, 1, 1, 1))])]
    if bias:
        inputs.append(patch.add("mul", [bias[0], patch.add("reshape", [factor], shape=(count,))]))
    patch.replace(Ref(mul_id), patch.add("conv2d", inputs, **conv.attrs))


def fuse_conv_relu(stride: int, padding: str) -> Rule:
    """relu(conv(x, w)) -> conv(x, w, activation=relu). TASO 0/3/6/9 (and generated 82 = rule 64).
    Not a pattern: any kernel and a bias input (a pattern conv has a fixed kernel and no bias)."""
    own = _hand_written_id(stride, padding, 0)
    return make_rule("FuseConvRelu", "relu", 1, (own, 82) if own == 0 else (own,), (0, 0),
                     _match_conv_relu, _build_conv_relu, stride=stride, padding=padding)


def fuse_conv_batchnorm(stride: int, padding: str) -> Rule:
    """batchnorm(conv) -> conv with folded weight and bias. TASO 1/4/7/10.
    Not a pattern: it writes the weight-folding ops `bn_fold_weight` and `bn_fold_bias`."""
    return make_rule("FuseConvBatchNorm", "batchnorm", 1, (_hand_written_id(stride, padding, 1),), (1, 3),
                     _match_conv_batchnorm, _build_conv_batchnorm, stride=stride, padding=padding)


def fuse_conv_mul(stride: int, padding: str) -> Rule:
    """conv * constant (scalar or per channel) -> conv with scaled weight and bias. TASO 2/5/8/11.
    Not a pattern: it reshapes a broadcast constant into the weight's layout."""
    return make_rule("FuseConvMul", "mul", 1, (_hand_written_id(stride, padding, 2),), (3, 4),
                     _match_conv_mul, _build_conv_mul, stride=stride, padding=padding)


# ---------------------------------------------------------------- merging siblings and convolutions


def _mergeable(graph: Graph, a: Node, b: Node, activation: str) -> bool:
    return (a.attrs["groups"] == b.attrs["groups"] == 1 and a.attrs["stride"] == b.attrs["stride"]
            and a.attrs["activation"] == b.attrs["activation"] == activation
            and len(a.inputs) == len(b.inputs) and _constant_inputs(graph, a, 1) and _constant_inputs(graph, b, 1))


def _merge_siblings(patch: Patch, location: Location, op: str, axis: int, weights: list[Ref], **attrs: Any) -> None:
    """Replace sibling `op` nodes that share their first input by one `op` over their weights concatenated
    on `axis` (and their biases, if any, on axis 0), followed by a split of its output on the last axis
    for matmul and the channel axis for conv2d."""
    nodes = [patch.node(i) for i in location]
    patch.remove(*location)
    inputs = [nodes[0].inputs[0], patch.add("concat", weights, axis=axis)]
    if len(nodes[0].inputs) == 3:
        inputs.append(patch.add("concat", [n.inputs[2] for n in nodes], axis=0))
    merged = patch.add(op, inputs, **attrs)
    out_axis = len(nodes[0].shape) - 1 if op == "matmul" else 1
    parts = patch.add_outputs("split", [merged], axis=out_axis, sizes=tuple(n.shape[out_axis] for n in nodes))
    for node_id, part in zip(location, parts):
        patch.replace(Ref(node_id), part)


def _match_merge_convs(graph, root, *, activation, enlarge):
    for a, other_id, b in _siblings(graph, root):
        if not _mergeable(graph, a, b, activation):
            continue
        ka, kb = graph.shape(a.inputs[1])[2:], graph.shape(b.inputs[1])[2:]
        if enlarge:
            ok = ka != kb and _centred(a, graph) and _centred(b, graph) and a.shape[2:] == b.shape[2:]
        else:
            ok = ka == kb and a.attrs["pads"] == b.attrs["pads"]
        if ok:
            yield root, other_id


def _build_merge_convs(patch, location, *, enlarge, **_):
    a, b = (patch.node(i) for i in location)
    kernels = [patch.shape(n.inputs[1])[2:] for n in (a, b)]
    kernel = (max(k[0] for k in kernels), max(k[1] for k in kernels))
    weights = [n.inputs[1] if k == kernel else patch.add("enlarge", [n.inputs[1]], kernel=kernel)
               for n, k in zip((a, b), kernels)]
    pads = ((kernel[0] - 1) // 2, (kernel[1] - 1) // 2) * 2 if enlarge else a.attrs["pads"]
    _merge_siblings(patch, location, "conv2d", 0, weights, **{**a.attrs, "pads": pads})


def merge_convs(activation: str, enlarge: bool) -> Rule:
    """Two convs on the same input -> one conv over concatenated weights, then split.

    `enlarge=True` (TASO 12/13, enlarge_merge_convs): the kernels differ; both are zero-padded to the
    larger size first, which needs centred ("same") padding; TASO restricts this to stride 1, any
    common stride is equivalent. `enlarge=False`: equal kernels and padding (TASO 145 without
    activation; with ReLU TASO has only the concat form, 146).
    Not a pattern: it enlarges kernels and concatenates biases of any kernel size.
    """
    if enlarge:
        taso_ids: tuple[int, ...] = (12 + _ACTIVATIONS.index(activation),)
    else:
        taso_ids = (145,) if activation == "none" else ()
    return make_rule("MergeConvs", "conv2d", 3, taso_ids, (5, 7), _match_merge_convs, _build_merge_convs,
                     activation=activation, enlarge=enlarge)


def _match_merge_group_convs(graph, root, *, stride, activation):
    conv = graph.nodes[root]
    groups = conv.attrs["groups"]
    if (groups >= 2 and groups % 2 == 0 and _stride(conv) == stride and conv.attrs["activation"] == activation
            and padding_mode(graph, conv) == "SAME" and _constant_inputs(graph, conv, 1)):
        yield (root,)


def _build_merge_group_convs(patch, location, **_):
    (conv_id,) = location
    conv = patch.node(conv_id)
    groups = conv.attrs["groups"]
    x, w, *bias = conv.inputs
    patch.remove(conv_id)
    merged = patch.add("merge_gconv", [w], groups=groups, count=2)
    patch.replace(Ref(conv_id), patch.add("conv2d", [x, merged, *bias], **{**conv.attrs, "groups": groups // 2}))


def merge_group_convs(stride: int, activation: str) -> Rule:
    """conv(x, w, groups=g) -> conv(x, merge_gconv(w), groups=g/2): pairs of groups share a dense block.
    TASO 14-17 (merge_group_convs at stride 1/2, activation none/relu, SAME padding).
    Not a pattern: it regroups the weight with `merge_gconv` (pattern convs have one group)."""
    return make_rule("MergeGroupConvs", "conv2d", 1, (14 + 2 * (stride - 1) + _ACTIVATIONS.index(activation),),
                     (1, 1), _match_merge_group_convs, _build_merge_group_convs, stride=stride, activation=activation)


def _match_merge_convs_into_add(graph, root):
    add = graph.nodes[root]
    (a_id, b_id) = (r.node for r in add.inputs)
    a, b = graph.nodes[a_id], graph.nodes[b_id]
    if (a_id != b_id and a.op == b.op == "conv2d" and _mergeable(graph, a, b, "none")
            and a.attrs["pads"] == b.attrs["pads"] and a.shape == b.shape == add.shape
            and graph.shape(a.inputs[1])[2:] == graph.shape(b.inputs[1])[2:]
            and graph.shape(a.inputs[0])[2:] == graph.shape(b.inputs[0])[2:]
            and _sole_use(graph, a_id) and _sole_use(graph, b_id)):
        yield root, a_id, b_id


def _build_merge_convs_into_add(patch, location):
    add_id, a_id, b_id = location
    a, b = patch.node(a_id), patch.node(b_id)
    patch.remove(add_id, a_id, b_id)
    inputs = [patch.add("concat", [a.inputs[0], b.inputs[0]], axis=1),
              patch.add("concat", [a.inputs[1], b.inputs[1]], axis=1)]
    if len(a.inputs) == 3:
        inputs.append(patch.add("add", [a.inputs[2], b.inputs[2]]))
    patch.replace(Ref(add_id), patch.add("conv2d", inputs, **a.attrs))


def merge_convs_into_add() -> Rule:
    """conv(x1, w1) + conv(x2, w2) -> conv(concat(x1, x2), concat(w1, w2)) along channels. TASO 116.
    Not a pattern: the convs may carry biases, which it adds."""
    return make_rule("MergeConvsIntoAdd", "add", 2, (116,), (1, 3), _match_merge_convs_into_add,
                     _build_merge_convs_into_add)


# ---------------------------------------------------------------- matmul identities


def _match_merge_matmuls(graph, root):
    a = graph.nodes[root]
    if len(graph.shape(a.inputs[1])) != 2 or not _constant_inputs(graph, a, 1):
        return
    for _, other_id, b in _siblings(graph, root):
        if b.attrs == a.attrs and len(graph.shape(b.inputs[1])) == 2 and _constant_inputs(graph, b, 1):
            yield root, other_id


def _build_merge_matmuls(patch, location):
    a, b = (patch.node(i) for i in location)
    _merge_siblings(patch, location, "matmul", 1, [a.inputs[1], b.inputs[1]], **a.attrs)


def merge_matmuls() -> Rule:
    """x @ A, x @ B -> split(x @ concat(A, B)) for constant A, B (TASO 95; the Q/K/V merge).
    Not a pattern: any shared activation (TASO's pattern 95 has none only)."""
    return make_rule("MergeMatmuls", "matmul", 3, (95,), (1, 1), _match_merge_matmuls, _build_merge_matmuls)


def _match_associate_matmul(graph, root):
    outer = graph.nodes[root]
    inner_id = outer.inputs[0].node
    inner = graph.nodes[inner_id]
    if (inner.op == "matmul" and inner.attrs["activation"] == "none" and _sole_use(graph, inner_id)
            and len(graph.shape(inner.inputs[1])) == 2 and len(graph.shape(outer.inputs[1])) == 2):
        yield root, inner_id


def _build_associate_matmul(patch, location):
    outer_id, inner_id = location
    outer, inner = patch.node(outer_id), patch.node(inner_id)
    patch.remove(outer_id, inner_id)
    product = patch.add("matmul", [inner.inputs[1], outer.inputs[1]])
    patch.replace(Ref(outer_id), patch.add("matmul", [inner.inputs[0], product], **outer.attrs))


def associate_matmul() -> Rule:
    """(x @ A) @ B -> x @ (A @ B) for 2-D A, B; free when A and B are weights. TASO 18.
    Not a pattern: any activation on the outer matmul (TASO's pattern 18 has none only)."""
    return make_rule("AssociateMatmul", "matmul", 1, (18,), (0, 0), _match_associate_matmul,
                     _build_associate_matmul)


def _bias_add(graph: Graph, node_id: int) -> int | None:
    """The sole consumer of `node_id` if it adds a constant vector over the last axis (a Linear's bias)."""
    uses = graph.uses(node_id)
    if len(uses) != 1 or node_id in graph.output_nodes:
        return None
    add = graph.nodes[uses[0].node]
    bias = add.inputs[1 - uses[0].input_index] if add.op == "add" else None
    if bias is None or not graph.nodes[bias.node].constant or add.shape != graph.nodes[node_id].shape:
        return None
    if graph.nodes[node_id].constant and not _leaf_inputs(graph, [bias]):
        return None  # a constant bias could be computed from a constant sibling: a leaf, as `_siblings` asks
    return uses[0].node if graph.shape(bias) == (add.shape[-1],) else None


def _match_merge_linears(graph, root):
    a = graph.nodes[root]
    add_a = _bias_add(graph, root)
    if (add_a is None or a.attrs["activation"] != "none" or len(graph.shape(a.inputs[1])) != 2
            or not _constant_inputs(graph, a, 1)):
        return
    for _, other_id, b in _siblings(graph, root):
        add_b = _bias_add(graph, other_id)
        if (add_b is not None and b.attrs == a.attrs and len(graph.shape(b.inputs[1])) == 2
                and _constant_inputs(graph, b, 1)):
            yield root, other_id, add_a, add_b


def _build_merge_linears(patch, location):
    a_id, b_id, add_a, add_b = location
    a, b = patch.node(a_id), patch.node(b_id)
    biases = [next(r for r in patch.node(i).inputs if r.node != m) for i, m in ((add_a, a_id), (add_b, b_id))]
    patch.remove(*location)
    merged = patch.add("matmul", [a.inputs[0], patch.add("concat", [a.inputs[1], b.inputs[1]], axis=1)], **a.attrs)
    biased = patch.add("add", [merged, patch.add("concat", biases, axis=0)])
    axis = len(a.shape) - 1
    parts = patch.add_outputs("split", [biased], axis=axis, sizes=(a.shape[-1], b.shape[-1]))
    for node_id, part in zip((add_a, add_b), parts):
        patch.replace(Ref(node_id), part)


def merge_linears() -> Rule:
    """x @ A + a, x @ B + b -> split(x @ concat(A, B) + concat(a, b)) for constant A, B, a, b: the Q/K/V
    projections of a real transformer, biases included, as one Gemm. TASO 95 with the bias adds (TASO's
    BERT had no biases).
    Not a pattern: the bias adds broadcast over rows (pattern adds read equal shapes)."""
    return make_rule("MergeLinears", "matmul", 3, (), (5, 9), _match_merge_linears, _build_merge_linears)


def _match_fold_conv_bias(graph, root):
    add = graph.nodes[root]
    for side in (0, 1):
        conv_id, constant = add.inputs[side].node, add.inputs[1 - side]
        conv = graph.nodes[conv_id]
        if (conv.op == "conv2d" and conv.attrs["activation"] == "none" and _sole_use(graph, conv_id)
                and graph.nodes[constant.node].constant and add.shape == conv.shape):
            shape = (1,) * (4 - len(graph.shape(constant))) + graph.shape(constant)
            if len(shape) == 4 and shape[:2] == (1, conv.shape[1]) and shape[2:] == (1, 1):
                yield root, conv_id


def _build_fold_conv_bias(patch, location):
    add_id, conv_id = location
    add, conv = patch.node(add_id), patch.node(conv_id)
    constant = add.inputs[1] if add.inputs[0].node == conv_id else add.inputs[0]
    patch.remove(add_id, conv_id)
    shift = patch.add("reshape", [constant], shape=(conv.shape[1],))
    x, w, *bias = conv.inputs
    folded = patch.add("add", [bias[0], shift]) if bias else shift
    patch.replace(Ref(add_id), patch.add("conv2d", [x, w, folded], **conv.attrs))


def fold_conv_bias() -> Rule:
    """conv(x, w [, b]) + c -> conv(x, w, b + c) for a constant per-channel c (the bias add a framework
    exports after a bias-free conv). No TASO id (TASO's conv has no bias input).
    Not a pattern: it writes the conv's bias input."""
    return make_rule("FoldConvBias", "add", 1, (), (3, 6), _match_fold_conv_bias, _build_fold_conv_bias)


def _match_split_of_split(graph, root):
    outer = graph.nodes[root]
    inner_id = outer.inputs[0].node
    inner = graph.nodes[inner_id]
    rank = len(outer.shape)
    if (inner.op == "split" and len(graph.ref_uses(outer.inputs[0])) == 1 and outer.inputs[0] not in graph.outputs
            and inner.attrs["axis"] % rank == outer.attrs["axis"] % rank):
        yield root, inner_id


def _build_split_of_split(patch, location):
    outer_id, inner_id = location
    outer, inner = patch.node(outer_id), patch.node(inner_id)
    k = outer.inputs[0].index
    sizes = inner.attrs["sizes"]
    patch.remove(outer_id, inner_id)
    parts = patch.add_outputs("split", inner.inputs, axis=inner.attrs["axis"],
                              sizes=sizes[:k] + outer.attrs["sizes"] + sizes[k + 1:])
    for j in range(len(sizes)):
        if j != k:
            patch.replace(Ref(inner_id, j), parts[j if j < k else j + len(outer.attrs["sizes"]) - 1])
    for j in range(len(outer.attrs["sizes"])):
        patch.replace(Ref(outer_id, j), parts[k + j])


def split_of_split() -> Rule:
    """split(split(x)[k]) on the same axis -> one split of x with part k's sizes spliced in (pairwise
    merges of three or more siblings leave nested splits). No TASO id.
    Not a pattern: splits of any number of parts are matched (pattern splits are targets only)."""
    return make_rule("SplitOfSplit", "split", 1, (), (1, 1), _match_split_of_split, _build_split_of_split)


# ---------------------------------------------------------------- relu / concat / split identities


def _match_concat_of_relus(graph, root):
    relus = [r.node for r in graph.nodes[root].inputs]
    if len(relus) >= 2 and all(graph.nodes[i].op == "relu" and _sole_use(graph, i) for i in relus):
        yield (root, *relus)


def _build_concat_of_relus(patch, location):
    concat_id, *relus = location
    patch.remove(*location)
    joined = patch.add("concat", [patch.node(i).inputs[0] for i in relus], **patch.node(concat_id).attrs)
    patch.replace(Ref(concat_id), patch.add("relu", [joined]))


def concat_of_relus() -> Rule:
    """concat(relu(a), relu(b), ...) -> relu(concat(a, b, ...)), any axis and arity.
    TASO 87/98/112/137 are its two-input cases (2-D and 4-D, axis 0 and 1).
    Not a pattern: any number of inputs (a pattern has a fixed arity)."""
    return make_rule("ConcatOfRelus", "concat", 1, (87, 98, 112, 137), (0, 0), _match_concat_of_relus,
                     _build_concat_of_relus)


def _match_split_concat(graph, root):
    concat = graph.nodes[root]
    split_id = concat.inputs[0].node
    split = graph.nodes[split_id]
    rank = len(concat.shape)
    if (split.op == "split" and concat.inputs == tuple(Ref(split_id, k) for k in range(len(split.shapes)))
            and concat.attrs["axis"] % rank == split.attrs["axis"] % rank):
        yield root, split_id


def _build_split_concat(patch, location):
    concat_id, split_id = location
    patch.replace(Ref(concat_id), patch.node(split_id).inputs[0])
    patch.remove(concat_id)


def split_concat() -> Rule:
    """concat(split(x)) -> x when the concat rejoins all parts in order on the split axis.

    No TASO id: TASO reaches the same graphs with concat-form rules (94, 143, 146) that merge and
    re-join in one step; here merges always split and this rule removes the split-concat pair.
    Not a pattern: splits of any number of parts are matched (pattern splits are targets only).
    """
    return make_rule("SplitConcat", "concat", 1, (), (0, 0), _match_split_concat, _build_split_concat)


RULES: tuple[Rule, ...] = (
    *(rule(stride, padding) for stride in (1, 2) for padding in _PADDINGS
      for rule in (fuse_conv_relu, fuse_conv_batchnorm, fuse_conv_mul)),
    *(merge_convs(activation, enlarge=True) for activation in _ACTIVATIONS),
    *(merge_group_convs(stride, activation) for stride in (1, 2) for activation in _ACTIVATIONS),
    *(merge_convs(activation, enlarge=False) for activation in _ACTIVATIONS),
    merge_convs_into_add(),
    merge_matmuls(),
    associate_matmul(),
    concat_of_relus(),
    split_concat(),
    merge_linears(),
    fold_conv_bias(),
    split_of_split(),
)
