"""Extraction from a saturated e-graph (`jaxgraph.saturation.EGraph`): one e-node per e-class, chosen for least
cost. `extract_greedy` is Tensat's greedy extraction (tree cost), `extract_ilp` Tensat's ILP (DAG cost: a shared
subterm counted once), solved exactly by HiGHS where it proves optimality within its time limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from jaxsched.common.arguments import number

if TYPE_CHECKING:
    from jaxgraph.saturation import EGraph


def extract_greedy(egraph: EGraph) -> dict[int, int]:
    """Tensat's greedy extraction: per e-class the e-node of least tree cost (its cost plus its children's best),
    a bottom-up fixpoint (a worklist: an e-node is revisited when one of its children's best improves). Returns
    e-class -> e-node index."""
    parents: dict[int, list[int]] = {}
    for i, e in enumerate(egraph.enodes):
        for c in set(e.children):
            parents.setdefault(c, []).append(i)
    best: dict[int, tuple[float, int]] = {}
    work = [i for i, e in enumerate(egraph.enodes) if not e.children]
    while work:
        i = work.pop()
        e = egraph.enodes[i]
        if egraph.costs[i] is None or any(c not in best for c in e.children):
            continue
        total = egraph.costs[i] + sum(best[c][0] for c in e.children)
        if e.eclass not in best or total < best[e.eclass][0] * (1 - 1e-12) - 1e-15:
            best[e.eclass] = (total, i)
            work.extend(parents.get(e.eclass, ()))
    missing = [r for r in egraph.roots if r not in best]
    if missing:
        raise ValueError(f"no extractable term for {len(missing)} output e-classes")
    return {c: i for c, (_, i) in best.items()}


def _folded(egraph: EGraph) -> dict[int, int]:
    """An acyclic choice of a free e-node (children all constant) for every constant e-class, bottom-up: a
    weight-only subterm costs nothing in any form, so the ILP leaves these classes out (the zero-cost cycles that
    concat rules make among weight concats left HiGHS without a solution in 20 s on Inception-v3)."""
    chosen, grew = {}, True
    while grew:
        size = len(chosen)
        for i, e in enumerate(egraph.enodes):
            if (e.eclass not in chosen and egraph.constant.get(e.eclass) and egraph.costs[i] == 0.0
                    and all(c in chosen for c in e.children)
                    and (e.op != "opaque" or egraph.graph.nodes[e.attrs[0]].constant)):
                chosen[e.eclass] = i
        grew = len(chosen) > size
    return chosen


def extract_ilp(egraph: EGraph, time_limit: float = 60.0) -> tuple[dict[int, int], bool]:
    """Tensat's ILP extraction (DAG cost: a shared subterm counted once) with `scipy.optimize.milp`: a binary per
    e-node reachable from the roots, every root class and every chosen e-node's child classes covered, and an
    order variable per class in [0, 1] that each chosen e-node's children in its class's strongly connected
    component must exceed (no cycles); constant classes are free and chosen before (`_folded`). Returns e-class
    -> e-node and whether HiGHS proved the choice optimal within `time_limit` seconds."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    time_limit = number("time_limit", time_limit, 0.0, above=True)
    by_class: dict[int, list[int]] = {}
    folded = _folded(egraph)
    for i, e in enumerate(egraph.enodes):
        if egraph.costs[i] is not None and e.eclass not in folded:
            by_class.setdefault(e.eclass, []).append(i)
    reachable, stack = set(), [r for r in egraph.roots if r not in folded]
    while stack:
        c = stack.pop()
        if c not in reachable:
            reachable.add(c)
            stack.extend(ch for i in by_class.get(c, ()) for ch in egraph.enodes[i].children if ch not in folded)
    nodes = [i for c in sorted(reachable) for i in by_class.get(c, ())]
    column = {i: k for k, i in enumerate(nodes)}
    index = {c: k for k, c in enumerate(sorted(reachable))}
    order = {c: len(nodes) + k for c, k in index.items()}
    edges = [(index[egraph.enodes[i].eclass], index[c]) for i in nodes for c in egraph.enodes[i].children
             if c not in folded]
    # a cycle lies in one strongly connected component of the class graph: only edges inside one need an order
    _, component = connected_components(coo_matrix(([1] * len(edges), tuple(zip(*edges)) or ([], [])),
                                                   shape=(len(index),) * 2), connection="strong")
    rows, cols, vals, low, high = [], [], [], [], []

    def constraint(entries, lo, hi):
        for col, val in entries:
            rows.append(len(low))
            cols.append(col)
            vals.append(val)
        low.append(lo)
        high.append(hi)

    eps = 1.0 / (len(reachable) + 1)
    for root in set(egraph.roots) - folded.keys():
        constraint([(column[i], 1.0) for i in by_class.get(root, ())], 1.0, np.inf)
    for i in nodes:
        e = egraph.enodes[i]
        for c in set(e.children) - folded.keys():
            constraint([(column[i], 1.0)] + [(column[j], -1.0) for j in by_class.get(c, ())], -np.inf, 0.0)
            if component[index[c]] == component[index[e.eclass]]:  # chosen: order[c] >= order[class] + eps
                constraint([(order[c], 1.0), (order[e.eclass], -1.0), (column[i], -2.0)], eps - 2.0, np.inf)
    size = len(nodes) + len(reachable)
    matrix = coo_matrix((vals, (rows, cols)), shape=(len(low), size)).tocsr()
    objective = np.array([egraph.costs[i] for i in nodes] + [0.0] * len(reachable))
    integrality = np.array([1] * len(nodes) + [0] * len(reachable))
    result = milp(objective, constraints=LinearConstraint(matrix, low, high), integrality=integrality,
                  bounds=Bounds(0.0, 1.0), options={"time_limit": time_limit})
    if result.x is None:
        raise ValueError(f"the ILP found no solution within {time_limit} s: {result.message}")
    chosen = dict(folded)
    for i in nodes:
        if result.x[column[i]] > 0.5:
            chosen.setdefault(egraph.enodes[i].eclass, i)
    return chosen, result.status == 0
