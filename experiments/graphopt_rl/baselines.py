"""The searches the agents are compared with, per setting (`experiments.graphopt_rl.settings`), as JSON-able rows.

Deployment: greedy and TASO's backtracking search at the configured alpha. Research: greedy, TASO's search at
alpha 1.0 and 1.05 (the budget in graphs expanded is reported), equality saturation in the manner of Tensat
(`jaxgraph.saturation`, the e-graph of egglog, with TASO's table as its rewrites; greedy and ILP extraction,
each with its time) and the exhaustive optimum when the reachable space has at most a capped number of graphs
(otherwise the row says the cap was hit and no optimum is claimed). `reachable_optimum`: TASO's search without
pruning, the optimum no agent can beat where it exhausts the reachable graphs.
"""

from __future__ import annotations

from typing import Sequence

from jaxgraph import Graph, Rule, SearchResult, equality_saturation, exhaustive_search, greedy, taso_search

RESEARCH_ALPHAS = (1.0, 1.05)


def search_row(result: SearchResult, rules: Sequence[Rule], **extra) -> dict:
    """A search's row: cost, graphs expanded (`interactions`), seconds and the rules it applied."""
    return {"cost": result.cost, "interactions": result.explored, "seconds": result.seconds,
            "rules": [rules[x].name for x, _ in result.history], **extra}


def deployment_baselines(graph: Graph, rules: Sequence[Rule], cm, alpha: float, budget: int,
                         progress: bool = False) -> tuple[dict[str, dict], dict[str, Graph]]:
    """Greedy and TASO's search (`alpha`, `budget`): their rows and resulting graphs."""
    results = {"greedy": greedy(graph, rules, cost_model=cm),
               "taso": taso_search(graph, alpha, budget, rules, cost_model=cm, progress=progress)}
    return ({m: search_row(r, rules) for m, r in results.items()}, {m: r.graph for m, r in results.items()})


def research_baselines(graph: Graph, rules: Sequence[Rule], cm, budget: int, exhaustive_states: int,
                       saturation_seconds: float, progress: bool = False) -> dict[str, dict]:
    """Greedy, TASO's search at each of `RESEARCH_ALPHAS` (`budget` graphs), equality saturation (greedy and ILP
    extraction, each capped at `saturation_seconds`) and the exhaustive optimum (at most `exhaustive_states`
    graphs; past the cap the row has `cost` None and says so)."""
    rows = {"greedy": search_row(greedy(graph, rules, cost_model=cm), rules)}
    for alpha in RESEARCH_ALPHAS:
        result = taso_search(graph, alpha, budget, rules, cost_model=cm, progress=progress)
        rows[f"taso_{alpha:g}"] = search_row(result, rules, alpha=alpha, budget=budget)
    for extraction in ("greedy", "ilp"):
        result = equality_saturation(graph, extraction, cost_model=cm, time_limit=saturation_seconds,
                                     ilp_time_limit=saturation_seconds)
        rows[f"eqsat_{extraction}"] = {"cost": result.cost, "interactions": result.explored,
                                       "seconds": result.seconds, "rules": []}
    try:
        optimum = exhaustive_search(graph, rules, cm, max_states=exhaustive_states)
        rows["exhaustive"] = search_row(optimum, rules, cap=exhaustive_states)
    except ValueError as error:  # more graphs reachable than the cap: the optimum stays unknown
        rows["exhaustive"] = {"cost": None, "interactions": exhaustive_states, "cap": exhaustive_states,
                              "rules": [], "note": str(error)}
    return rows


def reachable_optimum(graph: Graph, budget: int, cm, rules: Sequence[Rule]) -> dict:
    """TASO's search without pruning (alpha 1e9): when it stops before `budget` expansions it has expanded every
    graph the rules reach (within the node capacity), so its best cost is the optimum no agent can beat."""
    result = taso_search(graph, 1e9, budget, rules, cost_model=cm, progress=False)
    return {"cost": result.cost, "explored": result.explored, "exhausted": result.explored < budget,
            "rules": [rules[x].name for x, _ in result.history]}
