"""Equality saturation over TASO's substitution table (Tensat's method), on the `egglog` e-graph library.

A graph becomes a set of e-graph terms; every data rule of TASO's table (`pattern_data.load_patterns`) becomes
one egglog rule; egglog applies all of them to every match until nothing changes or a limit is hit; then one
term per output is extracted, converted back to a `Graph` and costed by `jaxgraph.cost.cost`, like every other
search.

Encoding. One egglog sort `T` (a tensor) with one constructor per TASO op, attributes as arguments:

- `(Matmul act a b)`; `(Conv act kh kw sh sw pad x w)` of one group, `pad` the first of "VALID", "SAME",
  "HALF" (`pattern_data.conv_pads`) equal to the node's pads, else "P top left bottom right" (no rule matches;
  a stride-2 HALF rule misses nodes whose pads are also SAME: a rule lost, never a wrong one); `(ConvB ... x w
  b)` with a bias (a three-input pattern conv); `(AddB a b)` a broadcasting add; `(Add a b)` and `(Mul a b)` of
  equal shapes (TASO's element-wise ops); `(Relu x)`; `(Concat rank axis a b)` (two inputs, axis normalised);
  `(Transpose perm x)`, `perm` its axes joined by commas ("1,0"); `(Sigmoid x)`, `(Tanh x)`;
- `(Part axis i x a b)`: output `i` of the two-way split of `x` along `axis` whose sizes are those of the
  e-classes `a` and `b` along `axis` (part 0 the first size(a) slices, part 1 the last size(b); the e-node infers
  only where size(a) + size(b) is x's size). The witnesses are the tensors the two parts replace (a rule's mapped
  source tensors, an input graph's split outputs), so a part is its own witness: a witness is an attribute, not
  an input, never extracted. Why witnesses: a split is fixed by its input and its sizes, and a part without them
  (sized by its own e-class) would make two splits of one tensor at different widths one e-node, so
  merges over two rounds plus a concat reassociation unite x @ concat1(A, A) with x @ A (unsound). Sizes as
  integers would need the rules to know shapes, which egglog does not (a data rule's shapes are symbolic);
  an e-class has one shape, so its witness fixes a size at every size the rule matches. Sharing stays where the
  same tensors are split the same way (a data xfer and the hand family that merge one pair make one e-node);
  two splits of one tensor at equal sizes with different witnesses stay two e-nodes (equal, not known equal). A
  two-way split of the input graph is its opaque outputs, each also united with its part;
- `(FoldW key w s v)`, `(FoldB key s b m v)` (batch norm folded into a conv's weight and bias, `key` the batch
  norm's) and `(Enlarge kh kw w)`: weight-only ops the hand-written families make;
- every other node (inputs, weights, pooling, batch norm, a three-way concat, a group conv, ...) and each of its
  outputs is an opaque `(OpN "op" key c1 .. cN)` (N <= `MAX_OPAQUE_INPUTS`): `key` names the node and output, the
  children are its inputs' terms, so rewrites below it still count. A multi-output opaque node's cost is charged
  to its output 0 (the builders' only multi-output ops are splits, which are free).

Each node output is a `let` binding, so a subterm read twice is one e-class (sharing is the e-graph's). Shapes
are not in the e-graph: after saturation they are inferred per e-class in Python, from the input graph's
tensors outward, with the IR's shape inference (equal shapes for add and mul, as the data rules require). An
e-node whose inferred shape differs from its e-class's, or that does not infer (a rule instance whose target
is ill-typed at these shapes: the table's matcher rejects these before rewriting, the e-graph after), is never
extracted.

Rules. Each data rule's source ops are the query (`(= oK (Op ...))`, constraints as constant arguments), its
target ops are `let`s and each mapped pair a `union`. Multi-op sources (two matmuls sharing an input) are
multi-pattern queries, as in Tensat; they run only in the first `multi_iterations` rounds (Tensat's k_multi).
`HAND_RULES` states ten rules of seven hand-written families of `RULES` in egglog, in general form (see
there). Not stated: FuseConvMul (a scale folded into a conv: needs the scale's shape in the query),
MergeGroupConvs (group convs are opaque), MergeConvs enlarging other than 1x1 into 3x3, FoldConvBias (needs a
reshape of the bias), SplitOfSplit (splits of more than two parts are opaque) and ConcatOfRelus (covered by its
data xfers); where a data xfer and a hand form say the same, both run. It also states TransposeInverse (a transpose
of a transpose by the inverse perm is its input, every perm of rank 2 to 4), which the pattern format cannot say.

Extraction. An e-node costs `node_cost` of its op at its e-class's shapes (TASO's backend: no fusion, so a
graph's cost is the sum of its nodes', shape-dependent only); an e-node whose inputs are all constant (weights
only) is folded and free, splits are free. `greedy` is Tensat's greedy extraction: per e-class the e-node of
least tree cost (shared subterms counted once per use), a bottom-up fixpoint. `ilp` is Tensat's ILP (one
binary per e-node, each chosen e-node's children chosen, a topological order against cycles within each
strongly connected component; constant classes, free in any form, chosen before), solved by
`scipy.optimize.milp` (HiGHS) under a time limit: exact when the solver proves optimality, which the result
reports. Both live in `jaxgraph.saturation_extract`.

Rules are stated one egglog command per parse: the bindings copy a program's whole text into every span of its
parsed commands, so a single program of n rules took memory quadratic in n (600 generated rules: 5 GB).
"""

