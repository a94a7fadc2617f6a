"""List-scheduler speed: each scheduler's compiled CPU form and batched JAX form against its NumPy reference in a
loop, and the batched form's host time per instance.

    python benchmarks/list_schedulers.py                       # 1,024 instances of 100 tasks, 4 processors
    python benchmarks/list_schedulers.py --instances 64 --sample 16 --names HEFT MinMin
    python benchmarks/list_schedulers.py --instances 8192 --jax-only   # the batched form alone (GPU row)

Instances: Topcuoglu random DAGs with integer costs (exact in float32, so both forms must give the same makespans:
checked and printed). For each scheduler, in turns: the NumPy reference (`jaxsched.schedule`) over the first
`--sample` instances, scaled to all of them, the compiled loop (`list_schedule_numba`, one instance at a time with
its host planning; its schedules must equal the reference's) in schedules per second, then the batched JAX form once
compiled (`schedule_batch`: host planning, padding, the transfer and the vmapped scan, end to end) and its kernel
alone (`list_schedule_batch` on ready plans, and streams for the static selections or edges for the dynamic ones,
placed on the device beforehand: the transfer counts as host time; gap insertion at its default capacity; Duplex:
its two halves). Host time per instance is end to end minus kernel, over the instances, in microseconds; the same
difference in the process's CPU time (every thread: the host's planning threads and XLA's) is printed beside it,
steadier on a shared machine. With `--jax-only` also the difference in the calling thread's CPU time (the host's
work but the other planning threads' parts: its critical path on free cores), and wall and calling thread with the
planning in one thread (`schedule_batch(threads=1)`: all the host's work in the calling thread). With `--repeats R`
the measurements alternate R times and the medians are printed (for shared, noisy machines). `--devices N` splits
the end-to-end batch across N devices (default all; the kernel alone runs on one). Targets: JAX end to end at least
20x the loop; host time at most 10 us per instance (HEFT); on a GPU, HEFT end to end within 3x of its kernel at
8,192 instances.

`end_to_end_times(names, instances, tasks, procs)` measures the batched form alone and returns the figures
(for `benchmarks.gpu`).
"""

from __future__ import annotations

import argparse
import time
from typing import Sequence

import jax
import numpy as np

from jaxsched import SCHEDULER_NAMES, BatchGraph, Shape, preset, random_dag, schedule
from jaxsched.common import add_devices_option, batch_mesh, join_from_environment, machine_description
from jaxsched.jax import (
    default_capacity,
    list_schedule_batch,
    pad_costs,
    pad_edges,
    padded_makespan,
    plan_batch,
    schedule_batch,
    stream_batch,
)
from jaxsched.numba import list_schedule as list_schedule_numba

BATCHED = tuple(n for n in SCHEDULER_NAMES if n != "GA")


