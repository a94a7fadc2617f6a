"""The exhaustive optimum: every graph the rules can reach, breadth first, deduplicated by canonical form.

Greedy descent and TASO's pruned search (`jaxgraph.search`) are heuristics; on graphs whose reachable
space is small this search is the independent answer they (and the RL agents) are judged against.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Sequence

from jaxgraph.cost import DEFAULT_COST_MODEL, CostModel, cost, cost_change
from jaxgraph.graph import Graph, canonical_form
from jaxgraph.locations import LocationIndex
from jaxgraph.rules import RULES, Rule
from jaxgraph.search import SearchResult
from jaxsched.common.arguments import integer, number


def canonical_key(graph: Graph) -> tuple[frozenset, tuple[int, ...]]:
    """A hashable `canonical_form`: equal for graphs that compute the same thing node for node, whatever
    the order of the rewrites that built them."""
    counts, outputs = canonical_form(graph)
    return frozenset(counts.items()), outputs


def exhaustive_search(graph: Graph, rules: Sequence[Rule] = RULES, cost_model: CostModel | None = None,
                      max_states: int = 100_000, max_size_factor: float = 2.0) -> SearchResult:
    """The cheapest graph reachable from `graph` by any sequence of rewrites (breadth first over distinct
    canonical graphs), with a shortest sequence reaching it.

    Graphs with `max_size_factor` x the original number of nodes or more are not entered (TASO's size
    bound, as in `taso_search`). `explored` is the number of distinct graphs visited. ValueError when the
    reachable space holds more than `max_states` graphs: the optimum is then unknown, never guessed.
    """
    max_states = integer("max_states", max_states, 1)
    max_size = number("max_size_factor", max_size_factor, 0.0, above=True) * len(graph)
    start = time.perf_counter()
    model = cost_model or DEFAULT_COST_MODEL
    rules = tuple(rules)
    initial = cost(graph, model)
    best = (initial, (), graph)
    seen = {canonical_key(graph)}
    frontier = deque([(graph, LocationIndex.build(rules, graph), initial, ())])
    while frontier:
        current, index, current_cost, history = frontier.popleft()
        for xfer, location in sorted(index.matches()):
            child, delta = rules[xfer].rewrite(current, location, check=False)
            if len(child) >= max_size:
                continue
            key = canonical_key(child)
            if key in seen:
                continue
            if len(seen) >= max_states:
                raise ValueError(f"more than max_states={max_states} graphs are reachable from this "
                                 f"{graph.num_ops}-op graph; raise max_states or use taso_search")
            seen.add(key)
            child_cost = current_cost + cost_change(model, current, child, delta)
            child_history = history + ((xfer, location),)
            if child_cost < best[0] - 1e-12 * max(abs(best[0]), 1.0):
                best = (child_cost, child_history, child)
            frontier.append((child, index.update(child, delta), child_cost, child_history))
    best_cost, history, best_graph = best
    return SearchResult(best_graph, cost(best_graph, model), initial, history, len(seen),
                        time.perf_counter() - start)
