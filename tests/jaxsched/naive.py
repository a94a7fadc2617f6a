"""Deliberately naive list scheduling, written independently of jaxsched's timelines, as a test oracle.

The earliest start on a processor is found by trying every candidate time (the ready time and every
finish time on that processor after it) and checking overlap against every task already there.
"""

import numpy as np


def _earliest_start(intervals, ready, duration):
    if duration == 0:
        return ready
    candidates = sorted({ready} | {f for _, f in intervals if f >= ready})
    for t in candidates:
        if all(t + duration <= s or t >= f for s, f in intervals if f > s):
            return t
    raise AssertionError("unreachable: the last finish time always fits")


def _transfer(problem, edge, source, target):
    """data x (1 / bandwidth) between distinct processors (0 on an instant link, bandwidth inf), 0 on one
    processor; multiplied by the inverse, as jaxsched does, so that times agree to the last bit."""
    if source == target:
        return 0.0
    return problem.data[edge] * (1.0 if problem.bandwidth is None else 1.0 / problem.bandwidth[source, target])


def _ready(problem, task, proc_of, finish, target):
    ready = float(problem.arrival[task])
    for e in np.flatnonzero(problem.dst == task):
        u = int(problem.src[e])
        ready = max(ready, finish[u] + _transfer(problem, e, proc_of[u], target))
    return ready


def naive_list_schedule(problem, order, choose):
    """Places tasks in `order`; `choose(task, ests)` picks the processor from per-processor starts."""
    num_tasks, num_procs = problem.comp.shape
    proc, start, finish = {}, np.zeros(num_tasks), np.zeros(num_tasks)
    busy = [[] for _ in range(num_procs)]
    for task in order:
        ests = [
            _earliest_start(busy[p], _ready(problem, task, proc, finish, p), problem.comp[task, p])
            for p in range(num_procs)
        ]
        p = choose(task, ests)
        proc[task], start[task] = p, ests[p]
        finish[task] = ests[p] + problem.comp[task, p]
        busy[p].append((start[task], finish[task]))
    return np.array([proc[t] for t in range(num_tasks)]), start, finish


def naive_heft(problem, rank):
    """HEFT from given upward ranks: decreasing rank (ties by topological position), earliest finish
    (ties by lowest processor)."""
    position = {int(t): i for i, t in enumerate(problem.topological_order)}
    order = sorted(range(problem.num_tasks), key=lambda t: (-rank[t], position[t]))

    def earliest_finish(task, ests):
        finishes = [ests[p] + problem.comp[task, p] for p in range(problem.num_procs)]
        return int(np.argmin(finishes))

    return naive_list_schedule(problem, order, earliest_finish)


def naive_upward_rank(problem):
    """rank(t) = mean comp + max over successors (mean transfer + rank), by plain recursion."""
    if problem.bandwidth is None or problem.num_procs == 1:
        mean_bandwidth = 1.0
    else:
        mean_bandwidth = problem.bandwidth[~np.eye(problem.num_procs, dtype=bool)].mean()
    memo = {}

    def rank(t):
        if t not in memo:
            succ = [(int(problem.dst[e]), problem.data[e]) for e in np.flatnonzero(problem.src == t)]
            memo[t] = problem.comp[t].mean() + max([d / mean_bandwidth + rank(v) for v, d in succ], default=0.0)
        return memo[t]

    return np.array([rank(t) for t in range(problem.num_tasks)])


def naive_simulate(problem, proc, priority):
    """Greedy list scheduling: repeatedly place the ready task (all predecessors placed) of highest
    effective priority (priority capped by every ancestor's), ties by topological position."""
    preds = {t: set(problem.src[problem.dst == t].tolist()) for t in range(problem.num_tasks)}
    eff = np.array(priority, dtype=np.float64)
    for t in problem.topological_order:
        eff[t] = min([eff[t]] + [eff[u] for u in preds[t]])
    position = {int(t): i for i, t in enumerate(problem.topological_order)}
    placed, order = set(), []
    while len(order) < problem.num_tasks:
        ready = [t for t in range(problem.num_tasks) if t not in placed and preds[t] <= placed]
        task = min(ready, key=lambda t: (-eff[t], position[t]))
        placed.add(task)
        order.append(task)
    return naive_list_schedule(problem, order, lambda task, ests: int(proc[task]))