from __future__ import annotations

import functools
import itertools
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from jaxgraph.cost import DEFAULT_COST_MODEL, CostModel, cost, node_cost
from jaxgraph.graph import Graph, GraphBuilder, Ref
from jaxgraph.ops import OPS
from jaxgraph.pattern_data import UNARY_OPS, Pattern, PatternOp, Tensor, conv_pads, infer, load_patterns
from jaxgraph.saturation_extract import extract_greedy, extract_ilp
from jaxgraph.search import SearchResult
from jaxsched.common.arguments import integer, number

EXTRACTIONS = ("greedy", "ilp")
_TASO_OPS = ("Matmul", "Conv", "ConvB", "Add", "AddB", "Mul", "Relu", "Sigmoid", "Tanh", "Concat", "Transpose", "Part",
             "FoldW", "FoldB", "Enlarge")

def _perm_text(perm: Sequence[int]) -> str:
    """A transpose's axes as the string attribute of its e-graph constructor."""
    return ",".join(map(str, perm))


def _transpose_inverses(max_rank: int = 4) -> str:
    """TransposeInverse: a transpose of a transpose by the inverse perm is its input, for every perm of rank 2 to
    `max_rank`."""
    return "".join(
        f'(rule ((= t (Transpose "{_perm_text(np.argsort(perm))}" (Transpose "{_perm_text(perm)}" x)))) '
        f'((union t x)) :ruleset single :name "TransposeInverse {_perm_text(perm)}")\n'
        for rank in range(2, max_rank + 1) for perm in itertools.permutations(range(rank))
        if perm != tuple(range(rank)))


