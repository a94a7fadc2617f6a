"""HEFT: Heterogeneous Earliest Finish Time (Topcuoglu, Hariri and Wu, IEEE TPDS 2002), in NumPy.

Tasks are visited in decreasing upward rank (mean costs); each goes to the processor that finishes it
earliest, inserted into the first idle gap that fits (`timeline.Timelines`).

Tie-breaking (documented because labels for the neural scheduler depend on it): equal ranks are
visited in canonical topological order (`Problem.topological_order`: by level, then index), which
also keeps the visit order precedence-consistent when zero costs make a task's rank equal its
successor's; equal finish times go to the lowest processor index.
"""

from __future__ import annotations

import numpy as np

from jaxsched.order import priority_order
from jaxsched.problem import Problem, Schedule, check_problem
from jaxsched.timeline import Timelines


def mean_bandwidth(problem: Problem) -> float:
    """Mean bandwidth between distinct processors (1 without bandwidths or with one processor): the paper's
    B-bar; infinite when a link is instant, so that mean transfer times (data / B-bar) are then zero."""
    if problem.bandwidth is None or problem.num_procs == 1:
        return 1.0
    return float(problem.bandwidth[~np.eye(problem.num_procs, dtype=bool)].mean())


def mean_communication(problem: Problem) -> np.ndarray:
    """[E] mean transfer time of each edge: data over the mean bandwidth between distinct processors."""
    if problem.bandwidth is None or problem.num_procs == 1:
        return problem.data
    return problem.data / mean_bandwidth(problem)


def upward_rank(problem: Problem, edge_value: np.ndarray | None = None) -> np.ndarray:
    """[T] rank_u(t) = mean_p comp[t, p] + max over successors s of (mean comm(t, s) + rank_u(s)).

    Computed level by level from the exit tasks up, one vectorised step per DAG level. `edge_value` [E]
    replaces `mean_communication` (another averaging convention, `jaxsched.priorities.mean_transfer`).
    """
    mean_comp = problem.comp.mean(axis=1)
    edge_value = mean_communication(problem) if edge_value is None else edge_value
    rank = np.zeros(problem.num_tasks)
    best_successor = np.zeros(problem.num_tasks)
    for edges, tasks in zip(problem.edges_by_src_level[::-1], problem.tasks_by_level[::-1]):
        np.maximum.at(best_successor, problem.src[edges], edge_value[edges] + rank[problem.dst[edges]])
        rank[tasks] = mean_comp[tasks] + best_successor[tasks]
    return rank


def heft(problem: Problem) -> Schedule:
    """Insertion-based HEFT schedule of `problem` (see the module docstring for tie-breaking)."""
    check_problem(problem)
    num_tasks, num_procs = problem.num_tasks, problem.num_procs
    proc, start, finish = [0] * num_tasks, [0.0] * num_tasks, [0.0] * num_tasks
    timelines = Timelines(problem.comp)
    in_ptr, in_order = problem.in_edges
    ptr = in_ptr.tolist()
    pred_src = problem.src[in_order]
    pred_data = problem.data[in_order]
    inverse_bandwidth, arrival, comp = problem.inverse_bandwidth, problem.arrival.tolist(), problem.comp
    ready = np.empty(num_procs)
    for task in priority_order(problem, upward_rank(problem)).tolist():
        lo, hi = ptr[task], ptr[task + 1]
        if lo == hi:
            ready.fill(arrival[task])
        elif problem.bandwidth is None:
            preds, data = pred_src[lo:hi].tolist(), pred_data[lo:hi].tolist()
            _ready_uniform(ready, preds, data, proc, finish, arrival[task])
        else:
            preds = pred_src[lo:hi].tolist()
            transfer = pred_data[lo:hi, None] * inverse_bandwidth[[proc[u] for u in preds]]  # [K, P]
            arrive = np.array([finish[u] for u in preds])[:, None] + transfer
            np.maximum(arrive.max(axis=0), arrival[task], out=ready)
        duration = comp[task]
        best, begin = timelines.earliest_finish(ready, duration)
        timelines.occupy(best, begin, float(duration[best]))
        proc[task], start[task], finish[task] = best, begin, begin + float(duration[best])
    return Schedule(proc=np.array(proc), start=np.array(start), finish=np.array(finish))


def _ready_uniform(ready, preds, data, proc, finish, arrival) -> None:
    """Fills `ready[P]` when a transfer costs `data` between any two processors.

    Every input arrives at finish + data, except on its own processor; so only the processor
    hosting all the latest-arriving inputs (if one does) can differ from the maximum.
    """
    arrive = [finish[u] + d for u, d in zip(preds, data)]
    latest = max(arrive)
    ready.fill(max(arrival, latest))
    hosts = {proc[u] for u, a in zip(preds, arrive) if a == latest}
    if len(hosts) == 1:
        (host,) = hosts
        others = [a if proc[u] != host else finish[u] for u, a in zip(preds, arrive)]
        ready[host] = max(arrival, max(others))
