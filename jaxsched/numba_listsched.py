"""The parametric list scheduler (`jaxsched.listsched`) compiled for the CPU with numba.

`list_schedule_numba(problem, config_or_name)` (`jaxsched.numba.list_schedule`) runs the same `ListPlan` as the
NumPy reference `list_schedule`: the static selections visit `plan.order` and pick a processor per task, the dynamic
ones score every ready task (in increasing task index) on every processor each step. Ready times,
placement (insertion through `jaxsched.numba_timeline.earliest_start`, or after the last task) and ties
(higher priority, then lowest processor index) follow the reference with the same float64
arithmetic, so the schedules are equal to the last bit. Duplex runs both of its halves compiled.
"""

from __future__ import annotations

import numba
import numpy as np

from jaxsched.listsched import PRESETS, SELECTIONS, ListConfig, ListPlan, duplex, make_plan, preset
from jaxsched.numba_timeline import earliest_start, empty_rows, fill_ready, frozen_array, is_uniform, occupy
from jaxsched.problem import Problem, Schedule, check_problem

COVERED = tuple(PRESETS) + ("Duplex",)

_jit = numba.njit(cache=True, nogil=True)
# Selection codes: positions in `SELECTIONS` (static first, then dynamic).
_EFT, _EST, _FASTEST, _EARLIEST_FREE, _EFT_OCT, _MIN_MIN, _MAX_MIN, _SUFFERAGE, _ETF, _WBA = range(len(SELECTIONS))


@_jit
def _fill_starts(starts, task, ready, comp, avail, insertion, busy_start, busy_finish, count):
    """starts[p]: earliest start of `task` on each processor p, given its ready times (`_Placer.starts`)."""
    for p in range(len(avail)):
        duration = comp[task, p]
        if insertion:
            starts[p] = earliest_start(busy_start, busy_finish, p, count[p], avail[p], ready[p], duration)
        else:
            starts[p] = ready[p] if duration == 0 else max(ready[p], avail[p])


@_jit
def _static_processor(selection, starts, duration, avail, oct_row):
    """`listsched.choose_processor`: the first processor of least score."""
    best, best_score = 0, np.inf
    for p in range(len(starts)):
        if selection == _EFT:
            score = starts[p] + duration[p]
        elif selection == _EST:
            score = starts[p]
        elif selection == _FASTEST:
            score = duration[p]
        elif selection == _EARLIEST_FREE:
            score = avail[p]
        else:
            score = starts[p] + duration[p] + oct_row[p]
        if p == 0 or score < best_score:
            best, best_score = p, score
    return best


@_jit
def _increase(starts, comp, tasks, row, proc, makespan):
    """How much placing ready row `row` on `proc` raises the makespan (WBA's score)."""
    return max(starts[row, proc] + comp[tasks[row], proc], makespan) - makespan


@_jit
def _dynamic_pair(selection, alpha, tasks, num_ready, position, starts, comp, makespan, draw):
    """`listsched.choose_pair` on the first `num_ready` rows of `tasks` and `starts` [R, P]."""
    num_procs = starts.shape[1]
    if selection == _WBA:
        low, high = np.inf, -np.inf
        for r in range(num_ready):
            for p in range(num_procs):
                increase = _increase(starts, comp, tasks, r, p, makespan)
                low, high = min(low, increase), max(high, increase)
        threshold = low + alpha * (high - low)
        eligible = 0
        for r in range(num_ready):
            for p in range(num_procs):
                eligible += _increase(starts, comp, tasks, r, p, makespan) <= threshold
        pick = draw % eligible
        for r in range(num_ready):
            for p in range(num_procs):
                if _increase(starts, comp, tasks, r, p, makespan) <= threshold:
                    if pick == 0:
                        return r, p
                    pick -= 1
    best_row, best_proc, best_key = 0, 0, np.inf
    for r in range(num_ready):
        proc, first, second = 0, np.inf, np.inf  # least and second least score (finish, or start for ETF)
        for p in range(num_procs):
            score = starts[r, p] if selection == _ETF else starts[r, p] + comp[tasks[r], p]
            if p == 0 or score < first:
                proc, first, second = p, score, first
            elif score < second:
                second = score
        if selection == _MAX_MIN:
            key = -first
        elif selection == _SUFFERAGE:
            key = -(second - first) if num_procs > 1 else -0.0
        else:
            key = first
        if r == 0 or key < best_key or (key == best_key and position[tasks[r]] < position[tasks[best_row]]):
            best_row, best_proc, best_key = r, proc, key
    return best_row, best_proc