# The hand-written families of `RULES` that egglog can state over these constructors, in general form (any kernel,
# any rank, biases): FuseConvRelu (xfers 0-3, 82), FuseConvBatchnorm (4-7), MergeMatmuls along the last axis
# (95, for batched inputs too), MergeLinears (95 with the bias adds), MergeConvs (116, any kernel, with biases, and
# a 1x1 with a 3x3 by enlarging, 12-13), MergeConvsIntoAdd (145, biased convs) and SplitConcat (concat of a
# split's two parts is its input); then TransposeInverse, a transpose of a transpose by the inverse perm is its input,
# for every perm of rank 2 to 4: an identity the pattern format cannot state (its target has no op), without which
# rules that move a transpose past an op (relu(x) -> transpose(relu(transpose(x)))) grow the e-graph without bound.
HAND_RULES = """
(rule ((= r (Relu c)) (= c (Conv "none" kh kw sh sw p x w)))
      ((union r (Conv "relu" kh kw sh sw p x w))) :ruleset single :name "FuseConvRelu")
(rule ((= r (Relu c)) (= c (ConvB "none" kh kw sh sw p x w b)))
      ((union r (ConvB "relu" kh kw sh sw p x w b))) :ruleset single :name "FuseConvBiasRelu")
(rule ((= o (Op5 "batchnorm" k c s b m v)) (= c (Conv "none" kh kw sh sw p x w)))
      ((union o (ConvB "none" kh kw sh sw p x (FoldW k w s v) (FoldB k s b m v)))) :ruleset single
      :name "FuseConvBatchnorm")
(rule ((= s0 (Matmul act x a)) (= s1 (Matmul act x b)))
      ((let m (Matmul act x (Concat 2 1 a b))) (union s0 (Part -1 0 m s0 s1)) (union s1 (Part -1 1 m s0 s1)))
      :ruleset multi :name "MergeMatmuls")
(rule ((= s0 (AddB (Matmul act x a) c)) (= s1 (AddB (Matmul act x b) d)))
      ((let m (AddB (Matmul act x (Concat 2 1 a b)) (Concat 1 0 c d)))
       (union s0 (Part -1 0 m s0 s1)) (union s1 (Part -1 1 m s0 s1))) :ruleset multi :name "MergeLinears")
(rule ((= s0 (Conv act kh kw sh sw p x a)) (= s1 (Conv act kh kw sh sw p x b)))
      ((let m (Conv act kh kw sh sw p x (Concat 4 0 a b)))
       (union s0 (Part 1 0 m s0 s1)) (union s1 (Part 1 1 m s0 s1)))
      :ruleset multi :name "MergeConvs")
(rule ((= s0 (ConvB act kh kw sh sw p x a c)) (= s1 (ConvB act kh kw sh sw p x b d)))
      ((let m (ConvB act kh kw sh sw p x (Concat 4 0 a b) (Concat 1 0 c d)))
       (union s0 (Part 1 0 m s0 s1)) (union s1 (Part 1 1 m s0 s1))) :ruleset multi :name "MergeBiasedConvs")
(rule ((= s0 (ConvB act 1 1 1 1 "VALID" x a c)) (= s1 (ConvB act 3 3 1 1 "SAME" x b d)))
      ((let m (ConvB act 3 3 1 1 "SAME" x (Concat 4 0 (Enlarge 3 3 a) b) (Concat 1 0 c d)))
       (union s0 (Part 1 0 m s0 s1)) (union s1 (Part 1 1 m s0 s1))) :ruleset multi :name "MergeConvsEnlarged")
(rule ((= c (Concat r axis (Part axis 0 m a b) (Part axis 1 m a b)))) ((union c m)) :ruleset single
      :name "SplitConcat")
(rule ((= s (Add (ConvB "none" kh kw sh sw p x a c) (ConvB "none" kh kw sh sw p y b d))))
      ((union s (ConvB "none" kh kw sh sw p (Concat 4 1 x y) (Concat 4 1 a b) (Add c d)))) :ruleset single
      :name "MergeConvsIntoAdd")
""" + _transpose_inverses()


def _bindings():
    """egglog's low-level bindings, imported on first use (an optional dependency)."""
    try:
        from egglog import bindings
    except ImportError as error:
        raise ImportError("equality saturation needs the `egglog` package: install the optional extra "
                          "`egraph` (pip install 'jax-research-systems[egraph]')") from error
    return bindings


# ---------------------------------------------------------------- rules as egglog text


def _pattern_term(op: PatternOp, args: Sequence[str]) -> str:
    """The egglog term of one pattern op (not a split) reading `args`."""
    if op.op == "matmul":
        return f'(Matmul "{op.attr("activation")}" {args[0]} {args[1]})'
    if op.op == "conv2d":
        (kh, kw), (sh, sw) = op.attr("kernel"), op.attr("stride")
        bias = f"B {args[2]}" if len(args) == 3 else ""
        return (f'(Conv{bias[:1]} "{op.attr("activation")}" {kh} {kw} {sh} {sw} "{op.attr("padding")}" {args[0]} '
                f'{args[1]}{bias[1:]})')
    if op.op == "concat":
        rank, axis = op.attr("rank"), op.attr("axis")
        if len(args) != 2:
            raise ValueError(f"a concat of {len(args)} inputs has no e-graph constructor")
        return f"(Concat {rank} {axis % rank} {args[0]} {args[1]})"
    if op.op == "transpose":
        return f'(Transpose "{_perm_text(op.attr("perm"))}" {args[0]})'
    return f"({op.op.capitalize()} {' '.join(args)})"


