"""One generic matcher and one generic builder for every data rule (`jaxgraph.pattern_data`), as `Rule`s.

A pattern compiles once into a matching plan: a root op (the source op closest to every other op and external
input, so `radius`, the largest undirected distance from it, stays small) and an order in which each further op
is reached from one already bound (the producer of a bound op's input, a consumer of a bound op's output, or a
consumer of a bound external tensor). `match_at` binds ops along that order by backtracking and accepts a
binding when:

- every op meets its constraints (op, arity, so a conv's bias, attributes, a conv's pads, equal add/mul shapes,
  concat rank) and reads the tensors the pattern says, the same external id being the same tensor;
- no external input is an output of a matched op, and every source tensor that is not mapped is read only by
  matched ops and is not a graph output (so all matched ops can go);
- no rewrite can close a cycle: a mapped op whose replacement reads an external that it might reach (an
  external read only by ops that are not its ancestors in the pattern) needs that external to be a leaf, or
  constant while the mapped op is not; both are facts of the nodes themselves, so matches stay local;
- the target shape-infers and each replacement has the shape and constness of the tensor it replaces.

A location is the matched node ids, the root's first and then the other source ops' in pattern order.
`build` removes the matched nodes, adds the target ops and redirects the mapped tensors.

`TASO_RULES` is the full table: `RULES` (the hand-written rules, unchanged, first) followed by one rule per
data pattern whose xfer no hand rule covers. `RULES`, which `Env` and `JaxEnv` use by default, stays as it is;
`JaxEnv` has no jitted twin of the generic matcher and rejects these rules.
"""

from __future__ import annotations

import functools
from collections import deque
from typing import Iterator

from jaxgraph.graph import Graph, Patch, Ref
from jaxgraph.pattern_data import (
    Pattern,
    Tensor,
    conv_matches,
    infer,
    ir_attrs,
    load_patterns,
    split_sizes,
)
from jaxgraph.rules import RULES, Location, Rule

DATA_FAMILY = "TasoPattern"


