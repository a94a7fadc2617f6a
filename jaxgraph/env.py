"""The graph-rewriting RL environment of the thesis (section 3.3), with fixed-shape observations.

An action is `(xfer, location)`; xfer id `X = len(rules)` is the NO-OP that ends the episode. The
observation holds the graph as a `jraph.GraphsTuple` whose nodes live in fixed slots (removed nodes
free their slot, new nodes take the lowest free one), plus `xfer_mask [X + 1]`, `location_mask [X, L]`
and `location_nodes [X, L, M]` (the node slots of each location, for pointer-style location heads).
Array shapes never change during an episode, so one compiled agent serves every step; the slot layout
is the one a fixed-capacity, fully jitted environment would keep on device.

`reset() -> TimeStep` and `step(action) -> TimeStep` return Jumanji's `TimeStep` (`jaxgraph.timestep`), the
convention `JaxEnv` shares: the observation, the reward, FIRST / MID / LAST and a discount that is 0 when the
episode terminated and 1 when it was truncated. A bad action (masked out, out of range, not a pair of integers)
raises `ValueError`; `JaxEnv`, which cannot raise inside jit, gives it a documented penalty instead.

A step re-matches rules only around the rewrite (`LocationIndex.update`), updates the cost from the
touched nodes (`cost_change`) and rewrites only the touched rows of the observation arrays.
"""

from __future__ import annotations

import heapq
import math
from types import MappingProxyType
from typing import Mapping, NamedTuple, Sequence

import jraph
import numpy as np

from jaxgraph.cost import DEFAULT_COST_MODEL, CostModel, affected, cost, cost_change, node_cost
from jaxgraph.graph import Delta, Graph, Node
from jaxgraph.locations import LocationIndex
from jaxgraph.ops import ACTIVATIONS, OP_TYPES
from jaxgraph.rules import RULES, Location, Rule
from jaxgraph.timestep import TimeStep, outcome, restart, termination
from jaxsched.common.arguments import integer

NODE_FEATURES = len(OP_TYPES) + len(ACTIVATIONS) + 13
EDGE_FEATURES = 6
GLOBAL_FEATURES = 4


class Observation(NamedTuple):
    """What the agent sees. Padding: node slot C (the last row) is a permanent dummy node; free edge
    slots connect it to itself. Masked-out rows are zero."""

    graph: jraph.GraphsTuple  # nodes [C + 1, NODE_FEATURES], edges [E, EDGE_FEATURES], globals [1, GLOBAL_FEATURES]
    node_mask: np.ndarray  # [C + 1] bool: slot holds a node
    edge_mask: np.ndarray  # [E] bool: slot holds an edge
    xfer_mask: np.ndarray  # [X + 1] bool: xfer has a location (and room to apply); the NO-OP (last) always
    location_mask: np.ndarray  # [X, L] bool: location id is valid for the xfer
    location_nodes: np.ndarray  # [X, L, M] int32: node slots of each location, padded with C


def _log2(x: float) -> float:
    return math.log2(1.0 + x)


def node_features(node: Node, op_cost: float) -> np.ndarray:
    """[NODE_FEATURES]: op one-hot, fused activation one-hot, constness, output shape, window, cost."""
    row = np.zeros(NODE_FEATURES, np.float32)
    row[OP_TYPES.index(node.op)] = 1.0
    base = len(OP_TYPES)
    if "activation" in node.attrs:
        row[base + ACTIVATIONS.index(node.attrs["activation"])] = 1.0
    base += len(ACTIVATIONS)
    shape = node.shape
    row[base] = float(node.constant)
    row[base + 1:base + 1 + min(len(shape), 4)] = [_log2(d) for d in shape[:4]]
    row[base + 5] = len(shape) / 4.0
    row[base + 6] = _log2(math.prod(shape)) / 8.0
    row[base + 7] = len(node.shapes) / 4.0
    kernel = node.attrs.get("kernel", ())
    stride = node.attrs.get("stride", ())
    row[base + 8:base + 8 + len(kernel)] = kernel
    row[base + 10:base + 10 + len(stride)] = stride
    row[base + 12] = _log2(1e3 * op_cost)  # microseconds
    return row