def pattern_rule(pattern: Pattern) -> str:
    """One egglog rule for a data rule: source ops as a (multi-)pattern query, target ops as lets, one union per
    mapped tensor."""
    def name(t: Tensor, side: str) -> str:
        return f"x{-t.op}" if t.external else f"{side}{t.op}"

    query = [f"(= s{k} {_pattern_term(op, [name(t, 's') for t in op.inputs])})" for k, op in enumerate(pattern.src)]
    replaces = {d: name(s, "s") for s, d in reversed(pattern.mapped)}  # a split's sizes: what its parts replace
    actions, parts = [], {}
    for k, op in enumerate(pattern.dst):
        args = [parts.get(t, name(t, "d")) for t in op.inputs]
        if op.op == "split":
            if op.outputs != 2:
                raise ValueError(f"xfer {pattern.xfer}: a {op.outputs}-way split has no e-graph constructor")
            witnesses = f"{replaces[Tensor(k, 0)]} {replaces[Tensor(k, 1)]}"
            for j in range(2):
                parts[Tensor(k, j)] = f"(Part {op.attr('axis')} {j} {args[0]} {witnesses})"
        else:
            actions.append(f"(let d{k} {_pattern_term(op, args)})")
    actions += [f"(union s{s.op} {parts.get(d, name(d, 'd'))})" for s, d in pattern.mapped]
    ruleset = "multi" if len(_roots(pattern)) > 1 else "single"
    return f"(rule ({' '.join(query)}) ({' '.join(actions)}) :ruleset {ruleset} :name \"xfer{pattern.xfer}\")"


def _roots(pattern: Pattern) -> list[int]:
    """Source ops no other source op reads: more than one makes a multi-pattern rule."""
    read = {t.op for op in pattern.src for t in op.inputs if not t.external}
    return [k for k in range(len(pattern.src)) if k not in read]


@functools.cache
def table_rules() -> tuple[str, ...]:
    """The egglog rules of the whole table (its data rules, then `HAND_RULES`), made once."""
    return (*map(pattern_rule, load_patterns()), HAND_RULES)


# ---------------------------------------------------------------- encoding a graph


def _encode_node(graph: Graph, node_id: int, args: list[str]) -> str | None:
    """The TASO constructor term of a node (output 0), or None when it is opaque."""
    node = graph.nodes[node_id]
    shapes = [graph.shape(r) for r in node.inputs]
    attrs = node.attrs
    if node.op == "matmul":
        return f'(Matmul "{attrs["activation"]}" {args[0]} {args[1]})'
    if node.op == "conv2d" and attrs["groups"] == 1 and len(shapes[0]) == 4:
        kernel, stride = tuple(shapes[1][2:]), tuple(attrs["stride"])
        pads = tuple(attrs["pads"])
        pad = next((p for p in ("VALID", "SAME", "HALF") if pads == conv_pads(p, shapes[0][2:], kernel, stride)),
                   "P" + " ".join(map(str, pads)))
        bias = f"B {args[2]}" if len(args) == 3 else ""
        return (f'(Conv{bias[:1]} "{attrs["activation"]}" {kernel[0]} {kernel[1]} {stride[0]} {stride[1]} '
                f'"{pad}" {args[0]} {args[1]}{bias[1:]})')
    if node.op in ("add", "mul") and shapes[0] == shapes[1]:
        return f"({node.op.capitalize()} {args[0]} {args[1]})"
    if node.op == "add":
        return f"(AddB {args[0]} {args[1]})"
    if node.op in UNARY_OPS:
        return f"({node.op.capitalize()} {args[0]})"
    if node.op == "concat" and len(args) == 2:
        rank = len(node.shape)
        return f"(Concat {rank} {attrs['axis'] % rank} {args[0]} {args[1]})"
    if node.op == "transpose":
        return f'(Transpose "{_perm_text(attrs["perm"])}" {args[0]})'
    return None


def _encode(graph: Graph) -> tuple[list[str], list[tuple[int, int]]]:
    """egglog `let`s for every tensor of `graph` (`$tNODE_OUTPUT`) and the opaque keys' (node, output) pairs."""
    lines, keys = [], []
    for node_id in graph.order:
        node = graph.nodes[node_id]
        args = [f"$t{r.node}_{r.index}" for r in node.inputs]
        term = _encode_node(graph, node_id, args)
        if term is not None:
            lines.append(f"(let $t{node_id}_0 {term})")
            continue
        if len(args) > MAX_OPAQUE_INPUTS:
            raise ValueError(f"node {node.name or node_id} ({node.op}) has {len(args)} inputs; the e-graph encodes "
                             f"opaque ops of at most {MAX_OPAQUE_INPUTS}")
        for k in range(len(node.shapes)):
            lines.append(f'(let $t{node_id}_{k} (Op{len(args)} "{node.op}" {len(keys)} {" ".join(args)}))')
            keys.append((node_id, k))
        if node.op == "split" and len(node.shapes) == 2:  # its parts, witnessed by themselves, for SplitConcat
            axis, witnesses = node.attrs["axis"], f"$t{node_id}_0 $t{node_id}_1"
            lines += [f"(union $t{node_id}_{k} (Part {axis} {k} {args[0]} {witnesses}))" for k in range(2)]
    return lines, keys


