"""Processor timelines for insertion-based list scheduling (NumPy).

Placement rule shared by every scheduler in this package (HEFT, `simulate`, the JAX kernels and the
pure-Python benchmark twin): a task that becomes ready at `r` and runs `d > 0` on processor p starts
at the earliest `t >= r` such that `[t, t + d)` overlaps no busy interval of p, i.e. in the first idle
gap that fits it (`max(gap_start, r) + d <= gap_end`), or after the last task. A zero-length task
occupies no time and starts at `r`.

HEFT needs only the processor with the earliest finish, not every processor's earliest start. The
finish after the last task, `max(r, avail) + d`, is one vectorised expression. A gap can only help a
processor whose lower bound `r + d` does not exceed the best finish so far and whose last gap ends
after `r + d`; those are searched (per-processor sorted gap lists, bisect) by increasing lower
bound, each against the best finish found so far. On the paper's 188-processor DAGs that is about
one search every two tasks, even at 84,654 tasks.
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
        self.zero_tasks = bool((comp == 0).any())
        self.avail = np.zeros(num_procs)  # [P] end of the last busy interval
        self.gap_starts = [[] for _ in range(num_procs)]  # per processor, sorted
        self.gap_ends = [[] for _ in range(num_procs)]
        self.last_gap_end = [-np.inf] * num_procs  # a search needs a gap ending after ready + duration
        self._tail, self._finish, self._lower = np.empty(num_procs), np.empty(num_procs), np.empty(num_procs)
        self._can_win = np.empty(num_procs, dtype=bool)

    def earliest_finish(self, ready: np.ndarray, duration: np.ndarray) -> tuple[int, float]:
        """(processor, start) finishing a task earliest; ties go to the lowest processor index.

        Processors that may beat the best finish after the last task are searched by increasing
        lower bound `ready + duration`, each against the best finish found so far.
        """
        avail, tail, finish = self.avail, self._tail, self._finish  # preallocated: this is the hot loop
        np.maximum(ready, avail, out=tail)
        if self.zero_tasks:  # a zero-length task starts when ready, busy processor or not
            np.copyto(tail, ready, where=duration == 0)
        np.add(tail, duration, out=finish)
        best = int(finish.argmin())
        best_finish, best_start = float(finish[best]), float(tail[best])
        lower = np.add(ready, duration, out=self._lower)
        candidates = np.flatnonzero(np.less_equal(lower, best_finish, out=self._can_win))
        if candidates.size > 1:
            candidates = candidates[np.argsort(lower[candidates], kind="stable")]
        for proc in candidates.tolist():
            bound, length = float(lower[proc]), float(duration[proc])
            if bound > best_finish:
                break
            if not self._gap_may_fit(proc, bound):
                continue
            start = self._gap_start(proc, float(ready[proc]), length, best_finish)
            if start is not None and (start + length < best_finish or proc < best):
                best, best_finish, best_start = proc, start + length, start
        return best, best_start

    def earliest_start(self, proc: int, ready: float, duration: float) -> float:
        """Earliest start of one task on processor `proc`."""
        avail = float(self.avail[proc])
        if duration == 0 or ready >= avail:
            return ready
        if self._gap_may_fit(proc, ready + duration):
            start = self._gap_start(proc, ready, duration, avail + duration)
            if start is not None:
                return start
        return avail

    def _gap_may_fit(self, proc: int, lower: float) -> bool:
        """False when no gap of `proc` can hold the task: the last one ends before ready + duration."""
        return self.last_gap_end[proc] >= lower

    def _gap_start(self, proc: int, ready: float, duration: float, finish_by: float) -> float | None:
        """Start in the first gap of `proc` that fits the task and finishes it by `finish_by`, or None."""
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
                self.last_gap_end[proc] = start
            return
        k = bisect.bisect_right(starts, start) - 1  # the gap holding the task
        gap_start, gap_end = starts[k], ends[k]
        del starts[k], ends[k]
        for lo, hi in ((finish, gap_end), (gap_start, start)):  # insert right part, then left before it
            if self._fits(proc, lo, hi):
                starts.insert(k, lo)
                ends.insert(k, hi)
        self.last_gap_end[proc] = ends[-1] if ends else -np.inf

    def _fits(self, proc: int, start: float, end: float) -> bool:
        """Whether the shortest task of `proc` fits in `[start, end]` (same arithmetic as placement)."""
        return start < end and start + self.min_length[proc] <= end
