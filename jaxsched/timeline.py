"""Processor timelines for insertion-based list scheduling (NumPy).

Placement rule shared by every scheduler in this package (HEFT, `simulate`, the JAX kernels and the
pure-Python benchmark twin): a task that becomes ready at `r` and runs `d > 0` on processor p starts
at the earliest `t >= r` such that `[t, t + d)` overlaps no busy interval of p, i.e. in the first idle
gap that fits it (`max(gap_start, r) + d <= gap_end`), or after the last task. A zero-length task
occupies no time and starts at `r`.

HEFT needs only the processor with the earliest finish, not every processor's earliest start. The
finish after the last task, `max(r, avail) + d`, is one vectorised expression; a gap can only help
a processor that is busy at `r` and whose lower bound `r + d` does not exceed the best such finish.
On the paper's 188-processor DAGs that is under one processor per task on average, so the gap lists
(kept per processor in Python, sorted by time) are searched rarely.
"""

from __future__ import annotations

import bisect

import numpy as np


class Timelines:
    """Busy intervals of P processors, as the last finish time and the idle gaps before it."""

    def __init__(self, comp: np.ndarray):
        """Empty timelines for the processors of `comp[T, P]` (used to skip gaps no task can fill)."""
        num_procs = comp.shape[1]
        positive = np.where(comp > 0, comp, np.inf)
        self.min_length = positive.min(axis=0).tolist()  # [P] a gap that cannot fit this is never stored
        self.avail = np.zeros(num_procs)  # [P] end of the last busy interval
        self.gap_starts = [[] for _ in range(num_procs)]  # per processor, sorted
        self.gap_ends = [[] for _ in range(num_procs)]
        self._tail, self._finish, self._bound = np.empty(num_procs), np.empty(num_procs), np.empty(num_procs)
        self._can_win = np.empty(num_procs, dtype=bool)

    def earliest_finish(self, ready: np.ndarray, duration: np.ndarray) -> tuple[int, float]:
        """(processor, start) finishing a task earliest; ties go to the lowest processor index."""
        avail, tail, finish = self.avail, self._tail, self._finish  # preallocated: this is the hot loop
        np.add(np.maximum(ready, avail, out=tail), duration, out=finish)
        best = int(finish.argmin())
        bound = float(finish[best])
        improved = False
        can_win = np.less_equal(np.add(ready, duration, out=self._bound), bound, out=self._can_win)
        for proc in np.flatnonzero(can_win).tolist():  # lower bound can win
            if avail[proc] > ready[proc]:  # busy at the ready time: a gap may do better
                start = self._gap_start(proc, float(ready[proc]), float(duration[proc]), bound)
                if start is not None:
                    finish[proc] = start + duration[proc]
                    tail[proc] = start
                    improved = True
        if improved:
            best = int(finish.argmin())
        return best, float(tail[best])

    def earliest_start(self, proc: int, ready: float, duration: float) -> float:
        """Earliest start of one task on processor `proc`."""
        avail = float(self.avail[proc])
        if duration == 0 or ready >= avail:
            return ready
        start = self._gap_start(proc, ready, duration, avail + duration)
        return avail if start is None else start

    def _gap_start(self, proc: int, ready: float, duration: float, finish_by: float) -> float | None:
        """Start in the first gap of `proc` that fits the task and finishes it by `finish_by`, or None."""
        if duration == 0:
            return ready
        starts, ends = self.gap_starts[proc], self.gap_ends[proc]
        for k in range(bisect.bisect_left(ends, ready + duration), len(ends)):  # earlier gaps end too soon
            start = max(starts[k], ready)
            if start + duration > finish_by:  # later gaps start later still
                return None
            if start + duration <= ends[k]:
                return start
        return None

    def occupy(self, proc: int, start: float, duration: float) -> None:
        """Marks `[start, start + duration)` busy on `proc`; `start` must come from this timeline."""
        if duration == 0:
            return
        finish = start + duration
        avail = float(self.avail[proc])
        starts, ends = self.gap_starts[proc], self.gap_ends[proc]
        if start >= avail:
            self.avail[proc] = finish
            if self._fits(proc, avail, start):
                starts.append(avail)
                ends.append(start)
            return
        k = bisect.bisect_right(starts, start) - 1  # the gap holding the task
        gap_start, gap_end = starts[k], ends[k]
        del starts[k], ends[k]
        for lo, hi in ((finish, gap_end), (gap_start, start)):  # insert right part, then left before it
            if self._fits(proc, lo, hi):
                starts.insert(k, lo)
                ends.insert(k, hi)

    def _fits(self, proc: int, start: float, end: float) -> bool:
        """Whether the shortest task of `proc` fits in `[start, end]` (same arithmetic as placement)."""
        return start < end and start + self.min_length[proc] <= end