MAX_OPAQUE_INPUTS = 16


def declarations(rules: Sequence[str]) -> tuple[str, ...]:
    """The egglog programs that declare the sort `T`, the rulesets and `rules` (egglog rules, such as
    `pattern_rule`'s), in order: what each saturation's e-graph starts from."""
    return (_datatype(), "(ruleset single) (ruleset multi)", *rules)


def _datatype() -> str:
    opaque = " ".join(f"(Op{n} String i64{' T' * n})" for n in range(MAX_OPAQUE_INPUTS + 1))
    return ("(datatype T (Matmul String T T) (Conv String i64 i64 i64 i64 String T T) "
            "(ConvB String i64 i64 i64 i64 String T T T) (Add T T) (AddB T T) (Mul T T) (Relu T) (Sigmoid T) "
            "(Tanh T) (Concat i64 i64 T T) (Transpose String T) (Part i64 i64 T T T) (FoldW i64 T T T) "
            "(FoldB i64 T T T T) (Enlarge i64 i64 T) "
            f"{opaque})")


# ---------------------------------------------------------------- the saturated e-graph


@dataclass(frozen=True)
class ENode:
    """One e-node: its op (a TASO constructor or `opaque`), attributes (the opaque key's (node, output) for
    opaque ones), children e-classes and e-class."""

    op: str
    attrs: tuple
    children: tuple[int, ...]
    eclass: int


@dataclass
class EGraph:
    """A saturated e-graph read back from egglog: e-nodes, the root e-classes, per-class shapes and constness,
    per-node costs (None: never extracted), how saturation ended and whether the e-graph united tensors of
    different shapes (`conflicts`)."""

    graph: Graph
    enodes: list[ENode]
    roots: tuple[int, ...]
    shapes: dict[int, tuple[int, ...]]
    constant: dict[int, bool]
    costs: list[float | None]
    iterations: int
    stop: str  # "saturated", "node limit", "iteration limit" or "time limit"
    seconds: float
    # e-nodes that infer a shape other than their e-class's: tensors of different shapes were united, which no
    # correct rule does (an ill-typed rule instance does not infer at all), so the e-graph is unsound
    conflicts: int = 0

    @property
    def classes(self) -> int:
        return len(self.shapes)


def _decode(egraph, keys) -> tuple[list[ENode], dict[str, int]]:
    """Every e-node of the frozen e-graph, e-classes numbered densely, and the class of each `let`."""
    frozen = egraph.freeze()
    ids: dict[Any, int] = {}

    def eclass(value) -> int:
        return ids.setdefault(value, len(ids))

    enodes, lets = [], {}
    for name, function in frozen.functions.items():
        if function.is_let_binding:
            lets[name] = eclass(function.rows[0].output)
            continue
        if function.output_sort != "T":
            continue
        for row in function.rows:
            prims, children = [], []
            for sort, value in zip(function.input_sorts, row.inputs):
                if sort == "T" and name == "Part" and children:  # a part's witnesses: attributes, not inputs
                    prims.append(eclass(value))
                elif sort == "T":
                    children.append(eclass(value))
                elif sort == "i64":
                    prims.append(egraph.value_to_i64(value))
                else:
                    prims.append(egraph.value_to_string(value))
            op = name if name in _TASO_OPS else "opaque"
            attrs = tuple(prims) if op != "opaque" else keys[prims[1]]
            if op in ("FoldW", "FoldB"):
                attrs = keys[prims[0]]
            enodes.append(ENode(op, attrs, tuple(children), eclass(row.output)))
    return enodes, lets


