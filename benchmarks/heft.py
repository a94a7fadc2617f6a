"""HEFT speed: NumPy `jaxsched.heft` vs a clean pure-Python HEFT, and batched JAX HEFT vs a NumPy loop.

    python benchmarks/heft.py                 # all sizes (the 84,654-task pure-Python run takes ~30 s)
    python benchmarks/heft.py --sizes 100x16 486x188 --batch 256

The pure-Python twin below is a fair, clean baseline: per-processor sorted interval lists searched
with bisect (no quadratic overlap checks), the same placement rule and tie-breaking as jaxsched, so
both must give the same makespan on every instance (checked and printed).
"""

from __future__ import annotations

import argparse
import bisect
import functools
import platform
import time

import numpy as np

import jaxsched
from jaxsched import random_dag
from jaxsched.common import best_time, machine_description


def python_heft(problem: jaxsched.Problem) -> float:
    """Insertion-based HEFT in plain Python; returns the makespan."""
    num_tasks, num_procs = problem.num_tasks, problem.num_procs
    comp = problem.comp.tolist()
    inverse_bandwidth = problem.inverse_bandwidth.tolist()
    arrival = problem.arrival.tolist()
    preds = [[] for _ in range(num_tasks)]
    succs = [[] for _ in range(num_tasks)]
    for u, v, d in zip(problem.src.tolist(), problem.dst.tolist(), problem.data.tolist()):
        preds[v].append((u, d))
        succs[u].append((v, d))
    # Upward ranks over a reverse topological order (Kahn), mean costs as in Topcuoglu et al.
    off_diagonal_bandwidth = 1.0
    if problem.bandwidth is not None and num_procs > 1:
        off_diagonal_bandwidth = float(problem.bandwidth[~np.eye(num_procs, dtype=bool)].mean())
    indegree = [len(p) for p in preds]
    level = [0] * num_tasks
    frontier = [t for t in range(num_tasks) if indegree[t] == 0]
    topo = []
    while frontier:
        topo.extend(frontier)
        nxt = []
        for u in frontier:
            for v, _ in succs[u]:
                indegree[v] -= 1
                if indegree[v] == 0:
                    level[v] = level[u] + 1
                    nxt.append(v)
        frontier = nxt
    position = {t: i for i, t in enumerate(sorted(range(num_tasks), key=lambda t: (level[t], t)))}
    mean_comp = problem.comp.mean(axis=1).tolist()  # same summation as the NumPy reference
    rank = [0.0] * num_tasks
    for u in reversed(topo):
        best = 0.0
        for v, d in succs[u]:
            best = max(best, d / off_diagonal_bandwidth + rank[v])
        rank[u] = mean_comp[u] + best
    order = sorted(range(num_tasks), key=lambda t: (-rank[t], position[t]))

    starts = [[] for _ in range(num_procs)]  # sorted busy starts per processor
    finishes = [[] for _ in range(num_procs)]
    proc, finish = [0] * num_tasks, [0.0] * num_tasks
    plain = problem.bandwidth is None
    for t in order:
        # Ready time: without bandwidths every input arrives at finish + data, except from a
        # predecessor on the same processor; only the predecessors' processors need a second look.
        base, special = arrival[t], {}
        if plain:
            for u, d in preds[t]:
                base = max(base, finish[u] + d)
            for q in {proc[u] for u, _ in preds[t]}:
                special[q] = max([arrival[t]] + [finish[u] + (0.0 if proc[u] == q else d) for u, d in preds[t]])
        best_eft, best_p, best_est = float("inf"), 0, 0.0
        comp_t = comp[t]
        for p in range(num_procs):
            if plain:
                ready = special.get(p, base)
            else:
                ready = arrival[t]
                for u, d in preds[t]:
                    ready = max(ready, finish[u] + d * inverse_bandwidth[proc[u]][p])
            duration = comp_t[p]
            ends = finishes[p]
            if duration == 0 or not ends or ready >= ends[-1]:  # after the last task: no search
                est = ready
            else:
                est = _earliest_start(starts[p], ends, ready, duration)
            if est + duration < best_eft:
                best_eft, best_p, best_est = est + duration, p, est
        proc[t], finish[t] = best_p, best_eft
        if best_eft > best_est:
            k = bisect.bisect_left(starts[best_p], best_est)
            starts[best_p].insert(k, best_est)
            finishes[best_p].insert(k, best_eft)
    return max(finish)


def _earliest_start(starts, finishes, ready, duration):
    if duration == 0:
        return ready
    n = len(starts)
    k = bisect.bisect_left(starts, ready + duration)  # earlier gaps end too soon
    while True:
        candidate = ready if k == 0 else max(finishes[k - 1], ready)
        if k == n or candidate + duration <= starts[k]:
            return candidate
        k += 1


def _timed(fn, repeats):
    """(best of `repeats` seconds, the last result) of `fn()`."""
    out = []
    seconds = best_time(lambda: out.append(fn()), repeats)
    return seconds, out[-1]


def compare_python(sizes, repeats):
    print("| tasks x procs | edges | NumPy HEFT (s) | pure-Python HEFT (s) | speed-up | same makespan |")
    print("|---|---|---|---|---|---|")
    for num_tasks, num_procs in sizes:
        problem = random_dag(num_tasks, num_procs, seed=num_tasks)
        fast, schedule = _timed(functools.partial(jaxsched.heft, problem), repeats)
        slow, makespan = _timed(functools.partial(python_heft, problem), 1 if num_tasks > 20_000 else repeats)
        same = makespan == schedule.makespan
        edges = problem.num_edges
        print(f"| {num_tasks} x {num_procs} | {edges} | {fast:.4f} | {slow:.3f} | {slow / fast:.1f}x | {same} |")


def compare_batched(batch_size, num_tasks, num_procs, repeats):
    import jax

    from jaxsched import pad_problems
    from jaxsched.jax import heft_batch

    problems = [random_dag(num_tasks, num_procs, integer=True, seed=i) for i in range(batch_size)]
    loop, schedules = _timed(lambda: [jaxsched.heft(p) for p in problems], repeats)
    batch = jax.device_put(pad_problems(problems))
    t0 = time.perf_counter()
    jax.block_until_ready(heft_batch(batch))
    compile_s = time.perf_counter() - t0
    fast, out = _timed(lambda: jax.block_until_ready(heft_batch(batch)), repeats)
    same = all(
        np.array_equal(np.asarray(out.proc[i, :num_tasks]), s.proc) and np.allclose(out.finish[i, :num_tasks], s.finish)
        for i, s in enumerate(schedules)
    )
    device = jax.devices()[0].device_kind
    print(f"\nBatched HEFT, {batch_size} DAGs of {num_tasks} tasks x {num_procs} processors ({device}):\n")
    print("| method | time (s) | DAGs/s | speed-up | equal schedules |")
    print("|---|---|---|---|---|")
    print(f"| NumPy heft, loop | {loop:.3f} | {batch_size / loop:.0f} | 1.0x | |")
    label = f"JAX heft_batch (compile {compile_s:.1f} s once)"
    print(f"| {label} | {fast:.3f} | {batch_size / fast:.0f} | {loop / fast:.1f}x | {same} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="*", default=["100x16", "486x188", "10000x188", "84654x188"])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"Machine: {machine_description(load=True)}, Python {platform.python_version()}\n")
    compare_python([tuple(int(x) for x in s.split("x")) for s in args.sizes], args.repeats)
    if args.batch:
        compare_batched(args.batch, 100, 16, args.repeats)


if __name__ == "__main__":
    main()
