"""The graph-rewriting environment as pure JAX, the jitted twin of `jaxgraph.env.Env`: `reset` and `step` jit and
vmap and equal `Env` step for step (`jaxgraph.parity`). The graph is a `GraphState` (`jaxgraph.jax_graph`), the rules
match and build in `jaxgraph.jax_rules` and `jaxgraph.jax_match` (data rules), edits commit in `jaxgraph.jax_edits`,
the cost is `jaxgraph.jax_cost.node_costs`, graphs convert through a `jaxgraph.graph_codec.GraphCodec`; this module
holds the environment's state types, step and observation.

Convention (shared with `Env`, `jaxgraph.timestep`): `reset(key, params) -> (EnvState, TimeStep)` and `step(key,
state, action, params) -> (EnvState, TimeStep)`; the time step's discount is 0 when the episode terminated, 1 when it
was truncated or goes on; extras "cost" and "invalid".

Instances (Jumanji-style generators): the environment is built for one graph or a list of graphs (a fixed list, or a
pool drawn by `jaxgraph.instances`' seeded random-graph and trap generators); its static sizes cover them all, so one
compilation serves every one. `params()` holds them all padded to those sizes ([N, ...] leaves), with their
locations matched once (on the host, by `Env`'s matcher), and `reset(key, params)` draws one uniformly with `key`
(`draw`); `reset_to(index, params)` starts a given one.

Slots and location ids are `Env`'s. Differences from `Env`, all deliberate:
- Bounds: as `jaxgraph.jax_rules` says for siblings and splits; each root op's list holds at most `root_capacity[op]`
  slots; as with the node capacity, a rewrite that could overfill a list is not offered.
- Edge rows: a node's inputs live in its slot (`max_inputs` of them). The observation has `edge_capacity` edge
  rows, as `Env`'s: the live inputs first, in order of (receiving slot, input position), where Env allocates its
  rows from a free list (the same edges, in another row order).
- Invalid actions (a masked-out xfer or location, an id out of range) do not raise (`Env` raises `ValueError`;
  nothing can raise inside jit): the graph stays, the reward is `-invalid_penalty` (an `EnvParams` field, default
  0), `extras["invalid"]` is true and the episode goes on (MID).
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import jraph
import numpy as np

from jaxgraph.backends import BACKENDS, TASO
from jaxgraph.cost import DEFAULT_COST_MODEL, CostModel, Roofline
from jaxgraph.env import NODE_FEATURES, Env, Observation
from jaxgraph.graph import Graph
from jaxgraph.graph_codec import GraphCodec
from jaxgraph.jax_cost import SPARE_PASSES, CostParams, node_costs
from jaxgraph.jax_edits import apply_edit, sweep
from jaxgraph.jax_graph import OP_ID, GraphState, attr_code, first_true, materialized, slot_view, stack_rows, tensors
from jaxgraph.jax_match import MATCHERS, PatternTable, default_matcher
from jaxgraph.jax_rules import JAX_RULE_FAMILIES, JAX_RULES, sibling_table
from jaxgraph.ops import ACTIVATIONS, OP_TYPES, OPS
from jaxgraph.patterns import DATA_FAMILY
from jaxgraph.rules import Rule
from jaxgraph.timestep import TimeStep, outcome, restart
from jaxsched.common.arguments import integer, number


class EnvParams(NamedTuple):
    """The instances (initial graphs) `reset` draws from with their locations, the cost model's numbers and the
    episode's; all traced, so one compilation serves every instance of the same capacity. Made by `JaxEnv.params`,
    which matches the instances once, apart from any rollout: `reset` copies their locations and matches nothing,
    so new `instances` need new params from `JaxEnv.params` (a `_replace` of `instances` alone keeps the old
    locations)."""

    instances: GraphState  # leaves [N, ...]: N initial graphs in slots
    cost: CostParams  # what `node_costs` reads
    max_steps: jax.Array  # int32; 0: no truncation
    invalid_penalty: jax.Array  # reward of an invalid action is minus this
    xfer_mask: jax.Array  # [N, X + 1] bool: each instance's, as `EnvState` holds them
    location_mask: jax.Array  # [N, X, L] bool
    location_nodes: jax.Array  # [N, X, L, M] int32


class EnvState(NamedTuple):
    """Everything a step reads: the graph, per-slot costs, the current locations and the step count."""

    graph: GraphState
    instance: jax.Array  # int32: which of `EnvParams.instances` the episode started from
    node_cost: jax.Array  # [C] float32 ms
    cost: jax.Array  # float32 ms
    initial_cost: jax.Array  # float32 ms
    steps: jax.Array  # int32
    xfer_mask: jax.Array  # [X + 1] bool
    location_mask: jax.Array  # [X, L] bool
    location_nodes: jax.Array  # [X, L, M] int32, padded with C


_ACTIVATED = np.array(["activation" in OPS[op].defaults for op in OP_TYPES])
_KERNELED = np.array(["kernel" in OPS[op].defaults for op in OP_TYPES])
_STRIDED = np.array(["stride" in OPS[op].defaults for op in OP_TYPES])


def _log2(x: jax.Array) -> jax.Array:
    return jnp.log2(1.0 + x.astype(jnp.float32))


def _shape_features(shape: jax.Array, rank: jax.Array) -> jax.Array:
    """[N, 5] from shapes [N, R] (R >= 4) and ranks [N]: log2 of the first four dims (0 past the rank) and
    log2(size) / 8, the tensor part of `Env`'s node and edge features."""
    dims = jnp.where(jnp.arange(4)[None, :] < rank[:, None], _log2(shape[:, :4]), 0.0)
    size = jnp.prod(shape.astype(jnp.float32), axis=1)
    return jnp.concatenate([dims, (_log2(size) / 8.0)[:, None]], axis=1)