def _ir(enode: ENode, shapes: Sequence[tuple[int, ...]], classes: Mapping[int, tuple[int, ...]],
        graph: Graph) -> tuple[str, dict]:
    """The IR op and attributes of a TASO e-node whose inputs have `shapes` (`classes`: the e-classes' shapes, where
    a split part's witnesses give its sizes)."""
    a = enode.attrs
    if enode.op == "Matmul":
        return "matmul", {"activation": a[0]}
    if enode.op in ("FoldW", "FoldB"):
        return "bn_fold_weight" if enode.op == "FoldW" else "bn_fold_bias", {"eps": graph.nodes[a[0]].attrs["eps"]}
    if enode.op == "Enlarge":
        return "enlarge", {"kernel": a}
    if enode.op in ("Conv", "ConvB"):
        act, kh, kw, sh, sw, pad = a
        pads = (conv_pads(pad, shapes[0][2:], (kh, kw), (sh, sw)) if pad in ("SAME", "VALID", "HALF")
                else tuple(map(int, pad[1:].split())))
        if len(shapes[1]) != 4 or tuple(shapes[1][2:]) != (kh, kw):
            raise ValueError("kernel does not match the weight")
        return "conv2d", {"activation": act, "stride": (sh, sw), "pads": pads, "groups": 1}
    if enode.op == "Concat":
        if any(len(s) != a[0] for s in shapes):
            raise ValueError("concat rank")
        return "concat", {"axis": a[1]}
    if enode.op == "Transpose":
        return "transpose", {"perm": tuple(map(int, a[0].split(",")))}
    if enode.op == "Part":
        axis, _, *witnesses = a
        rank = len(shapes[0])
        if not -rank <= axis < rank or any(w not in classes or len(classes[w]) != rank for w in witnesses):
            raise ValueError("part witnesses")
        sizes = tuple(classes[w][axis] for w in witnesses)
        if min(sizes) < 1 or sum(sizes) != shapes[0][axis]:
            raise ValueError("part sizes")
        return "split", {"axis": axis % rank, "sizes": sizes}
    return "add" if enode.op == "AddB" else enode.op.lower(), {}


def _needs(enode: ENode) -> tuple[int, ...]:
    """The e-classes whose shapes an e-node's shape is inferred from: its children and a part's witnesses."""
    return enode.children + enode.attrs[2:] if enode.op == "Part" else enode.children


def _infer(enode: ENode, graph: Graph, shapes: Mapping[int, tuple]) -> tuple[int, ...]:
    """The output shape of an e-node from its children's (and a part's witnesses') shapes (ValueError if it does
    not infer)."""
    if enode.op == "opaque":
        node_id, index = enode.attrs
        return graph.nodes[node_id].shapes[index]
    ins = [shapes[c] for c in enode.children]
    op, attrs = _ir(enode, ins, shapes, graph)
    out = OPS[op].infer(attrs, ins) if enode.op == "AddB" else infer(op, attrs, ins)
    return out[enode.attrs[1]] if enode.op == "Part" else out[0]


def _analyse(graph: Graph, enodes: list[ENode], lets: dict[str, int], model: CostModel):
    """Shapes and constness per e-class, per e-node costs (None where the e-node's shape is wrong) and how many
    e-nodes infer a shape other than their e-class's (`EGraph.conflicts`)."""
    shapes: dict[int, tuple[int, ...]] = {}
    for name, eclass in lets.items():
        node_id, index = map(int, name.lstrip("$t").split("_"))
        shapes.setdefault(eclass, graph.nodes[node_id].shapes[index])
    pending = [i for i, e in enumerate(enodes) if e.eclass not in shapes]
    grew = True
    while grew:  # classes made by rules get the shape of their first e-node that infers
        grew, left = False, []
        for i in pending:
            e = enodes[i]
            if e.eclass in shapes:
                continue
            if any(c not in shapes for c in _needs(e)):
                left.append(i)
                continue
            try:
                shapes[e.eclass] = _infer(e, graph, shapes)
                grew = True
            except (ValueError, IndexError):
                left.append(i)
        pending = left
    valid, conflicts = [], 0
    for e in enodes:
        inferred = None
        if e.eclass in shapes and all(c in shapes for c in _needs(e)):
            try:
                inferred = _infer(e, graph, shapes)
            except (ValueError, IndexError):
                pass
        valid.append(inferred is not None and inferred == shapes[e.eclass])
        conflicts += inferred is not None and inferred != shapes[e.eclass]
    constant = {c: False for c in shapes}
    changed = True
    while changed:
        changed = False
        for e, ok in zip(enodes, valid):
            if ok and not constant[e.eclass] and all(constant[c] for c in e.children) and (
                    e.op != "opaque" or graph.nodes[e.attrs[0]].constant):
                constant[e.eclass] = changed = True
    costs = [_enode_cost(model, graph, e, shapes, constant) if ok else None for e, ok in zip(enodes, valid)]
    return shapes, constant, costs, conflicts