def edge_features(shape: tuple[int, ...], position: int) -> np.ndarray:
    """[EDGE_FEATURES]: tensor shape (log2), size (log2) and input position."""
    row = np.zeros(EDGE_FEATURES, np.float32)
    row[:min(len(shape), 4)] = [_log2(d) for d in shape[:4]]
    row[4] = _log2(math.prod(shape)) / 8.0
    row[5] = position / 4.0
    return row


class _Slots:
    """Fixed-capacity node and edge arrays with free lists; node slot `capacity` is the dummy node."""

    def __init__(self, graph: Graph, node_capacity: int, edge_capacity: int, model: CostModel) -> None:
        self.capacity, self.model = node_capacity, model
        self.slot: dict[int, int] = {}
        self.edge_slots: dict[int, list[int]] = {}
        self.free_nodes = list(range(node_capacity))
        self.free_edges = list(range(edge_capacity))
        self.nodes = np.zeros((node_capacity + 1, NODE_FEATURES), np.float32)
        self.node_mask = np.zeros(node_capacity + 1, bool)
        self.edges = np.zeros((edge_capacity, EDGE_FEATURES), np.float32)
        self.senders = np.full(edge_capacity, node_capacity, np.int32)
        self.receivers = np.full(edge_capacity, node_capacity, np.int32)
        self.edge_mask = np.zeros(edge_capacity, bool)
        if len(graph) > node_capacity or graph.num_edges > edge_capacity:
            raise ValueError(f"graph with {len(graph)} nodes does not fit node/edge capacity "
                             f"{node_capacity}/{edge_capacity}")
        for node_id in graph.order:
            self._place(graph, node_id)
        for node_id in graph.order:
            self._connect(graph, node_id)

    def _place(self, graph: Graph, node_id: int) -> None:
        slot = heapq.heappop(self.free_nodes)
        self.slot[node_id] = slot
        self.node_mask[slot] = True
        self.nodes[slot] = node_features(graph.nodes[node_id], node_cost(self.model, graph, node_id))

    def _connect(self, graph: Graph, node_id: int) -> None:
        """(Re)write the incoming edges of a node, reusing its edge slots."""
        node = graph.nodes[node_id]
        slots = self.edge_slots.setdefault(node_id, [])
        while len(slots) < len(node.inputs):
            slots.append(heapq.heappop(self.free_edges))
        for position, (edge, ref) in enumerate(zip(slots, node.inputs)):
            self.senders[edge] = self.slot[ref.node]
            self.receivers[edge] = self.slot[node_id]
            self.edges[edge] = edge_features(graph.shape(ref), position)
            self.edge_mask[edge] = True

    def _forget(self, node_id: int) -> None:
        slot = self.slot.pop(node_id)
        self.nodes[slot] = 0.0
        self.node_mask[slot] = False
        heapq.heappush(self.free_nodes, slot)
        for edge in self.edge_slots.pop(node_id, []):
            self.senders[edge] = self.receivers[edge] = self.capacity
            self.edges[edge] = 0.0
            self.edge_mask[edge] = False
            heapq.heappush(self.free_edges, edge)

    def update(self, graph: Graph, delta: Delta, recost: set[int]) -> None:
        """Apply a rewrite; `recost` holds surviving nodes whose cost (a feature) may have changed. The nodes the
        rewrite removes free their slots, its new nodes take the lowest free ones in the order it made them, and
        only then do the nodes it left without consumers free theirs (as `JaxEnv` commits an edit, then sweeps)."""
        for node_id in delta.removed - delta.swept:
            self._forget(node_id)
        for node_id in delta.created:
            self._place(graph, node_id)
        for node_id in delta.swept:
            self._forget(node_id)
        for node_id in recost - delta.added:
            if node_id in graph.nodes:
                self.nodes[self.slot[node_id]] = node_features(graph.nodes[node_id],
                                                               node_cost(self.model, graph, node_id))
        for node_id in delta.added | delta.rewired:  # rewired nodes keep their features, not their edges
            self._connect(graph, node_id)

    def copy(self) -> _Slots:
        clone = object.__new__(_Slots)
        clone.capacity, clone.model = self.capacity, self.model
        clone.slot = dict(self.slot)
        clone.edge_slots = {k: list(v) for k, v in self.edge_slots.items()}
        clone.free_nodes, clone.free_edges = list(self.free_nodes), list(self.free_edges)
        for name in ("nodes", "node_mask", "edges", "senders", "receivers", "edge_mask"):
            setattr(clone, name, getattr(self, name).copy())
        return clone


