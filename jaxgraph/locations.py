"""Every location of every rule in a graph, kept up to date incrementally across rewrites.

After a rewrite only matches that touch a changed node can appear or disappear, and every node a
match reads lies within its rule's `radius` of the match's root. So `update` drops the matches that
contain a changed node and re-runs `match_at` only on roots within that radius of the change: the
work is proportional to the rewrite, not to the graph (the thesis's environment re-ran TASO's full
pattern search on every step).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Sequence

from jaxgraph.graph import Delta, Graph
from jaxgraph.rules import Location, Rule

Match = tuple[int, Location]  # (xfer id, location)


class LocationIndex:
    """Immutable: `update` returns a new index and shares what did not change."""

    def __init__(self, rules: Sequence[Rule], by_rule: tuple[frozenset[Location], ...],
                 by_node: Mapping[int, frozenset[Match]],
                 rules_by_op: Mapping[str, tuple[tuple[int, Rule], ...]] | None = None) -> None:
        self.rules = tuple(rules)
        if not self.rules:
            raise ValueError("need at least one rule")
        self.by_rule = by_rule
        self._by_node = by_node
        self._sorted: dict[int, tuple[Location, ...]] = {}
        if rules_by_op is None:
            table: dict[str, list[tuple[int, Rule]]] = {}
            for xfer, rule in enumerate(self.rules):
                table.setdefault(rule.root_op, []).append((xfer, rule))
            rules_by_op = MappingProxyType({op: tuple(entries) for op, entries in table.items()})
        self._rules_by_op = rules_by_op
        self._radius = max(rule.radius for rule in self.rules)

    @classmethod
    def build(cls, rules: Sequence[Rule], graph: Graph) -> LocationIndex:
        """Full scan: every rule at every node of its root op."""
        by_rule = tuple(frozenset(rule.find(graph)) for rule in rules)
        by_node: dict[int, set[Match]] = {}
        for xfer, locations in enumerate(by_rule):
            for location in locations:
                for node_id in location:
                    by_node.setdefault(node_id, set()).add((xfer, location))
        return cls(rules, by_rule, MappingProxyType({k: frozenset(v) for k, v in by_node.items()}))

    def locations(self, xfer: int) -> tuple[Location, ...]:
        """Locations of rule `xfer`, sorted (a stable order for location ids)."""
        if xfer not in self._sorted:
            self._sorted[xfer] = tuple(sorted(self.by_rule[xfer]))
        return self._sorted[xfer]

    def count(self, xfer: int) -> int:
        return len(self.by_rule[xfer])

    def __len__(self) -> int:
        return sum(len(s) for s in self.by_rule)

    def matches(self) -> list[Match]:
        """Every (xfer, location), in xfer then location order."""
        return [(x, loc) for x in range(len(self.rules)) for loc in self.locations(x)]

    def update(self, graph: Graph, delta: Delta) -> LocationIndex:
        """The index of `graph`, which a rewrite described by `delta` made from this index's graph."""
        by_rule = list(self.by_rule)
        by_node = self._by_node.copy()
        changed: dict[int, set[Location]] = {}

        def rule_set(xfer: int) -> set[Location]:
            if xfer not in changed:
                changed[xfer] = set(by_rule[xfer])
            return changed[xfer]

        stale: set[Match] = set()
        for node_id in delta.removed | delta.dirty:
            stale.update(by_node.get(node_id, ()))
        touched_nodes: dict[int, set[Match]] = {}
        for xfer, location in stale:
            rule_set(xfer).discard(location)
            for node_id in location:
                touched_nodes.setdefault(node_id, set()).add((xfer, location))
        for node_id, gone in touched_nodes.items():
            by_node[node_id] = by_node[node_id] - gone

        fresh: dict[int, set[Match]] = {}
        for node_id, distance in _neighbourhood(graph, delta.dirty, self._radius).items():
            for xfer, rule in self._rules_by_op.get(graph.nodes[node_id].op, ()):
                if distance > rule.radius:
                    continue
                for location in rule.match_at(graph, node_id):
                    if location not in rule_set(xfer):
                        rule_set(xfer).add(location)
                        for member in location:
                            fresh.setdefault(member, set()).add((xfer, location))
        for node_id, new in fresh.items():
            by_node[node_id] = by_node.get(node_id, frozenset()) | new
        for node_id in delta.removed:
            by_node.pop(node_id, None)
        for xfer, locations in changed.items():
            by_rule[xfer] = frozenset(locations)
        index = LocationIndex(self.rules, tuple(by_rule), MappingProxyType(by_node), self._rules_by_op)
        index._sorted = {x: s for x, s in self._sorted.items() if x not in changed}
        return index


def _neighbourhood(graph: Graph, sources: frozenset[int], radius: int) -> dict[int, int]:
    """Undirected BFS distances (through inputs and consumers) up to `radius` from `sources`."""
    distance = {node_id: 0 for node_id in sources if node_id in graph.nodes}
    frontier = list(distance)
    for step in range(1, radius + 1):
        following = []
        for node_id in frontier:
            neighbours = [r.node for r in graph.nodes[node_id].inputs] + [u.node for u in graph.uses(node_id)]
            for other in neighbours:
                if other not in distance:
                    distance[other] = step
                    following.append(other)
        frontier = following
    return distance
