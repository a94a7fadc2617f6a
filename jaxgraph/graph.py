"""The computation-graph IR: immutable typed nodes, graphs, a builder and local rewrites (patches).

A `Graph` never changes. A rewrite goes through a `Patch`, whose `commit` returns a new graph plus a
`Delta` (which nodes were added, removed, rewired or lost a consumer), computed in time proportional
to the size of the change, so that location indexes, costs and RL observations can be updated
incrementally instead of being recomputed on every step.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from jaxgraph.ops import OPS, Shape, normalize_attrs

_HASH_MASK = (1 << 64) - 1
_FIRST_DERIVED_ID = 1 << 60  # ids of nodes created by rewrites are content hashes above this


class Ref(NamedTuple):
    """A tensor: output `index` of node `node`."""

    node: int
    index: int = 0


class Use(NamedTuple):
    """One consumption of a tensor: input position `input_index` of node `node`."""

    node: int
    input_index: int


@dataclass(frozen=True, eq=False)
class Node:
    """One op: its inputs, normalized attributes and inferred output shapes.

    `constant` is true when the value does not depend on any graph input (weights and ops on weights
    only); such nodes are folded before execution and are free in the cost model.
    """

    op: str
    inputs: tuple[Ref, ...]
    attrs: Mapping[str, Any]
    shapes: tuple[Shape, ...]
    constant: bool
    name: str = ""
    value: np.ndarray | None = field(default=None, repr=False)

    @property
    def shape(self) -> Shape:
        return self.shapes[0]


@dataclass(frozen=True)
class Delta:
    """What a commit changed, for incremental consumers (location index, costs, observations)."""

    removed: frozenset[int]
    added: frozenset[int]
    rewired: frozenset[int]  # kept their id, shapes and constness; got new inputs
    touched: frozenset[int]  # kept their id and inputs, gained or lost a consumer
    created: tuple[int, ...] = ()  # `added` in the order the rewrite made them (an environment's slot order)
    swept: frozenset[int] = frozenset()  # the part of `removed` the patch did not name: left without consumers

    @property
    def dirty(self) -> frozenset[int]:
        """Surviving nodes whose inputs, consumers or existence changed."""
        return self.added | self.rewired | self.touched


def make_node(op: str, inputs: Sequence[Ref], attrs: Mapping[str, Any], lookup, label: str,
              name: str = "", value: np.ndarray | None = None) -> Node:
    """Check arity, normalize attributes and infer shapes; errors name the node (`label`)."""
    try:
        spec = OPS.get(op)
        if spec is None:
            raise ValueError(f"unknown op {op!r}")
        attrs = normalize_attrs(op, attrs)
        inputs = tuple(r if type(r) is Ref else Ref(*r) for r in inputs)
        high = spec.max_inputs if spec.max_inputs is not None else len(inputs)
        if not spec.min_inputs <= len(inputs) <= high:
            raise ValueError(f"takes {spec.min_inputs}..{spec.max_inputs or 'any'} inputs, got {len(inputs)}")
        producers = [lookup(r.node) for r in inputs]
        for r, p in zip(inputs, producers):
            if not 0 <= r.index < len(p.shapes):
                raise ValueError(f"input {r} refers to a missing output of a {p.op}")
        shapes = spec.infer(attrs, [p.shapes[r.index] for r, p in zip(inputs, producers)])
    except ValueError as error:
        raise ValueError(f"node {label} ({op}): {error}") from None
    constant = op == "weight" or (op != "input" and all(p.constant for p in producers))
    return Node(op, inputs, attrs, tuple(tuple(int(d) for d in s) for s in shapes), constant, name, value)


def _term(node_id: int, node: Node) -> int:
    return hash((node_id, node.inputs)) & _HASH_MASK


@dataclass(frozen=True, eq=False)
class Graph:
    """An immutable computation graph. Build it with `GraphBuilder`; rewrite it with `Patch`.

    `structure_hash` identifies the graph up to the order in which rewrites were applied: nodes that
    rewrites create get ids that hash their op, attributes and inputs (TASO hashes graphs the same
    way, as a sum over nodes of their id and inputs).
    """

    nodes: Mapping[int, Node]
    inputs: tuple[int, ...]
    outputs: tuple[Ref, ...]
    output_names: tuple[str, ...]
    _uses: Mapping[int, tuple[Use, ...]] = field(repr=False)
    structure_hash: int = field(repr=False)

    @classmethod
    def from_nodes(cls, nodes: Mapping[int, Node], inputs: Sequence[int], outputs: Sequence[Ref],
                   output_names: Sequence[str]) -> Graph:
        """Assemble a graph (consumer lists and hash computed here) and validate it."""
        uses: dict[int, list[Use]] = {i: [] for i in nodes}
        for node_id, node in nodes.items():
            for position, ref in enumerate(node.inputs):
                if ref.node not in nodes:
                    raise ValueError(f"node {node.name or node_id} ({node.op}) reads missing node {ref.node}")
                uses[ref.node].append(Use(node_id, position))
        if len(output_names) != len(outputs) or len(set(output_names)) != len(output_names):
            raise ValueError(f"output names must be unique, one per output: {list(output_names)}")
        outputs = tuple(Ref(*r) for r in outputs)
        structure = sum(_term(i, n) for i, n in nodes.items()) + hash(outputs)
        graph = cls(MappingProxyType(dict(nodes)), tuple(inputs), outputs, tuple(output_names),
                    MappingProxyType({i: tuple(u) for i, u in uses.items()}), structure & _HASH_MASK)
        graph.validate()
        return graph

    # ------------------------------------------------------------ queries

    def __len__(self) -> int:
        return len(self.nodes)

    def uses(self, node_id: int) -> tuple[Use, ...]:
        """Every consumption of any output of `node_id`."""
        return self._uses[node_id]

    def ref_uses(self, ref: Ref) -> list[Use]:
        """Every consumption of one tensor."""
        return [u for u in self._uses[ref.node] if self.nodes[u.node].inputs[u.input_index] == ref]

    def shape(self, ref: Ref) -> Shape:
        return self.nodes[ref.node].shapes[ref.index]

    @cached_property
    def by_op(self) -> dict[str, tuple[int, ...]]:
        """Node ids grouped by op type."""
        groups: dict[str, list[int]] = {}
        for node_id, node in self.nodes.items():
            groups.setdefault(node.op, []).append(node_id)
        return {op: tuple(ids) for op, ids in groups.items()}

    @cached_property
    def output_nodes(self) -> frozenset[int]:
        return frozenset(r.node for r in self.outputs)

    @cached_property
    def input_names(self) -> tuple[str, ...]:
        return tuple(self.nodes[i].name for i in self.inputs)

    @cached_property
    def input_shapes(self) -> dict[str, Shape]:
        return {self.nodes[i].name: self.nodes[i].shape for i in self.inputs}

    @cached_property
    def output_shapes(self) -> dict[str, Shape]:
        return {n: self.shape(r) for n, r in zip(self.output_names, self.outputs)}

    @cached_property
    def num_ops(self) -> int:
        """Ops that run at inference time: everything but inputs, weights and constant folding."""
        return sum(1 for n in self.nodes.values() if not n.constant and n.op != "input")

    @cached_property
    def num_edges(self) -> int:
        """Inputs of all nodes (a node that reads one tensor twice counts two): the edge rows an environment needs."""
        return sum(len(n.inputs) for n in self.nodes.values())

    @cached_property
    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes.values():
            if not n.constant and n.op != "input":
                counts[n.op] = counts.get(n.op, 0) + 1
        return dict(sorted(counts.items()))

    @cached_property
    def order(self) -> tuple[int, ...]:
        """Node ids in a topological order (Kahn's algorithm); ValueError on a cycle."""
        pending = {i: len(n.inputs) for i, n in self.nodes.items()}
        ready = [i for i, k in pending.items() if k == 0]
        order: list[int] = []
        while ready:
            node_id = ready.pop()
            order.append(node_id)
            for use in self._uses[node_id]:
                pending[use.node] -= 1
                if pending[use.node] == 0:
                    ready.append(use.node)
        if len(order) != len(self.nodes):
            raise ValueError("graph has a cycle")
        return tuple(order)

    def check_inputs(self, inputs: Mapping[str, object]) -> dict[str, np.ndarray]:
        """Inputs as float32 arrays by name; ValueError naming a missing, extra or misshapen input."""
        missing = sorted(set(self.input_names) - set(inputs))
        extra = sorted(set(inputs) - set(self.input_names))
        if missing or extra:
            raise ValueError(f"graph inputs are {list(self.input_names)}; missing {missing}, unexpected {extra}")
        checked = {}
        for name, expected in self.input_shapes.items():
            value = np.asarray(inputs[name])
            if value.shape != expected:
                raise ValueError(f"input {name!r} has shape {value.shape}, graph expects {expected}")
            if not np.issubdtype(value.dtype, np.floating):
                raise ValueError(f"input {name!r} has dtype {value.dtype}; graphs compute in float32")
            checked[name] = value.astype(np.float32)
        return checked

    def validate(self) -> None:
        """Check acyclicity, consumer lists, shapes (re-inferred) and the interface; ValueError if broken."""
        order = self.order
        if len(set(self.inputs)) != len(self.inputs) or any(self.nodes[i].op != "input" for i in self.inputs):
            raise ValueError("graph inputs must be distinct input nodes")
        names = [self.nodes[i].name for i in self.inputs]
        if len(set(names)) != len(names):
            raise ValueError(f"graph input names must be unique: {names}")
        for ref in self.outputs:
            if ref.node not in self.nodes or not 0 <= ref.index < len(self.nodes[ref.node].shapes):
                raise ValueError(f"graph output {ref} does not exist")
        for node_id in order:
            node = self.nodes[node_id]
            if node.op in ("input", "weight"):
                continue
            producers = [self.nodes[r.node] for r in node.inputs]
            try:
                shapes = OPS[node.op].infer(node.attrs, [p.shapes[r.index] for r, p in zip(node.inputs, producers)])
            except (ValueError, IndexError) as error:
                raise ValueError(f"node {node.name or node_id} ({node.op}): {error}") from None
            if shapes != node.shapes or node.constant != all(p.constant for p in producers):
                raise ValueError(f"node {node.name or node_id} ({node.op}) has stale shapes or constness")
        for node_id, uses in self._uses.items():
            for use in uses:
                if self.nodes[use.node].inputs[use.input_index].node != node_id:
                    raise ValueError(f"consumer list of node {node_id} is stale")


class GraphBuilder:
    """Builds a graph node by node (ids 0, 1, 2, ...), inferring and checking shapes as it goes."""

    def __init__(self) -> None:
        self._nodes: dict[int, Node] = {}
        self._inputs: list[int] = []
        self._names: set[str] = set()

    def _leaf(self, op: str, name: str, shape: Shape, value: np.ndarray | None) -> Ref:
        if not name or name in self._names:
            raise ValueError(f"{op} name {name!r} is empty or not unique")
        if any(int(d) < 1 for d in shape):
            raise ValueError(f"{op} {name!r} has a non-positive dimension: {tuple(shape)}")
        self._names.add(name)
        node_id = len(self._nodes)
        self._nodes[node_id] = Node(op, (), MappingProxyType({}), (tuple(int(d) for d in shape),),
                                    op == "weight", name, value)
        return Ref(node_id)

    def input(self, name: str, shape: Shape) -> Ref:
        ref = self._leaf("input", name, shape, None)
        self._inputs.append(ref.node)
        return ref

    def weight(self, name: str, value: np.ndarray) -> Ref:
        value = np.asarray(value, dtype=np.float32)
        value.setflags(write=False)
        return self._leaf("weight", name, value.shape, value)

    def add(self, op: str, inputs: Sequence[Ref], name: str = "", **attrs: Any) -> Ref:
        """Add an op; returns its first output (`add_outputs` returns all of them)."""
        return self.add_outputs(op, inputs, name, **attrs)[0]

    def add_outputs(self, op: str, inputs: Sequence[Ref], name: str = "", **attrs: Any) -> tuple[Ref, ...]:
        """Add an op; returns all its outputs."""
        node_id = len(self._nodes)
        node = make_node(op, inputs, attrs, self._nodes.__getitem__, name or f"#{node_id}", name)
        self._nodes[node_id] = node
        return tuple(Ref(node_id, k) for k in range(len(node.shapes)))

    def shape(self, ref: Ref) -> Shape:
        return self._nodes[ref.node].shapes[ref.index]

    def build(self, outputs: Mapping[str, Ref]) -> Graph:
        """Finish the graph; nodes not reachable from `outputs` are dropped (inputs are kept)."""
        live = set(self._inputs)
        stack = [r.node for r in outputs.values()]
        while stack:
            node_id = stack.pop()
            if node_id not in live:
                live.add(node_id)
                stack.extend(r.node for r in self._nodes[node_id].inputs)
        nodes = {i: n for i, n in self._nodes.items() if i in live}
        return Graph.from_nodes(nodes, self._inputs, list(outputs.values()), list(outputs))


def _content_id(op: str, attrs: Mapping[str, Any], inputs: tuple[Ref, ...], salt: int = 0) -> int:
    key = repr((op, tuple(attrs.items()), tuple(tuple(r) for r in inputs), salt)).encode()
    digest = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
    return _FIRST_DERIVED_ID | (digest >> 4)


class Patch:
    """One local rewrite of a graph: add nodes, redirect tensors, remove the replaced nodes.

    Nodes left without consumers (except graph inputs and outputs) are removed on commit.
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._new: dict[int, Node] = {}
        self._replacements: dict[Ref, Ref] = {}
        self._removed: set[int] = set()

    def node(self, node_id: int) -> Node:
        return self._new[node_id] if node_id in self._new else self.graph.nodes[node_id]

    def shape(self, ref: Ref) -> Shape:
        return self.node(ref.node).shapes[ref.index]

    def add(self, op: str, inputs: Sequence[Ref], **attrs: Any) -> Ref:
        return self.add_outputs(op, inputs, **attrs)[0]

    def add_outputs(self, op: str, inputs: Sequence[Ref], **attrs: Any) -> tuple[Ref, ...]:
        node = make_node(op, inputs, attrs, self.node, f"new {op}")
        salt = 0
        while True:
            node_id = _content_id(op, node.attrs, node.inputs, salt)
            existing = self._new.get(node_id) or self.graph.nodes.get(node_id)
            if existing is None:
                self._new[node_id] = node
                break
            if (existing.op == op and existing.inputs == node.inputs and existing.attrs == node.attrs
                    and node_id not in self._removed):
                break  # the same computation already exists: share it
            salt += 1
        return tuple(Ref(node_id, k) for k in range(len(node.shapes)))

    def replace(self, old: Ref, new: Ref) -> None:
        """Redirect every consumer of tensor `old` to `new` (same shape and constness)."""
        if self.shape(old) != self.shape(new) or self.node(old.node).constant != self.node(new.node).constant:
            raise ValueError(f"cannot replace {old} (shape {self.shape(old)}) by {new} (shape {self.shape(new)}): "
                             "shapes or constness differ")
        self._replacements[old] = new

    def remove(self, *node_ids: int) -> None:
        self._removed.update(node_ids)

    def commit(self) -> tuple[Graph, Delta]:
        """Apply the patch: O(size of the change) besides one shallow copy of the node table."""
        g = self.graph
        nodes = g.nodes.copy()  # copy() of a mappingproxy is a fast dict copy
        uses: dict[int, list[Use]] = {}  # consumer lists that change, copied on first touch
        structure = g.structure_hash - hash(g.outputs)

        def use_list(node_id: int) -> list[Use]:
            if node_id not in uses:
                uses[node_id] = list(g.uses(node_id)) if node_id in g.nodes else []
            return uses[node_id]

        touched: set[int] = set()
        for node_id, node in self._new.items():
            nodes[node_id] = node
            use_list(node_id)
            structure += _term(node_id, node)
            for position, ref in enumerate(node.inputs):
                use_list(ref.node).append(Use(node_id, position))
                touched.add(ref.node)

        rewired: dict[int, list[Ref]] = {}
        for old, new in self._replacements.items():
            for use in g.uses(old.node):
                if use.node in self._removed or nodes[use.node].inputs[use.input_index] != old:
                    continue
                rewired.setdefault(use.node, list(nodes[use.node].inputs))[use.input_index] = new
                use_list(old.node).remove(use)
                use_list(new.node).append(use)
                touched.update((old.node, new.node))
        for node_id, inputs in rewired.items():
            before = nodes[node_id]
            after = replace(before, inputs=tuple(inputs))  # same shapes and constness: `replace` checks
            nodes[node_id] = after
            structure += _term(node_id, after) - _term(node_id, before)
        outputs = tuple(self._replacements.get(r, r) for r in g.outputs)

        removed: set[int] = set()
        output_nodes = {r.node for r in outputs}
        doomed = list(self._removed)
        while doomed:
            node_id = doomed.pop()
            if node_id in removed:
                continue
            node = nodes.pop(node_id)
            removed.add(node_id)
            structure -= _term(node_id, node)
            for position, ref in enumerate(node.inputs):
                producer = use_list(ref.node)
                producer.remove(Use(node_id, position))
                touched.add(ref.node)
                if (not producer and ref.node in nodes and ref.node not in output_nodes
                        and nodes[ref.node].op != "input"):
                    doomed.append(ref.node)
        for node_id in removed:
            if use_list(node_id) or node_id in output_nodes:
                raise ValueError(f"patch removes node {node_id} whose outputs are still used")
            del uses[node_id]

        all_uses = g._uses.copy()
        for node_id in removed:
            all_uses.pop(node_id, None)
        all_uses.update((k, tuple(v)) for k, v in uses.items())
        graph = Graph(MappingProxyType(nodes), g.inputs, outputs, g.output_names, MappingProxyType(all_uses),
                      (structure + hash(outputs)) & _HASH_MASK)
        added = frozenset(self._new) - removed
        delta = Delta(frozenset(removed), added, frozenset(rewired) - removed,
                      frozenset(touched) - removed - added - set(rewired),
                      tuple(i for i in self._new if i not in removed), frozenset(removed - self._removed))
        return graph, delta


def node_signatures(graph: Graph) -> dict[int, int]:
    """Node id -> a hash of what the node computes (op, attributes, shapes, constness, leaf name, and the
    signatures of its inputs): equal across two graphs for nodes that compute the same thing, whatever
    their ids. Compares `JaxEnv` and `Env` graphs and locations."""
    signature: dict[int, int] = {}
    for node_id in graph.order:
        node = graph.nodes[node_id]
        signature[node_id] = hash((node.op, tuple(sorted(node.attrs.items())), node.shapes, node.constant,
                                   node.name if node.op in ("input", "weight") else "",
                                   tuple((signature[r.node], r.index) for r in node.inputs)))
    return signature


def canonical_form(graph: Graph) -> tuple[Counter, tuple[int, ...]]:
    """The multiset of node signatures and the signatures of the outputs: equal for graphs that compute the
    same thing node for node."""
    signature = node_signatures(graph)
    return Counter(signature.values()), tuple(hash((signature[r.node], r.index)) for r in graph.outputs)