@_jit
def list_kernel(comp, in_ptr, in_src, in_data, out_ptr, out_dst, arrival, inverse_bandwidth, position, order, pin,
                oct_table, draws, selection, insertion, alpha):
    """(proc, start, finish) of the list scheduler `selection` (a code, the position in `SELECTIONS`) on one
    problem given as CSR edge arrays and its plan's arrays (compiled `list_schedule`)."""
    num_tasks, num_procs = comp.shape
    dynamic = selection >= _MIN_MIN
    uniform = is_uniform(inverse_bandwidth, num_procs)
    busy_start, busy_finish, count = empty_rows(num_tasks, num_procs)
    avail, ready = np.zeros(num_procs), np.empty(num_procs)
    proc, start, finish = np.zeros(num_tasks, np.int64), np.zeros(num_tasks), np.zeros(num_tasks)
    waiting = np.zeros(num_tasks, np.int64)
    for k in range(len(out_dst)):
        waiting[out_dst[k]] += 1
    tasks = np.empty(num_tasks, np.int64)
    starts = np.empty((num_tasks if dynamic else 1, num_procs))
    makespan = 0.0
    for step in range(num_tasks):
        if dynamic:
            num_ready = 0
            for t in range(num_tasks):  # ready, unplaced tasks in increasing index
                if waiting[t] == 0:
                    tasks[num_ready] = t
                    fill_ready(ready, t, num_procs, in_ptr, in_src, in_data, arrival, proc, finish,
                               inverse_bandwidth, uniform)
                    _fill_starts(starts[num_ready], t, ready, comp, avail, insertion, busy_start, busy_finish, count)
                    num_ready += 1
            row, best = _dynamic_pair(selection, alpha, tasks, num_ready, position, starts, comp, makespan,
                                      draws[step])
            task, begin = tasks[row], starts[row, best]
        else:
            task = order[step]
            fill_ready(ready, task, num_procs, in_ptr, in_src, in_data, arrival, proc, finish, inverse_bandwidth,
                       uniform)
            _fill_starts(starts[0], task, ready, comp, avail, insertion, busy_start, busy_finish, count)
            best = pin[task]
            if best < 0:
                best = _static_processor(selection, starts[0], comp[task], avail, oct_table[task])
            begin = starts[0, best]
        duration = comp[task, best]
        proc[task], start[task], finish[task] = best, begin, begin + duration
        makespan = max(makespan, begin + duration)
        if duration > 0:
            avail[best] = max(avail[best], begin + duration)
            if insertion:
                busy_start, busy_finish = occupy(busy_start, busy_finish, count, best, begin, duration)
        waiting[task] = -1  # placed
        for k in range(out_ptr[task], out_ptr[task + 1]):
            waiting[out_dst[k]] -= 1
    return proc, start, finish


def list_schedule_numba(problem: Problem, config_or_name: ListConfig | str, plan: ListPlan | None = None) -> Schedule:
    """`list_schedule(problem, config)` (or `schedule(problem, name)` for a name in `COVERED`) compiled:
    the same schedule, to the last bit. `plan` (from `make_plan`) skips planning on the host."""
    check_problem(problem)
    if isinstance(config_or_name, str):
        if config_or_name == "Duplex":
            return duplex(tuple(list_schedule_numba(problem, half) for half in ("MinMin", "MaxMin")))
        if config_or_name not in PRESETS:
            raise ValueError(f"no compiled list scheduler {config_or_name!r}; covered: {', '.join(COVERED)}")
        config = preset(config_or_name)
    elif isinstance(config_or_name, ListConfig):
        config = config_or_name
    else:
        raise ValueError(f"expected a ListConfig or a scheduler name, got {type(config_or_name).__name__}")
    plan = make_plan(problem, config) if plan is None else plan
    out_ptr, out_order = problem.out_edges
    in_ptr, in_order = problem.in_edges
    arrays = (problem.comp, in_ptr, problem.src[in_order], problem.data[in_order], out_ptr, problem.dst[out_order],
              problem.arrival, problem.inverse_bandwidth, plan.position, plan.order, plan.pin, plan.oct, plan.draws)
    proc, start, finish = list_kernel(*(frozen_array(a) for a in arrays), SELECTIONS.index(config.selection),
                                      config.insertion, float(config.alpha))
    return Schedule(proc=proc, start=start, finish=finish)
