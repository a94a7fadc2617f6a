"""Graphs to slots and back: `GraphCodec` encodes a `jaxgraph.graph.Graph` as the `GraphState` of `jaxgraph.jax_graph`
in fixed sizes and decodes a state into a `Graph` again, node ids = slots.

A codec is immutable, sizes only, built once (`GraphCodec.over`) from the graphs it will hold; encoding and decoding
read nothing else, and any graph that fits the sizes encodes. A float attribute (eps, clip bounds) travels as a 32-bit
fingerprint of its value (`jaxgraph.jax_graph.float_code`), so no table of values grows as graphs are encoded: `decode`
reads the value back from the graph the state started from (rewrites copy floats, never make new ones; the ops'
defaults are known too), and `encode` refuses a graph two of whose floats share a fingerprint. Attribute vectors are
written by `jaxgraph.jax_graph.attr_row`, the one writer of the layout, which the rules' and patterns' rewrites use
in jit as well.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph.graph import Graph, Node, Ref, make_node
from jaxgraph.jax_graph import (
    FLOAT_FIELDS,
    OP_ID,
    PLACES,
    TUPLE_FIELDS,
    TUPLE_LEN,
    TUPLE_START,
    GraphState,
    attr_code,
    attr_field,
    attr_row,
    attr_value,
    float_code,
)
from jaxgraph.ops import OP_TYPES, OPS
from jaxsched.common.arguments import integer

_DEFAULT_FLOATS = [value for op in OP_TYPES for key, value in OPS[op].defaults.items() if key in FLOAT_FIELDS]


def _floats(graph: Graph) -> dict[int, float]:
    """fingerprint -> value of every float attribute of `graph` and of the ops' defaults. ValueError if two values
    share a fingerprint."""
    table: dict[int, float] = {}
    values = _DEFAULT_FLOATS + [v for n in graph.nodes.values() for k, v in n.attrs.items() if k in FLOAT_FIELDS]
    for value in values:
        code = float_code(value)
        if table.setdefault(code, value) != value:
            raise ValueError(f"float attributes {table[code]!r} and {value!r} share the fingerprint {code}; one graph "
                             "cannot hold both")
    return table


@dataclasses.dataclass(frozen=True)
class GraphCodec:
    """`Graph` <-> `GraphState` in static sizes: C = `node_capacity` slots, K = `max_inputs` inputs, O = `max_outputs`
    outputs of rank <= R = `max_rank` per node, Q = `num_outputs` graph outputs; `edge_capacity` edges at most."""

    node_capacity: int
    edge_capacity: int
    max_inputs: int
    max_outputs: int
    max_rank: int
    num_outputs: int

    def __post_init__(self) -> None:
        """Every size an integer >= 1 (stored as a Python int); ValueError naming the one that is not."""
        for field in dataclasses.fields(self):
            object.__setattr__(self, field.name, integer(field.name, getattr(self, field.name), 1))

    @classmethod
    def over(cls, graphs: Sequence[Graph], node_capacity: int | None = None, edge_capacity: int | None = None,
             min_outputs: int = 2) -> GraphCodec:
        """The codec of `graphs` (one output count): by default twice the largest graph's nodes and edges, at least
        5 inputs (batch norm's), rank 4 and `min_outputs` outputs per node. ValueError for no graphs or several
        output counts."""
        graphs = tuple(graphs)
        if not graphs or not all(isinstance(g, Graph) for g in graphs):
            raise ValueError("a GraphCodec needs a non-empty sequence of Graphs")
        output_counts = sorted({len(g.outputs) for g in graphs})
        if len(output_counts) > 1:
            raise ValueError(f"the graphs have different output counts {output_counts}; one environment holds graphs "
                             "of one output count")
        nodes = [n for g in graphs for n in g.nodes.values()]
        return cls(node_capacity=2 * max(len(g) for g in graphs) if node_capacity is None else node_capacity,
                   edge_capacity=2 * max(g.num_edges for g in graphs) if edge_capacity is None else edge_capacity,
                   max_inputs=max(5, max(len(n.inputs) for n in nodes)),
                   max_outputs=max(min_outputs, max(len(n.shapes) for n in nodes)),
                   max_rank=max(4, max(len(s) for n in nodes for s in n.shapes)),
                   num_outputs=output_counts[0])

    @property
    def attr_size(self) -> int:
        """A: the attribute vector's width (the tuple field holds a perm, a shape or O split sizes)."""
        return TUPLE_START + max(self.max_rank, self.max_outputs)

    def encode(self, graph: Graph) -> GraphState:
        """A `Graph` in slots: node k of `graph.order` in slot k (as `Env` places them). ValueError if it does not fit
        the sizes or two of its floats share a fingerprint."""
        capacity = self.node_capacity
        if len(graph) > capacity or len(graph.outputs) != self.num_outputs:
            raise ValueError(f"graph with {len(graph)} nodes and {len(graph.outputs)} outputs does not fit node "
                             f"capacity {capacity} with {self.num_outputs} outputs")
        if graph.num_edges > self.edge_capacity:
            raise ValueError(f"graph with {graph.num_edges} edges does not fit edge capacity {self.edge_capacity}")
        _floats(graph)
        op = np.full(capacity, -1, np.int32)
        attrs = np.zeros((capacity, self.attr_size), np.int32)
        inputs = np.full((capacity, self.max_inputs), capacity, np.int32)
        input_index = np.zeros((capacity, self.max_inputs), np.int32)
        num_inputs, num_outputs = np.zeros(capacity, np.int32), np.zeros(capacity, np.int32)
        shapes = np.ones((capacity, self.max_outputs, self.max_rank), np.int32)
        rank = np.zeros((capacity, self.max_outputs), np.int32)
        constant, origin = np.zeros(capacity, bool), np.full(capacity, -1, np.int32)
        slot = {node_id: k for k, node_id in enumerate(graph.order)}
        id_rank = {node_id: k for k, node_id in enumerate(sorted(graph.nodes))}  # ids may be 64-bit hashes
        for node_id, k in slot.items():
            node = graph.nodes[node_id]
            if (len(node.inputs) > self.max_inputs or len(node.shapes) > self.max_outputs
                    or any(len(s) > self.max_rank for s in node.shapes)):
                raise ValueError(f"node {node.name or node_id} ({node.op}) exceeds the environment's sizes")
            op[k], attrs[k], constant[k] = OP_ID[node.op], self._attr_row(node), node.constant
            origin[k] = id_rank[node_id]
            num_inputs[k], num_outputs[k] = len(node.inputs), len(node.shapes)
            for position, ref in enumerate(node.inputs):
                inputs[k, position], input_index[k, position] = slot[ref.node], ref.index
            for j, s in enumerate(node.shapes):
                shapes[k, j, :len(s)], rank[k, j] = s, len(s)
        outputs = np.array([(slot[r.node], r.index) for r in graph.outputs], np.int32).reshape(-1, 2)
        return jax.tree.map(jnp.asarray, GraphState(op, attrs, inputs, input_index, num_inputs, shapes, rank,
                                                    num_outputs, constant, origin, outputs))

    def _attr_row(self, node: Node) -> np.ndarray:
        """The attribute vector of `node`."""
        codes = {}
        for key, value in node.attrs.items():
            if key in TUPLE_FIELDS:
                if len(value) > self.attr_size - TUPLE_START:
                    raise ValueError(f"{node.op} attribute {key}={value} is longer than the environment allows")
                codes[key] = np.asarray(value, np.int32).reshape(-1)
            elif key in PLACES:
                codes[key] = attr_code(key, value)
            else:
                raise ValueError(f"attribute {key!r} of op {node.op!r} has no slot in the attribute vector")
        return attr_row(np.zeros(self.attr_size, np.int32), **codes)

    def _attrs(self, op: str, row: np.ndarray, floats: dict[int, float]) -> dict[str, Any]:
        """The attributes of an `op` node from its attribute vector (the inverse of `_attr_row`), the float values
        looked up by fingerprint in `floats`."""
        attrs = {}
        for key in OPS[op].defaults:
            if key in TUPLE_FIELDS:
                attrs[key] = tuple(int(d) for d in row[TUPLE_START:TUPLE_START + row[TUPLE_LEN]])
            elif key in FLOAT_FIELDS:
                code = int(attr_field(row, key))
                if code not in floats:
                    raise ValueError(f"{op} attribute {key} has fingerprint {code}, which no float of the instance "
                                     "graph has: decode a state with the graph it started from")
                attrs[key] = floats[code]
            else:
                attrs[key] = attr_value(key, attr_field(row, key))
        return attrs

    def decode(self, g: GraphState, instance: Graph) -> Graph:
        """The `Graph` in `g` (one unbatched state), node ids = slots; shapes re-inferred by the IR and checked against
        the state's. Leaves take their names and weight values from `instance`, the graph the state's episode started
        from (`g` is its encoding or a rewrite of it), so the decoded graph runs (`jaxgraph.execute`); so do its float
        attributes' values. ValueError if the state is not a graph the IR accepts."""
        ids = sorted(instance.nodes)  # `origin` holds ranks in this order
        floats = _floats(instance)
        g = jax.tree.map(np.asarray, g)
        alive = np.flatnonzero(g.op >= 0)
        pending = {int(k): set(int(s) for s in g.inputs[k, :g.num_inputs[k]]) for k in alive}
        nodes: dict[int, Node] = {}
        while pending:
            ready = sorted(k for k, deps in pending.items() if deps <= nodes.keys())
            if not ready:
                raise ValueError("graph state has a cycle or reads a free slot")
            for k in ready:
                del pending[k]
                op = OP_TYPES[g.op[k]]
                shapes = tuple(tuple(int(d) for d in g.shapes[k, j, :g.rank[k, j]]) for j in range(g.num_outputs[k]))
                if op in ("input", "weight"):
                    leaf = instance.nodes[ids[g.origin[k]]]
                    nodes[k] = Node(op, (), {}, shapes, op == "weight", leaf.name, leaf.value)
                    continue
                refs = [Ref(int(s), int(i)) for s, i in zip(g.inputs[k, :g.num_inputs[k]],
                                                            g.input_index[k, :g.num_inputs[k]])]
                node = make_node(op, refs, self._attrs(op, g.attrs[k], floats), nodes.__getitem__, f"slot {k}")
                if node.shapes != shapes or node.constant != bool(g.constant[k]):
                    raise ValueError(f"slot {k} ({op}) holds shapes {shapes}, constness {bool(g.constant[k])}; the IR "
                                     f"infers {node.shapes}, {node.constant}")
                nodes[k] = node
        inputs = [k for k in sorted(nodes) if nodes[k].op == "input"]
        inputs.sort(key=lambda k: instance.inputs.index(ids[g.origin[k]]))
        return Graph.from_nodes(nodes, inputs, [Ref(int(s), int(i)) for s, i in g.outputs], instance.output_names)
