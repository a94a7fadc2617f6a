"""The list-scheduling family jitted over padded problems: the JAX twin of `jaxsched.listsched`.

`list_schedule_padded(problem, plan, config)` is one `lax.scan`; each step picks a task and a processor
by `config` exactly as the NumPy reference does (same priority positions and pins from the
host-computed `ListPlan`, same tie-breaks), and places it with the placement rule of
`jaxsched.timeline` (each processor's idle gaps, `jaxsched.jax_timeline.occupy_gaps`) or after the
processor's last task. Static selections visit tasks in the plan's order and score one task on every
processor [P]; their scan runs over a predecessor stream (`jaxsched._pull_stream`: a few of the task's
inputs per micro-step, the last one placing it), so they need only the problem's costs (`PaddedCosts`).
Dynamic selections take T steps, each scoring every ready task on every processor [T, P] and releasing
the placed task's successors through one dense row built from the edges (`PaddedEdges`). Steps after
the last real task change nothing. `heft_padded` / `heft_batch` are the HEFT preset on a `PaddedProblem`.

With integer costs (or under x64) the schedules equal the NumPy reference exactly (see
`jaxsched.batch` for the float32 contract). `schedule_batch(problems, name)` pads, plans and runs a
named scheduler over a whole batch in one call across every device (one compilation per padded shape,
config and device count).
"""

from __future__ import annotations

import functools
import threading
from typing import NamedTuple, Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxsched._batch_plan import batch_draws, fused, plan_flat, stream_width
from jaxsched._pull_stream import PullStream, compact_streams, visit_stream
from jaxsched.batch import (
    PaddedCosts,
    PaddedEdges,
    PaddedProblem,
    Shape,
    assert_padded,
    checked_batch,
    fit_shape,
    fitted_graph,
    pad_costs,
    pad_edges,
)
from jaxsched.batch_graph import BatchGraph, HostBuffers
from jaxsched.common.arguments import integer
from jaxsched.common.sharding import Devices, batch_mesh, gather, shard_batch
from jaxsched.jax_simulate import ScheduleArrays
from jaxsched.jax_timeline import earliest_start_in_gaps, occupy_gaps, ready_time
from jaxsched.listsched import PRESETS, ListConfig, ListPlan, make_plan, preset
from jaxsched.problem import Problem


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
    gap_start: jax.Array  # [P, G] each processor's idle gaps before its last busy interval, sorted, +inf
    gap_end: jax.Array  # [P, G] where unused (insertion only)
    avail: jax.Array  # [P] end of each processor's last busy interval
    makespan: jax.Array  # []
    overflow: jax.Array  # [] bool
    pulled: jax.Array  # [P] inputs of the task being visited pulled so far (static selections)
    waiting: jax.Array  # [T] int32 unplaced predecessors (dynamic selections), -1 once placed
    arrive: jax.Array  # [T, P] when the inputs placed so far reach each processor (dynamic selections)


def _earliest_starts(carry: _Carry, ready, duration, insertion: bool):
    """Earliest starts [N, P] for ready times and durations [N, P] under the placement rule."""
    if insertion:
        return earliest_start_in_gaps(carry.gap_start, carry.gap_end, carry.avail, ready, duration)
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


def _inclusive_sums(counts):
    """[N] the running sums of a short 1-D array `counts` [N], as one masked [N, N] sum (no scan)."""
    index = jnp.arange(counts.shape[0])
    return jnp.sum(jnp.where(index[None, :] <= index[:, None], counts[None, :], 0), axis=1, dtype=counts.dtype)


