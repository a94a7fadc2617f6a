"""Schedule quality metrics (Topcuoglu et al. 2002 for SLR, speedup, efficiency; DeepSched Eq. 1 and
Fig. 4 for waiting and turnaround times)."""

from __future__ import annotations

import numpy as np

from jaxsched.problem import Problem, Schedule, check_problem


def makespan(schedule: Schedule) -> float:
    """Finish time of the last task."""
    return schedule.makespan


def critical_path_min(problem: Problem) -> float:
    """Length of the longest path when every task takes its minimum execution time and transfers
    are free: the lower bound that normalises SLR."""
    fastest = problem.comp.min(axis=1)
    length = fastest.copy()  # longest path ending at each task
    for edges in problem.edges_by_dst_level[1:]:
        dst = problem.dst[edges]
        np.maximum.at(length, dst, length[problem.src[edges]] + fastest[dst])
    return float(length.max())


def _check(problem: Problem, schedule: Schedule) -> None:
    """Raises ValueError when `schedule` is not one of `problem`'s tasks."""
    check_problem(problem)
    for name in ("proc", "start", "finish"):
        shape = np.shape(getattr(schedule, name))
        if shape != (problem.num_tasks,):
            raise ValueError(f"schedule.{name} must have shape ({problem.num_tasks},), got {shape}")


def _ratio(numerator: float, denominator: float, what: str) -> float:
    """numerator / denominator, or ValueError naming `what` (a ratio with a zero denominator)."""
    if denominator == 0:
        raise ValueError(f"{what} is undefined: its denominator is 0")
    return numerator / denominator


def slr(problem: Problem, schedule: Schedule) -> float:
    """Schedule length ratio: makespan over the minimum-cost critical path (>= 1 up to zero costs);
    ValueError when that path costs nothing."""
    _check(problem, schedule)
    return _ratio(schedule.makespan, critical_path_min(problem), "SLR (makespan / critical path)")


def speedup(problem: Problem, schedule: Schedule) -> float:
    """Best single-processor sequential time over the makespan; ValueError for a zero makespan."""
    _check(problem, schedule)
    return _ratio(float(problem.comp.sum(axis=0).min()), schedule.makespan, "speedup (sequential time / makespan)")


def efficiency(problem: Problem, schedule: Schedule) -> float:
    """Speedup per processor."""
    return speedup(problem, schedule) / problem.num_procs


def average_turnaround(problem: Problem, schedule: Schedule) -> float:
    """Mean over tasks of finish time minus arrival time (the DeepSched paper's Fig. 4 metric)."""
    _check(problem, schedule)
    return float(np.mean(schedule.finish - problem.arrival))


def average_waiting(problem: Problem, schedule: Schedule) -> float:
    """Mean over tasks of start time minus arrival time (the GA fitness, DeepSched Eq. 1)."""
    _check(problem, schedule)
    return float(np.mean(schedule.start - problem.arrival))


def summary(problem: Problem, schedule: Schedule) -> dict[str, float]:
    """All metrics of `schedule`, by name."""
    return {
        "makespan": makespan(schedule),
        "slr": slr(problem, schedule),
        "speedup": speedup(problem, schedule),
        "efficiency": efficiency(problem, schedule),
        "avg_turnaround": average_turnaround(problem, schedule),
        "avg_waiting": average_waiting(problem, schedule),
    }
