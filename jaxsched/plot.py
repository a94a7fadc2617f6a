"""Gantt charts of schedules (extra `plots`: matplotlib)."""

from __future__ import annotations

import numpy as np

from jaxsched.problem import Problem, Schedule


def gantt(problem: Problem, schedule: Schedule, ax=None, title: str | None = None):
    """Draws one row per processor with a bar per task (zero-length tasks as ticks); returns the axes."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError("Gantt charts need the extra: pip install 'jax-research-systems[plots]'") from error
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.35 * problem.num_procs + 1.5))
    colors = plt.get_cmap("tab20")(np.arange(problem.num_tasks) % 20)
    for task in range(problem.num_tasks):
        p, start, finish = int(schedule.proc[task]), schedule.start[task], schedule.finish[task]
        ax.barh(p, max(finish - start, 1e-9), left=start, height=0.8, color=colors[task], edgecolor="black", lw=0.3)
        if problem.num_tasks <= 60 and finish > start:
            ax.text((start + finish) / 2, p, str(task), ha="center", va="center", fontsize=6)
    ax.set_yticks(range(problem.num_procs), [f"P{p}" for p in range(problem.num_procs)])
    ax.invert_yaxis()
    ax.set_xlabel("time")
    ax.set_title(title or f"makespan {schedule.makespan:.1f}")
    return ax
