"""The list-scheduling family jitted over padded problems: the JAX twin of `jaxsched.listsched`.

`list_schedule_padded(problem, plan, config)` is one `lax.scan`; each step picks a task and a processor
by `config` exactly as the NumPy reference does (same priority positions and pins from the
host-computed `ListPlan`, same tie-breaks), and places it with the placement rule of
`jaxsched.timeline` (the gap search of `jaxsched.kernels`) or after the processor's last task. Static
selections visit tasks in the plan's order and score one task on every processor [P]; their scan runs
over a predecessor stream (`jaxsched.pull_stream`: a few of the task's inputs per micro-step, the last
one placing it), so they need only the problem's costs (`PaddedCosts`). Dynamic selections take T
steps, each scoring every ready task on every processor [T, P] and releasing the placed task's
successors through one dense row. Steps after the last real task change nothing.

With integer costs (or under x64) the schedules equal the NumPy reference exactly (see
`jaxsched.batch` for the float32 contract). `schedule_batch(problems, name)` pads, plans and runs a
named scheduler over a whole batch in one call (one compilation per padded shape and config).
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxsched.batch import PaddedCosts, PaddedProblem, Shape, assert_padded, fit_shape, pad_costs, pad_problems
from jaxsched.batch_graph import BatchGraph
from jaxsched.kernels import ScheduleArrays, earliest_gap_start, insert_sorted, ready_time
from jaxsched.listsched import PRESETS, ListConfig, ListPlan, draws, preset
from jaxsched.problem import Problem
from jaxsched.pull_stream import PullStream, compact_streams, visit_stream


def pad_plan(plan: ListPlan, shape: Shape, dtype=np.float32) -> ListPlan:
    """`plan` padded to `shape`: padded tasks come last in the order, unpinned, with zero costs."""
    num_tasks, num_procs = shape.num_tasks, shape.num_procs
    t, p = plan.oct.shape
    position = np.arange(num_tasks, dtype=np.int32)
    position[:t] = plan.position
    order = np.arange(num_tasks, dtype=np.int32)
    order[:t] = plan.order
    pin = np.full(num_tasks, -1, np.int32)
    pin[:t] = plan.pin
    oct_table = np.zeros((num_tasks, num_procs), dtype)
    oct_table[:t, :p] = plan.oct
    draws = np.zeros(num_tasks, np.int32)
    draws[:t] = plan.draws
    return ListPlan(position, order, pin, oct_table, draws)


class _Carry(NamedTuple):
    proc: jax.Array  # [T + 2] int32: slot T is the padded-predecessor sentinel, T + 1 a discard slot
    start: jax.Array  # [T + 2]
    finish: jax.Array  # [T + 2], -inf at T
    busy_start: jax.Array  # [P, C] sorted by start, +inf padded (insertion only)
    busy_finish: jax.Array  # [P, C]
    avail: jax.Array  # [P] end of each processor's last busy interval
    makespan: jax.Array  # []
    overflow: jax.Array  # [] bool
    pulled: jax.Array  # [P] inputs of the task being visited pulled so far (static selections)
    waiting: jax.Array  # [T] int32 unplaced predecessors (dynamic selections), -1 once placed
    arrive: jax.Array  # [T, P] when the inputs placed so far reach each processor (dynamic selections)


def _earliest_starts(carry: _Carry, ready, duration, insertion: bool):
    """Earliest starts [N, P] for ready times and durations [N, P] under the placement rule."""
    if insertion:
        gap_start = jax.vmap(earliest_gap_start, in_axes=(None, None, 0, 0))
        return gap_start(carry.busy_start, carry.busy_finish, ready, duration)
    return jnp.where(duration == 0, ready, jnp.maximum(ready, carry.avail[None, :]))


def _pull(problem, carry, preds, pred_data):
    """[P] when the outputs of `preds` [W] (placed already; the sentinel T where padded) reach each
    processor, and of those pulled before for the same task (`carry.pulled`)."""
    transfer = pred_data[:, None] * problem.inverse_bandwidth[carry.proc[preds]]  # [W, P]
    return jnp.maximum(carry.pulled, ready_time(carry.finish, preds, transfer, -jnp.inf))


def _static_choice(problem, plan, carry, task, ready, config: ListConfig):
    """(processor, start) of `task`, whose inputs reach the processors at `ready` [P], by a static
    selection (or its pin)."""
    duration = problem.comp[task]
    start = _earliest_starts(carry, ready[None], duration[None], config.insertion)[0]
    score = {
        "eft": lambda: start + duration,
        "est": lambda: start,
        "fastest": lambda: duration,
        "earliest_free": lambda: carry.avail,
        "eft_oct": lambda: start + duration + plan.oct[task],
    }[config.selection]()
    proc = jnp.argmin(jnp.where(problem.proc_mask, score, jnp.inf)).astype(jnp.int32)
    proc = jnp.where(plan.pin[task] >= 0, plan.pin[task], proc)
    return proc, start[proc]


def _first_by_position(candidate, position):
    """The candidate task of lowest priority position (highest priority)."""
    return jnp.argmin(jnp.where(candidate, position, jnp.iinfo(jnp.int32).max)).astype(jnp.int32)


def _dynamic_choice(problem, plan, carry, draw, config: ListConfig):
    """(task, processor, start) of a dynamic selection, scoring every ready task on every processor."""
    num_procs = problem.comp.shape[1]
    ready = carry.waiting == 0
    start = _earliest_starts(carry, carry.arrive, problem.comp, config.insertion)
    valid = ready[:, None] & problem.proc_mask[None, :]
    finish = jnp.where(valid, start + problem.comp, jnp.inf)
    if config.selection == "wba":
        increase = jnp.where(valid, jnp.maximum(finish, carry.makespan) - carry.makespan, jnp.inf)
        low, high = increase.min(), jnp.where(valid, increase, -jnp.inf).max()
        eligible = valid & (increase <= low + config.alpha * (high - low))  # [T, P]
        per_task = eligible.sum(axis=1, dtype=jnp.int32)  # [T]
        pick = draw.astype(jnp.int32) % jnp.maximum(per_task.sum(dtype=jnp.int32), 1)
        # the pick-th eligible pair (row-major): its task by a prefix sum over tasks (associative scan, O(T
        # log T), where jnp.cumsum lowers to an O(T^2) window on CPU), then its processor within the row
        before = jax.lax.associative_scan(jnp.add, per_task)  # eligible pairs up to each task's row
        task = jnp.argmax(before > pick)
        within = pick - (before[task] - per_task[task])
        row = eligible[task].astype(jnp.int32)
        proc = jnp.argmax(jnp.cumsum(row, dtype=jnp.int32) > within)  # P is small
        return task.astype(jnp.int32), proc.astype(jnp.int32), start[task, proc]
    if config.selection == "etf":
        scored = jnp.where(valid, start, jnp.inf)
        key = scored.min(axis=1)
    else:
        scored = finish
        best = finish.min(axis=1)
        if config.selection == "min_min":
            key = best
        elif config.selection == "max_min":
            key = jnp.where(ready, -best, jnp.inf)
        else:  # sufferage
            # the second least finish: the least once the (first) least is masked out; no sort
            first = jnp.argmin(finish, axis=1)[:, None] == jnp.arange(num_procs)[None, :]
            second = jnp.where(first, jnp.inf, finish).min(axis=1) if num_procs > 1 else best
            key = jnp.where(ready, -jnp.where(jnp.isfinite(second), second - best, 0.0), jnp.inf)
    task = _first_by_position(ready & (key == key.min()), plan.position)
    proc = jnp.argmin(scored[task]).astype(jnp.int32)
    return task, proc, start[task, proc]


class _Successors(NamedTuple):
    """A padded problem's edges as dense rows by source task, built once per schedule so that a step
    reads one row instead of scattering over every edge."""

    mask: jax.Array  # [T, T] bool: an edge from row to column
    data: jax.Array  # [T, T] data of that edge, 0 elsewhere


def _successors(problem: PaddedProblem) -> _Successors:
    """The `_Successors` of `problem` (one scatter of its edges; padded ones add nothing, data are >= 0)."""
    num_tasks = problem.comp.shape[0]
    src, dst = problem.edge_src, problem.edge_dst
    count = jnp.zeros((num_tasks, num_tasks), jnp.int32).at[src, dst].add(problem.edge_mask.astype(jnp.int32))
    data = jnp.zeros((num_tasks, num_tasks), problem.comp.dtype)
    return _Successors(count > 0, data.at[src, dst].max(jnp.where(problem.edge_mask, problem.edge_data, 0)))


def _released(problem: PaddedProblem, successors: _Successors, carry: _Carry, task, proc, finish) -> _Carry:
    """Tells `task`'s successors it finished at `finish` on `proc`: one fewer predecessor to wait for,
    and its output reaching each processor at finish + transfer (one [T, P] pass over its row)."""
    outgoing = successors.mask[task]  # [T]
    transfer = successors.data[task][:, None] * problem.inverse_bandwidth[proc][None, :]  # [T, P]
    # rounded before the addition, as in the NumPy reference: the no-op maximum (transfers are never
    # negative) keeps XLA's CPU backend from fusing the multiply and the add (optimization_barrier does not)
    transfer = jnp.maximum(transfer, 0.0)
    reach = jnp.where(outgoing[:, None], finish + transfer, -jnp.inf)
    return carry._replace(
        waiting=(carry.waiting - outgoing.astype(jnp.int32)).at[task].set(-1),
        arrive=jnp.maximum(carry.arrive, reach),
    )


def _check_graph_given(problem, config: ListConfig, stream) -> None:
    """Raises ValueError when `problem` (one or a batch) holds only costs (`PaddedCosts`) but `config`
    (dynamic) or the missing `stream` needs its graph."""
    if not isinstance(problem, PaddedProblem) and (config.dynamic or stream is None):
        raise ValueError(
            "a dynamic selection, or a static one without a stream, needs the padded graph: pad_problems, "
            "not pad_costs"
        )


def list_schedule_padded(
    problem: PaddedProblem | PaddedCosts,
    plan: ListPlan,
    config: ListConfig,
    capacity: int | None = None,
    stream: PullStream | None = None,
) -> ScheduleArrays:
    """Schedule of one padded problem by the family member `config`, from its padded `plan`
    (`pad_plan(make_plan(...))`); `capacity` bounds busy tasks per processor (default T) when
    `config.insertion`, and `overflow` reports when some processor needed more. A static selection
    scans the micro-steps of `stream` (`jaxsched.pull_stream`; default `visit_stream` of `plan.order`,
    one per task), and then needs only the problem's `PaddedCosts`; a dynamic one T steps."""
    _check_graph_given(problem, config, stream)
    if isinstance(problem, PaddedProblem):
        assert_padded(problem)
    else:
        chex.assert_rank(list(problem), [2, 1, 1, 1, 2])
    num_tasks, num_procs = problem.comp.shape
    dtype = problem.comp.dtype
    capacity = num_tasks if capacity is None else int(capacity)
    rows = jnp.full((num_procs, capacity if config.insertion else 1), jnp.inf, dtype)
    discard = num_tasks + 1
    successors = _successors(problem) if config.dynamic else None

    def place(carry: _Carry, task, proc, start, active) -> _Carry:
        duration = problem.comp[task, proc]
        finish = start + duration
        slot = jnp.where(active, task, discard)
        busy = active & (duration > 0)
        carry = carry._replace(
            proc=carry.proc.at[slot].set(proc),
            start=carry.start.at[slot].set(start),
            finish=carry.finish.at[slot].set(finish),
            avail=carry.avail.at[proc].set(jnp.where(busy, jnp.maximum(carry.avail[proc], finish), carry.avail[proc])),
            makespan=jnp.where(active, jnp.maximum(carry.makespan, finish), carry.makespan),
        )
        if config.dynamic:
            released = _released(problem, successors, carry, task, proc, finish)
            carry = jax.tree.map(lambda new, old: jnp.where(active, new, old), released, carry)
        if config.insertion:
            row_start, row_finish = carry.busy_start[proc], carry.busy_finish[proc]
            pos = jnp.sum(row_start < start)
            carry = carry._replace(
                busy_start=carry.busy_start.at[proc].set(
                    jnp.where(busy, insert_sorted(row_start, pos, start), row_start)
                ),
                busy_finish=carry.busy_finish.at[proc].set(
                    jnp.where(busy, insert_sorted(row_finish, pos, finish), row_finish)
                ),
                overflow=carry.overflow | (busy & jnp.isfinite(row_start[-1])),
            )
        return carry

    def dynamic_step(carry: _Carry, draw):
        task, proc, start = _dynamic_choice(problem, plan, carry, draw, config)
        return place(carry, task, proc, start, jnp.any(carry.waiting == 0)), None

    def static_step(carry: _Carry, micro: PullStream):
        pulled = _pull(problem, carry, micro.pred, micro.pred_data)
        ready = jnp.maximum(pulled, problem.arrival[micro.task])
        proc, start = _static_choice(problem, plan, carry, micro.task, ready, config)
        carry = carry._replace(pulled=jnp.where(micro.place, -jnp.inf, pulled))
        return place(carry, micro.task, proc, start, micro.place & problem.task_mask[micro.task]), None

    if config.dynamic:
        waiting = jnp.where(problem.task_mask, jnp.sum(problem.pred < num_tasks, axis=1, dtype=jnp.int32), -1)
        arrive = jnp.broadcast_to(problem.arrival[:, None], (num_tasks, num_procs)).astype(dtype)
    else:
        waiting, arrive = jnp.zeros(0, jnp.int32), jnp.zeros((0, num_procs), dtype)
    init = _Carry(
        proc=jnp.zeros(num_tasks + 2, jnp.int32),
        start=jnp.zeros(num_tasks + 2, dtype),
        finish=jnp.full(num_tasks + 2, -jnp.inf, dtype),
        busy_start=rows,
        busy_finish=rows,
        avail=jnp.zeros(num_procs, dtype),
        makespan=jnp.zeros((), dtype),
        overflow=jnp.zeros((), bool),
        pulled=jnp.full(num_procs, -jnp.inf, dtype),
        waiting=waiting,
        arrive=arrive,
    )
    if config.dynamic:
        carry, _ = jax.lax.scan(dynamic_step, init, plan.draws)
    else:
        carry, _ = jax.lax.scan(static_step, init, visit_stream(problem, plan.order) if stream is None else stream)
    steps = jnp.asarray(num_tasks, jnp.int32)
    return ScheduleArrays(
        carry.proc[:num_tasks], carry.start[:num_tasks], carry.finish[:num_tasks], carry.overflow, steps
    )


