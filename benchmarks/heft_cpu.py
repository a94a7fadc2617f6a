"""HEFT on the CPU, side by side: the NumPy reference, the compiled numba path, the batched JAX path and a
compiled single-instance C baseline (below, built with `gcc -O3` into a temporary directory, called by ctypes).

    python -m benchmarks.heft_cpu                         # every size (the JAX column skips the largest)
    python -m benchmarks.heft_cpu --sizes 100x16 --batch 512

All four follow one visit order (decreasing upward rank, ties by canonical topological position), one
placement rule (first idle gap that fits, else after the last task) and one tie rule (lowest processor),
so they must give the same makespans on every DAG (checked and printed). Label-generation sizes are given
in DAGs per second over a batch of Topcuoglu DAGs; the paper's sizes in seconds for one DAG.

Columns: `NumPy` is `jaxsched.heft(problem)` in a loop; `numba, 1 core` is the compiled HEFT
(`jaxsched.numba_heft.heft_kernel`) on the arrays of `heft_inputs` (prepared beforehand, as for C); `numba batch` is
`jaxsched.numba.heft_batch` on a padded float64 batch, on every core; `JAX` is `jaxsched.jax.heft_batch` on the
padded float32 batch (integer costs, so float32 is exact; capacity: the smallest power of two that holds HEFT's
busiest processor, its fastest setting); `C, 1 core` is the baseline on the same prepared arrays (one ctypes call
per DAG). Batches: `--batch` DAGs of up to 200 tasks, a quarter as many of up to 1,000. Best of `--repeats`,
alternated. `--clock cpu` times process CPU time instead of elapsed time: steady on a
shared machine, and it adds up threads, so the batch column then gives DAGs per CPU-second.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import subprocess
import tempfile

import jax
import numpy as np

import jaxsched
from jaxsched import random_dag
from jaxsched.common import alternated_times, machine_description
from jaxsched.numba import heft_inputs, heft_kernel

C_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

typedef struct { double *start, *finish; int64_t n, cap; } Row;  /* busy intervals, sorted by start */

static const double *rank_of;
static const int64_t *position_of;

static int by_rank(const void *a, const void *b) {  /* decreasing rank, ties by topological position */
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    if (rank_of[x] != rank_of[y]) return rank_of[x] > rank_of[y] ? -1 : 1;
    return (position_of[x] > position_of[y]) - (position_of[x] < position_of[y]);
}

static int64_t first_not_below(const double *a, int64_t n, double x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (a[mid] < x) lo = mid + 1; else hi = mid; }
    return lo;
}

static double gap_start(const Row *r, double ready, double d, double finish_by) {
    for (int64_t k = first_not_below(r->start, r->n, ready + d); k < r->n; k++) {
        double begin = k == 0 ? ready : fmax(r->finish[k - 1], ready);
        if (begin + d > finish_by) return INFINITY;
        if (begin + d <= r->start[k]) return begin;
    }
    return INFINITY;
}

static void occupy(Row *r, double s, double d) {
    if (d == 0) return;
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 8;
        r->start = realloc(r->start, r->cap * sizeof(double));
        r->finish = realloc(r->finish, r->cap * sizeof(double));
    }
    int64_t pos = first_not_below(r->start, r->n, s);
    memmove(r->start + pos + 1, r->start + pos, (r->n - pos) * sizeof(double));
    memmove(r->finish + pos + 1, r->finish + pos, (r->n - pos) * sizeof(double));
    r->start[pos] = s; r->finish[pos] = s + d; r->n++;
}

double heft(int64_t T, int64_t P, const double *comp, const double *mean_comp, const int64_t *topo,
            const int64_t *out_ptr, const int64_t *out_dst, const double *edge_value, const int64_t *in_ptr,
            const int64_t *in_src, const double *in_data, const double *arrival, const double *inv_bw,
            int64_t *proc, double *start, double *finish) {
    double *rank = malloc(T * sizeof(double)), *ready = malloc(P * sizeof(double)), *avail = calloc(P, sizeof(double));
    int64_t *position = malloc(T * sizeof(int64_t)), *order = malloc(T * sizeof(int64_t));
    Row *rows = calloc(P, sizeof(Row));
    for (int64_t i = T - 1; i >= 0; i--) {  /* upward rank */
        int64_t t = topo[i]; double best = 0;
        for (int64_t k = out_ptr[t]; k < out_ptr[t + 1]; k++) best = fmax(best, edge_value[k] + rank[out_dst[k]]);
        rank[t] = mean_comp[t] + best;
    }
    for (int64_t i = 0; i < T; i++) { position[topo[i]] = i; order[i] = topo[i]; }
    rank_of = rank; position_of = position;
    qsort(order, T, sizeof(int64_t), by_rank);
    int uniform = 1;
    for (int64_t p = 0; p < P * P; p++) uniform &= inv_bw[p] == (p / P == p % P ? 0.0 : 1.0);
    double makespan = 0;
    for (int64_t i = 0; i < T; i++) {
        int64_t t = order[i], lo = in_ptr[t], hi = in_ptr[t + 1];
        if (uniform) {  /* only the processor hosting every latest input can differ from the maximum */
            double latest = -INFINITY; int64_t host = -1; int single = 1;
            for (int64_t k = lo; k < hi; k++) {
                double a = finish[in_src[k]] + in_data[k];
                if (a > latest) { latest = a; host = proc[in_src[k]]; single = 1; }
                else if (a == latest && proc[in_src[k]] != host) single = 0;
            }
            for (int64_t p = 0; p < P; p++) ready[p] = fmax(arrival[t], latest);
            if (single && host >= 0) {
                double r = arrival[t];
                for (int64_t k = lo; k < hi; k++)
                    r = fmax(r, proc[in_src[k]] == host ? finish[in_src[k]] : finish[in_src[k]] + in_data[k]);
                ready[host] = r;
            }
        } else {
            for (int64_t p = 0; p < P; p++) {
                double r = arrival[t];
                for (int64_t k = lo; k < hi; k++)
                    r = fmax(r, finish[in_src[k]] + in_data[k] * inv_bw[proc[in_src[k]] * P + p]);
                ready[p] = r;
            }
        }
        const double *d = comp + t * P;
        int64_t best = 0; double best_finish = INFINITY, best_start = 0;
        for (int64_t p = 0; p < P; p++) {
            double begin = d[p] == 0 ? ready[p] : fmax(ready[p], avail[p]);
            if (begin + d[p] < best_finish) { best = p; best_finish = begin + d[p]; best_start = begin; }
        }
        for (int64_t p = 0; p < P; p++) {
            if (d[p] == 0 || ready[p] >= avail[p] || ready[p] + d[p] > best_finish) continue;
            double begin = gap_start(&rows[p], ready[p], d[p], best_finish);
            if (begin + d[p] < best_finish || (begin + d[p] == best_finish && p < best)) {
                best = p; best_finish = begin + d[p]; best_start = begin;
            }
        }
        proc[t] = best; start[t] = best_start; finish[t] = best_finish;
        if (d[best] > 0) avail[best] = fmax(avail[best], best_finish);
        occupy(&rows[best], best_start, d[best]);
        makespan = fmax(makespan, best_finish);
    }
    for (int64_t p = 0; p < P; p++) { free(rows[p].start); free(rows[p].finish); }
    free(rows); free(rank); free(ready); free(avail); free(position); free(order);
    return makespan;
}
"""


