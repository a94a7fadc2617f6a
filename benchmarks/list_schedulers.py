"""List-scheduler speed: each scheduler's compiled CPU form and batched JAX form against its NumPy reference in a
loop.

    python benchmarks/list_schedulers.py                       # 1,024 instances of 100 tasks, 4 processors
    python benchmarks/list_schedulers.py --instances 64 --sample 16 --names HEFT MinMin

Instances: Topcuoglu random DAGs with integer costs (exact in float32, so both forms must give the
same makespans: checked and printed). For each scheduler, in turns: the NumPy reference
(`jaxsched.schedule`) over the first `--sample` instances, scaled to all of them, the compiled loop
(`list_schedule_numba`, one instance at a time with its host planning; its schedules must equal the
reference's) in schedules per second, then the batched JAX form once compiled (`schedule_batch`: host
planning, padding and the vmapped scan, end to end) and its kernel alone (`list_schedule_batch` on ready
plans, and streams for the static selections or edges for the dynamic ones; gap insertion at its default
capacity). With `--repeats R` the four measurements alternate R times and the medians are printed (for
shared, noisy machines). `--devices N` splits the end-to-end batch across N devices (default all; the kernel
alone runs on one). Target: JAX end to end at least 20x the loop.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from jaxsched import Shape
from jaxsched.batch import pad_costs, pad_edges
from jaxsched.batch_graph import BatchGraph
from jaxsched.common import add_devices_option, batch_mesh, join_from_environment
from jaxsched.common.machine import machine_description
from jaxsched.compiled_listsched import list_schedule_numba
from jaxsched.generate import random_dag
from jaxsched.listsched import NAMES, preset, schedule
from jaxsched.listsched_jax import (
    default_capacity,
    list_schedule_batch,
    padded_makespan,
    plan_batch,
    schedule_batch,
    stream_batch,
)


def _seconds(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    return time.perf_counter() - start, out


def _reference_makespans(problems, name) -> list[float]:
    return [schedule(p, name).makespan for p in problems]


def _numba_makespans(problems, name) -> list[float]:
    return [list_schedule_numba(p, name).makespan for p in problems]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=1024)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--sample", type=int, default=128, help="instances the NumPy loop runs (then scaled)")
    parser.add_argument("--names", nargs="+", default=[n for n in NAMES if n != "GA"])
    parser.add_argument("--repeats", type=int, default=1, help="alternated rounds; medians are printed")
    add_devices_option(parser)
    args = parser.parse_args(argv)
    join_from_environment()
    if not 1 <= args.sample <= args.instances:
        parser.exit(2, f"--sample must lie in [1, --instances], got {args.sample}\n")
    if args.repeats < 1:
        parser.exit(2, f"--repeats must be >= 1, got {args.repeats}\n")
    try:
        mesh = batch_mesh(args.devices)
    except ValueError as error:
        parser.exit(2, f"{error}\n")
    problems = [random_dag(args.tasks, args.procs, integer=True, seed=s) for s in range(args.instances)]
    shape = Shape.of(problems)
    print(f"# {args.instances} instances, {args.tasks} tasks, {args.procs} processors; "
          f"{machine_description(load=True)}")
    print("| scheduler | NumPy loop (s, scaled) | numba (schedules/s) | numba speedup | JAX end to end (s) | "
          "JAX kernel (s) | JAX speedup | JAX kernel speedup |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.names:
        schedule_batch(problems, name, shape=shape, devices=mesh)  # compile
        _numba_makespans(problems[:1], name)  # compile, or load from the cache
        graph = BatchGraph.of(problems, shape.num_tasks, shape.num_procs)
        batch = pad_costs(problems, shape, graph=graph)
        config = preset(name) if name != "Duplex" else None
        if config is not None:
            plans = plan_batch(problems, config, shape, graph=graph)
            streams = stream_batch(graph, plans, config)
            edges = pad_edges(problems, shape, graph=graph) if config.dynamic else None
            capacity = default_capacity(shape) if config.insertion else None
            list_schedule_batch(batch, plans, config, capacity, streams, edges)
        rounds = []
        for _ in range(args.repeats):
            numpy_time, reference = _seconds(_reference_makespans, problems[: args.sample], name)
            numba_time, compiled = _seconds(_numba_makespans, problems, name)
            if compiled[: args.sample] != reference:
                raise SystemExit(f"{name}: numba and NumPy makespans differ")
            jax_time, out = _seconds(schedule_batch, problems, name, shape=shape, devices=mesh)
            got = np.asarray(padded_makespan(batch, out))[: args.sample]
            if not np.array_equal(got, np.array(reference, dtype=got.dtype)):
                raise SystemExit(f"{name}: JAX and NumPy makespans differ")
            kernel_time = float("nan")
            if config is not None:
                kernel_time, _ = _seconds(list_schedule_batch, batch, plans, config, capacity, streams, edges)
            rounds.append((numpy_time * args.instances / args.sample, numba_time, jax_time, kernel_time))
        numpy_time, numba_time, jax_time, kernel_time = np.median(np.array(rounds), axis=0)
        print(
            f"| {name} | {numpy_time:.2f} | {args.instances / numba_time:.0f} | {numpy_time / numba_time:.0f}x | "
            f"{jax_time:.2f} | {kernel_time:.3f} | {numpy_time / jax_time:.0f}x | {numpy_time / kernel_time:.0f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