class CompiledPattern:
    """A pattern's matching plan plus its `match_at` and `build`."""

    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        src = pattern.src
        self.root, self.radius = _root(pattern)
        self.steps = _plan(pattern, self.root)
        self.order = (self.root,) + tuple(k for k in range(len(src)) if k != self.root)
        # consumers[k]: (op i, input position p, output j) for every pattern op i reading output j of op k
        self.consumers: list[list[tuple[int, int, int]]] = [[] for _ in src]
        for i, op in enumerate(src):
            for p, t in enumerate(op.inputs):
                if not t.external:
                    self.consumers[t.op].append((i, p, t.index))
        mapped = {s for s, _ in pattern.mapped}
        self.interior = tuple(Tensor(k) for k in range(len(src)) if Tensor(k) not in mapped)
        self.hazards = _hazards(pattern)
        self.root_producers = tuple((p, src[t.op].op) for p, t in enumerate(src[self.root].inputs) if not t.external)

    # ------------------------------------------------------------ matching

    def _fits(self, graph: Graph, k: int, node_id: int) -> bool:
        """Node `node_id` meets the constraints of source op `k` (not yet its connections)."""
        op, node = self.pattern.src[k], graph.nodes[node_id]
        if node.op != op.op or len(node.inputs) != len(op.inputs):
            return False
        if op.op == "matmul":
            return node.attrs["activation"] == op.attr("activation")
        shapes = [graph.shape(r) for r in node.inputs]
        if op.op == "conv2d":
            return len(shapes[0]) == 4 and len(shapes[1]) == 4 and conv_matches(op, node.attrs, shapes)
        if op.op in ("add", "mul"):
            return shapes[0] == shapes[1]
        if op.op == "concat":
            rank = len(shapes[0])
            return rank == op.attr("rank") and node.attrs["axis"] % rank == op.attr("axis")
        if op.op == "transpose":
            return tuple(node.attrs["perm"]) == op.attr("perm")
        return True

    def _bind(self, graph: Graph, k: int, node_id: int, nodes: dict[int, int],
              externals: dict[int, Ref]) -> list[int] | None:
        """Check op `k` at `node_id` against everything bound; bind its new externals (returned, to unbind)."""
        node = graph.nodes[node_id]
        fresh: list[int] = []
        for p, t in enumerate(self.pattern.src[k].inputs):
            actual = node.inputs[p]
            if t.external:
                if t.op in externals:
                    ok = externals[t.op] == actual
                else:
                    externals[t.op] = actual
                    fresh.append(t.op)
                    ok = True
            else:
                ok = t.op not in nodes or actual == Ref(nodes[t.op], t.index)
            if not ok:
                for e in fresh:
                    del externals[e]
                return None
        for i, p, j in self.consumers[k]:
            if i in nodes and graph.nodes[nodes[i]].inputs[p] != Ref(node_id, j):
                for e in fresh:
                    del externals[e]
                return None
        return fresh

    def _candidates(self, graph: Graph, step: tuple, nodes: dict[int, int], externals: dict[int, Ref]) -> list[int]:
        kind, k, anchor, p, j = step
        if kind == "producer":  # op k produces input p of bound op `anchor`
            ref = graph.nodes[nodes[anchor]].inputs[p]
            return [ref.node] if ref.index == j else []
        ref = Ref(nodes[anchor], j) if kind == "consumer" else externals[anchor]
        return [u.node for u in graph.uses(ref.node)
                if u.input_index == p and graph.nodes[u.node].inputs[p] == ref]

    def _search(self, graph: Graph, depth: int, nodes: dict[int, int], externals: dict[int, Ref]) -> Iterator:
        if depth == len(self.steps):
            if self._complete(graph, nodes, externals):
                yield tuple(nodes[k] for k in self.order)
            return
        k = self.steps[depth][1]
        taken = set(nodes.values())
        for node_id in self._candidates(graph, self.steps[depth], nodes, externals):
            if node_id in taken or not self._fits(graph, k, node_id):
                continue
            fresh = self._bind(graph, k, node_id, nodes, externals)
            if fresh is None:
                continue
            nodes[k] = node_id
            yield from self._search(graph, depth + 1, nodes, externals)
            del nodes[k]
            for e in fresh:
                del externals[e]

    def _complete(self, graph: Graph, nodes: dict[int, int], externals: dict[int, Ref]) -> bool:
        matched = set(nodes.values())
        if any(ref.node in matched for ref in externals.values()):
            return False
        outputs = set(graph.outputs)
        for t in self.interior:
            ref = Ref(nodes[t.op], t.index)
            if ref in outputs or any(u.node not in matched for u in graph.ref_uses(ref)):
                return False
        for k, e in self.hazards:
            producer = graph.nodes[externals[e].node]
            if producer.op not in ("input", "weight") and not (
                    producer.constant and not graph.nodes[nodes[k]].constant):
                return False
        return self.target(graph.nodes.__getitem__, nodes, externals) is not None

    def match_at(self, graph: Graph, root: int) -> Iterator[Location]:
        """Every location rooted at node `root`."""
        inputs = graph.nodes[root].inputs
        if any(p >= len(inputs) or graph.nodes[inputs[p].node].op != op for p, op in self.root_producers):
            return  # a cheap first test: the ops producing the root's inputs
        if not self._fits(graph, self.root, root):
            return
        nodes: dict[int, int] = {}
        externals: dict[int, Ref] = {}
        if self._bind(graph, self.root, root, nodes, externals) is None:
            return
        nodes[self.root] = root
        yield from self._search(graph, 0, nodes, externals)

    # ------------------------------------------------------------ the target

    def target(self, lookup, nodes: dict[int, int], externals: dict[int, Ref]) -> list[dict] | None:
        """The target ops' IR attributes, or None if the target does not shape-infer or a replacement's shape or
        constness differs from the tensor it replaces. `lookup(node_id)` gives a node."""
        def source(t: Tensor):
            node = lookup(nodes[t.op])
            return node.shapes[t.index], node.constant

        sizes = split_sizes(self.pattern, lambda t: source(t)[0])
        facts: dict[Tensor, tuple] = {}
        for e, ref in externals.items():
            node = lookup(ref.node)
            facts[Tensor(e)] = (node.shapes[ref.index], node.constant)
        plan = []
        for k, op in enumerate(self.pattern.dst):
            shapes = [facts[t][0] for t in op.inputs]
            attrs = ir_attrs(op, shapes, sizes.get(k, ()))
            try:
                out = infer(op.op, attrs, shapes)
            except ValueError:
                return None
            constant = all(facts[t][1] for t in op.inputs)
            for j, shape in enumerate(out):
                facts[Tensor(k, j)] = (tuple(shape), constant)
            plan.append(attrs)
        if any(facts[d] != source(s) for s, d in self.pattern.mapped):
            return None
        return plan

    def build(self, patch: Patch, location: Location) -> None:
        """Replace the matched nodes at `location` by the target."""
        nodes = dict(zip(self.order, location))
        externals = {t.op: patch.node(nodes[k]).inputs[p] for k, op in enumerate(self.pattern.src)
                     for p, t in enumerate(op.inputs) if t.external}
        plan = self.target(patch.node, nodes, externals)
        if plan is None:
            raise ValueError(f"TASO xfer {self.pattern.xfer}: the target does not fit location {location}")
        patch.remove(*location)
        refs: dict[Tensor, Ref] = {Tensor(e): ref for e, ref in externals.items()}
        for k, (op, attrs) in enumerate(zip(self.pattern.dst, plan)):
            for j, ref in enumerate(patch.add_outputs(op.op, [refs[t] for t in op.inputs], **attrs)):
                refs[Tensor(k, j)] = ref
        for s, d in self.pattern.mapped:
            patch.replace(Ref(nodes[s.op], s.index), refs[d])

    def rule(self) -> Rule:
        """The pattern as a `Rule`, named `TasoPattern(xfer=N)`."""
        src, dst = self.pattern.src, self.pattern.dst
        edges = sum(len(o.inputs) for o in dst) - sum(len(o.inputs) for o in src)
        growth = (max(0, len(dst) - len(src)), max(0, edges))
        return Rule(DATA_FAMILY, (("xfer", self.pattern.xfer),), src[self.root].op, self.radius, (self.pattern.xfer,),
                    *growth, self.match_at, self.build, self.pattern)


