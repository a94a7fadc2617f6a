"""What ran where and when: the trace of a tuning run (simulated or real), its metrics and its chart."""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

import numpy as np

from jaxsched.autotune.jobs import STAGES
from jaxsched.autotune.resources import CPU, DEVICE, Machine


@dataclasses.dataclass(frozen=True)
class Trace:
    """One row per stage run: arrays of length S (stage index into STAGES, `kind` 0 = cpu, 1 = device)."""

    names: tuple[str, ...]  # [J] job names; `job` indexes them
    job: np.ndarray  # [S]
    round: np.ndarray  # [S]
    stage: np.ndarray  # [S]
    machine: np.ndarray  # [S]
    kind: np.ndarray  # [S]
    amount: np.ndarray  # [S]
    start: np.ndarray  # [S] seconds
    finish: np.ndarray  # [S] seconds

    @classmethod
    def from_rows(cls, names: Sequence[str], rows: Iterable[tuple]) -> "Trace":
        """From rows (job, round, stage, machine, kind name, amount, start, finish)."""
        rows = list(rows)
        columns = list(zip(*rows)) if rows else [()] * 8
        ints = [np.asarray(c, dtype=np.int64) for c in columns[:4]]
        kind = np.asarray([(CPU, DEVICE).index(k) for k in columns[4]], dtype=np.int64)
        return cls(
            tuple(names),
            *ints,
            kind,
            np.asarray(columns[5], dtype=np.int64),
            np.asarray(columns[6], dtype=np.float64),
            np.asarray(columns[7], dtype=np.float64),
        )

    @property
    def makespan(self) -> float:
        """Time from 0 to the end of the last stage."""
        return float(self.finish.max()) if self.finish.size else 0.0

    @property
    def seconds(self) -> np.ndarray:
        """[S] duration of each stage run."""
        return self.finish - self.start

    def busy_fraction(self, machine: int, kind: str) -> float:
        """Fraction of the makespan during which at least one stage used resource `kind` of `machine`."""
        rows = (self.machine == machine) & (self.kind == (CPU, DEVICE).index(kind))
        return _union_length(self.start[rows], self.finish[rows]) / self.makespan if self.makespan > 0 else 0.0

    def mean_seconds(self) -> dict[str, float]:
        """Mean duration per stage name (NaN for a stage that never ran)."""
        return {
            name: float(self.seconds[self.stage == s].mean()) if np.any(self.stage == s) else float("nan")
            for s, name in enumerate(STAGES)
        }


def _union_length(start: np.ndarray, finish: np.ndarray) -> float:
    """Total length of the union of the intervals [start, finish)."""
    total, reach = 0.0, -np.inf
    for lo, hi in sorted(zip(start.tolist(), finish.tolist())):
        if hi > reach:
            total += hi - max(lo, reach)
            reach = hi
    return total


def check_trace(
    trace: Trace, rounds: Sequence[int], machines: Sequence[Machine], exclusive: bool = True, tol: float = 1e-9
) -> None:
    """Raises ValueError naming the first violation: a job's stages missing or out of order (every
    stage once, in round-major order, each starting after the previous one finished) or, when
    `exclusive`, a resource holding more than its capacity at some moment (two profiles overlapping
    on one device)."""
    for j, name in enumerate(trace.names):
        rows = np.flatnonzero(trace.job == j)
        rows = rows[np.lexsort((trace.start[rows], trace.stage[rows], trace.round[rows]))]
        expected = [(r, s) for r in range(rounds[j]) for s in range(len(STAGES))]
        got = list(zip(trace.round[rows].tolist(), trace.stage[rows].tolist()))
        if got != expected:
            raise ValueError(f"job {name!r}: ran stages {got}, expected {expected}")
        gaps = trace.start[rows[1:]] - trace.finish[rows[:-1]]
        if np.any(gaps < -tol):
            k = int(np.argmin(gaps))
            raise ValueError(f"job {name!r}: stage {got[k + 1]} started before stage {got[k]} finished")
    if not exclusive:
        return
    for m, machine in enumerate(machines):
        for k, kind in enumerate((CPU, DEVICE)):
            rows = np.flatnonzero((trace.machine == m) & (trace.kind == k))
            # sweep: +amount at a start, -amount at a finish; finishes first at equal times
            times = np.concatenate([trace.start[rows], trace.finish[rows] - tol])
            deltas = np.concatenate([trace.amount[rows], -trace.amount[rows]])
            order = np.lexsort((deltas, times))
            load = np.cumsum(deltas[order])
            if load.size and load.max() > machine.capacity(kind):
                at = float(times[order][int(np.argmax(load))])
                capacity = machine.capacity(kind)
                raise ValueError(
                    f"machine {m} {kind}: {int(load.max())} units in use at t={at:.6g}, capacity {capacity}"
                )


def gantt(trace: Trace, machines: Sequence[Machine], ax=None, title: str | None = None):
    """Gantt chart of the stages per resource lane (one lane per core or device; overlapping stages
    of an uncoordinated run get extra lanes), drawn with `jaxsched.plot.gantt` and coloured by stage;
    returns the axes (extra `plots`)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from jaxsched.plot import gantt as draw
    from jaxsched.problem import Problem, Schedule

    lane = np.zeros(trace.job.size, dtype=np.int64)
    labels = []
    for m in range(len(machines)):
        for k, kind in enumerate((CPU, DEVICE)):
            rows = np.flatnonzero((trace.machine == m) & (trace.kind == k))
            ends: list[float] = []  # finish of the last stage in each lane of this resource
            for row in rows[np.argsort(trace.start[rows], kind="stable")]:
                i = next((i for i, end in enumerate(ends) if end <= trace.start[row] + 1e-9), len(ends))
                ends[i : i + 1] = [trace.finish[row]]
                lane[row] = len(labels) + i
            labels += [f"m{m} {kind}{i}" for i in range(max(len(ends), 1))]
    problem = Problem(np.repeat(trace.seconds[:, None], len(labels), axis=1), [], [], [])
    ax = draw(
        problem, Schedule(lane, trace.start, trace.finish), ax=ax, title=title or f"makespan {trace.makespan:.2f} s"
    )
    colors = plt.get_cmap("tab10")(np.arange(len(STAGES)))
    for patch, stage in zip(ax.patches, trace.stage):  # one bar per stage run, in row order
        patch.set_facecolor(colors[stage])
    for text in list(ax.texts):  # task numbers: replaced by job numbers on the bars wide enough to hold one
        text.remove()
    for row in np.flatnonzero(trace.seconds > trace.makespan / 80):
        ax.text(
            (trace.start[row] + trace.finish[row]) / 2,
            lane[row],
            str(trace.job[row]),
            ha="center",
            va="center",
            fontsize=6,
        )
    ax.legend(
        handles=[Patch(color=colors[s], label=name) for s, name in enumerate(STAGES)],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=7,
        title="job numbers on bars",
        title_fontsize=6,
    )
    ax.set_xlabel("seconds")
    ax.set_yticks(range(len(labels)), labels)
    return ax