@functools.partial(jax.jit, static_argnames=("config", "capacity"))
def _list_schedule_batch(batch, plans, config, capacity, streams):
    return jax.vmap(list_schedule_padded, in_axes=(0, 0, None, None, 0))(batch, plans, config, capacity, streams)


def list_schedule_batch(
    batch: PaddedProblem | PaddedCosts,
    plans: ListPlan,
    config: ListConfig,
    capacity: int | None = None,
    streams: PullStream | None = None,
) -> ScheduleArrays:
    """`list_schedule_padded` on every problem of a padded batch with its padded plan and, for a static
    selection, its stream (`compact_streams`; default one micro-step per task). One compilation per
    padded shape, config, capacity and stream length. Raises ValueError when the plans do not match
    the batch, or when the batch holds only costs that `config` cannot use."""
    _check_graph_given(batch, config, streams)
    expected = {"position": batch.task_mask.shape, "oct": batch.comp.shape}
    for field, shape in expected.items():
        got = np.shape(getattr(plans, field))
        if got != shape:
            raise ValueError(
                f"plans.{field} has shape {got}, but the padded batch needs {shape}: pad every problem and "
                "plan to one Shape (pad_problems, plan_batch)"
            )
    return _list_schedule_batch(batch, plans, config, capacity, streams)


