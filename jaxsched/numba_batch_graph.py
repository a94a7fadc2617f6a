"""The compiled half of `jaxsched.batch_graph` (numba): the DAG sweeps of a `BatchGraph` and the passes that build it.

Each sweep walks every problem of a batch once in its canonical topological order (forwards or
backwards) over the batch's edges in compressed rows (edges grouped by the task they start or end at,
tasks numbered b * T + t), doing per edge exactly the float64 arithmetic of the per-problem NumPy form
(`jaxsched.heft.upward_rank`, `jaxsched.priorities`), so the values equal it to the last bit. The walk
replaces a level-by-level vectorised NumPy sweep, whose Python loop over levels and per-level sorting
cost more than the arithmetic on batches of small DAGs (1,024 problems of 100 tasks: CPOP's planning
58 -> 19 ms, PEFT's 71 -> 18 ms). Compiled code is cached on disk (`cache=True`).

The glue around the walks is compiled too, each step one pass over the batch's arrays: building the batch
graph from the problems' concatenated arrays (`build_graph`: padding, grouping the edges by task with a
stable counting sort in place of per-problem `in_edges` / `out_edges`, mean costs in NumPy's own summation
order, the sizes the padding checks), mean costs of other tables (`mean_costs`) and priority positions
(`priority_positions`, one stable sort per problem); NumPy's reductions over a short last axis and its sort
along rows cost more per problem than the walks themselves (4,096 problems of 100 tasks on 4 processors:
2.6 us each for the mean, 4.6 us for the sort).

In the hottest loops an index computed at run time is cast to an unsigned integer (`_u`): numba wraps a
signed index that may be negative (`a[i - 1]` reads the last entry for i = 0), a test and an add per access
that also keep LLVM from vectorising; an unsigned index skips them (a contiguous copy 7.5x faster, measured).
Every index cast is non-negative by construction.
"""

from __future__ import annotations

import numba
import numba.extending
import numpy as np
from numba import uintp as _u

_jit = numba.njit(cache=True, nogil=True)


@_jit
def upward_rank_of(topo, base, out_ptr, out_dst, edge_value, mean_comp, rank):
    """Writes rank_u of one problem's tasks (`jaxsched.heft.upward_rank`) into `rank`: `topo` [T] its
    topological order, its task t numbered base + t in `out_ptr`, `out_dst` and `edge_value` (the edges by
    source), `mean_comp` and `rank`."""
    for i in range(len(topo) - 1, -1, -1):
        task = base + topo[i]
        best = 0.0
        for k in range(out_ptr[task], out_ptr[task + 1]):
            best = max(best, edge_value[k] + rank[out_dst[k]])
        rank[task] = mean_comp[task] + best


@_jit
def upward_ranks(topo, out_ptr, out_dst, edge_value, mean_comp):
    """[B * T] rank_u of every task (`jaxsched.heft.upward_rank`): `topo` [B, T] each problem's
    topological order; `out_ptr` [B * T + 1], `out_dst` and `edge_value` [E] the edges by source."""
    size, num_tasks = topo.shape
    rank = np.zeros(size * num_tasks)
    for b in range(size):
        upward_rank_of(topo[b], b * num_tasks, out_ptr, out_dst, edge_value, mean_comp, rank)
    return rank


@_jit
def downward_ranks(topo, in_ptr, in_src, edge_value, mean_comp):
    """[B * T] rank_d of every task (`jaxsched.priorities.downward_rank`); `in_ptr`, `in_src` and
    `edge_value` the edges by destination."""
    size, num_tasks = topo.shape
    rank = np.zeros(size * num_tasks)
    for b in range(size):
        for i in range(num_tasks):
            task = b * num_tasks + topo[b, i]
            best = 0.0
            for k in range(in_ptr[task], in_ptr[task + 1]):
                source = in_src[k]
                best = max(best, rank[source] + mean_comp[source] + edge_value[k])
            rank[task] = best
    return rank


