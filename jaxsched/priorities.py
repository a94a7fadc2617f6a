"""Task priorities of the list-scheduling family (NumPy, float64), computed once per problem.

Every priority is turned into a total visit order by `priority_position`: decreasing priority, ties by
canonical topological position (`jaxsched.order.priority_order`), so the NumPy reference and the JAX
twin (which receives the positions, not the floats) visit tasks identically.

* upward rank (`jaxsched.heft.upward_rank`): longest mean-cost path to an exit, HEFT.
* downward rank: longest mean-cost path from an entry, excluding the task itself (Topcuoglu et al.
  2002, Eq. 5); visited in increasing order.
* rank sum: upward + downward rank, the length of the longest path through the task (CPOP); the
  tasks whose rank sum equals the critical-path length form the critical path (`critical_path`).
* optimistic cost table (Arabnejad and Barbosa 2014, Eq. 7): OCT[t, p], the shortest remaining path
  to an exit when t runs on p, maximised over successors; PEFT's rank is its row mean.
* topological: the canonical topological order (MCT, MET, OLB, MinMin's tie-break, ...).
"""

from __future__ import annotations

import numpy as np

from jaxsched.heft import mean_communication, upward_rank
from jaxsched.order import priority_order
from jaxsched.problem import Problem

PRIORITIES = ("upward", "downward", "rank_sum", "oct", "topological")


def downward_rank(problem: Problem, mean_comp: np.ndarray | None = None) -> np.ndarray:
    """[T] rank_d(t) = max over predecessors u of (rank_d(u) + mean_p comp[u, p] + mean comm(u, t));
    0 for entry tasks (Topcuoglu, Hariri and Wu 2002, Eq. 5). One vectorised step per DAG level.
    `mean_comp` [T] (the mean of comp over processors) may be passed when already computed."""
    mean_comp = problem.comp.mean(axis=1) if mean_comp is None else mean_comp
    edge_value = mean_communication(problem)
    rank = np.zeros(problem.num_tasks)
    for edges in problem.edges_by_dst_level[1:]:
        src = problem.src[edges]
        np.maximum.at(rank, problem.dst[edges], rank[src] + mean_comp[src] + edge_value[edges])
    return rank


def optimistic_cost_table(problem: Problem) -> np.ndarray:
    """[T, P] OCT(t, p) = max over successors s of min over q of (OCT(s, q) + comp[s, q] + cbar(t, s)
    [q != p]); 0 for exit tasks (Arabnejad and Barbosa 2014, Eq. 7; cbar is the mean transfer time).

    The inner minimum is min(A[s, p], min_q A[s, q] + cbar) with A = OCT + comp, so each DAG level is
    one vectorised step, from the exit tasks up."""
    table = np.zeros(problem.comp.shape)
    edge_value = mean_communication(problem)
    for edges in problem.edges_by_src_level[::-1]:
        dst = problem.dst[edges]
        after = table[dst] + problem.comp[dst]  # [e, P]
        elsewhere = after.min(axis=1, keepdims=True) + edge_value[edges, None]
        np.maximum.at(table, problem.src[edges], np.minimum(after, elsewhere))
    return table


def critical_path(problem: Problem) -> tuple[np.ndarray, int]:
    """(tasks, processor) of CPOP (Topcuoglu, Hariri and Wu 2002, Sec. 4.2): the path from the entry
    task of largest rank sum that follows, at each step, the first successor (canonical topological
    order) whose rank sum equals the critical-path length; and the processor that runs those tasks
    fastest in total (lowest index on ties)."""
    total = upward_rank(problem) + downward_rank(problem)
    length = total.max()
    on_path = np.isclose(total, length, rtol=1e-9, atol=0.0)
    position = np.empty(problem.num_tasks, dtype=np.int64)
    position[problem.topological_order] = np.arange(problem.num_tasks)
    out_ptr, out_order = problem.out_edges
    entries = np.flatnonzero(on_path & (problem.levels == 0))
    task = int(entries[np.argmin(position[entries])])
    path = [task]
    while True:
        successors = problem.dst[out_order[out_ptr[task] : out_ptr[task + 1]]]
        successors = successors[on_path[successors]]
        if not successors.size:
            break
        task = int(successors[np.argmin(position[successors])])
        path.append(task)
    tasks = np.array(path, dtype=np.int64)
    return tasks, int(problem.comp[tasks].sum(axis=0).argmin())


def task_priority(problem: Problem, kind: str) -> np.ndarray:
    """[T] the priority named `kind` (one of `PRIORITIES`), larger first."""
    if kind == "upward":
        return upward_rank(problem)
    if kind == "downward":
        return -downward_rank(problem)
    if kind == "rank_sum":
        return upward_rank(problem) + downward_rank(problem)
    if kind == "oct":
        return optimistic_cost_table(problem).mean(axis=1)
    if kind == "topological":
        return np.zeros(problem.num_tasks)
    raise ValueError(f"unknown priority {kind!r}; known: {', '.join(PRIORITIES)}")


def priority_position(problem: Problem, kind: str) -> np.ndarray:
    """[T] int each task's place in the visit order of priority `kind` (0 first): decreasing priority,
    ties by canonical topological position. A list scheduler takes the ready task of lowest place."""
    position = np.empty(problem.num_tasks, dtype=np.int64)
    position[priority_order(problem, task_priority(problem, kind))] = np.arange(problem.num_tasks)
    return position
