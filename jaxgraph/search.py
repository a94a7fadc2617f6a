"""Search baselines over substitutions: greedy descent and TASO's cost-based backtracking search."""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from tqdm.auto import tqdm

from jaxgraph.cost import DEFAULT_COST_MODEL, CostModel, cost, cost_change
from jaxgraph.graph import Graph
from jaxgraph.locations import LocationIndex
from jaxgraph.rules import RULES, Location, Rule
from jaxsched.common.arguments import integer, number


@dataclass(frozen=True)
class SearchResult:
    """The best graph found, its cost, and how it was reached."""

    graph: Graph
    cost: float
    initial_cost: float
    history: tuple[tuple[int, Location], ...]  # (xfer id, location) applied to reach `graph`
    explored: int  # greedy: steps taken; TASO: graphs dequeued
    seconds: float

    @property
    def speedup(self) -> float:
        """initial cost / final cost (TASO's reported ratio)."""
        return self.initial_cost / self.cost


def greedy(graph: Graph, rules: Sequence[Rule] = RULES, cost_model: CostModel | None = None,
           max_steps: int | None = None, progress: bool = False) -> SearchResult:
    """Repeatedly apply the rewrite that lowers the cost most, until none lowers it.

    A rewrite's cost change depends only on the nodes it touches, so changes are cached per location
    and only new locations are evaluated after each step.
    """
    max_steps = None if max_steps is None else integer("max_steps", max_steps, 0)
    start = time.perf_counter()
    model = cost_model or DEFAULT_COST_MODEL
    rules = tuple(rules)
    index = LocationIndex.build(rules, graph)
    initial = current = cost(graph, model)
    changes: dict[tuple[int, Location], float] = {}
    history: list[tuple[int, Location]] = []
    bar = tqdm(desc="greedy", disable=not progress, unit="step", mininterval=0.5)
    while max_steps is None or len(history) < max_steps:
        best = None
        for xfer, location in index.matches():
            if (xfer, location) not in changes:
                after, delta = rules[xfer].rewrite(graph, location, check=False)
                changes[xfer, location] = cost_change(model, graph, after, delta)
            candidate = (changes[xfer, location], xfer, location)
            if best is None or candidate < best:
                best = candidate
        if best is None or best[0] >= -1e-12 * max(current, 1.0):
            break
        change, xfer, location = best
        graph, delta = rules[xfer].rewrite(graph, location, check=False)
        index = index.update(graph, delta)
        current += change
        history.append((xfer, location))
        bar.update()
        bar.set_postfix(cost=f"{current:.4f}", refresh=False)
    bar.close()
    return SearchResult(graph, cost(graph, model), initial, tuple(history), len(history), time.perf_counter() - start)


def taso_search(graph: Graph, alpha: float = 1.05, budget: int = 1000, rules: Sequence[Rule] = RULES,
                cost_model: CostModel | None = None, max_size_factor: float = 2.0, progress: bool = False,
                on_visit: Callable[[Graph, float], None] | None = None) -> SearchResult:
    """TASO's cost-based backtracking search (Jia et al. 2019, Algorithm 2 of the thesis).

    A priority queue ordered by cost starts with `graph`. Each dequeued graph (at most `budget` of them)
    is expanded by every rule at every location; a new graph is kept when its cost is below
    `alpha` x the best cost so far, it has fewer than `max_size_factor` x the original number of nodes,
    and its structure hash is new. Queue entries store the parent and the rewrite, and the child graph
    is rebuilt when dequeued, so memory grows with `budget` rather than with the number of candidates.
    `on_visit(graph, cost)` is called on each dequeued graph. `progress=True` shows a progress bar.
    """
    alpha = number("alpha", alpha, 1.0, finite=False)
    budget = integer("budget", budget, 1)
    max_size_factor = number("max_size_factor", max_size_factor, 0.0, above=True)
    start = time.perf_counter()
    model = cost_model or DEFAULT_COST_MODEL
    rules = tuple(rules)
    initial = cost(graph, model)
    max_size = max_size_factor * len(graph)
    best_cost, best_graph, best_history = initial, graph, ()
    order = itertools.count()
    # entry: (cost, tie-break, parent graph, parent index, rewrite or None, history)
    queue = [(initial, next(order), graph, LocationIndex.build(rules, graph), None, ())]
    seen = {graph.structure_hash}
    explored = 0
    bar = tqdm(total=budget, desc="taso search", disable=not progress, unit="graph", mininterval=0.5)
    while queue and explored < budget:
        current_cost, _, parent, parent_index, rewrite, history = heapq.heappop(queue)
        if rewrite is None:
            current, index = parent, parent_index
        else:
            current, delta = rules[rewrite[0]].rewrite(parent, rewrite[1], check=False)
            index = parent_index.update(current, delta)
        explored += 1
        bar.update()
        if on_visit is not None:
            on_visit(current, current_cost)
        for xfer, location in index.matches():
            child, delta = rules[xfer].rewrite(current, location, check=False)
            if child.structure_hash in seen or len(child) >= max_size:
                continue
            seen.add(child.structure_hash)
            child_cost = current_cost + cost_change(model, current, child, delta)
            # Pruned against the best known before this child (as TASO, whose best is a dequeued graph), so
            # with alpha = 1 a strictly cheaper child is still expanded.
            if child_cost < alpha * best_cost:
                heapq.heappush(queue, (child_cost, next(order), current, index, (xfer, location),
                                       history + ((xfer, location),)))
            if child_cost < best_cost:
                best_cost, best_graph, best_history = child_cost, child, history + ((xfer, location),)
        bar.set_postfix(best=f"{best_cost:.4f}", queue=len(queue), refresh=False)
    bar.close()
    return SearchResult(best_graph, cost(best_graph, model), initial, best_history, explored,
                        time.perf_counter() - start)