@_jit
def optimistic_cost_tables(topo, out_ptr, out_dst, edge_value, comp, proc_mask):
    """[B * T, P] the optimistic cost table of every task (`jaxsched.priorities.optimistic_cost_table`)
    from `comp` [B * T, P] and `proc_mask` [B, P]; 0 on padded processors."""
    size, num_tasks = topo.shape
    num_procs = comp.shape[1]
    table = np.zeros(comp.shape)
    after = np.empty(num_procs)
    for b in range(size):
        for i in range(num_tasks - 1, -1, -1):
            task = b * num_tasks + topo[b, i]
            for k in range(out_ptr[task], out_ptr[task + 1]):
                successor = out_dst[k]
                least = np.inf
                for q in range(num_procs):
                    after[q] = table[successor, q] + comp[successor, q] if proc_mask[b, q] else np.inf
                    least = min(least, after[q])
                elsewhere = least + edge_value[k]
                for p in range(num_procs):
                    table[task, p] = max(table[task, p], min(after[p], elsewhere))
        for t in range(b * num_tasks, (b + 1) * num_tasks):
            for p in range(num_procs):
                if not proc_mask[b, p]:
                    table[t, p] = 0.0
    return table


@_jit
def critical_path_pins(on_path, position, out_ptr, out_dst, in_degree, comp, proc_mask):
    """[B, T] CPOP's pins (`jaxsched.priorities.critical_path`): from the entry task of least topological
    `position` among those `on_path` [B, T], the path through the on-path successor of least position at
    each step, pinned to the processor of least total cost over it (`comp` [B, T, P]); -1 elsewhere."""
    size, num_tasks, num_procs = comp.shape
    pin = np.full((size, num_tasks), -1, np.int32)
    path = np.empty(num_tasks, np.int64)
    load = np.empty(num_procs)
    for b in range(size):
        base = b * num_tasks
        task = -1
        for t in range(num_tasks):
            if on_path[b, t] and in_degree[base + t] == 0 and (task < 0 or position[b, t] < position[b, task]):
                task = t
        length = 0
        while task >= 0:
            path[length] = task
            length += 1
            following = -1
            for k in range(out_ptr[base + task], out_ptr[base + task + 1]):
                successor = out_dst[k] - base
                if on_path[b, successor] and (following < 0 or position[b, successor] < position[b, following]):
                    following = successor
            task = following
        load[:] = 0.0
        for i in range(length):
            for p in range(num_procs):
                load[p] += comp[b, path[i], p]
        best = -1
        for p in range(num_procs):
            if proc_mask[b, p] and (best < 0 or load[p] < load[best]):
                best = p
        for i in range(length):
            pin[b, path[i]] = best
    return pin


@_jit
def ready_list_order_of(position, base, out_ptr, out_dst, in_degree, waiting, ready, task_at, order):
    """Writes into `order` [T] the order in which a list scheduler taking the ready task of lowest `position`
    [T] (a permutation of 0..T-1) visits one problem's tasks (`jaxsched.listsched.ready_list_order`): its
    task t numbered base + t in `out_ptr`, `out_dst` (the edges by source) and `in_degree`; `waiting`,
    `ready` and `task_at` [T] scratch."""
    num_tasks = len(position)
    forward = True  # positions increase along every edge: the order is the positions sorted
    for t in range(num_tasks):
        for k in range(out_ptr[base + t], out_ptr[base + t + 1]):
            forward &= position[out_dst[k] - base] > position[t]
    if forward:
        for t in range(num_tasks):
            order[position[t]] = t
        return
    count = 0  # ready[:count]: the ready tasks' positions, unsorted (few at a time: a scan finds the least)
    for t in range(num_tasks):
        task_at[position[t]] = t
        waiting[t] = in_degree[base + t]
        if waiting[t] == 0:
            ready[count] = position[t]
            count += 1
    for step in range(num_tasks):
        least = 0
        for i in range(1, count):
            if ready[i] < ready[least]:
                least = i
        task = task_at[ready[least]]
        count -= 1
        ready[least] = ready[count]
        order[step] = task
        for k in range(out_ptr[base + task], out_ptr[base + task + 1]):
            successor = out_dst[k] - base
            waiting[successor] -= 1
            if waiting[successor] == 0:
                ready[count] = position[successor]
                count += 1


