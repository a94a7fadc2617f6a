"""Discrete-event simulator of the scheduling policies over MockJobs on many machines (NumPy reference).

Time jumps from event to event (a job arrives, a stage ends); at each event the central `Scheduler`
decides what starts, exactly as it does in a real run. Stages that share a resource beyond its
capacity (only the uncoordinated `parallel` policy lets that happen) share it fairly: with demand D
on c units each runs at rate c / D, further slowed by `1 + interference` (context switches and
cache thrashing on top of the fair share; 0 is ideal processor sharing). Every stage on a resource
then progresses at one common rate, so each resource keeps a virtual clock (seconds of service
each of its stages has received) and a heap of virtual finish times: an event costs O(log n).
"""

from __future__ import annotations

import heapq
import math
from typing import Sequence

from jaxsched.autotune.jobs import MockJob
from jaxsched.autotune.policies import Policy
from jaxsched.autotune.resources import Machine
from jaxsched.autotune.scheduler import Scheduler
from jaxsched.autotune.trace import Trace
from jaxsched.common.arguments import number


class _Resource:
    """A shared resource in processor-sharing time: virtual clock, rate and the stages on it."""

    __slots__ = ("capacity", "interference", "clock", "updated", "demand", "heap")

    def __init__(self, capacity: int, interference: float):
        self.capacity, self.interference = capacity, interference
        self.clock = 0.0  # seconds of service each running stage has received since the start
        self.updated = 0.0  # wall time of `clock`
        self.demand = 0
        self.heap: list = []  # (virtual finish, seq, row)

    def rate(self) -> float:
        if self.demand <= self.capacity:
            return 1.0
        return self.capacity / self.demand / (1.0 + self.interference)

    def advance(self, now: float) -> None:
        self.clock += (now - self.updated) * self.rate()
        self.updated = now

    def next_finish(self) -> float:
        if not self.heap:
            return math.inf
        return self.updated + max(self.heap[0][0] - self.clock, 0.0) / self.rate()


def simulate_policy(
    jobs: Sequence[MockJob], machines: Sequence[Machine], policy: Policy, interference: float = 0.0
) -> Trace:
    """Simulates `policy` scheduling `jobs` (their `durations` are the stage times when run alone)
    on `machines`; returns the trace, with jobs numbered as given."""
    interference = number("interference", interference, 0)
    scheduler = Scheduler(machines, policy)
    order = sorted(range(len(jobs)), key=lambda j: (jobs[j].arrival, j))
    to_given = []  # scheduler index -> position in `jobs`
    pools = list(scheduler.free)
    resources = [_Resource(scheduler.free[pool], interference) for pool in pools]
    index_of = {pool: i for i, pool in enumerate(pools)}
    due = [math.inf] * len(pools)  # next finish time of each resource, updated when it changes
    starts, rows = [], []  # per stage run: StageStart, [start, finish]
    seq, arrived, now = 0, 0, 0.0
    while True:
        while arrived < len(order) and jobs[order[arrived]].arrival <= now:
            to_given.append(order[arrived])
            scheduler.submit(jobs[order[arrived]], jobs[order[arrived]].arrival)
            arrived += 1
        for start in scheduler.dispatch():
            r = index_of[start.machine, start.kind]
            resource = resources[r]
            resource.advance(now)
            work = float(jobs[to_given[start.job]].durations[start.round, start.stage])
            heapq.heappush(resource.heap, (resource.clock + work, seq, len(starts)))
            seq += 1
            resource.demand += start.amount
            due[r] = resource.next_finish()
            starts.append(start)
            rows.append([now, math.nan])
        upcoming = min(due)
        if arrived < len(order):
            upcoming = min(upcoming, jobs[order[arrived]].arrival)
        if math.isinf(upcoming):
            break
        now = upcoming
        ended = []
        for r, resource in enumerate(resources):
            if due[r] <= now + 1e-12 * max(1.0, now):
                resource.advance(now)
                while resource.heap and resource.heap[0][0] <= resource.clock + 1e-9 * max(1.0, resource.clock):
                    row = heapq.heappop(resource.heap)[2]
                    resource.demand -= starts[row].amount
                    ended.append(row)
                due[r] = resource.next_finish()
        for row in ended:
            rows[row][1] = now
            scheduler.finish(starts[row], now, now - rows[row][0])
    if scheduler.unfinished:
        raise RuntimeError(f"simulation stalled with {scheduler.unfinished} unfinished jobs")
    return Trace.from_rows(
        [job.name for job in jobs],
        ((to_given[s.job], s.round, s.stage, s.machine, s.kind, s.amount, r[0], r[1]) for s, r in zip(starts, rows)),
    )