def build_c_baseline(directory: str):
    """The C baseline compiled with `gcc -O3` into `directory`; returns a function of `heft_inputs` arrays
    that gives the makespan (the arguments are converted once, beforehand, by `c_arguments`)."""
    source, library = os.path.join(directory, "heft.c"), os.path.join(directory, "libheft.so")
    with open(source, "w") as f:
        f.write(C_SOURCE)
    subprocess.run(["gcc", "-O3", "-march=native", "-shared", "-fPIC", source, "-o", library, "-lm"], check=True)
    heft = ctypes.CDLL(library).heft
    heft.restype = ctypes.c_double
    return heft


def c_arguments(problem: jaxsched.Problem):
    """ctypes arguments of the C baseline for `problem` (the arrays are kept alive in the tuple's tail)."""
    arrays = [np.ascontiguousarray(a) for a in heft_inputs(problem)]
    outputs = [np.zeros(problem.num_tasks, np.int64), np.zeros(problem.num_tasks), np.zeros(problem.num_tasks)]
    pointers = [ctypes.c_void_p(a.ctypes.data) for a in arrays + outputs]
    return (ctypes.c_int64(problem.num_tasks), ctypes.c_int64(problem.num_procs), *pointers), arrays + outputs


def _busiest_capacity(schedule: jaxsched.Schedule, problem: jaxsched.Problem) -> int:
    busy = problem.comp[np.arange(problem.num_tasks), schedule.proc] > 0
    most = int(np.bincount(schedule.proc[busy], minlength=1).max())
    return 1 << max(most - 1, 0).bit_length()


