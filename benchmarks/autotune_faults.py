"""What fault isolation costs a fault-free run of the autotuning scheduler (target: under 2% of the makespan).

    python -m benchmarks.autotune_faults            # a few minutes on 2 cores; prints one table
    python -m benchmarks.autotune_faults --reps 3   # more alternations, tighter numbers

One core plays the device (`local_machine()`). Two mixes, each run alternately under `load_aware` in
two configurations: `plain` (no record database, no retries: the isolation that is always on, i.e.
each stage's failure caught and each round's state sent back by its worker) and `isolated` (a record
database that saves every finished round's state for resume, and one retry per job). The MockJob mix
sleeps through its stages, so its makespan is also predicted by the simulator, which has no overhead
at all; the tuning mix tunes three small real workloads. Per row: the median makespan, its ratio to
`plain`, and the direct cost of the per-round bookkeeping (pickling the state and saving it, timed on
the states the run produced) as a share of the makespan: makespans on a loaded machine vary by more
than 2%, the bookkeeping's own time does not.
"""

from __future__ import annotations

import argparse
import os
import pickle
import tempfile
import time
from pathlib import Path

import numpy as np

from jaxsched.autotune import (
    MockJob,
    ProcessRunner,
    TuningJob,
    TuningRecords,
    Workload,
    local_machine,
    make_policy,
    simulate_policy,
)

TUNING = (("matmul", 64), ("scan", 256), ("xla_options", 64))


def mock_mix() -> list[MockJob]:
    """Four jobs of four rounds, stage times 0.05-0.25 s (fixed seed)."""
    rng = np.random.default_rng(0)
    return [MockJob(f"mock{j}", rng.uniform(0.05, 0.25, size=(4, 4))) for j in range(4)]


def tuning_mix() -> list[TuningJob]:
    """Three small real tuning jobs of two rounds of two candidates."""
    options = {"batch": 2, "repeats": 2, "min_repeat_s": 0.01, "fit_steps": 300}
    return [TuningJob(Workload(kind, size), rounds=2, **options) for kind, size in TUNING]


def run_once(make_jobs, isolated: bool, folder: Path) -> tuple[float, float]:
    """(makespan, seconds of per-round bookkeeping) of one fault-free run."""
    states = []
    with TuningRecords(folder / f"records-{time.monotonic_ns()}.sqlite") as records:
        runner = ProcessRunner(local_machine(), make_policy("load_aware"), records if isolated else None, int(isolated))
        for job in make_jobs():
            runner.submit(job)
        run = runner.run(on_round=lambda job, round_, before, after: states.append((job, round_, after)))
        if run.failures:
            raise RuntimeError(run.summary)
    with TuningRecords(folder / f"scratch-{time.monotonic_ns()}.sqlite") as scratch:
        begin = time.perf_counter()
        for job, round_, state in states:
            pickle.loads(pickle.dumps(state))  # the worker's send and the scheduler's receive
            if isolated:
                scratch.save_progress(job.name, job.definition(), round_ + 1, state)
        bookkeeping = time.perf_counter() - begin
    return run.trace.makespan, bookkeeping


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2, help="alternations of plain and isolated per mix")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error(f"--reps must be positive, got {args.reps}")
    machine = local_machine()
    simulated = simulate_policy(mock_mix(), [machine], make_policy("load_aware")).makespan
    print(f"simulator, mock mix: makespan {simulated:.3f} s (no overhead by construction)\n")
    print("| mix | configuration | runs | median makespan (s) | ratio to plain | bookkeeping / makespan |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for name, make_jobs in (("mock", mock_mix), ("tuning", tuning_mix)):
            measured = {False: [], True: []}
            for _ in range(args.reps):
                for isolated in (False, True):
                    measured[isolated].append(run_once(make_jobs, isolated, Path(folder)))
            plain = np.median([m for m, _ in measured[False]])
            for isolated in (False, True):
                makespans = [m for m, _ in measured[isolated]]
                share = np.median([b / m for m, b in measured[isolated]])
                print(
                    f"| {name} | {'isolated' if isolated else 'plain'} | {len(makespans)} | {np.median(makespans):.3f} "
                    f"| {np.median(makespans) / plain:.3f} | {100 * share:.3f}% |"
                )
    print(f"\nnproc {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
