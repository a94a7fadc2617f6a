"""The list-scheduling family as one parametric scheduler (NumPy reference) and its named presets.

A list scheduler repeats, until every task is placed: take the ready tasks (all predecessors placed),
pick a task and a processor, place the task there. `ListConfig` names the three choices:

* priority (`jaxsched.priorities`): the static visit order among ready tasks.
* selection: how the processor (and, for the dynamic rules, the task) is chosen.
  Static rules place the ready task of highest priority on the processor of least
  "eft" finish time, "est" start time, "fastest" execution time, "earliest_free" last busy time,
  "eft_oct" finish time plus optimistic cost (PEFT). Dynamic rules score every ready task on every
  processor: "min_min" / "max_min" take the task whose best finish time is least / greatest,
  "sufferage" the task that loses most if denied its best processor (second-best minus best finish),
  "etf" the (task, processor) pair of earliest start, "wba" a seeded random pair among those whose
  makespan increase is within `alpha` of the best (Blythe et al. 2005). Ties go to the higher
  priority task, then to the lowest processor index.
* placement: `insertion=True` starts a task in the first idle gap that fits (`jaxsched.timeline`),
  `False` appends it after the processor's last task. A zero-length task starts when ready.
* pinning: "critical_path" runs CPOP's critical-path tasks on its processor, "fastest_processor"
  runs every task on the processor of least total execution time (FastestNode).

`schedule(problem, name, **options)` runs a named preset (`PRESETS`, plus "Duplex" and "GA");
`options` override the preset's fields. The JAX twin (`jaxsched.jax_listsched`) takes the same
`ListPlan`, so both visit and break ties identically.
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import NamedTuple

import numpy as np

from jaxsched.ga import ga
from jaxsched.priorities import (
    PRIORITIES,
    RANK_CONVENTIONS,
    critical_path,
    optimistic_cost_table,
    priority_position,
)
from jaxsched.problem import Problem, Schedule, check_problem
from jaxsched.timeline import Timelines

STATIC_SELECTIONS = ("eft", "est", "fastest", "earliest_free", "eft_oct")
DYNAMIC_SELECTIONS = ("min_min", "max_min", "sufferage", "etf", "wba")
SELECTIONS = STATIC_SELECTIONS + DYNAMIC_SELECTIONS
PINNINGS = ("none", "critical_path", "fastest_processor")


@dataclasses.dataclass(frozen=True)
class ListConfig:
    """One member of the family: priority, selection, placement, pinning (module docstring), the
    seed and threshold of "wba", and the rank convention (`jaxsched.priorities.RANK_CONVENTIONS`:
    "topcuoglu", or "saga" to reproduce SAGA's HEFT, CPOP and PEFT)."""

    priority: str = "upward"
    selection: str = "eft"
    insertion: bool = True
    pinning: str = "none"
    seed: int = 0
    alpha: float = 0.5
    ranks: str = "topcuoglu"

    def __post_init__(self):
        for field, value, known in (
            ("priority", self.priority, PRIORITIES),
            ("selection", self.selection, SELECTIONS),
            ("pinning", self.pinning, PINNINGS),
            ("ranks", self.ranks, RANK_CONVENTIONS),
        ):
            if value not in known:
                raise ValueError(f"unknown {field} {value!r}; known: {', '.join(known)}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must lie in [0, 1], got {self.alpha}")

    @property
    def dynamic(self) -> bool:
        """Whether the selection scores every ready task (it then picks the task too)."""
        return self.selection in DYNAMIC_SELECTIONS


PRESETS = {
    # Topcuoglu, Hariri and Wu, "Performance-effective and low-complexity task scheduling for
    # heterogeneous computing", IEEE TPDS 13(3), 2002.
    "HEFT": ListConfig("upward", "eft", True),
    "CPOP": ListConfig("rank_sum", "eft", True, "critical_path"),
    # Arabnejad and Barbosa, "List scheduling algorithm for heterogeneous systems by an optimistic
    # cost table", IEEE TPDS 25(3), 2014.
    "PEFT": ListConfig("oct", "eft_oct", True),
    # Braun et al., "A comparison of eleven static heuristics for mapping a class of independent
    # tasks onto heterogeneous distributed computing systems", JPDC 61(6), 2001 (MCT, MET, OLB,
    # MinMin, MaxMin, Duplex), taken to DAGs in topological order.
    "MCT": ListConfig("topological", "eft", False),
    "MET": ListConfig("topological", "fastest", False),
    "OLB": ListConfig("topological", "earliest_free", False),
    "MinMin": ListConfig("topological", "min_min", False),
    "MaxMin": ListConfig("topological", "max_min", False),
    # Minimum start time: each task in topological order on the processor where it starts first.
    "MST": ListConfig("topological", "est", False),
    # Every task on the one processor that runs the whole graph fastest (a serial baseline).
    "FastestNode": ListConfig("topological", "eft", False, "fastest_processor"),
    # Maheswaran et al., "Dynamic mapping of a class of independent tasks onto heterogeneous
    # computing systems", JPDC 59(2), 1999.
    "Sufferage": ListConfig("topological", "sufferage", False),
    # Hwang, Chow, Anger and Lee, "Scheduling precedence graphs in systems with interprocessor
    # communication times", SIAM J. Comput. 18(2), 1989 (ties by upward rank, for static level).
    "ETF": ListConfig("upward", "etf", False),
    # Blythe et al., "Task scheduling strategies for workflow-based applications in grids",
    # CCGrid 2005 (weighted basic allocation, seeded).
    "WBA": ListConfig("topological", "wba", False),
}
COMPOSITES = ("Duplex", "GA")
NAMES = tuple(PRESETS) + COMPOSITES


class ListPlan(NamedTuple):
    """What a `ListConfig` needs from one problem, computed once on the host in float64."""

    position: np.ndarray  # [T] int place in the priority order (lower is visited first)
    order: np.ndarray  # [T] int visit order of the static selections: the ready task of lowest position
    pin: np.ndarray  # [T] int processor a task is pinned to, -1 where free
    oct: np.ndarray  # [T, P] optimistic cost table ("eft_oct"), zeros otherwise
    draws: np.ndarray  # [T] int random integers of "wba", one per step, zeros otherwise


def make_plan(problem: Problem, config: ListConfig) -> ListPlan:
    """The positions, pins, cost table and draws of `config` on `problem`."""
    check_problem(problem)
    num_tasks, num_procs = problem.comp.shape
    oct_table = (
        optimistic_cost_table(problem, config.ranks)
        if config.selection == "eft_oct"
        else np.zeros((num_tasks, num_procs))
    )
    position = priority_position(problem, config.priority, config.ranks)
    return ListPlan(
        position, ready_list_order(problem, position), pins(problem, config), oct_table, draws(problem, config)
    )


def pins(problem: Problem, config: ListConfig) -> np.ndarray:
    """[T] int the processor each task is pinned to by `config.pinning`, -1 where free."""
    pin = np.full(problem.num_tasks, -1, dtype=np.int64)
    if config.pinning == "critical_path":
        tasks, proc = critical_path(problem, config.ranks)
        pin[tasks] = proc
    elif config.pinning == "fastest_processor":
        pin[:] = int(problem.comp.sum(axis=0).argmin())
    return pin


def draws(problem: Problem, config: ListConfig) -> np.ndarray:
    """[T] int the seeded random integers of "wba", one per step; zeros for the other selections."""
    if config.selection == "wba":
        return np.random.default_rng(config.seed).integers(0, 2**31 - 1, problem.num_tasks)
    return np.zeros(problem.num_tasks, dtype=np.int64)


def ready_list_order(problem: Problem, position: np.ndarray) -> np.ndarray:
    """[T] the order in which a list scheduler visits tasks when it always takes the ready task of
    lowest `position`: it depends on the DAG alone, not on the schedule, so it is computed once.
    When every edge goes from a lower to a higher position (upward rank, topological), it is the
    positions sorted."""
    if np.all(position[problem.src] < position[problem.dst]):
        return np.argsort(position)
    waiting = np.bincount(problem.dst, minlength=problem.num_tasks)
    out_ptr, out_order = problem.out_edges
    heap = [(int(position[t]), int(t)) for t in np.flatnonzero(waiting == 0)]
    heapq.heapify(heap)
    order = []
    while heap:
        _, task = heapq.heappop(heap)
        order.append(task)
        for successor in problem.dst[out_order[out_ptr[task] : out_ptr[task + 1]]].tolist():
            waiting[successor] -= 1
            if waiting[successor] == 0:
                heapq.heappush(heap, (int(position[successor]), successor))
    return np.array(order, dtype=np.int64)


def choose_processor(selection: str, start, duration, free, oct_row) -> int:
    """Index of the processor a static `selection` picks from per-processor arrays (lowest on ties)."""
    score = {
        "eft": lambda: start + duration,
        "est": lambda: start,
        "fastest": lambda: duration,
        "earliest_free": lambda: free,
        "eft_oct": lambda: start + duration + oct_row,
    }[selection]()
    return int(np.argmin(score))


def choose_pair(config: ListConfig, tasks, position, start, duration, makespan, draw) -> tuple[int, int]:
    """(row, processor) a dynamic selection picks from starts and durations [R, P] of ready `tasks`
    (ties: higher priority, i.e. lower `position`, then lowest processor)."""
    finish = start + duration
    if config.selection == "etf":
        best_proc = start.argmin(axis=1)
        key = start.min(axis=1)
    elif config.selection == "wba":
        increase = np.maximum(finish, makespan) - makespan
        low, high = increase.min(), increase.max()
        eligible = np.flatnonzero(increase.ravel() <= low + config.alpha * (high - low))
        row, proc = divmod(int(eligible[draw % eligible.size]), start.shape[1])
        return row, proc
    else:
        best_proc = finish.argmin(axis=1)
        best = finish.min(axis=1)
        if config.selection == "min_min":
            key = best
        elif config.selection == "max_min":
            key = -best
        else:  # sufferage: largest loss when denied the best processor
            second = np.sort(finish, axis=1)[:, 1] if finish.shape[1] > 1 else best
            key = -(second - best)
    tied = np.flatnonzero(key == key.min())
    row = int(tied[np.argmin(position[tasks[tied]])])
    return row, int(best_proc[row])


class _Placer:
    """Earliest starts of tasks on every processor against a growing schedule. `arrive[t, p]`, when the
    inputs placed so far reach processor p (the release time at first), is raised as predecessors are
    placed, so a task's ready times are one row and those of many tasks one gather."""

    def __init__(self, problem: Problem, insertion: bool):
        self.problem, self.insertion = problem, insertion
        self.timelines = Timelines(problem.comp)
        self.out_ptr, self.out_order = problem.out_edges
        self.arrive = np.repeat(problem.arrival[:, None], problem.num_procs, axis=1)
        self.proc = np.zeros(problem.num_tasks, dtype=np.int64)
        self.start, self.finish = np.zeros(problem.num_tasks), np.zeros(problem.num_tasks)

    def starts(self, task: int) -> np.ndarray:
        """[P] earliest start of `task` on each processor."""
        ready, duration = self.arrive[task], self.problem.comp[task]
        if self.insertion:
            return np.array([self.timelines.earliest_start(p, ready[p], duration[p]) for p in range(len(ready))])
        return np.where(duration == 0, ready, np.maximum(ready, self.timelines.avail))

    def starts_of(self, tasks: np.ndarray) -> np.ndarray:
        """[R, P] earliest starts of `tasks` on each processor."""
        if self.insertion:
            return np.stack([self.starts(t) for t in tasks])
        ready = self.arrive[tasks]
        return np.where(self.problem.comp[tasks] == 0, ready, np.maximum(ready, self.timelines.avail))

    def place(self, task: int, proc: int, start: float) -> np.ndarray:
        """Places `task`; returns its successors, whose arrival times it raised."""
        problem = self.problem
        duration = float(problem.comp[task, proc])
        self.timelines.occupy(proc, start, duration)
        self.proc[task], self.start[task], self.finish[task] = proc, start, start + duration
        edges = self.out_order[self.out_ptr[task] : self.out_ptr[task + 1]]
        successors = problem.dst[edges]
        reach = self.finish[task] + problem.data[edges, None] * problem.inverse_bandwidth[proc]  # [K, P]
        self.arrive[successors] = np.maximum(self.arrive[successors], reach)  # a DAG has no duplicate edges
        return successors


def list_schedule(problem: Problem, config: ListConfig, plan: ListPlan | None = None) -> Schedule:
    """Schedule of `problem` by the family member `config` (NumPy reference; module docstring)."""
    plan = make_plan(problem, config) if plan is None else plan
    if not config.dynamic and not config.insertion:
        return _append_schedule(problem, config, plan)
    comp = problem.comp
    placer = _Placer(problem, config.insertion)
    waiting = np.bincount(problem.dst, minlength=problem.num_tasks)  # unplaced predecessors
    ready = waiting == 0
    makespan = 0.0
    for step in range(problem.num_tasks):
        if config.dynamic:
            tasks = np.flatnonzero(ready)
            start = placer.starts_of(tasks)
            row, proc = choose_pair(config, tasks, plan.position, start, comp[tasks], makespan, int(plan.draws[step]))
            task, begin = int(tasks[row]), float(start[row, proc])
        else:
            task = int(plan.order[step])
            start = placer.starts(task)
            proc = int(plan.pin[task])
            if proc < 0:
                proc = choose_processor(config.selection, start, comp[task], placer.timelines.avail, plan.oct[task])
            begin = float(start[proc])
        successors = placer.place(task, proc, begin)
        makespan = max(makespan, float(placer.finish[task]))
        ready[task] = False
        waiting[successors] -= 1
        ready[successors[waiting[successors] == 0]] = True
    return Schedule(proc=placer.proc, start=placer.start, finish=placer.finish)


def _append_schedule(problem: Problem, config: ListConfig, plan: ListPlan) -> Schedule:
    """`list_schedule` of a static selection with append-only placement, in scalar Python over
    per-processor lists: the visit order is fixed and each step touches P processors and the task's
    out-edges, too few values for NumPy's per-call cost to pay (the same float64 operations, in the
    same order, as the general loop: equal schedules)."""
    num_tasks, num_procs = problem.comp.shape
    procs = range(num_procs)
    comp = problem.comp.tolist()
    oct_table = plan.oct.tolist() if config.selection == "eft_oct" else None
    inverse_bandwidth = problem.inverse_bandwidth.tolist()
    out_ptr, out_order = problem.out_edges
    ptr, successors, data = out_ptr.tolist(), problem.dst[out_order].tolist(), problem.data[out_order].tolist()
    arrive = [[release] * num_procs for release in problem.arrival.tolist()]
    avail = [0.0] * num_procs
    proc, start, finish = [0] * num_tasks, [0.0] * num_tasks, [0.0] * num_tasks
    pins, selection = plan.pin.tolist(), config.selection
    every_start = selection in ("eft", "est", "eft_oct")  # the others choose without start times
    for task in plan.order.tolist():
        duration, ready = comp[task], arrive[task]
        chosen = pins[task]
        if chosen < 0 and every_start:
            begin = [r if d == 0 or r >= a else a for r, d, a in zip(ready, duration, avail)]
            if selection == "eft":
                score = [b + d for b, d in zip(begin, duration)]
            elif selection == "est":
                score = begin
            else:  # eft_oct
                score = [b + d + o for b, d, o in zip(begin, duration, oct_table[task])]
            chosen = min(procs, key=score.__getitem__)  # the first least, as argmin
            begun = begin[chosen]
        else:
            if chosen < 0:
                score = duration if selection == "fastest" else avail  # "earliest_free"
                chosen = min(procs, key=score.__getitem__)
            r, d, a = ready[chosen], duration[chosen], avail[chosen]
            begun = r if d == 0 or r >= a else a
        end = begun + duration[chosen]
        proc[task], start[task], finish[task] = chosen, begun, end
        if duration[chosen] != 0:
            avail[chosen] = end
        link = inverse_bandwidth[chosen]
        for edge in range(ptr[task], ptr[task + 1]):
            row = arrive[successors[edge]]
            amount = data[edge]
            for q in procs:
                reach = end + amount * link[q]
                if reach > row[q]:
                    row[q] = reach
    return Schedule(proc=np.array(proc, dtype=np.int64), start=np.array(start), finish=np.array(finish))


def preset(name: str, **options) -> ListConfig:
    """The `ListConfig` of preset `name` with `options` overriding its fields."""
    if name not in PRESETS:
        raise ValueError(f"unknown list scheduler {name!r}; known: {', '.join(PRESETS)}")
    fields = {f.name for f in dataclasses.fields(ListConfig)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)} for {name}; known: {', '.join(sorted(fields))}")
    return dataclasses.replace(PRESETS[name], **options)


def duplex(schedules: tuple[Schedule, Schedule]) -> Schedule:
    """Duplex (Braun et al. 2001): the better of the MinMin and MaxMin schedules (MinMin on ties)."""
    min_min, max_min = schedules
    return max_min if max_min.makespan < min_min.makespan else min_min


def schedule(problem: Problem, name: str, **options) -> Schedule:
    """Schedule of `problem` by the scheduler `name` (one of `NAMES`). For a preset, `options`
    override `ListConfig` fields; for "Duplex" they apply to both halves; "GA" passes them to
    `jaxsched.ga`."""
    check_problem(problem)
    if name == "GA":
        return ga(problem, **options)
    if name == "Duplex":
        return duplex(tuple(list_schedule(problem, preset(half, **options)) for half in ("MinMin", "MaxMin")))
    if name not in PRESETS:
        raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(NAMES)}")
    return list_schedule(problem, preset(name, **options))
