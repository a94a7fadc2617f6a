"""Where the autotuner's profiling error comes from, and which profiling protocol to use.

    python -m benchmarks.autotune_profiling            # about 3 minutes on 2 cores; prints three tables
    python -m benchmarks.autotune_profiling --turns 3  # more turns, tighter numbers

One core plays the device (`local_machine()`), as in `python -m experiments.autotune`.

1. Threads: a real `ProcessRunner` run of a one-round tuning job records, in its profile stage, the
   cores every thread of its worker may use (XLA's thread pool included).
2. Clocks and conditions: four configurations (ones a study of the default job mix chose) are profiled by two
   worker processes in turns: a tuning-style worker (started pinned to the CPU core, pinned to the
   device core before profiling, executables deserialized) and an alone-style one (pinned to the
   device core before JAX starts, as the re-measurement alone is). On the wall clock and on the
   process CPU clock, with the CPU core idle, with the CPU core busy (a process spinning on it: SMT
   siblings or a shared clock frequency would slow the device core), and with the device core
   shared by a process outside the scheduler (what any unpinned process on the machine does).
   Per cell: seconds relative to the quiet CPU-clock median, tuning-style / alone-style, and the
   disagreement between independent measurements of one configuration (median |a / b - 1| over
   pairs of workers and turns): the profiling error to expect between tuning and re-measuring alone.
3. Protocols: `repeats` x `min_repeat_s` on the CPU clock, quiet: profiling seconds per candidate and
   the disagreement, to choose the cheapest protocol that measures as well as the dearest.
4. Selection: n identical copies of each configuration profiled in one batch; the fastest copy (what a
   tuner reports for its best) against the other worker's median: the winner's curse among near-equal
   candidates, which a re-measurement alone does not share.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import sys
import time

import jax
import numpy as np
from jax.experimental import serialize_executable
from tqdm.auto import tqdm

from jaxsched.autotune import (
    PROFILE,
    ProcessRunner,
    TuningJob,
    Workload,
    local_machine,
    make_policy,
    pin_to_cores,
    profile_calls,
    thread_affinities,
)

CONFIGS = (
    (("matmul", 128), {"tm": 128, "tk": 128}),
    (("scan", 1024), {"chunk": 1, "unroll": 1}),
    (("matmul", 256), {"tm": 128, "tk": 256}),
    (("xla_options", 256), {"opt_level": 1, "vector_width": 256, "fast_math": 0}),
)
OLD_PROTOCOL = (5, 0.1)  # repeats, min_repeat_s: the dearest protocol, the reference
PROTOCOLS = ((5, 0.1), (5, 0.02), (3, 0.02), (3, 0.005), (1, 0.005))
CHOSEN_PROTOCOL = (5, 0.02)  # the study's default
SELECTION_COPIES = (1, 4, 16)


class ThreadProbeJob(TuningJob):
    """A tuning job that records the cores of every thread of its worker at the end of its profile stage."""

    def run_stage(self, stage, round_, state):
        state = super().run_stage(stage, round_, state)
        if stage == PROFILE:
            self.threads_in_profile = thread_affinities()
        return state

    def result(self, state):
        return self.threads_in_profile


def thread_table(machine) -> list[str]:
    """Markdown rows: threads of the profiling worker and how many may run only on the device core."""
    runner = ProcessRunner(machine, make_policy("load_aware"))
    runner.submit(ThreadProbeJob(Workload("matmul", 64), rounds=1, batch=2, repeats=2, min_repeat_s=0.01, fit_steps=50))
    threads = next(iter(runner.run().results.values()))
    device = frozenset(machine.device_ids)
    elsewhere = sorted({tuple(sorted(cores)) for cores in threads.values() if cores != device})
    return [
        "| threads of the profiling worker | pinned to the device core only | other core sets |",
        "|---|---|---|",
        f"| {len(threads)} | {sum(cores == device for cores in threads.values())} | {elsewhere or '-'} |",
    ]


def _worker(conn, first_cores, device_cores) -> None:
    """A profiling process: pinned to `first_cores` before JAX starts, builds the configurations, is
    pinned to `device_cores`, then profiles them with the protocol it is sent, until told to stop."""
    pin_to_cores(first_cores)
    calls = {}
    for (kind, size), config in CONFIGS:
        workload = Workload(kind, size)
        payload = serialize_executable.serialize(workload.build(config))
        executable = serialize_executable.deserialize_and_load(*payload, execution_devices=jax.devices()[:1])
        args = jax.block_until_ready(workload.inputs())
        calls[workload.name] = lambda executable=executable, args=args: jax.block_until_ready(executable(*args))
    pin_to_cores(device_cores)
    conn.send("ready")
    while (message := conn.recv()) is not None:
        *protocol, copies = message
        batch = {(name, copy): call for name, call in calls.items() for copy in range(copies)}
        start = time.perf_counter()
        seconds = profile_calls(batch, *protocol)
        conn.send((seconds, (time.perf_counter() - start) / len(batch)))


class Spinner:
    """A process spinning on `cores` while the `with` block runs (None: no spinner)."""

    def __init__(self, context, cores):
        self.process = None if cores is None else context.Process(target=_spin_on, args=(cores,), daemon=True)

    def __enter__(self):
        if self.process is not None:
            self.process.start()
            time.sleep(0.2)

    def __exit__(self, *exc):
        if self.process is not None:
            self.process.terminate()
            self.process.join()


def _spin_on(cores) -> None:
    os.sched_setaffinity(0, set(cores))
    while True:
        pass


def measure(workers, protocol, clock, turns, copies=1) -> tuple[np.ndarray, float]:
    """seconds[turn, worker, copy, config] of `turns` turns of every worker profiling `copies` copies of each
    configuration in one batch, and profiling seconds per candidate."""
    seconds, cost = [], []
    for turn in range(turns):
        row = []
        for conn in workers if turn % 2 == 0 else workers[::-1]:
            conn.send((*protocol, clock, copies))
            times, per_candidate = conn.recv()
            row.append([[times[Workload(*w).name, copy] for w, _ in CONFIGS] for copy in range(copies)])
            cost.append(per_candidate)
        seconds.append(row if turn % 2 == 0 else row[::-1])
    return np.asarray(seconds), float(np.mean(cost))


def disagreement(seconds: np.ndarray) -> float:
    """Median over configurations and pairs of independent measurements (other worker or other turn) of |a/b - 1|."""
    flat = seconds.reshape(-1, seconds.shape[-1])  # [measurements, configs]
    ratios = [np.abs(np.log(flat[i] / flat[j])) for i, j in itertools.combinations(range(len(flat)), 2)]
    return float(np.expm1(np.median(ratios)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2, help="turns of each worker per cell (>= 1)")
    args = parser.parse_args(argv)
    if args.turns < 1:
        print(f"error: --turns must be >= 1, got {args.turns}", file=sys.stderr)
        return 2
    if len(os.sched_getaffinity(0)) < 2:
        print("error: needs at least two usable cores (one plays the device)", file=sys.stderr)
        return 2
    machine = local_machine()
    print(f"load average at start: {os.getloadavg()}")
    lines = ["Threads (a profile stage in a real ProcessRunner worker):", "", *thread_table(machine), ""]

    context = mp.get_context("spawn")
    conns, processes = [], []
    for first in (machine.cpu_ids, machine.device_ids):  # tuning-style, alone-style
        parent, child = context.Pipe()
        process = context.Process(target=_worker, args=(child, first, machine.device_ids), daemon=True)
        process.start()
        conns.append(parent)
        processes.append(process)
    try:
        for conn in conns:
            assert conn.recv() == "ready"
        conditions = {"quiet": None, "CPU core busy": machine.cpu_ids, "device core shared": machine.device_ids}
        cells = list(itertools.product(conditions, ("wall", "cpu")))
        results = {}
        for condition, clock in tqdm(cells, desc="clocks and conditions"):
            with Spinner(context, conditions[condition]):
                results[condition, clock] = measure(conns, OLD_PROTOCOL, clock, args.turns)
        reference = np.median(results["quiet", "cpu"][0], axis=(0, 1, 2))  # [configs]
        lines += [
            f"Clocks and conditions (protocol: {OLD_PROTOCOL[0]} repeats of >= {OLD_PROTOCOL[1]} s, {args.turns} "
            "turns of 2 workers):",
            "",
            "| condition | clock | seconds vs quiet CPU clock | tuning-style / alone-style | disagreement "
            "| profiling s per candidate |",
            "|---|---|---|---|---|---|",
        ]
        for (condition, clock), (seconds, cost) in results.items():
            level = np.exp(np.mean(np.log(np.median(seconds, axis=(0, 1, 2)) / reference)))
            style = np.exp(np.mean(np.log(np.median(seconds[:, 0], (0, 1)) / np.median(seconds[:, 1], (0, 1)))))
            lines.append(
                f"| {condition} | {clock} | {level:.2f}x | {style:.3f} | {disagreement(seconds):.1%} | {cost:.2f} |"
            )
        protocol_rows = []
        for protocol in tqdm(PROTOCOLS, desc="protocols"):
            seconds, cost = measure(conns, protocol, "cpu", args.turns)
            level = np.exp(np.mean(np.log(np.median(seconds, axis=(0, 1, 2)) / reference)))
            protocol_rows.append(
                f"| {protocol[0]} | {protocol[1]} | {cost:.3f} | {level:.3f}x | {disagreement(seconds):.1%} |"
            )
        selection_rows = []
        for copies in tqdm(SELECTION_COPIES, desc="selection"):
            seconds, _ = measure(conns, CHOSEN_PROTOCOL, "cpu", 1, copies)  # [1, workers, copies, configs]
            for worker in range(2):
                picked = seconds[0, worker].min(0) / np.median(seconds[0, 1 - worker], 0)
                selection_rows.append((copies, float(np.exp(np.mean(np.log(picked))))))
        lines += [
            "",
            "Protocols (CPU clock, quiet):",
            "",
            "| repeats | min_repeat_s | profiling s per candidate | seconds vs reference | disagreement |",
            "|---|---|---|---|---|",
            *protocol_rows,
            "",
            f"Selection (CPU clock, {CHOSEN_PROTOCOL[0]} repeats of >= {CHOSEN_PROTOCOL[1]} s): the fastest of n "
            "identical candidates profiled in one batch, relative to the median of the other worker's measurements "
            "of the same candidates (a tuner reports the fastest measurement, so its best is biased low):",
            "",
            "| identical candidates | fastest / independent |",
            "|---|---|",
            *(
                f"| {copies} | {np.exp(np.mean(np.log([r for c, r in selection_rows if c == copies]))):.3f} |"
                for copies in SELECTION_COPIES
            ),
        ]
    finally:
        for conn in conns:
            conn.send(None)
        for process in processes:
            process.join(timeout=10)
    print("\n".join(lines))
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