@_jit
def ready_list_orders(position, out_ptr, out_dst, in_degree):
    """[B, T] the order in which a list scheduler taking the ready task of lowest `position` [B, T] (a
    permutation of 0..T-1 per problem) visits each problem's tasks (`jaxsched.listsched.ready_list_order`);
    `in_degree` [B * T]."""
    size, num_tasks = position.shape
    order = np.empty((size, num_tasks), np.int32)
    waiting, ready = np.empty(num_tasks, np.int64), np.empty(num_tasks, np.int64)
    task_at = np.empty(num_tasks, np.int64)
    for b in range(size):
        ready_list_order_of(position[b], b * num_tasks, out_ptr, out_dst, in_degree, waiting, ready, task_at, order[b])
    return order


@_jit
def pad_rows(task_off, procs, comp, padded):
    """Writes each problem's costs, rows task_off[b]:task_off[b + 1] of the concatenated raveled [T_b, procs[b]]
    arrays `comp`, into `padded` [B, T, P] (any float dtype; its padding left as it is)."""
    row = 0
    for b in range(len(procs)):
        width = procs[b]
        for t in range(task_off[b + 1] - task_off[b]):
            for p in range(width):
                padded[b, t, p] = comp[row + p]
            row += width


@numba.extending.intrinsic
def _int64_pointer(typingctx, address):
    """The int64 pointer at the integer `address` (compiled code only)."""
    if not isinstance(address, numba.types.Integer):
        return None
    pointer = numba.types.CPointer(numba.types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(address), codegen


@_jit
def block_arrays(addresses, b):
    """(tasks, procs, edges, comp raveled, data, src, dst, topo): the views of problem b's `Problem.packed`
    block, read in place at addresses[b] (`Problem.packed_address`; `jaxsched.problem.packed_layout`'s layout,
    read in compiled code). The caller keeps the problems alive while it reads."""
    pointer = _int64_pointer(addresses[b])
    header = numba.carray(pointer, 3)
    tasks, procs, edges = header[0], header[1], header[2]
    cells = 3 + tasks * procs
    block = numba.carray(pointer, cells + 3 * edges + tasks)
    return (tasks, procs, edges, block[3:cells].view(np.float64), block[cells:cells + edges].view(np.float64),
            block[cells + edges:cells + 2 * edges], block[cells + 2 * edges:cells + 3 * edges],
            block[cells + 3 * edges:cells + 3 * edges + tasks])


@_jit
def block_sizes(addresses):
    """[B, 3] each problem's tasks, processors and edges: its block's header (`block_arrays`)."""
    sizes = np.empty((len(addresses), 3), np.int64)
    for b in range(len(addresses)):
        sizes[b, 0], sizes[b, 1], sizes[b, 2] = block_arrays(addresses, b)[:3]
    return sizes


@_jit
def unpack(addresses, task_off, procs, edge_off, comp, src, dst, data, topo):
    """Writes every problem's arrays from its `Problem.packed` block (read in place, `block_arrays`) at its
    place in the concatenated `comp`, `src`, `dst`, `data` and `topo` (`FlatBatch`: `task_off`, `procs` and
    `edge_off` given)."""
    row = 0
    for b in range(len(procs)):
        t0, e0 = task_off[b], edge_off[b]
        tasks, width, edges, comp_b, data_b, src_b, dst_b, topo_b = block_arrays(addresses, b)
        cells = tasks * width
        comp[row:row + cells] = comp_b
        data[e0:e0 + edges], src[e0:e0 + edges], dst[e0:e0 + edges] = data_b, src_b, dst_b
        topo[t0:t0 + tasks] = topo_b
        row += cells


@_jit
def graph_of(comp, row, width, tasks, topo, src, dst, data, base, first, in_ptr, in_src, in_data, out_ptr, out_dst,
             out_data, order, position, mean, fill_in, fill_out, sizes):
    """Builds one problem's part of a batch graph (`build_graph`) from its costs comp[row:row + tasks * width]
    ([tasks, width] raveled), topological order `topo` [tasks] and edges `src`, `dst`, `data`: its task t
    numbered base + t in `in_ptr`, `out_ptr` (whose entries base..base + T it writes; T = len(order)) and
    `mean`, its edges at first.. in `in_src`, `in_data`, `out_dst`, `out_data`; `order`, `position` [T] its
    rows; `fill_in`, `fill_out` [T] scratch; `sizes` [5] its row of the sizes."""
    num_tasks = len(order)
    largest_sum, least = 0.0, np.inf
    for t in range(num_tasks):
        if t >= tasks:
            mean[base + t] = 0.0
            continue
        largest = 0.0
        for p in range(row, row + width):
            largest = max(largest, comp[p])
            if comp[p] != 0.0:
                least = min(least, comp[p])
        if width <= 128:
            mean[base + t] = pairwise_sum(comp, row, width) / width
        largest_sum += largest
        row += width
    for i in range(num_tasks):
        task = topo[i] if i < tasks else i
        order[i] = task
        position[task] = i
    fill_in[:] = 0
    fill_out[:] = 0
    data_sum, least_data = 0.0, np.inf
    for e in range(len(src)):
        fill_in[dst[e]] += 1
        fill_out[src[e]] += 1
        data_sum += data[e]
        if data[e] != 0.0:
            least_data = min(least_data, data[e])
    into, out_of, most = first, first, 0
    for t in range(num_tasks):
        most = max(most, fill_in[t])
        in_ptr[base + t], out_ptr[base + t] = into, out_of
        into, out_of = into + fill_in[t], out_of + fill_out[t]
        fill_in[t], fill_out[t] = in_ptr[base + t], out_ptr[base + t]
    in_ptr[base + num_tasks], out_ptr[base + num_tasks] = into, out_of
    for e in range(len(src)):
        k = fill_in[dst[e]]
        fill_in[dst[e]] += 1
        in_src[k], in_data[k] = base + src[e], data[e]
        k = fill_out[src[e]]
        fill_out[src[e]] += 1
        out_dst[k], out_data[k] = base + dst[e], data[e]
    sizes[0], sizes[1], sizes[2], sizes[3], sizes[4] = most, largest_sum, data_sum, least, least_data


@_jit
def build_graph(task_off, procs, edge_off, comp, src, dst, data, topo, in_ptr, in_src, in_data, out_ptr, out_dst,
                out_data, order, position, mean, sizes):
    """One pass over a batch read as flat arrays (`jaxsched.batch_graph.BatchGraph.of`): problem b has tasks
    task_off[b]:task_off[b + 1] of the concatenated topological orders `topo` and rows of the concatenated
    costs `comp` (each problem's [T_b, procs[b]] raveled), edges edge_off[b]:edge_off[b + 1] of `src`, `dst`
    and `data`. Writes, with tasks numbered b * T + t (T = order.shape[1]): the edges by destination (in_ptr
    [B * T + 1], in_src, in_data [E]) and by source (out_ptr, out_dst, out_data), each group in edge order
    (`Problem.in_edges` / `out_edges`); the topological order [B, T] (padded tasks last, in index order) and
    each task's place in it; mean costs [B * T] (`mean_costs`, 0 padded; left as they are past 128
    processors); and per problem `sizes` [B, 5]: the most incoming edges of a task, the sum over tasks of the
    largest cost, the sum of the data, the least non-zero cost and datum."""
    size, num_tasks = order.shape
    fill_in, fill_out = np.empty(num_tasks, np.int64), np.empty(num_tasks, np.int64)
    row = 0
    for b in range(size):
        t0, t1, e0, e1 = task_off[b], task_off[b + 1], edge_off[b], edge_off[b + 1]
        graph_of(comp, row, procs[b], t1 - t0, topo[t0:t1], src[e0:e1], dst[e0:e1], data[e0:e1], b * num_tasks, e0,
                 in_ptr, in_src, in_data, out_ptr, out_dst, out_data, order[b], position[b], mean, fill_in, fill_out,
                 sizes[b])
        row += (t1 - t0) * procs[b]


@_jit
def pairwise_sum(values, start, count):
    """The sum of values[start:start + count] (count <= 128) in the order of NumPy's pairwise summation (its
    add reduction over a contiguous axis): a plain loop below 8 terms, else 8 running sums combined as a tree,
    then the rest one by one. (Longer rows NumPy splits in halves: `mean_costs` leaves those to NumPy.)"""
    if count < 8:
        total = 0.0
        for i in range(start, start + count):
            total += values[_u(i)]
        return total
    r0, r1, r2, r3 = values[_u(start)], values[_u(start + 1)], values[_u(start + 2)], values[_u(start + 3)]
    r4, r5, r6, r7 = values[_u(start + 4)], values[_u(start + 5)], values[_u(start + 6)], values[_u(start + 7)]
    i = start + 8
    while i < start + count - count % 8:
        r0, r1, r2, r3 = r0 + values[_u(i)], r1 + values[_u(i + 1)], r2 + values[_u(i + 2)], r3 + values[_u(i + 3)]
        r4, r5, r6, r7 = r4 + values[_u(i + 4)], r5 + values[_u(i + 5)], r6 + values[_u(i + 6)], r7 + values[_u(i + 7)]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for k in range(i, start + count):
        total += values[_u(k)]
    return total


@_jit
def _mean_costs(comp, num_tasks, num_procs):
    size, padded_tasks, width = comp.shape
    flat = comp.reshape(-1)
    out = np.zeros(size * padded_tasks)
    for b in range(size):
        for t in range(num_tasks[b]):
            out[b * padded_tasks + t] = pairwise_sum(flat, (b * padded_tasks + t) * width, num_procs[b]) / num_procs[b]
    return out


def mean_costs(comp, num_tasks, num_procs):
    """[B * T] each task's mean cost over its problem's processors: `comp[b, t, :num_procs[b]].mean()` to the
    last bit (NumPy's summation order, then one division) for the first `num_tasks[b]` tasks, 0 after."""
    if comp.shape[2] <= 128:
        return _mean_costs(comp, num_tasks, num_procs)
    out = np.zeros(comp.shape[:2])
    for b, (tasks, procs) in enumerate(zip(num_tasks, num_procs)):
        out[b, :tasks] = comp[b, :tasks, :procs].mean(axis=1)
    return out.ravel()


@_jit
def _stable_argsort(key, index, scratch):
    """The indices 0..N-1 sorted by `key` [N], ties in increasing index, in the buffer returned (`index` or
    `scratch` [N]). Priorities listed in topological order are nearly sorted already (upward ranks fall along
    edges: about 450 inversions among 100 tasks), so an insertion sort runs first; past 16 moves per key it
    gives way to a bottom-up merge sort (taking the left run's key on ties). Keys are never NaN."""
    count = len(key)
    budget = 16 * count
    held = np.empty(count + 1)  # held[1 + j]: the key of index[j], moved with it (no indirect load per comparison)
    held[0] = -np.inf  # below every key: ends each scan without a test of the index
    for i in range(count):
        value = key[i]
        j = i
        while held[_u(j)] > value:
            index[_u(j)], held[_u(j + 1)] = index[_u(j - 1)], held[_u(j)]
            j -= 1
        index[_u(j)], held[_u(j + 1)] = i, value
        budget -= i - j
        if budget <= 0:
            break
    if budget > 0:
        return index
    for i in range(count):
        index[i] = i
    source, target = index, scratch
    width = 1
    while width < count:
        for lo in range(0, count, 2 * width):
            middle, hi = min(lo + width, count), min(lo + 2 * width, count)
            i, j = lo, middle
            for k in range(lo, hi):
                if j >= hi or (i < middle and not key[source[j]] < key[source[i]]):
                    target[k] = source[i]
                    i += 1
                else:
                    target[k] = source[j]
                    j += 1
        source, target = target, source
        width *= 2
    return source


@_jit
def priority_position_of(priority, tasks, topo, key, index, scratch, position):
    """Writes into `position` [T] each task's place in decreasing `priority` [T], ties by place in the
    topological order `topo` [T], tasks from `tasks` on (padding) last; `key`, `index`, `scratch` [T] scratch."""
    num_tasks = len(topo)
    for i in range(num_tasks):
        task = topo[i]
        key[i] = -priority[_u(task)] if task < tasks else np.inf
    ranked = _stable_argsort(key, index, scratch)
    for i in range(num_tasks):
        position[_u(topo[_u(ranked[i])])] = i


@_jit
def priority_positions(priority, tasks, topo):
    """[B, T] each task's place in decreasing `priority` [B, T], ties by place in the topological order
    `topo` [B, T], padded tasks (from tasks[b] on) last (`BatchGraph.priority_position`): one stable sort
    per problem."""
    size, num_tasks = priority.shape
    position = np.empty((size, num_tasks), np.int32)
    key = np.empty(num_tasks)
    index, scratch = np.empty(num_tasks, np.int64), np.empty(num_tasks, np.int64)
    for b in range(size):
        priority_position_of(priority[b], tasks[b], topo[b], key, index, scratch, position[b])
    return position


@_jit
def stream_layout(order, tasks, inputs, width, task, place, start):
    """Lays out one problem's predecessor stream (`stream_of`) in its rows `task`, `place` [M]: visiting its
    tasks in `order` [T], ceil(inputs[t] / `width`), at least 1, micro-steps per real task (t < tasks; none for
    padded tasks), the last of them placing it; micro-steps past the stream's end task 0 and no placing. Writes
    each real task's first slot (micro-step x width) into `start` [T], where its inputs then go in order."""
    step = 0
    for i in range(len(order)):
        visited = order[i]
        if visited >= tasks:
            continue
        start[_u(visited)] = step * width
        chunks, rest = 1, inputs[_u(visited)] - width  # ceil(in-degree / width), at least 1, without a division
        while rest > 0:
            chunks, rest = chunks + 1, rest - width
        for chunk in range(step, step + chunks):
            task[_u(chunk)] = visited
            place[_u(chunk)] = False
        step += chunks
        place[_u(step - 1)] = True
    for rest in range(step, len(task)):
        task[_u(rest)] = 0
        place[_u(rest)] = False


@_jit
def stream_of(order, tasks, base, in_ptr, in_src, in_data, task, place, pred, pred_data):
    """Writes one problem's predecessor stream (`jaxsched._pull_stream.compact_streams`) into its rows `task`,
    `place` [M], `pred`, `pred_data` [M, W] (C-contiguous): the micro-steps of `stream_layout` visiting its
    tasks in `order` [T], its inputs `in_src` / `in_data` at in_ptr[base + t]:in_ptr[base + t + 1] (sources
    numbered base + s) in a task's slots in order; unused slots get the sentinel T (data 0). Every slot is
    first set to the sentinel (one vectorised fill) and each input then written once at its place."""
    num_tasks = len(order)
    steps, width = pred.shape
    pred_flat, data_flat = pred.reshape(steps * width), pred_data.reshape(steps * width)
    pred_flat[:] = num_tasks
    data_flat[:] = 0
    inputs = in_ptr[base + 1: base + num_tasks + 1] - in_ptr[base: base + num_tasks]
    start = np.empty(num_tasks, np.int64)
    stream_layout(order, tasks, inputs, width, task, place, start)
    for t in range(tasks):
        first, end = in_ptr[_u(base + t)], in_ptr[_u(base + t + 1)]
        slot = start[_u(t)] - first
        for k in range(first, end):
            pred_flat[_u(slot + k)] = in_src[_u(k)] - base
            data_flat[_u(slot + k)] = in_data[_u(k)]