class Env:
    """The environment over one graph: `reset() -> TimeStep`, `step((xfer, location)) -> TimeStep`
    (`jaxgraph.timestep`; extras: "cost", "rule", "location").

    reward = cost before - cost after (the thesis's R(t-1) - R(t), in cost-model milliseconds).
    The episode terminates on the NO-OP or when no rewrite applies (LAST, discount 0), and is truncated after
    `max_steps` (LAST, discount 1).
    Masked-out or non-integer actions raise `ValueError` (an agent that samples from the masks never
    sends one).
    `node_capacity` defaults to twice the graph (TASO's size bound), `edge_capacity` likewise; an xfer is
    masked out when its worst-case growth would not fit.
    """

    def __init__(self, graph: Graph, max_locations: int = 200, rules: Sequence[Rule] = RULES,
                 cost_model: CostModel | None = None, node_capacity: int | None = None,
                 edge_capacity: int | None = None, max_location_size: int = 8,
                 max_steps: int | None = None) -> None:
        self.rules = tuple(rules)
        self.model = cost_model or DEFAULT_COST_MODEL
        self.max_locations = integer("max_locations", max_locations, 1)
        self.max_location_size = integer("max_location_size", max_location_size, 1)
        self.max_steps = None if max_steps is None else integer("max_steps", max_steps, 1)
        self.node_capacity = 2 * len(graph) if node_capacity is None else integer("node_capacity", node_capacity, 1)
        self.edge_capacity = (2 * graph.num_edges if edge_capacity is None
                              else integer("edge_capacity", edge_capacity, 1))
        self.initial_graph = graph
        self.initial_cost = cost(graph, self.model)
        self._initial_index = LocationIndex.build(self.rules, graph)
        self._initial_slots = _Slots(graph, self.node_capacity, self.edge_capacity, self.model)
        self._initial_ordered: list[tuple[Location, ...]] = [() for _ in self.rules]
        self._initial_locations = self._location_arrays(self._initial_index, self._initial_slots, self._initial_ordered)
        self._episode_over = True

    @property
    def num_xfers(self) -> int:
        """X; the NO-OP is xfer id X."""
        return len(self.rules)

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def cost(self) -> float:
        return self._cost

    @property
    def node_slots(self) -> Mapping[int, int]:
        """Node id -> row of the observation's node array."""
        return MappingProxyType(self._slots.slot)

    def location(self, xfer: int, location_id: int) -> Location:
        """The node ids behind action (xfer, location_id)."""
        xfer, location_id = integer("xfer id", xfer), integer("location id", location_id)
        self._check_action(xfer, location_id)
        return self._ordered[xfer][location_id]

    def reset(self) -> TimeStep:
        """Start an episode on the initial graph: a FIRST time step (reward 0)."""
        self._graph, self._cost, self._steps = self.initial_graph, self.initial_cost, 0
        self._index = self._initial_index
        self._slots = self._initial_slots.copy()
        self._location_mask, self._location_nodes = (a.copy() for a in self._initial_locations)
        self._ordered = list(self._initial_ordered)
        self._episode_over = False
        return restart(self._observe(), {"cost": self._cost, "rule": None, "location": None})

    def step(self, action: tuple[int, int]) -> TimeStep:
        """Apply `(xfer, location id)`; xfer X is the NO-OP. ValueError for a bad action or after the episode's end."""
        if self._episode_over:
            raise ValueError("the episode is over; call reset() first")
        try:
            xfer, location_id = action
        except (TypeError, ValueError):
            raise ValueError(f"an action is a pair (xfer, location id), got {action!r}") from None
        xfer, location_id = integer("xfer id", xfer), integer("location id", location_id)
        if xfer == self.num_xfers:
            self._episode_over = True
            return termination(0.0, self._observe(), {"cost": self._cost, "rule": "NO-OP", "location": None})
        location = self.location(xfer, location_id)
        rule = self.rules[xfer]
        before = self._graph
        self._graph, delta = rule.rewrite(before, location, check=False)
        region = affected(self.model, before, self._graph, delta)
        reward = -cost_change(self.model, before, self._graph, delta, region)
        self._cost -= reward
        previous = self._index
        self._index = self._index.update(self._graph, delta)
        self._slots.update(self._graph, delta, region)
        changed = [x for x in range(self.num_xfers) if self._index.by_rule[x] is not previous.by_rule[x]]
        self._fill_locations(self._index, self._slots, changed, self._location_mask, self._location_nodes,
                             self._ordered)
        self._steps += 1
        obs = self._observe()
        terminated = not obs.xfer_mask[:-1].any()
        truncated = not terminated and self.max_steps is not None and self._steps >= self.max_steps
        self._episode_over = terminated or truncated
        return outcome(float(reward), obs, terminated, truncated,
                       {"cost": self._cost, "rule": rule.name, "location": location})

    def _check_action(self, xfer: int, location_id: int) -> None:
        if not 0 <= xfer < self.num_xfers:
            raise ValueError(f"xfer id {xfer} is not a rewrite: rewrites are 0..{self.num_xfers - 1}, "
                             f"{self.num_xfers} is the NO-OP")
        if not self._xfer_mask()[xfer]:
            raise ValueError(f"xfer {xfer} ({self.rules[xfer].name}) is masked out: "
                             f"{self._index.count(xfer)} locations, or no room for it in the node/edge capacity")
        if not 0 <= location_id < self.max_locations or not self._location_mask[xfer, location_id]:
            raise ValueError(f"location {location_id} is masked out for xfer {xfer} ({self.rules[xfer].name}), "
                             f"which has {min(self._index.count(xfer), self.max_locations)} valid locations")

    def _xfer_mask(self) -> np.ndarray:
        slots = self._slots
        mask = np.zeros(self.num_xfers + 1, bool)
        for xfer, rule in enumerate(self.rules):
            mask[xfer] = (self._index.count(xfer) > 0 and len(slots.free_nodes) >= rule.max_node_growth
                          and len(slots.free_edges) >= rule.max_edge_growth)
        mask[-1] = True
        return mask

    def _location_arrays(self, index: LocationIndex, slots: _Slots, ordered: list[tuple[Location, ...]]
                         ) -> tuple[np.ndarray, np.ndarray]:
        mask = np.zeros((self.num_xfers, self.max_locations), bool)
        nodes = np.full((self.num_xfers, self.max_locations, self.max_location_size), slots.capacity, np.int32)
        self._fill_locations(index, slots, range(self.num_xfers), mask, nodes, ordered)
        return mask, nodes

    def _fill_locations(self, index: LocationIndex, slots: _Slots, xfers, mask: np.ndarray, nodes: np.ndarray,
                        ordered: list[tuple[Location, ...]]) -> None:
        """Rewrite the rows of `xfers`. Location ids follow the slots of the location's nodes (root slot first): the
        order of the observation's rows, which a jitted twin can keep (node ids of rewrite-made nodes are hashes)."""
        for xfer in xfers:
            ordered[xfer] = tuple(sorted(index.locations(xfer), key=lambda loc: [slots.slot[i] for i in loc]))
            locations = ordered[xfer][:self.max_locations]
            mask[xfer] = False
            mask[xfer, :len(locations)] = True
            nodes[xfer] = slots.capacity
            for row, location in enumerate(locations):
                members = [slots.slot[i] for i in location[:self.max_location_size]]
                nodes[xfer, row, :len(members)] = members

    def _observe(self) -> Observation:
        s = self._slots
        globals_ = np.array([[self._cost, self.initial_cost, self._cost / self.initial_cost,
                              len(s.slot) / self.node_capacity]], np.float32)
        graph = jraph.GraphsTuple(
            nodes=s.nodes.copy(), edges=s.edges.copy(), senders=s.senders.copy(), receivers=s.receivers.copy(),
            globals=globals_, n_node=np.array([self.node_capacity + 1], np.int32),
            n_edge=np.array([self.edge_capacity], np.int32))
        return Observation(graph, s.node_mask.copy(), s.edge_mask.copy(), self._xfer_mask(),
                           self._location_mask.copy(), self._location_nodes.copy())