def padded_makespan(batch: PaddedProblem, schedules: ScheduleArrays) -> jax.Array:
    """[B] makespan of each schedule of a padded batch (latest finish of a real task)."""
    return jnp.where(batch.task_mask, schedules.finish, -jnp.inf).max(axis=-1)


def plan_batch(
    problems: Sequence[Problem], config: ListConfig, shape: Shape, dtype=np.float32, graph: BatchGraph | None = None
) -> ListPlan:
    """The padded plans of `config` for `problems`, stacked: those of `pad_plan(make_plan(...))`,
    computed for the whole batch at once on its `BatchGraph` (equal values); `graph`: that graph at
    `shape`, when already built (padding shares it)."""
    shape = fit_shape(problems, shape, "plan_batch")
    graph = BatchGraph.of(problems, shape.num_tasks, shape.num_procs) if graph is None else graph
    oct_table = graph.optimistic_cost_table() if config.priority == "oct" or config.selection == "eft_oct" else None
    cpop = config.priority == "rank_sum" or config.pinning == "critical_path"
    rank_sum = graph.upward_rank() + graph.downward_rank() if cpop else None
    if config.priority == "topological":  # the canonical order itself: no sort
        position, order = graph.position, graph.topo_order
    else:
        priority = {
            "upward": graph.upward_rank,
            "downward": lambda: -graph.downward_rank(),
            "rank_sum": lambda: rank_sum,
            "oct": lambda: graph.row_mean(oct_table),
        }[config.priority]()
        position = graph.priority_position(priority)
        order = graph.ready_list_order(position)
    pin = np.full(graph.task_mask.shape, -1, np.int64)
    if config.pinning == "critical_path":
        pin = graph.critical_path_pins(rank_sum)
    elif config.pinning == "fastest_processor":
        fastest = np.where(graph.proc_mask, graph.comp.sum(axis=1), np.inf).argmin(axis=1)
        pin = np.where(graph.task_mask, fastest[:, None], -1)
    draw = np.zeros(graph.task_mask.shape, np.int64)
    if config.selection == "wba":
        # one seed for every problem, and a Generator draws in sequence: each problem's draws are the
        # first of the longest problem's
        longest = max(problems, key=lambda problem: problem.num_tasks)
        sequence = np.zeros(graph.num_tasks, np.int64)
        sequence[: longest.num_tasks] = draws(longest, config)
        draw = np.where(graph.task_mask, sequence, 0)
    return ListPlan(
        position.astype(np.int32),
        order.astype(np.int32),
        pin.astype(np.int32),
        (oct_table if config.selection == "eft_oct" else np.zeros(graph.comp.shape)).astype(dtype),
        draw.astype(np.int32),
    )