def _enode_cost(model, graph: Graph, e: ENode, shapes, constant) -> float:
    if e.op == "opaque":
        node_id, index = e.attrs
        return node_cost(model, graph, node_id) if index == 0 else 0.0
    if e.op == "Part" or all(constant[c] for c in e.children):
        return 0.0
    ins = tuple((shapes[c], constant[c]) for c in e.children)
    op, attrs = _ir(e, [s for s, _ in ins], shapes, graph)
    return _op_cost(model, op, tuple(sorted(attrs.items())), ins)


@functools.lru_cache(maxsize=65536)
def _op_cost(model, op: str, attrs: tuple, ins: tuple) -> float:
    """`node_cost` of one op reading tensors of these shapes (weights where constant, else inputs)."""
    b = GraphBuilder()
    refs = [b.weight(f"w{k}", np.zeros(s, np.float32)) if c else b.input(f"x{k}", s) for k, (s, c) in enumerate(ins)]
    out = b.add(op, refs, **dict(attrs))
    g = b.build({"y": out})
    return node_cost(model, g, out.node)


def run_programs(egraph, programs: Sequence[str]) -> list:
    """Run egglog `programs` on `egraph` (an egglog bindings `EGraph`), each parsed on its own: the bindings copy
    a program's whole text into every span of its parsed commands, so one program of n rules takes memory
    quadratic in n (600 generated rules: 5 GB; one parse per rule: 8,292 rules in 0.2 GB)."""
    return egraph.run_program(*(command for text in programs for command in egraph.parse_program(text)))


@functools.lru_cache(maxsize=4)
def _declared(rules: tuple[str, ...]):
    """An egglog e-graph with the sort and `rules` (egglog programs) declared (rule compilation is most of a small
    run's time), reused: each saturation runs between a `push` and a `pop`."""
    egraph = _bindings().EGraph()
    run_programs(egraph, declarations(rules))
    return egraph


def saturate(graph: Graph, patterns: Sequence[Pattern] | None = None, cost_model: CostModel | None = None,
             max_nodes: int = 20_000, max_iterations: int = 10, time_limit: float = 60.0,
             multi_iterations: int = 1, hand_rules: bool = True) -> EGraph:
    """Run equality saturation of `graph` under the data rules `patterns` (default: the whole table) until no
    rule adds anything, the e-graph holds `max_nodes` e-nodes, `max_iterations` rounds ran or `time_limit`
    seconds passed (all checked between rounds), then read the e-graph back with shapes and costs. `hand_rules`
    adds `HAND_RULES`.

    Multi-pattern rules (sources of two unconnected-at-the-root ops, such as two matmuls sharing an input) run
    only in the first `multi_iterations` rounds, as in Tensat: each application makes new instances of their
    own source (x @ A and x @ concat(A, B) share x), so unrestricted they grow the e-graph without bound."""
    max_nodes = integer("max_nodes", max_nodes, 1)
    max_iterations = integer("max_iterations", max_iterations, 0)
    multi_iterations = integer("multi_iterations", multi_iterations, 0)
    time_limit = number("time_limit", time_limit, 0.0, above=True)
    _bindings()  # fails here, naming the extra, where egglog is missing
    start = time.perf_counter()
    lets, keys = _encode(graph)
    rules = (table_rules() if patterns is None and hand_rules else
             (*map(pattern_rule, load_patterns() if patterns is None else patterns), HAND_RULES * hand_rules))
    egraph = _declared(rules)
    run_programs(egraph, ("(push)", *lets))
    stop, iterations = "iteration limit", 0
    both = egraph.parse_program("(run multi 1) (run single 1)")
    single = egraph.parse_program("(run single 1)")
    size = egraph.parse_program("(print-size)")
    while iterations < max_iterations:
        outputs = egraph.run_program(*(both if iterations < multi_iterations else single))
        iterations += 1
        if not any(o.report.updated for o in outputs) and iterations >= multi_iterations:
            stop = "saturated"
            break
        if sum(n for _, n in egraph.run_program(*size)[0].sizes) >= max_nodes:
            stop = "node limit"
            break
        if time.perf_counter() - start >= time_limit:
            stop = "time limit"
            break
    enodes, let_classes = _decode(egraph, keys)
    egraph.run_program(*egraph.parse_program("(pop)"))
    model = cost_model or DEFAULT_COST_MODEL
    shapes, constant, costs, conflicts = _analyse(graph, enodes, let_classes, model)
    roots = tuple(let_classes[f"$t{r.node}_{r.index}"] for r in graph.outputs)
    return EGraph(graph, enodes, roots, shapes, constant, costs, iterations, stop, time.perf_counter() - start,
                  conflicts)


