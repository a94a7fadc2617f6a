"""Gantt charts of schedules and heatmaps of scheduler comparisons (extra `plots`: matplotlib)."""

from __future__ import annotations

import numpy as np

from jaxsched.problem import Problem, Schedule


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError("plots need the extra: pip install 'jax-research-systems[plots]'") from error
    return plt


def gantt(problem: Problem, schedule: Schedule, ax=None, title: str | None = None):
    """Draws one row per processor with a bar per task (zero-length tasks as ticks); returns the axes."""
    plt = _pyplot()
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


def heatmap(values: np.ndarray, rows, columns, ax=None, title: str = "", label: str = ""):
    """Draws `values[R, C]` as a log-coloured grid with each value written in its cell (for example
    the worst makespan ratio of each scheduler pair); returns the axes."""
    plt = _pyplot()
    from matplotlib.colors import LogNorm

    values = np.asarray(values, dtype=float)
    if ax is None:
        _, ax = plt.subplots(figsize=(0.55 * len(columns) + 2.5, 0.45 * len(rows) + 1.5))
    image = ax.imshow(values, cmap="viridis", norm=LogNorm(vmin=max(values.min(), 1e-9), vmax=values.max()))
    for (r, c), value in np.ndenumerate(values):
        ax.text(c, r, f"{value:.3g}", ha="center", va="center", fontsize=6, color="white")
    ax.set_xticks(range(len(columns)), columns, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.figure.colorbar(image, ax=ax, label=label)
    ax.set_title(title)
    return ax