def stream_batch(graph: BatchGraph, plans: ListPlan, config: ListConfig, dtype=np.float32) -> PullStream | None:
    """The predecessor streams of a static `config` on the batch `graph` with its `plans` (None for a
    dynamic one): 4 predecessors per micro-step, 8 with gap insertion, whose search every micro-step
    runs (measured on Topcuoglu DAGs of 100 tasks)."""
    if config.dynamic:
        return None
    return compact_streams(graph, plans.order, 8 if config.insertion else 4, dtype)


def schedule_batch(
    problems: Sequence[Problem],
    name: str,
    shape: Shape | None = None,
    dtype=np.float32,
    capacity: int | None = None,
    **options,
) -> ScheduleArrays:
    """Schedules of `problems` by the scheduler `name` (a preset or "Duplex"), padded to `shape`
    (default: the smallest that fits them all) and run in one vmapped call; `options` override the
    preset's `ListConfig` fields. Gap insertion keeps `capacity` busy tasks per processor: by default
    twice a fair share (a power of two), doubled and rerun while some processor overflows. The GA
    batches differently: `jaxsched.evolve_padded`."""
    if name not in PRESETS and name != "Duplex":
        raise ValueError(f"unknown batched scheduler {name!r}; known: {', '.join(tuple(PRESETS) + ('Duplex',))}")
    shape = fit_shape(problems, shape, "schedule_batch")
    graph = BatchGraph.of(list(problems), shape.num_tasks, shape.num_procs)
    halves = ("MinMin", "MaxMin") if name == "Duplex" else (name,)
    configs = [preset(half, **options) for half in halves]
    # a static selection scans a predecessor stream and reads only the costs: no graph arrays to pad
    pad = pad_problems if any(config.dynamic for config in configs) else pad_costs
    batch = pad(problems, shape, dtype, graph)
    results = []
    for config in configs:
        plans = plan_batch(problems, config, shape, dtype, graph)
        streams = stream_batch(graph, plans, config, dtype)
        size = capacity or 1 << max(2 * -(-shape.num_tasks // shape.num_procs) - 1, 0).bit_length()
        while True:
            size = min(size, shape.num_tasks)
            out = list_schedule_batch(batch, plans, config, size if config.insertion else None, streams)
            if capacity is not None or size == shape.num_tasks or not bool(np.asarray(out.overflow).any()):
                break
            size *= 2
        results.append(out)
    if name != "Duplex":
        return results[0]
    better = padded_makespan(batch, results[1]) < padded_makespan(batch, results[0])  # MinMin on ties
    return jax.tree.map(
        lambda a, b: jnp.where(better.reshape(better.shape + (1,) * (a.ndim - 1)), b, a), results[0], results[1]
    )