def to_graph(egraph: EGraph, choice: Mapping[int, int]) -> Graph:
    """The graph of the chosen e-nodes reachable from the outputs (ValueError on a cycle or a missing class):
    inputs, weights and opaque nodes as in the input graph, split parts as IR splits (one per input, axis and
    sizes)."""
    graph, b = egraph.graph, GraphBuilder()
    made: dict[Any, tuple[Ref, ...]] = {}
    for node_id in graph.inputs:
        node = graph.nodes[node_id]
        made[node_id] = (b.input(node.name, node.shape),)
    refs: dict[int, Ref] = {}
    visiting: set[int] = set()

    def build(eclass: int) -> Ref:
        if eclass in refs:
            return refs[eclass]
        if eclass in visiting:
            raise ValueError("the extracted e-nodes form a cycle")
        if eclass not in choice:
            raise ValueError(f"no e-node chosen for e-class {eclass}")
        visiting.add(eclass)
        e = egraph.enodes[choice[eclass]]
        args = [build(c) for c in e.children]
        if e.op == "opaque":
            node_id, index = e.attrs
            node = graph.nodes[node_id]
            if node_id not in made:
                made[node_id] = ((b.weight(node.name, node.value),) if node.op == "weight" else
                                 b.add_outputs(node.op, args, node.name, **node.attrs))
            ref = made[node_id][index]
        else:
            op, attrs = _ir(e, [b.shape(a) for a in args], egraph.shapes, graph)
            key = (op, tuple(args), tuple(sorted(attrs.items())))
            if key not in made:
                made[key] = b.add_outputs(op, args, **attrs)
            ref = made[key][e.attrs[1] if e.op == "Part" else 0]
        visiting.discard(eclass)
        refs[eclass] = ref
        return ref

    outputs = {name: build(root) for name, root in zip(graph.output_names, egraph.roots)}
    return b.build(outputs)


def equality_saturation(graph: Graph, extraction: str = "greedy", patterns: Sequence[Pattern] | None = None,
                        cost_model: CostModel | None = None, max_nodes: int = 20_000, max_iterations: int = 10,
                        time_limit: float = 60.0, multi_iterations: int = 1,
                        ilp_time_limit: float = 60.0) -> SearchResult:
    """Saturate (`saturate`), extract (`greedy` or `ilp`) and rebuild the graph, costed by `cost` like every
    other search; never worse than `graph` (the input is returned when the extraction costs more). `explored` is
    the number of e-nodes; `seconds` covers saturation, extraction and rebuilding. ValueError when the e-graph
    holds an unsound union (`EGraph.conflicts`), rather than a graph that may compute something else."""
    if extraction not in EXTRACTIONS:
        raise ValueError(f"extraction must be one of {EXTRACTIONS}, got {extraction!r}")
    start = time.perf_counter()
    model = cost_model or DEFAULT_COST_MODEL
    egraph = saturate(graph, patterns, model, max_nodes, max_iterations, time_limit, multi_iterations)
    if egraph.conflicts:
        raise ValueError(f"the saturated e-graph united tensors of different shapes ({egraph.conflicts} e-nodes): "
                         "a rule is wrong at these shapes")
    choice = extract_greedy(egraph) if extraction == "greedy" else extract_ilp(egraph, ilp_time_limit)[0]
    best = to_graph(egraph, choice)
    initial, found = cost(graph, model), cost(best, model)
    if found > initial:
        best, found = graph, initial
    return SearchResult(best, found, initial, (), len(egraph.enodes), time.perf_counter() - start)