def _node_features(g: GraphState, costs: jax.Array) -> jax.Array:
    """[C + 1, NODE_FEATURES]: `jaxgraph.env.node_features` of every slot; free slots and the dummy are zero."""
    op = jnp.maximum(g.op, 0)
    # one-hot rows as a select, not a bool -> float convert: XLA's CPU loop for the select is about 2x faster
    one_hot = jnp.where(op[:, None] == jnp.arange(len(OP_TYPES))[None, :], 1.0, 0.0)
    activated = jnp.asarray(_ACTIVATED)[op, None]
    activation = jnp.where((g.attrs[:, :1] == jnp.arange(len(ACTIVATIONS))[None, :]) & activated, 1.0, 0.0)
    rank = g.rank[:, 0]
    tensor = _shape_features(g.shapes[:, 0], rank)
    kernel = g.attrs[:, 8:10].astype(jnp.float32) * jnp.asarray(_KERNELED, jnp.float32)[op, None]
    stride = g.attrs[:, 1:3].astype(jnp.float32) * jnp.asarray(_STRIDED, jnp.float32)[op, None]
    rows = jnp.concatenate([
        one_hot, activation, g.constant[:, None].astype(jnp.float32), tensor[:, :4],
        (rank.astype(jnp.float32) / 4.0)[:, None], tensor[:, 4:],
        (g.num_outputs.astype(jnp.float32) / 4.0)[:, None], kernel, stride, _log2(1e3 * costs)[:, None]], axis=1)
    rows = jnp.where(g.alive[:, None], rows, 0.0)
    return jnp.concatenate([rows, jnp.zeros((1, NODE_FEATURES), jnp.float32)])


def _max_siblings(graph: Graph) -> int:
    """The most nodes that read one tensor as their first input (the partners a sibling-pair rule scans)."""
    readers = Counter(node.inputs[0] for node in graph.nodes.values() if node.inputs)
    return max(readers.values(), default=1)


def _max_readers(graph: Graph) -> int:
    """The most distinct nodes that read one tensor (the candidates of a data rule's consumer or external step)."""
    readers = Counter(ref for node in graph.nodes.values() for ref in set(node.inputs))
    return max(readers.values(), default=1)