def _nth_of_counts(counts, n, block: int = 8):
    """(i, r): the n-th unit (from 0; n < counts.sum()) of a row of `counts` [N] lies at row i, r-th within
    it. Blocks of `block` rows: the block holding it by the running sums of the block totals, then the row
    within the block, so both running sums are short (a prefix over all N takes log N dependent steps)."""
    size = counts.shape[0]
    blocks = -(-size // block)
    grouped = jnp.pad(counts, (0, blocks * block - size)).reshape(blocks, block)
    block_total = grouped.sum(axis=1, dtype=counts.dtype)
    block_end = _inclusive_sums(block_total)
    b = jnp.sum(block_end <= n, dtype=jnp.int32)
    rest = n - (block_end[b] - block_total[b])
    row_end = _inclusive_sums(grouped[b])
    i = jnp.sum(row_end <= rest, dtype=jnp.int32)
    return b * block + i, rest - (row_end[i] - grouped[b, i])


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
        task, within = _nth_of_counts(per_task, pick)  # the pick-th eligible pair (row-major): its task
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


def _successor_data(edges: PaddedEdges, num_tasks: int) -> jax.Array:
    """[T, T] the data of each edge by (source, destination) row, -1 where there is no edge: built once per
    schedule (one scatter into a flat row; edges are unique and carry data >= 0, and padded ones write -1
    at the self-loop 0 -> 0, which no problem has), so that a step reads one row instead of every edge."""
    flat = edges.edge_src * num_tasks + edges.edge_dst
    data = jnp.full(num_tasks * num_tasks, -1, edges.edge_data.dtype)
    return data.at[flat].set(jnp.where(edges.edge_mask, edges.edge_data, -1)).reshape(num_tasks, num_tasks)


def _released(problem: PaddedCosts, successor_data, carry: _Carry, task, proc, finish) -> _Carry:
    """Tells `task`'s successors (its row of `successor_data` [T, T]) it finished at `finish` on `proc`: one
    fewer predecessor to wait for, and its output reaching each processor at finish + transfer (one [T, P]
    pass over its row)."""
    row = successor_data[task]  # [T]
    outgoing = row >= 0
    transfer = row[:, None] * problem.inverse_bandwidth[proc][None, :]  # [T, P]
    # rounded before the addition, as in the NumPy reference: the no-op maximum (transfers are never
    # negative where there is an edge) keeps XLA's CPU backend from fusing the multiply and the add
    # (optimization_barrier does not)
    transfer = jnp.maximum(transfer, 0.0)
    reach = jnp.where(outgoing[:, None], finish + transfer, -jnp.inf)
    return carry._replace(
        waiting=(carry.waiting - outgoing.astype(jnp.int32)).at[task].set(-1),
        arrive=jnp.maximum(carry.arrive, reach),
    )


def _graph_input(problem, config: ListConfig, stream, edges) -> PullStream | PaddedEdges:
    """What the scan of `config` reads of the graph: a static selection its `stream` (default one
    micro-step per task of a `PaddedProblem`), a dynamic one the `edges` (default the `PaddedProblem`'s).
    Raises ValueError when `problem` holds only costs (`PaddedCosts`) and that input is missing."""
    given = edges if config.dynamic else stream
    if given is None and not isinstance(problem, PaddedProblem):
        raise ValueError(
            f"a {'dynamic' if config.dynamic else 'static'} selection on padded costs needs "
            f"{'the edges (pad_edges)' if config.dynamic else 'a stream (stream_batch)'}, or the padded "
            "graph (pad_problems)"
        )
    if given is not None or not config.dynamic:
        return given
    return PaddedEdges(problem.edge_src, problem.edge_dst, problem.edge_data, problem.edge_mask)


def list_schedule_padded(
    problem: PaddedProblem | PaddedCosts,
    plan: ListPlan,
    config: ListConfig,
    capacity: int | None = None,
    stream: PullStream | None = None,
    edges: PaddedEdges | None = None,
) -> ScheduleArrays:
    """Schedule of one padded problem by the family member `config`, from its padded `plan`
    (`pad_plan(make_plan(...))`); `capacity` bounds the idle gaps kept per processor (default T) when
    `config.insertion`, and `overflow` reports when some processor needed more. A static selection
    scans the micro-steps of `stream` (`jaxsched._pull_stream`; default `visit_stream` of `plan.order`,
    one per task); a dynamic one takes T steps over the problem's `edges` (default its own). Given its
    stream or edges, a selection needs only the problem's `PaddedCosts`."""
    reads = _graph_input(problem, config, stream, edges)
    if isinstance(problem, PaddedProblem):
        assert_padded(problem)
    else:
        chex.assert_rank(list(problem), [2, 1, 1, 1, 2])
    num_tasks, num_procs = problem.comp.shape
    dtype = problem.comp.dtype
    capacity = num_tasks if capacity is None else integer("capacity (idle gaps per processor)", capacity, 1)
    rows = jnp.full((num_procs, capacity if config.insertion else 1), jnp.inf, dtype)
    # the shortest positive cost of each processor: a shorter idle gap never holds a task (`Timelines`)
    min_length = jnp.where(problem.comp > 0, problem.comp, jnp.inf).min(axis=0)
    discard = num_tasks + 1
    successor_data = _successor_data(reads, num_tasks) if config.dynamic else None

    def place(carry: _Carry, task, proc, start, active) -> _Carry:
        duration = problem.comp[task, proc]
        finish = start + duration
        slot = jnp.where(active, task, discard)
        busy = active & (duration > 0)
        if config.insertion:
            gap_start, gap_end, overflow = occupy_gaps(
                carry.gap_start[proc], carry.gap_end[proc], carry.avail[proc], start, finish, min_length[proc]
            )
            carry = carry._replace(
                gap_start=carry.gap_start.at[proc].set(jnp.where(busy, gap_start, carry.gap_start[proc])),
                gap_end=carry.gap_end.at[proc].set(jnp.where(busy, gap_end, carry.gap_end[proc])),
                overflow=carry.overflow | (busy & overflow),
            )
        carry = carry._replace(
            proc=carry.proc.at[slot].set(proc),
            start=carry.start.at[slot].set(start),
            finish=carry.finish.at[slot].set(finish),
            avail=carry.avail.at[proc].set(jnp.where(busy, jnp.maximum(carry.avail[proc], finish), carry.avail[proc])),
            makespan=jnp.where(active, jnp.maximum(carry.makespan, finish), carry.makespan),
        )
        if config.dynamic:  # once every task is placed, releasing one again changes only placed tasks
            carry = _released(problem, successor_data, carry, task, proc, finish)
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
        waiting = jnp.where(problem.task_mask, jnp.sum(successor_data >= 0, axis=0, dtype=jnp.int32), -1)
        arrive = jnp.broadcast_to(problem.arrival[:, None], (num_tasks, num_procs)).astype(dtype)
    else:
        waiting, arrive = jnp.zeros(0, jnp.int32), jnp.zeros((0, num_procs), dtype)
    init = _Carry(
        proc=jnp.zeros(num_tasks + 2, jnp.int32),
        start=jnp.zeros(num_tasks + 2, dtype),
        finish=jnp.full(num_tasks + 2, -jnp.inf, dtype),
        gap_start=rows,
        gap_end=rows,
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
        carry, _ = jax.lax.scan(static_step, init, visit_stream(problem, plan.order) if reads is None else reads)
    steps = jnp.asarray(num_tasks, jnp.int32)
    return ScheduleArrays(
        carry.proc[:num_tasks], carry.start[:num_tasks], carry.finish[:num_tasks], carry.overflow, steps
    )


def heft_padded(problem: PaddedProblem, capacity: int | None = None) -> ScheduleArrays:
    """HEFT on one padded problem (`jaxsched.heft`): the HEFT preset visiting tasks in `problem.heft_order`,
    which is its ready-list order (upward ranks never increase along an edge, and ties go to the
    topological position), one micro-step per task; `capacity` as in `list_schedule_padded`."""
    assert_padded(problem)
    num_tasks, num_procs = problem.comp.shape
    order = problem.heft_order
    plan = ListPlan(
        position=jnp.zeros(num_tasks, jnp.int32).at[order].set(jnp.arange(num_tasks, dtype=jnp.int32)),
        order=order,
        pin=jnp.full(num_tasks, -1, jnp.int32),
        oct=jnp.zeros((num_tasks, num_procs), problem.comp.dtype),
        draws=jnp.zeros(num_tasks, jnp.int32),
    )
    return list_schedule_padded(problem, plan, PRESETS["HEFT"], capacity)


@functools.partial(jax.jit, static_argnames="capacity")
def heft_batch(batch: PaddedProblem, capacity: int | None = None) -> ScheduleArrays:
    """HEFT on every problem of a padded batch (one compilation per padded shape and capacity)."""
    return jax.vmap(heft_padded, in_axes=(0, None))(batch, capacity)


@functools.partial(jax.jit, static_argnames=("config", "capacity"))
def _list_schedule_batch(batch, plans, config, capacity, streams, edges):
    batched = jax.vmap(list_schedule_padded, in_axes=(0, 0, None, None, 0, 0))
    return batched(batch, plans, config, capacity, streams, edges)


def list_schedule_batch(
    batch: PaddedProblem | PaddedCosts,
    plans: ListPlan,
    config: ListConfig,
    capacity: int | None = None,
    streams: PullStream | None = None,
    edges: PaddedEdges | None = None,
) -> ScheduleArrays:
    """`list_schedule_padded` on every problem of a padded batch with its padded plan and, for a static
    selection, its stream (`compact_streams`; default one micro-step per task), for a dynamic one its
    edges (`pad_edges`; default the batch's). One compilation per padded shape, config, capacity and
    stream length. Raises ValueError when the plans do not match the batch, or when the batch holds
    only costs and the stream or edges `config` needs are missing."""
    _graph_input(batch, config, streams, edges)
    expected = {"position": batch.task_mask.shape, "oct": batch.comp.shape}
    for field, shape in expected.items():
        got = np.shape(getattr(plans, field))
        if got != shape:
            raise ValueError(
                f"plans.{field} has shape {got}, but the padded batch needs {shape}: pad every problem and "
                "plan to one Shape (pad_problems, plan_batch)"
            )
    return _list_schedule_batch(batch, plans, config, capacity, streams, edges)


def padded_makespan(batch: PaddedProblem, schedules: ScheduleArrays) -> jax.Array:
    """[B] makespan of each schedule of a padded batch (latest finish of a real task)."""
    return jnp.where(batch.task_mask, schedules.finish, -jnp.inf).max(axis=-1)


def plan_batch(
    problems: Sequence[Problem], config: ListConfig, shape: Shape, dtype=np.float32, graph: BatchGraph | None = None
) -> ListPlan:
    """The padded plans of `config` for `problems`, stacked: those of `pad_plan(make_plan(...))`,
    computed for the whole batch at once on its `BatchGraph` (equal values); `graph`: that graph at
    `shape`, when already built (padding shares it)."""
    if config.ranks != "topcuoglu":  # another rank convention: each problem planned by the reference
        shape = fit_shape(problems, shape, "plan_batch")
        return ListPlan(*map(np.stack, zip(*(pad_plan(make_plan(p, config), shape, dtype) for p in problems))))
    problems, shape, graph = fitted_graph(problems, shape, graph, "plan_batch", dtype)
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
    pin = np.full(graph.task_mask.shape, -1, np.int32)
    if config.pinning == "critical_path":
        pin = graph.critical_path_pins(rank_sum)
    elif config.pinning == "fastest_processor":
        fastest = np.where(graph.proc_mask, graph.comp64().sum(axis=1), np.inf).argmin(axis=1)
        pin = np.where(graph.task_mask, fastest[:, None], -1)
    return ListPlan(
        position.astype(np.int32, copy=False),
        order.astype(np.int32, copy=False),
        pin.astype(np.int32, copy=False),
        oct_table.astype(dtype) if config.selection == "eft_oct" else np.zeros(graph.comp.shape, dtype),
        batch_draws(problems, config, graph.task_mask),
    )


def stream_batch(graph: BatchGraph, plans: ListPlan, config: ListConfig, dtype=np.float32) -> PullStream | None:
    """The predecessor streams of a static `config` on the batch `graph` with its `plans` (None for a
    dynamic one), `batch_plan.stream_width(config)` predecessors per micro-step."""
    if config.dynamic:
        return None
    return compact_streams(graph, plans.order, stream_width(config), dtype)


def default_capacity(shape: Shape) -> int:
    """The idle gaps per processor that `schedule_batch` keeps first: half a fair share of the tasks, a
    multiple of 8 (on Topcuoglu DAGs of 100 tasks on 4 processors, HEFT, CPOP and PEFT needed at most 16)."""
    return 8 * -(-shape.num_tasks // shape.num_procs // 16)


def _run_across(mesh: Mesh, batch, plans: ListPlan, config: ListConfig, capacity, streams, edges) -> ScheduleArrays:
    """`list_schedule_batch` with the batch split across `mesh` (padded to a multiple of its device count by
    repeating the last problem) and the schedules gathered back, the padding dropped; on one device, placed
    there whole by the call itself (XLA's CPU client reads aligned host arrays in place: `schedule_batch` waits
    for the schedules before its buffers are used again; a `device_put` first costs about 20 us per array) and
    left there (no copies through the host)."""
    if mesh.devices.size == 1:
        with jax.default_device(mesh.devices.flat[0]):
            return list_schedule_batch(batch, plans, config, capacity, streams, edges)
    (batch, plans, streams, edges), size = shard_batch((batch, plans, streams, edges), mesh)
    return gather(list_schedule_batch(batch, plans, config, capacity, streams, edges), size)


def _with_room(mesh: Mesh, batch, plans: ListPlan, config: ListConfig, streams, edges, size: int,
               num_tasks: int) -> ScheduleArrays:
    """`_run_across` with gap insertion keeping `size` idle gaps per processor; the problems on which some
    processor overflowed run again with twice the room (at most T, which always fits), their count padded to
    a power of two by repeating them so that reruns share few compilations."""
    size = min(size, num_tasks)
    out = _run_across(mesh, batch, plans, config, size, streams, edges)
    over = np.flatnonzero(np.asarray(out.overflow))
    if not over.size or size == num_tasks:
        return out
    rows = np.resize(over, 1 << (over.size - 1).bit_length())

    def take(tree):
        return None if tree is None else jax.tree.map(lambda array: array[rows], tree)

    again = _with_room(mesh, take(batch), take(plans), config, take(streams), take(edges), 2 * size, num_tasks)
    return jax.tree.map(lambda all_rows, redone: all_rows.at[over].set(redone[: over.size]), out, again)


_HOST = threading.local()  # each thread's `HostBuffers` for `schedule_batch`


def _batch_inputs(problems, configs: list[ListConfig], shape, dtype, buffers: HostBuffers | None,
                  threads: int | None):
    """(shape, costs, [(plans, streams, edges)] per config) of `schedule_batch`: the costs, and of the graph
    only what the scans read: predecessor streams (static selections), edges (dynamic ones). Planned in one
    compiled pass per problem (`jaxsched._batch_plan`, into `buffers`, in `threads` parts) when every config
    allows it, else on the `BatchGraph`."""
    problems, shape = checked_batch(problems, shape, "schedule_batch")
    num_procs = max(p.num_procs for p in problems) if shape is None else shape.num_procs
    if all(fused(config, num_procs) for config in configs):
        planned = {}  # Duplex's halves share their plan
        keys = [(c.priority, c.pinning, c.selection == "wba", c.seed, c.dynamic, c.insertion) for c in configs]
        for key, config in zip(keys, configs):
            if key not in planned:
                planned[key] = plan_flat(problems, config, shape, dtype, None if planned else buffers, threads)
        shape, batch = planned[keys[0]][:2]
        return shape, batch, [planned[key][2:] for key in keys]
    problems, shape, graph = fitted_graph(problems, shape, None, "schedule_batch", dtype)
    batch = pad_costs(problems, shape, dtype, graph)
    edges = pad_edges(problems, shape, dtype, graph) if any(config.dynamic for config in configs) else None
    inputs = []
    for config in configs:
        plans = plan_batch(problems, config, shape, dtype, graph)
        inputs.append((plans, stream_batch(graph, plans, config, dtype), edges))
    return shape, batch, inputs


def schedule_batch(
    problems: Sequence[Problem],
    name: str,
    shape: Shape | None = None,
    dtype=np.float32,
    capacity: int | None = None,
    devices: Devices = None,
    threads: int | None = None,
    **options,
) -> ScheduleArrays:
    """Schedules of `problems` by the scheduler `name` (a preset or "Duplex"), padded to `shape`
    (default: the smallest that fits them all) and run in one vmapped call, the batch split across
    `devices` (`jaxsched.common.batch_mesh`: default all devices; the schedules do not depend on it);
    `options` override the preset's `ListConfig` fields. Gap insertion keeps `capacity` idle gaps per
    processor; by default `default_capacity(shape)`, and the problems where some processor overflows run
    again with twice the room. On one device the host arrays are built in buffers kept for the next call
    of the same thread (`batch_graph.HostBuffers`: about 25 KB per problem of 100 tasks on 4 processors), which
    the device may read in place: the call returns once the schedules are computed.
    `threads`: how many threads plan the presets planned in one pass (`jaxsched._batch_plan.plan_flat`; default one per
    core, the schedules do not depend on it).
    The GA batches differently: `jaxsched.jax.evolve`."""
    if name not in PRESETS and name != "Duplex":
        raise ValueError(f"unknown batched scheduler {name!r}; known: {', '.join(tuple(PRESETS) + ('Duplex',))}")
    if threads is not None:
        integer("threads", threads, 1)
    mesh = batch_mesh(devices)
    halves = ("MinMin", "MaxMin") if name == "Duplex" else (name,)
    configs = [preset(half, **options) for half in halves]
    buffers = None
    if mesh.devices.size == 1:  # the host arrays are reused once the schedules are computed (`_run_across`)
        buffers = getattr(_HOST, "buffers", None) or HostBuffers()
        _HOST.buffers = buffers
    try:
        shape, batch, inputs = _batch_inputs(problems, configs, shape, dtype, buffers, threads)
        results = []
        for config, (plans, streams, edges) in zip(configs, inputs):
            if not config.insertion or capacity is not None:
                size = capacity if config.insertion else None
                results.append(_run_across(mesh, batch, plans, config, size, streams, edges))
            else:
                room = default_capacity(shape)
                results.append(_with_room(mesh, batch, plans, config, streams, edges, room, shape.num_tasks))
        out = results[0]
        if name == "Duplex":
            better = padded_makespan(batch, results[1]) < padded_makespan(batch, results[0])  # MinMin on ties
            out = jax.tree.map(
                lambda a, b: jnp.where(better.reshape(better.shape + (1,) * (a.ndim - 1)), b, a), results[0],
                results[1])
        return out if buffers is None else jax.block_until_ready(out)
    except BaseException:
        _HOST.buffers = None  # a kernel dispatched before the error may still read them: the next call takes new ones
        raise