def _adjacency(pattern: Pattern) -> dict[tuple[str, int], set[tuple[str, int]]]:
    """The source pattern as an undirected graph over ops ("op", k) and externals ("ext", e)."""
    adjacent: dict[tuple[str, int], set[tuple[str, int]]] = {("op", k): set() for k in range(len(pattern.src))}
    for k, op in enumerate(pattern.src):
        for t in op.inputs:
            other = ("ext", t.op) if t.external else ("op", t.op)
            adjacent.setdefault(other, set()).add(("op", k))
            adjacent[("op", k)].add(other)
    return adjacent


def _distances(adjacent, start) -> dict:
    distance = {start: 0}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in adjacent[v]:
            if w not in distance:
                distance[w] = distance[v] + 1
                queue.append(w)
    return distance


def _root(pattern: Pattern) -> tuple[int, int]:
    """The source op of least eccentricity (the last on ties) and that eccentricity; ValueError if the source
    is not connected."""
    adjacent = _adjacency(pattern)
    best = None
    for k in range(len(pattern.src)):
        distance = _distances(adjacent, ("op", k))
        if len(distance) != len(adjacent):
            raise ValueError(f"TASO xfer {pattern.xfer}: the source pattern is not connected")
        eccentricity = max(distance.values())
        if best is None or eccentricity <= best[1]:
            best = (k, eccentricity)
    return best


def _plan(pattern: Pattern, root: int) -> tuple[tuple, ...]:
    """Breadth-first from the root: (how, op, anchor, position, output) per further op, where how is
    "producer" (op produces output `output` read at `position` of bound op `anchor`), "consumer" (op reads
    output `output` of bound op `anchor` at `position`) or "external" (op reads bound external `anchor` at
    `position`)."""
    src = pattern.src
    steps, seen, queue = [], {("op", root)}, deque([("op", root)])
    while queue:
        kind, v = queue.popleft()
        if kind == "op":
            for p, t in enumerate(src[v].inputs):
                key = ("ext", t.op) if t.external else ("op", t.op)
                if key not in seen:
                    seen.add(key)
                    queue.append(key)
                    if not t.external:
                        steps.append(("producer", t.op, v, p, t.index))
        for k, op in enumerate(src):
            for p, t in enumerate(op.inputs):
                reads = (t.external and kind == "ext" and t.op == v) or (not t.external and kind == "op" and t.op == v)
                if reads and ("op", k) not in seen:
                    seen.add(("op", k))
                    queue.append(("op", k))
                    steps.append(("external" if kind == "ext" else "consumer", k, v, p, t.index))
    return tuple(steps)


def _hazards(pattern: Pattern) -> tuple[tuple[int, int], ...]:
    """(mapped source op, external) pairs where the op might reach the external outside the pattern: the
    external is read only by ops that are not the mapped op or its ancestors."""
    src = pattern.src
    ancestors: list[set[int]] = []
    for k, op in enumerate(src):
        ancestors.append({k}.union(*(ancestors[t.op] for t in op.inputs if not t.external)))
    pairs = []
    for k in dict.fromkeys(s.op for s, _ in pattern.mapped):
        for e in pattern.externals:
            readers = {i for i, op in enumerate(src) if any(t.op == e for t in op.inputs)}
            if not readers & ancestors[k]:
                pairs.append((k, e))
    return tuple(pairs)


def pattern_rules(patterns: tuple[Pattern, ...]) -> tuple[Rule, ...]:
    """One `Rule` per pattern."""
    return tuple(CompiledPattern(p).rule() for p in patterns)


@functools.cache
def data_rules() -> tuple[Rule, ...]:
    """Every rule of the package's pattern file (loaded and checked once)."""
    return pattern_rules(load_patterns())


def hand_covered() -> frozenset[int]:
    """TASO xfer ids that a hand-written rule of `RULES` implements."""
    return frozenset(x for rule in RULES for x in rule.taso_ids)


@functools.cache
def taso_rules() -> tuple[Rule, ...]:
    """The full table: `RULES`, then the data rules of xfers no hand rule covers."""
    covered = hand_covered()
    return RULES + tuple(r for r in data_rules() if r.taso_ids[0] not in covered)


def __getattr__(name: str):
    """`TASO_RULES`, loaded on first use (`taso_rules()`)."""
    if name == "TASO_RULES":
        return taso_rules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