class JaxEnv:
    """`Env` as pure functions over `EnvState`: `reset(key, params)`, `step(key, state, action, params)`, both
    returning `(EnvState, TimeStep)`.

    Static sizes live here (xfers X, locations L, location size M) and in `codec`, the `GraphCodec` built once over
    every graph of `graphs` (one `Graph` or a sequence): node capacity C, inputs per node K, outputs per node O (at
    least `max_siblings`), rank R, graph outputs Q. The instances live in `EnvParams` (`self.params(graphs)`,
    default all of `self.instances`): any graphs that fit the same sizes. A graph over the capacities raises
    `ValueError`.
    `rules` must come from families in `JAX_RULE_FAMILIES` (default: `JAX_RULES`, those of `RULES`) or be data rules
    (`jaxgraph.patterns`: `TASO_RULES` is both), matched by `jaxgraph.jax_match.PatternTable` with the grouping
    `matcher` (one of `jax_match.MATCHERS`; default: the fastest measured on `jax.default_backend()`). A data rule that
    needs an op the instances can never come to hold is pruned (it costs nothing; `encode` refuses graphs with other
    ops), and its consumer and external steps see the first `max_readers` readers of a tensor (default: 4 or the
    most distinct readers of one tensor in the instances, if more; `encode` refuses a graph over it) and of their
    candidates that meet the source's ops, constraints and reads, the first `max_locations` are checked for shapes;
    `cost_model` must be a `Roofline` (any of the backends taso, xla, onnxruntime; measured models raise
    `ValueError`). `fusion_passes` (static) is how many absorb passes a fused backend's cost runs: by default
    `backend.absorb_depth(graph) + 2`, so a few rewrites that lengthen a chain of fusions stay exact.

    Each family is matched only at the slots of its root op (`JaxRule.root`): the first N_op slots holding
    that op, N_op = `root_capacity[op]`, by default the graph's count of the op plus, for the ops a rewrite can
    multiply (`JaxRule.growth`), that growth times the graph's conv, matmul and mul nodes (the nodes those
    rewrites consume). Like the node capacity, a root capacity is never exceeded: a rewrite is offered only
    when every list it can grow has room.
    """

    def __init__(self, graphs: Graph | Sequence[Graph], max_locations: int = 200, rules: Sequence[Rule] = JAX_RULES,
                 cost_model: CostModel | None = None, node_capacity: int | None = None,
                 edge_capacity: int | None = None, max_location_size: int = 8, max_steps: int | None = None,
                 invalid_penalty: float = 0.0, max_siblings: int | None = None, max_readers: int | None = None,
                 root_capacity: dict[str, int] | None = None, fusion_passes: int | None = None,
                 matcher: str | None = None) -> None:
        self.rules, self.matcher = tuple(rules), default_matcher() if matcher is None else matcher
        if self.matcher not in MATCHERS:
            raise ValueError(f"unknown matcher {self.matcher!r}; known: {', '.join(MATCHERS)}")
        if not self.rules:
            raise ValueError("need at least one rule")
        unsupported = sorted({r.family for r in self.rules} - set(JAX_RULE_FAMILIES) - {DATA_FAMILY})
        if unsupported:
            raise ValueError(f"rule families {unsupported} have no JAX implementation; supported: "
                             f"{sorted(JAX_RULE_FAMILIES)} and {DATA_FAMILY} (data rules)")
        model = cost_model or DEFAULT_COST_MODEL
        if not isinstance(model, Roofline) or model.backend not in BACKENDS.values():
            raise ValueError(f"JaxEnv computes the analytic Roofline cost of the backends {sorted(BACKENDS)}, got "
                             f"{model!r}")
        self.model = model
        self.instances = (graphs,) if isinstance(graphs, Graph) else tuple(graphs)
        if not self.instances or not all(isinstance(g, Graph) for g in self.instances):
            raise ValueError("JaxEnv needs a Graph or a non-empty sequence of Graphs")
        if fusion_passes is None:
            fusion_passes = (max(model.backend.absorb_depth(g) for g in self.instances) + SPARE_PASSES
                             if model.backend.fuses else 0)
        self.fusion_passes = integer("fusion_passes", fusion_passes, 0)
        self.max_locations = integer("max_locations", max_locations, 1)
        self.max_location_size = integer("max_location_size", max_location_size, 2)
        self.max_steps = 0 if max_steps is None else integer("max_steps", max_steps, 1)
        self.invalid_penalty = number("invalid_penalty", invalid_penalty, 0.0)
        self.max_siblings = (max(4, max(_max_siblings(g) for g in self.instances)) if max_siblings is None
                             else integer("max_siblings", max_siblings, 1))
        self.codec = GraphCodec.over(self.instances, node_capacity, edge_capacity, max(2, self.max_siblings))
        self.node_capacity, self.edge_capacity = self.codec.node_capacity, self.codec.edge_capacity
        self.max_inputs, self.max_outputs, self.max_rank = (self.codec.max_inputs, self.codec.max_outputs,
                                                            self.codec.max_rank)
        self.num_outputs = self.codec.num_outputs
        nodes = [n for g in self.instances for n in g.nodes.values()]
        self._growth = np.array([(r.max_node_growth, r.max_edge_growth) for r in self.rules], np.int32)
        # hand rules grouped by family: one match (vmapped over the family's parameters) and one build per family
        hand = [x for x, r in enumerate(self.rules) if r.family != DATA_FAMILY]
        data = [x for x, r in enumerate(self.rules) if r.family == DATA_FAMILY]
        self._families = tuple(dict.fromkeys(self.rules[x].family for x in hand))
        grouped = [[x for x in hand if self.rules[x].family == f] for f in self._families]
        self._variant_params = [
            {key: np.array([attr_code(key, dict(self.rules[x].params)[key]) for x in xfers], np.int32)
             for key, _ in self.rules[xfers[0]].params} for xfers in grouped]
        self._variant_counts = [len(xfers) for xfers in grouped]
        # a data rule's family index is len(self._families) (one generic build) and its row in the table `_data_row`
        self._family_of = np.array([len(self._families) if r.family == DATA_FAMILY else self._families.index(r.family)
                                    for r in self.rules], np.int32)
        self._data_row = np.zeros(len(self.rules), np.int32)
        self._data_row[data] = np.arange(len(data))
        makes = [(frozenset({JAX_RULE_FAMILIES[f].root}), frozenset(JAX_RULE_FAMILIES[f].makes))
                 for f in self._families]
        self.data_rules = PatternTable([self.rules[x].pattern for x in data], {n.op for n in nodes}, makes,
                                       self.matcher, self.max_location_size) if data else None
        self.max_readers = (max(4, max(_max_readers(g) for g in self.instances)) if max_readers is None
                            else integer("max_readers", max_readers, 1))
        # where each xfer's locations come from: (piece, row) of `_locations`' pieces, a family's then a data group's
        families = len(self._families)
        self._picks = [None] * len(self.rules)
        for f, xfers in enumerate(grouped):
            for row, x in enumerate(xfers):
                self._picks[x] = (f, row)
        for row, x in enumerate(data):
            pick = self.data_rules.picks[row]
            self._picks[x] = None if pick is None else (families + pick[0], pick[1])
        # root lists: one per root op of the rules, each with its static length N_op
        self._roots = tuple(dict.fromkeys([JAX_RULE_FAMILIES[f].root for f in self._families]
                                          + list(self.data_rules.roots if data else ())))
        growths = [self.data_rules.growth(int(self._data_row[x])) if r.family == DATA_FAMILY else
                   dict(JAX_RULE_FAMILIES[r.family].growth) for x, r in enumerate(self.rules)]
        growth = {op: max(g.get(op, 0) for g in growths) for op in self._roots}
        self.root_capacity = {op: 1 for op in self._roots}
        for g in self.instances:
            counts = Counter(node.op for node in g.nodes.values())
            consumed = counts["conv2d"] + counts["matmul"] + counts["mul"]
            for op in self._roots:
                self.root_capacity[op] = max(self.root_capacity[op], min(self.node_capacity,
                                                                         counts[op] + growth[op] * consumed))
        unknown = sorted(set(root_capacity or {}) - {r.root_op for r in self.rules})
        if unknown:
            raise ValueError(f"root_capacity names ops {unknown} that root none of the rules; roots: {self._roots}")
        for op, size in (root_capacity or {}).items():
            size = integer(f"root_capacity[{op!r}]", size, 1)
            if op in self.root_capacity:  # not the root of pruned data rules only
                self.root_capacity[op] = size
        self._root_growth = np.array([[g.get(op, 0) for op in self._roots] for g in growths], np.int32)

    @property
    def num_xfers(self) -> int:
        return len(self.rules)

    @property
    def attr_size(self) -> int:
        """A: the width of a slot's attribute vector (the codec's)."""
        return self.codec.attr_size

    # ------------------------------------------------------------ conversion

    def encode(self, graph: Graph) -> GraphState:
        """A `Graph` in slots (`GraphCodec.encode`: node k of `graph.order` in slot k, as `Env` places them).
        ValueError if it does not fit the environment's sizes and bounds."""
        state = self.codec.encode(graph)
        if _max_siblings(graph) > self.max_siblings:
            raise ValueError(f"a tensor of the graph is the first input of {_max_siblings(graph)} nodes, more than "
                             f"max_siblings={self.max_siblings}")
        if self.data_rules is not None:
            readers = _max_readers(graph)
            if readers > self.max_readers:
                raise ValueError(f"a tensor of the graph is read by {readers} nodes, more than "
                                 f"max_readers={self.max_readers}")
            foreign = sorted({node.op for node in graph.nodes.values()} - self.data_rules.reachable)
            if foreign:
                raise ValueError(f"the graph holds ops {foreign} that the environment's instances cannot come to "
                                 "hold, so data rules that read them were pruned: build the JaxEnv with this graph")
        counts = Counter(node.op for node in graph.nodes.values())
        over = {op: counts[op] for op, size in self.root_capacity.items() if counts[op] > size}
        if over:
            raise ValueError(f"the graph has more nodes of ops {over} than the environment's root_capacity "
                             f"{self.root_capacity}")
        return state

    def decode(self, g: GraphState, instance: Graph | int | None = None) -> Graph:
        """The `Graph` in `g` (one unbatched state), node ids = slots (`GraphCodec.decode`). Leaves take their names
        and weight values from the graph `g` was encoded from (`instance`: a `Graph`, or an index into
        `self.instances` such as `EnvState.instance`; default the only instance), so the decoded graph runs
        (`jaxgraph.execute`)."""
        if instance is None:
            if len(self.instances) > 1:
                raise ValueError(f"the environment holds {len(self.instances)} instances: pass which one the state "
                                 "started from (EnvState.instance)")
            instance = 0
        if not isinstance(instance, Graph):
            index = integer("instance", np.asarray(instance), 0)
            if index >= len(self.instances):
                raise ValueError(f"instance {index} is not one of the environment's {len(self.instances)}")
            instance = self.instances[index]
        return self.codec.decode(g, instance)

    def params(self, graphs: Graph | Sequence[Graph] | None = None) -> EnvParams:
        """The `EnvParams` whose instances are `graphs` (one or several; default `self.instances`), each encoded in
        this environment's sizes. ValueError if a graph does not fit them or the backend's fusions in it need more
        passes than `fusion_passes`."""
        graphs = self.instances if graphs is None else (graphs,) if isinstance(graphs, Graph) else tuple(graphs)
        if not graphs:
            raise ValueError("params needs at least one graph")
        encoded = []
        for index, graph in enumerate(graphs):
            depth = self.model.backend.absorb_depth(graph)
            if depth > self.fusion_passes:
                raise ValueError(f"the {self.model.backend.name} fusions of graph {index} need {depth} passes, the "
                                 f"environment runs fusion_passes={self.fusion_passes}")
            try:
                encoded.append(self.encode(graph))
            except ValueError as error:
                raise ValueError(f"graph {index}: {error}") from None
        instances = jax.tree.map(lambda *leaves: jnp.stack(leaves), *encoded)
        located = [self._initial_locations(graph, state) for graph, state in zip(graphs, encoded)]
        return EnvParams(instances, CostParams.of(self.model), jnp.int32(self.max_steps),
                         jnp.float32(self.invalid_penalty), *(jnp.stack(parts) for parts in zip(*located)))

    def _initial_locations(self, graph: Graph, g: GraphState) -> tuple[jax.Array, jax.Array, jax.Array]:
        """`locations` of an initial graph (`g`: its encoding) without a program to compile: `Env`'s locations,
        found on the host by the matcher JaxEnv equals (the same slots, location ids and order), and JaxEnv's own
        bound on top, no rewrite offered that could overfill a root list (`_xfer_mask`)."""
        env = Env(graph, max_locations=self.max_locations, rules=self.rules, node_capacity=self.node_capacity,
                  edge_capacity=self.edge_capacity, cost_model=self.model, max_location_size=self.max_location_size)
        obs = env.reset().observation
        location_mask = jnp.asarray(obs.location_mask)
        xfer_mask = self._xfer_mask(g, location_mask, [(g.op == OP_ID[op]).sum() for op in self._roots])
        return xfer_mask, location_mask, jnp.asarray(obs.location_nodes, jnp.int32)

    def _xfer_mask(self, g: GraphState, location_mask: jax.Array, roots: list) -> jax.Array:
        """[X + 1] the xfers offered in a graph state of `roots` nodes in each root list (one per root op; none
        where every data rule is pruned): those with a location whose rewrite fits, its node, edge and root-list
        growth within what is free (a capacity is never exceeded), then the NO-OP."""
        growth = jnp.asarray(self._growth)
        free_roots = jnp.asarray([self.root_capacity[op] for op in self._roots], jnp.int32) - jnp.asarray(
            roots, jnp.int32)
        room = ((self.node_capacity - g.alive.sum() >= growth[:, 0])
                & (self.edge_capacity - g.num_inputs.sum() >= growth[:, 1])
                & (free_roots[None, :] >= jnp.asarray(self._root_growth)).all(axis=1))
        return jnp.concatenate([location_mask.any(axis=1) & room, jnp.ones(1, bool)])

    def node_costs(self, g: GraphState, params: EnvParams) -> jax.Array:
        """[C] float32 ms: `node_costs` under this environment's cost model."""
        return node_costs(g, params.cost, self.model.backend, self.fusion_passes)

    # ------------------------------------------------------------ environment

    def _root_lists(self, g: GraphState) -> dict[str, jax.Array]:
        """Per root op, the first N_op slots holding it, increasing, padded with C: where its families match.
        One sort of the slots keyed by (root op, slot) lays the lists end to end (on CPU about 2x cheaper than a
        running count per op)."""
        capacity, count = self.node_capacity, len(self._roots)
        position = np.full(len(OP_TYPES) + 1, count, np.int32)  # an op's place among the root ops; others last
        position[[OP_ID[op] for op in self._roots]] = np.arange(count)
        place = jnp.asarray(position)[jnp.where(g.op >= 0, g.op, len(OP_TYPES))]
        keys = jnp.sort(place * capacity + jnp.arange(capacity, dtype=jnp.int32))
        starts = (place[None, :] < jnp.arange(count)[:, None]).sum(axis=1)
        lists = {}
        for i, op in enumerate(self._roots):
            size = self.root_capacity[op]
            part = jax.lax.dynamic_slice(jnp.pad(keys, (0, size), constant_values=count * capacity), (starts[i],),
                                         (size,))
            lists[op] = jnp.where(part // capacity == i, part % capacity, capacity).astype(jnp.int32)
        return lists

    def locations(self, g: GraphState, reads: jax.Array | None = None) -> tuple[jax.Array, jax.Array, jax.Array]:
        """xfer mask [X + 1], location mask [X, L], location slots [X, L, M] of a graph state (`reads`: its
        `tensor_reads` where known), matched in JAX as every step matches its new state. Each family is matched once
        at the slots of its root op, vmapped over the parameters of its rules."""
        capacity, big_l, big_m = self.node_capacity, self.max_locations, self.max_location_size
        v = slot_view(g, reads=reads)
        lists = self._root_lists(g)
        paired = dict.fromkeys(JAX_RULE_FAMILIES[f].root for f in self._families if JAX_RULE_FAMILIES[f].pairs)
        tables = {op: sibling_table(g, lists[op], self.max_siblings) for op in paired}

        def first(found_x, rows_x):
            index = first_true(found_x[None], big_l)[0]
            valid = index < found_x.shape[0]
            return valid, jnp.where(valid[:, None], rows_x[jnp.minimum(index, found_x.shape[0] - 1)], capacity)

        masks, members = [], []
        for family, variants, count in zip(self._families, self._variant_params, self._variant_counts):
            rule = JAX_RULE_FAMILIES[family]
            roots = lists[rule.root]
            r = jnp.minimum(roots, capacity - 1)

            def match(params, rule=rule, roots=roots, r=r):
                if rule.pairs:  # [N, S] candidates (root slot, partner slot), flattened root-major
                    found, partners = rule.match(g, v, r, tables[rule.root], **params)
                    roots = jnp.broadcast_to(roots[:, None], found.shape)
                else:
                    found, partners = rule.match(g, v, r, **params)
                found = found & (roots < capacity)
                rows = jnp.stack([roots, *partners], axis=-1).reshape(-1, 1 + len(partners))[:, :big_m]
                rows = jnp.pad(rows, ((0, 0), (0, big_m - rows.shape[1])), constant_values=capacity)
                return first(found.reshape(-1), rows)

            found, rows = jax.vmap(match, axis_size=count)(variants)
            masks.append(found)
            members.append(rows)
        if self.data_rules is not None:
            found, rows = self.data_rules.locations(g, v.reads, lists, self.max_readers, big_l, big_m)
            masks += found
            members += rows
        location_mask = stack_rows(masks, self._picks, jnp.zeros(big_l, bool))
        location_nodes = stack_rows(members, self._picks, jnp.full((big_l, big_m), capacity, jnp.int32))
        xfer_mask = self._xfer_mask(g, location_mask, [(lists[op] < capacity).sum() for op in self._roots])
        return xfer_mask, location_mask, location_nodes.astype(jnp.int32)

    def _costs_after(self, g: GraphState, params: EnvParams, before: jax.Array, written: jax.Array) -> jax.Array:
        """[C] the node costs of `g`, a rewrite of a graph whose costs were `before` that wrote the slots `written`
        (C: none). Without fusion only those slots' costs change (`cost.affected`: a rewrite keeps the shapes of
        the tensors it replaces): they alone are computed, the freed slots' zeroed. A fused backend's kernels reach
        past them, so it recomputes every slot."""
        if self.model.backend is not TASO:
            return self.node_costs(g, params)
        fresh = node_costs(g, params.cost, TASO, rows=jnp.minimum(written, self.node_capacity - 1))
        return jnp.where(g.alive, before, 0.0).at[written].set(fresh, mode="drop")

    def draw(self, key: jax.Array, params: EnvParams) -> jax.Array:
        """The instance `reset(key, params)` starts: uniform over `params.instances` (int32)."""
        return jax.random.randint(key, (), 0, params.instances.op.shape[0], jnp.int32)

    def reset_to(self, instance: jax.Array, params: EnvParams) -> tuple[EnvState, TimeStep]:
        """The initial state of instance `instance` (an index into `params.instances`) and its FIRST time step. Its
        locations are copied from `params` (matched by `params()` on the host), so a program that resets holds no
        matcher of its own."""
        g = jax.tree.map(lambda leaf: leaf[instance], params.instances)
        costs = self.node_costs(g, params)
        state = EnvState(g, jnp.asarray(instance, jnp.int32), costs, costs.sum(), costs.sum(), jnp.int32(0),
                         params.xfer_mask[instance], params.location_mask[instance], params.location_nodes[instance])
        extras = {"cost": state.cost, "invalid": jnp.bool_(False)}
        return state, restart(self.observe(state), extras, shape=())

    def reset(self, key: jax.Array, params: EnvParams) -> tuple[EnvState, TimeStep]:
        """Draw an instance with `key` (`draw`) and start an episode on it."""
        return self.reset_to(self.draw(key, params), params)

    def step(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
             ) -> tuple[EnvState, TimeStep]:
        """Apply `action` = [xfer, location id] (int32 [2]); xfer X is the NO-OP that terminates. An invalid action
        leaves the graph, costs `params.invalid_penalty` and sets extras["invalid"] (`key` is unused)."""
        xfer, location_id = action[0], action[1]
        num_xfers = self.num_xfers
        noop = xfer == num_xfers
        in_range = (xfer >= 0) & (xfer < num_xfers) & (location_id >= 0) & (location_id < self.max_locations)
        safe_xfer = jnp.clip(xfer, 0, num_xfers - 1)
        safe_location = jnp.clip(location_id, 0, self.max_locations - 1)
        valid = in_range & state.xfer_mask[safe_xfer] & state.location_mask[safe_xfer, safe_location]
        location = state.location_nodes[safe_xfer, safe_location]
        branches = [JAX_RULE_FAMILIES[family].build for family in self._families]
        if self.data_rules is not None:
            row = jnp.asarray(self._data_row)[safe_xfer]
            branches.append(lambda g, location: self.data_rules.build(g, location, row))
        family = jnp.asarray(self._family_of)[safe_xfer]
        edit = jax.lax.switch(family, branches, state.graph, location)
        # an invalid action commits an empty edit (cheaper than selecting between two whole graphs)
        edit = edit._replace(removed=jnp.where(valid, edit.removed, self.node_capacity),
                             present=edit.present & valid, old=jnp.where(valid, edit.old, -1))
        graph, written = apply_edit(state.graph, materialized(edit))  # selected once, not per slot
        graph, reads = sweep(graph)
        costs = self._costs_after(graph, params, state.node_cost, written)
        reward = jnp.where(valid, (state.node_cost - costs).sum(), jnp.where(noop, 0.0, -params.invalid_penalty))
        steps = state.steps + jnp.where(noop, 0, 1)
        xfer_mask, location_mask, location_nodes = self.locations(graph, reads)
        new_state = EnvState(graph, state.instance, costs, state.cost - jnp.where(valid, reward, 0.0),
                             state.initial_cost, steps, xfer_mask, location_mask, location_nodes)
        terminated = noop | ~xfer_mask[:-1].any()
        truncated = ~terminated & (params.max_steps > 0) & (steps >= params.max_steps)
        extras = {"cost": new_state.cost, "invalid": ~valid & ~noop}
        return new_state, outcome(reward, self.observe(new_state), terminated, truncated, extras)

    def observe(self, state: EnvState) -> Observation:
        """The `Observation` of a state: `Env`'s layout and sizes. The live inputs fill the first edge rows, in order
        of (receiving slot, input position); the other `edge_capacity` rows are padding (the dummy node to itself)."""
        g, capacity, max_inputs = state.graph, self.node_capacity, self.max_inputs
        # compacted, not a row per (slot, input position): the agent's GNN pays per edge row
        index = first_true(g.live_inputs.reshape(1, -1), self.edge_capacity)[0]
        edge_mask = index < capacity * max_inputs
        index = jnp.where(edge_mask, index, 0)
        receivers, position = index // max_inputs, index % max_inputs
        senders = g.inputs.reshape(-1)[index]
        # the logs of the tensors the edges carry, not of every output of every slot (C x O, several times more)
        producer, output = jnp.minimum(senders, capacity - 1), g.input_index.reshape(-1)[index]
        shape_features = _shape_features(tensors(g.shapes, producer, output), tensors(g.rank, producer, output))
        edges = jnp.concatenate([shape_features, (position.astype(jnp.float32) / 4.0)[:, None]], axis=1)
        edges = jnp.where(edge_mask[:, None], edges, 0.0)
        globals_ = jnp.stack([state.cost, state.initial_cost, state.cost / state.initial_cost,
                              g.alive.sum().astype(jnp.float32) / capacity]).astype(jnp.float32)[None]
        graph = jraph.GraphsTuple(nodes=_node_features(g, state.node_cost), edges=edges,
                                  senders=jnp.where(edge_mask, senders, capacity).astype(jnp.int32),
                                  receivers=jnp.where(edge_mask, receivers, capacity).astype(jnp.int32),
                                  globals=globals_, n_node=jnp.array([capacity + 1], jnp.int32),
                                  n_edge=jnp.array([self.edge_capacity], jnp.int32))
        node_mask = jnp.concatenate([g.alive, jnp.zeros(1, bool)])
        return Observation(graph, node_mask, edge_mask, state.xfer_mask, state.location_mask, state.location_nodes)
