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

Two conventions (`RANK_CONVENTIONS`) for what the papers leave to the implementation:

* "topcuoglu" (default): a transfer's mean time is its data over the mean bandwidth between distinct
  processors; the downward rank adds each predecessor's mean cost (Eq. 5); CPOP's critical path is
  walked from the entry task; PEFT's table uses that mean transfer. Topcuoglu's published schedules hold.
* "saga" (SAGA, github.com/ANRGUSC/saga): the mean over every link, self links (instant) included, of
  data / link speed; the downward rank adds the task's own cost over the mean speed (the harmonic mean
  of its row of comp) instead of its predecessor's; the critical path is every task whose rank sum is
  close (numpy.isclose) to the largest among entry tasks; PEFT's table charges the actual link between
  the two processors. SAGA's makespans are reproduced on shared instances (`tests/jaxsched/test_saga_*`).
"""

from __future__ import annotations

import numpy as np

from jaxsched.heft import mean_communication, upward_rank
from jaxsched.order import priority_order
from jaxsched.problem import Problem

PRIORITIES = ("upward", "downward", "rank_sum", "oct", "topological")
RANK_CONVENTIONS = ("topcuoglu", "saga")


def _check_convention(convention: str) -> None:
    if convention not in RANK_CONVENTIONS:
        raise ValueError(f"unknown rank convention {convention!r}; known: {', '.join(RANK_CONVENTIONS)}")


def _bandwidth(problem: Problem) -> np.ndarray:
    return np.ones((problem.num_procs,) * 2) if problem.bandwidth is None else problem.bandwidth


def mean_transfer(problem: Problem, convention: str = "topcuoglu") -> np.ndarray:
    """[E] mean transfer time of each edge under `convention` (module docstring): "topcuoglu" data over
    the mean bandwidth between distinct processors; "saga" data times the mean over the P (P + 1) / 2
    undirected links, self links (instant) included, of 1 / bandwidth."""
    _check_convention(convention)
    if convention == "topcuoglu":
        return mean_communication(problem)
    count = problem.num_procs
    inverse = 1.0 / _bandwidth(problem)[np.triu_indices(count, 1)]
    return problem.data * inverse.sum() / (count * (count + 1) / 2)


def downward_rank(problem: Problem, mean_comp: np.ndarray | None = None, convention: str = "topcuoglu") -> np.ndarray:
    """[T] rank_d(t) = max over predecessors u of (rank_d(u) + mean_p comp[u, p] + mean comm(u, t));
    0 for entry tasks (Topcuoglu, Hariri and Wu 2002, Eq. 5). One vectorised step per DAG level.
    `mean_comp` [T] (the mean of comp over processors) may be passed when already computed. Under
    `convention="saga"` the cost added is t's own over the mean speed (module docstring)."""
    edge_value = mean_transfer(problem, convention)
    if convention == "saga":
        with np.errstate(divide="ignore"):
            own = np.where(problem.comp.min(axis=1) > 0, problem.num_procs / (1.0 / problem.comp).sum(axis=1), 0.0)
    else:
        mean_comp = problem.comp.mean(axis=1) if mean_comp is None else mean_comp
    rank = np.zeros(problem.num_tasks)
    for edges in problem.edges_by_dst_level[1:]:
        src, dst = problem.src[edges], problem.dst[edges]
        cost = own[dst] if convention == "saga" else mean_comp[src]
        np.maximum.at(rank, dst, rank[src] + cost + edge_value[edges])
    return rank


def optimistic_cost_table(problem: Problem, convention: str = "topcuoglu") -> np.ndarray:
    """[T, P] OCT(t, p) = max over successors s of min over q of (OCT(s, q) + comp[s, q] + cbar(t, s)
    [q != p]); 0 for exit tasks (Arabnejad and Barbosa 2014, Eq. 7; cbar is the mean transfer time,
    or under `convention="saga"` the transfer over the link p - q).

    The inner minimum is min(A[s, p], min_q A[s, q] + cbar) with A = OCT + comp, so each DAG level is
    one vectorised step, from the exit tasks up."""
    _check_convention(convention)
    table = np.zeros(problem.comp.shape)
    edge_value = mean_communication(problem)
    inverse = 1.0 / _bandwidth(problem)
    np.fill_diagonal(inverse, 0.0)
    for edges in problem.edges_by_src_level[::-1]:
        dst = problem.dst[edges]
        after = table[dst] + problem.comp[dst]  # [e, P]
        if convention == "saga":
            reach = (after[:, None, :] + problem.data[edges, None, None] * inverse[None]).min(axis=2)
        else:
            reach = np.minimum(after, after.min(axis=1, keepdims=True) + edge_value[edges, None])
        np.maximum.at(table, problem.src[edges], reach)
    return table


def rank_sum(problem: Problem, convention: str = "topcuoglu") -> np.ndarray:
    """[T] upward + downward rank under `convention` (CPOP's priority)."""
    return upward_rank(problem, mean_transfer(problem, convention)) + downward_rank(problem, convention=convention)


def critical_path(problem: Problem, convention: str = "topcuoglu") -> tuple[np.ndarray, int]:
    """(tasks, processor) of CPOP (Topcuoglu, Hariri and Wu 2002, Sec. 4.2): the path from the entry
    task of largest rank sum that follows, at each step, the first successor (canonical topological
    order) whose rank sum equals the critical-path length; and the processor that runs those tasks
    fastest in total (lowest index on ties). Under `convention="saga"`: every task whose rank sum is
    numpy.isclose to the largest rank sum of an entry task."""
    total = rank_sum(problem, convention)
    if convention == "saga":
        tasks = np.flatnonzero(np.isclose(total, total[problem.levels == 0].max()))
        return tasks, int(problem.comp[tasks].sum(axis=0).argmin())
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


def task_priority(problem: Problem, kind: str, convention: str = "topcuoglu") -> np.ndarray:
    """[T] the priority named `kind` (one of `PRIORITIES`), larger first, ranks under `convention`."""
    if kind == "upward":
        return upward_rank(problem, mean_transfer(problem, convention))
    if kind == "downward":
        return -downward_rank(problem, convention=convention)
    if kind == "rank_sum":
        return rank_sum(problem, convention)
    if kind == "oct":
        return optimistic_cost_table(problem, convention).mean(axis=1)
    if kind == "topological":
        return np.zeros(problem.num_tasks)
    raise ValueError(f"unknown priority {kind!r}; known: {', '.join(PRIORITIES)}")


def priority_position(problem: Problem, kind: str, convention: str = "topcuoglu") -> np.ndarray:
    """[T] int each task's place in the visit order of priority `kind` (0 first): decreasing priority,
    ties by canonical topological position. A list scheduler takes the ready task of lowest place."""
    position = np.empty(problem.num_tasks, dtype=np.int64)
    position[priority_order(problem, task_priority(problem, kind, convention))] = np.arange(problem.num_tasks)
    return position
