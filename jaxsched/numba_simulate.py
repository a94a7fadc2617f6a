"""`simulate` and the GA's population evaluation compiled for the CPU with numba: the numba twin of
`jaxsched.simulate`.

The same loop as the NumPy reference, with the same visit order (the placement order of `jaxsched.order`), the
same placement rule (`jaxsched.numba_timeline`) and the same ties, in float64 with the same arithmetic, so every
schedule equals the reference's to the last bit. `population_fitness_numba` simulates every chromosome of a GA
population, spread over the CPU cores (`ga(backend="numba")`). The face `jaxsched.numba` gives both without the
suffix (`simulate_population`, `population_fitness`).
"""

from __future__ import annotations

import numba
import numpy as np

from jaxsched.numba_timeline import earliest_start, empty_rows, frozen_array, occupy, over_cores
from jaxsched.problem import Problem
from jaxsched.simulate import check_assignment

_jit = numba.njit(cache=True, nogil=True)


@_jit
def _placement_order(topo, in_ptr, in_src, priority):
    """`jaxsched.order.placement_order`: decreasing effective priority (capped by every ancestor's), ties by
    topological position."""
    eff = priority.copy()
    for i in range(len(topo)):
        task = topo[i]
        for k in range(in_ptr[task], in_ptr[task + 1]):
            eff[task] = min(eff[task], eff[in_src[k]])
    return topo[np.argsort(-eff[topo], kind="mergesort")]


@_jit
def _simulate_one(comp, topo, in_ptr, in_src, in_data, arrival, inverse_bandwidth, proc, priority, start, finish):
    """`jaxsched.simulate` of one chromosome (proc, priority); fills start and finish."""
    num_tasks, num_procs = comp.shape
    busy_start, busy_finish, count = empty_rows(num_tasks, num_procs)
    avail = np.zeros(num_procs)
    order = _placement_order(topo, in_ptr, in_src, priority)
    for i in range(num_tasks):
        task = order[i]
        p = proc[task]
        ready = arrival[task]
        for k in range(in_ptr[task], in_ptr[task + 1]):
            u = in_src[k]
            ready = max(ready, finish[u] + in_data[k] * inverse_bandwidth[proc[u], p])
        duration = comp[task, p]
        begin = earliest_start(busy_start, busy_finish, p, count[p], avail[p], ready, duration)
        start[task], finish[task] = begin, begin + duration
        if duration > 0:
            avail[p] = max(avail[p], begin + duration)
        busy_start, busy_finish = occupy(busy_start, busy_finish, count, p, begin, duration)


@_jit
def _simulate_population(lo, hi, comp, topo, in_ptr, in_src, in_data, arrival, inverse_bandwidth, proc, priority,
                         start, finish):
    for n in range(lo, hi):
        _simulate_one(comp, topo, in_ptr, in_src, in_data, arrival, inverse_bandwidth, proc[n], priority[n], start[n],
                      finish[n])


def simulate_population_numba(problem: Problem, proc, priority) -> tuple[np.ndarray, np.ndarray]:
    """(start [N, T], finish [N, T]) of `jaxsched.simulate(problem, proc[n], priority[n])` for every row n,
    compiled and spread over the CPU cores; equal to the reference to the last bit."""
    proc, priority = check_assignment(problem, proc, priority)
    if proc.ndim != 2:
        raise ValueError(f"proc and priority must be [N, T] populations, got shape {proc.shape}")
    in_ptr, in_order = problem.in_edges
    start, finish = np.zeros(proc.shape), np.zeros(proc.shape)
    inputs = (problem.comp, problem.topological_order, in_ptr, problem.src[in_order], problem.data[in_order],
              problem.arrival, problem.inverse_bandwidth, proc, priority)
    over_cores(_simulate_population, proc.shape[0], *(frozen_array(a) for a in inputs), start, finish)
    return start, finish


def population_fitness_numba(problem: Problem, proc, priority, objective: str = "waiting") -> np.ndarray:
    """[N] GA fitness of every chromosome (`jaxsched.ga.fitness_of`: average waiting time, paper Eq. 1, or
    makespan), simulated by `simulate_population_numba`; equal to the NumPy GA's evaluation."""
    if objective not in ("waiting", "makespan"):
        raise ValueError(f"objective must be 'waiting' or 'makespan', got {objective!r}")
    start, finish = simulate_population_numba(problem, proc, priority)
    if objective == "makespan":
        return finish.max(axis=1)
    return np.array([np.mean(row - problem.arrival) for row in start])