def _seconds(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    return time.perf_counter() - start, out


def _cpu_and_wall(fn, *args) -> tuple[float, float, float, object]:
    """(wall seconds, CPU seconds of the calling thread, CPU seconds of the process, output) of one call of
    `fn(*args)`: on a shared machine CPU time leaves out the waits for a core. The calling thread runs the host's
    work but the planning threads' parts (XLA's kernels run in threads of their own): its CPU time is the host
    part's critical path on free cores."""
    thread, cpu = time.thread_time(), time.process_time()
    wall, out = _seconds(fn, *args)
    return wall, time.thread_time() - thread, time.process_time() - cpu, out


def _reference_makespans(problems, name) -> list[float]:
    return [schedule(p, name).makespan for p in problems]


def _numba_makespans(problems, name) -> list[float]:
    return [list_schedule_numba(p, name).makespan for p in problems]


def _instances(instances: int, tasks: int, procs: int) -> list:
    return [random_dag(tasks, procs, integer=True, seed=s) for s in range(instances)]


class _Batched:
    """One scheduler's batched form on one batch: the end-to-end call and its kernels on inputs built once
    and placed on the device, both compiled on construction."""

    def __init__(self, problems, name: str, shape: Shape, mesh):
        self.problems, self.name, self.shape, self.mesh = problems, name, shape, mesh
        graph = BatchGraph.of(problems, shape.num_tasks, shape.num_procs)
        self.costs = jax.device_put(pad_costs(problems, shape, graph=graph))
        self.kernels = []
        for half in ("MinMin", "MaxMin") if name == "Duplex" else (name,):
            config = preset(half)
            plans = plan_batch(problems, config, shape, graph=graph)
            streams = stream_batch(graph, plans, config)
            edges = pad_edges(problems, shape, graph=graph) if config.dynamic else None
            capacity = default_capacity(shape) if config.insertion else None
            plans, streams, edges = jax.device_put((plans, streams, edges))
            self.kernels.append((plans, config, capacity, streams, edges))
        self.end_to_end()
        self.kernel()

    def end_to_end(self, threads: int | None = None):
        return schedule_batch(self.problems, self.name, shape=self.shape, devices=self.mesh, threads=threads)

    def kernel(self):
        return [list_schedule_batch(self.costs, plans, *rest) for plans, *rest in self.kernels]

    def check(self, out, reference: Sequence[float]) -> None:
        """Raises SystemExit unless the first makespans of `out` equal `reference`."""
        got = np.asarray(padded_makespan(self.costs, out))[: len(reference)]
        if not np.array_equal(got, np.array(reference, dtype=got.dtype)):
            raise SystemExit(f"{self.name}: JAX and NumPy makespans differ")


def _figures(instances: int, end_to_end_s: float, kernel_s: float) -> dict[str, float]:
    return {
        "end_to_end_s": end_to_end_s,
        "kernel_s": kernel_s,
        "host_us_per_instance": (end_to_end_s - kernel_s) / instances * 1e6,
    }


def end_to_end_times(
    names: Sequence[str] = BATCHED, instances: int = 1024, tasks: int = 100, procs: int = 4, *, repeats: int = 1,
    devices=None, check: int = 8, cpu_time: bool = False, one_thread: bool = False,
) -> dict[str, dict[str, float]]:
    """{name: {end_to_end_s, kernel_s, host_us_per_instance}} of each batched scheduler in `names` on `instances`
    Topcuoglu DAGs of `tasks` tasks x `procs` processors (integer costs): medians of `repeats` alternated rounds,
    once compiled; the first `check` schedules' makespans are checked against the NumPy reference (SystemExit
    if they differ). `cpu_time` adds the same difference in CPU time, steadier than wall time on a shared
    machine: host_cpu_us_per_instance in the process's, host_thread_us_per_instance in the calling thread's;
    `one_thread` adds host_us_one_thread and host_thread_us_one_thread: wall and calling thread with the planning
    in one thread (all the host's work in the calling thread), measured in the same rounds. ValueError for an
    unknown name or a size below 1."""
    unknown = [n for n in names if n not in BATCHED]
    if unknown:
        raise ValueError(f"unknown batched scheduler {unknown[0]!r}; known: {', '.join(BATCHED)}")
    for what, value in (("instances", instances), ("tasks", tasks), ("procs", procs), ("repeats", repeats)):
        if value < 1:
            raise ValueError(f"{what} must be at least 1, got {value}")
    problems = _instances(instances, tasks, procs)
    shape, mesh = Shape.of(problems), batch_mesh(devices)
    figures = {}
    for name in names:
        batched = _Batched(problems, name, shape, mesh)
        batched.check(batched.end_to_end(), _reference_makespans(problems[:check], name))
        rounds = []
        for _ in range(repeats):
            alone = _cpu_and_wall(batched.end_to_end, 1)[:2] if one_thread else (0.0, 0.0)
            rounds.append((*_cpu_and_wall(batched.end_to_end)[:3], *_cpu_and_wall(batched.kernel)[:3], *alone))
        wall, thread, cpu, kernel_wall, kernel_thread, kernel_cpu, alone, alone_thread = np.median(rounds, axis=0)
        figures[name] = _figures(instances, wall, kernel_wall)
        per_instance = {
            "host_cpu_us_per_instance": cpu - kernel_cpu, "host_thread_us_per_instance": thread - kernel_thread,
            "host_us_one_thread": alone - kernel_wall, "host_thread_us_one_thread": alone_thread - kernel_thread,
        }
        wanted = [*(list(per_instance)[:2] if cpu_time else []), *(list(per_instance)[2:] if one_thread else [])]
        figures[name].update({key: per_instance[key] / instances * 1e6 for key in wanted})
    return figures


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=1024)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--sample", type=int, default=128, help="instances the NumPy loop runs (then scaled)")
    parser.add_argument("--names", nargs="+", default=list(BATCHED), choices=BATCHED, metavar="NAME")
    parser.add_argument("--repeats", type=int, default=1, help="alternated rounds; medians are printed")
    parser.add_argument("--jax-only", action="store_true", help="the batched form alone: no NumPy or numba loop")
    add_devices_option(parser)
    args = parser.parse_args(argv)
    join_from_environment()
    for what in ("instances", "tasks", "procs"):
        if getattr(args, what) < 1:
            parser.exit(2, f"--{what} must be at least 1, got {getattr(args, what)}\n")
    if not args.jax_only and not 1 <= args.sample <= args.instances:
        parser.exit(2, f"--sample must lie in [1, --instances], got {args.sample}\n")
    if args.repeats < 1:
        parser.exit(2, f"--repeats must be >= 1, got {args.repeats}\n")
    try:
        mesh = batch_mesh(args.devices)
    except ValueError as error:
        parser.exit(2, f"{error}\n")
    print(f"# {args.instances} instances, {args.tasks} tasks, {args.procs} processors; "
          f"{machine_description(load=True)}")
    if args.jax_only:
        figures = end_to_end_times(args.names, args.instances, args.tasks, args.procs, repeats=args.repeats,
                                   devices=mesh, cpu_time=True, one_thread=True)
        print("| scheduler | JAX end to end (s) | JAX kernel (s) | end to end / kernel | host us per instance: wall "
              "| calling thread's CPU | process CPU | planning in one thread: wall | calling thread's CPU |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, f in figures.items():
            print(f"| {name} | {f['end_to_end_s']:.3f} | {f['kernel_s']:.3f} | "
                  f"{f['end_to_end_s'] / f['kernel_s']:.1f}x | {f['host_us_per_instance']:.1f} | "
                  f"{f['host_thread_us_per_instance']:.1f} | {f['host_cpu_us_per_instance']:.1f} | "
                  f"{f['host_us_one_thread']:.1f} | {f['host_thread_us_one_thread']:.1f} |")
        return
    problems = _instances(args.instances, args.tasks, args.procs)
    shape = Shape.of(problems)
    print("| scheduler | NumPy loop (s, scaled) | numba (schedules/s) | numba speedup | JAX end to end (s) | "
          "JAX kernel (s) | host us per instance | host CPU us per instance | JAX speedup | JAX kernel speedup |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.names:
        batched = _Batched(problems, name, shape, mesh)
        _numba_makespans(problems[:1], name)  # compile, or load from the cache
        rounds = []
        for _ in range(args.repeats):
            numpy_time, reference = _seconds(_reference_makespans, problems[: args.sample], name)
            numba_time, compiled = _seconds(_numba_makespans, problems, name)
            if compiled[: args.sample] != reference:
                raise SystemExit(f"{name}: numba and NumPy makespans differ")
            jax_time, _, jax_cpu, out = _cpu_and_wall(batched.end_to_end)
            batched.check(out, reference)
            kernel_time, _, kernel_cpu, _ = _cpu_and_wall(batched.kernel)
            host_cpu = (jax_cpu - kernel_cpu) / args.instances * 1e6
            rounds.append((numpy_time * args.instances / args.sample, numba_time, jax_time, kernel_time, host_cpu))
        numpy_time, numba_time, jax_time, kernel_time, host_cpu = np.median(np.array(rounds), axis=0)
        host = _figures(args.instances, jax_time, kernel_time)["host_us_per_instance"]
        print(
            f"| {name} | {numpy_time:.2f} | {args.instances / numba_time:.0f} | {numpy_time / numba_time:.0f}x | "
            f"{jax_time:.3f} | {kernel_time:.3f} | {host:.1f} | {host_cpu:.1f} | {numpy_time / jax_time:.0f}x | "
            f"{numpy_time / kernel_time:.0f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