HEADER = (
    "| tasks x procs | unit | NumPy | numba, 1 core | numba batch, all cores | JAX heft_batch | C, 1 core "
    "| numba / C time | numba / NumPy speed | equal makespans |\n|---|---|---|---|---|---|---|---|---|---|"
)


def compare(num_tasks: int, num_procs: int, batch_size: int, repeats: int, heft_c, clock: str) -> str:
    """One table row: every implementation on the same DAGs, alternated, best of `repeats`."""
    label_size = num_tasks <= 1000
    count = (batch_size if num_tasks <= 200 else max(1, batch_size // 4)) if label_size else 1
    problems = [random_dag(num_tasks, num_procs, integer=True, seed=i) for i in range(count)]
    inputs = [heft_inputs(p) for p in problems]
    c_calls = [c_arguments(p) for p in problems]
    batch64 = jaxsched.pad_problems(problems, dtype=np.float64)
    references = [jaxsched.heft(p) for p in problems]
    expected = [r.makespan for r in references]
    capacity = max(_busiest_capacity(r, p) for r, p in zip(references, problems))
    same = (
        np.array_equal([heft_kernel(*x)[2].max() for x in inputs], expected)
        and np.array_equal(jaxsched.numba.heft_batch(batch64).finish.max(axis=1), expected)
        and np.array_equal([heft_c(*args) for args, _ in c_calls], expected)
    )
    candidates = {
        "numpy": lambda: [jaxsched.heft(p) for p in problems],
        "numba": lambda: [heft_kernel(*x) for x in inputs],
        "numba batch": lambda: jaxsched.numba.heft_batch(batch64),
        "C": lambda: [heft_c(*args) for args, _ in c_calls],
    }
    if num_tasks <= 20_000:
        batch32 = jax.device_put(jaxsched.pad_problems(problems))
        same &= np.array_equal(np.asarray(jaxsched.jax.heft_batch(batch32, capacity).finish).max(axis=1), expected)
        candidates["jax"] = lambda: jax.block_until_ready(jaxsched.jax.heft_batch(batch32, capacity))
    times = {name: float(t.min()) for name, t in alternated_times(candidates, repeats, warmup=0, clock=clock).items()}

    def cell(name):
        if name not in times:
            return "—"
        return f"{count / times[name]:,.0f}" if label_size else f"{times[name]:.4f}"

    unit = f"DAGs/s ({count})" if label_size else "s"
    return (
        f"| {num_tasks} x {num_procs} | {unit} | {cell('numpy')} | {cell('numba')} | {cell('numba batch')} "
        f"| {cell('jax')} | {cell('C')} | {times['numba'] / times['C']:.2f} "
        f"| {times['numpy'] / times['numba']:.0f}x | {same} |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="*", default=["100x16", "486x188", "10000x64", "84654x188"])
    parser.add_argument("--batch", type=int, default=256, help="DAGs per batch at the label sizes (<= 1000 tasks)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="cpu: process CPU time, the work done whatever else runs (threads add up)")
    args = parser.parse_args()
    try:
        sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes]
    except ValueError:
        sizes = []
    if not sizes or any(len(size) != 2 or min(size) < 1 for size in sizes):
        parser.error(f"--sizes takes TASKSxPROCESSORS with both at least 1 (like 100x16), not {' '.join(args.sizes)}")
    print(f"Machine: {machine_description(load=True)}, Python {platform.python_version()}, clock {args.clock}\n")
    print(HEADER)
    with tempfile.TemporaryDirectory() as directory:
        heft_c = build_c_baseline(directory)
        for num_tasks, num_procs in sizes:
            print(compare(num_tasks, num_procs, args.batch, args.repeats, heft_c, args.clock), flush=True)


if __name__ == "__main__":
    main()
