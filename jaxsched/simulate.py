"""Turn any processor assignment plus priority into a valid schedule (list scheduling, NumPy).

This is how every non-HEFT scheduler here (the GA, the neural scheduler) produces schedules, so
their outputs always satisfy precedence, communication delays and processor exclusivity.

Order: `jaxsched.order.placement_order` (decreasing effective priority, ties by topological position).
Placement: each task starts at the earliest time its inputs have arrived on its processor, in the
first idle gap that fits (`timeline.Timelines`), like HEFT.
"""

from __future__ import annotations

import numpy as np

from jaxsched.order import placement_order
from jaxsched.problem import Problem, Schedule, check_problem, real_array
from jaxsched.timeline import Timelines


def check_assignment(problem: Problem, proc, priority) -> tuple[np.ndarray, np.ndarray]:
    """Validates a (processor, priority) pair for `problem`, each [T] (or [N, T]: a population);
    returns them as arrays."""
    check_problem(problem)
    proc = np.asarray(proc)
    priority = real_array("priority", priority)
    if proc.ndim not in (1, 2) or proc.shape[-1] != problem.num_tasks or priority.shape != proc.shape:
        raise ValueError(
            f"proc and priority must have shape ({problem.num_tasks},) (or (N, {problem.num_tasks}), a population), "
            f"got {proc.shape} and {priority.shape}"
        )
    if not np.issubdtype(proc.dtype, np.integer):
        raise ValueError(f"proc must hold integer processor indices, got dtype {proc.dtype}")
    out = (proc < 0) | (proc >= problem.num_procs)
    if out.any():
        index = np.unravel_index(int(np.argmax(out)), out.shape)
        where = ", ".join(str(int(i)) for i in index)
        raise ValueError(f"proc[{where}] = {proc[index]} is out of range for {problem.num_procs} processors")
    if not np.all(np.isfinite(priority)):
        raise ValueError("priority must be finite")
    return proc.astype(np.int64), priority


def simulate(problem: Problem, proc, priority) -> Schedule:
    """Schedule of `problem` with task t on `proc[t]`, placed in `priority` order (higher first)."""
    proc, priority = check_assignment(problem, proc, priority)
    start = np.zeros(problem.num_tasks)
    finish = np.zeros(problem.num_tasks)
    timelines = Timelines(problem.comp)
    duration = problem.comp[np.arange(problem.num_tasks), proc]
    in_ptr, in_order = problem.in_edges
    pred_edges = np.split(in_order, in_ptr[1:-1])
    comm = problem.data * problem.inverse_bandwidth[proc[problem.src], proc[problem.dst]]  # [E]
    arrival = problem.arrival
    for task in placement_order(problem, priority).tolist():
        edges = pred_edges[task]
        ready = arrival[task]
        if edges.size:
            ready = max(ready, float((finish[problem.src[edges]] + comm[edges]).max()))
        p = proc[task]
        start[task] = timelines.earliest_start(p, ready, duration[task])
        finish[task] = start[task] + duration[task]
        timelines.occupy(p, start[task], duration[task])
    return Schedule(proc=proc, start=start, finish=finish)
