"""The thesis's evaluation (Stiller 2019, ch. 5), run for real on this machine plus a simulator study.

`run_study(config, workdir)`:
1. tunes the same mix of real jobs under every policy with the process runner on `local_machine()`
   (one core plays the device), keeping each finished policy's run in `workdir/runs/` (a rerun
   skips finished policies; another configuration is refused: `jaxsched.common.Workdir`);
2. re-measures each job's chosen best configuration alone, pinned to the device core (tuned
   quality and profiling error);
3. per policy: makespan, busy fraction and idle time per resource, per-stage slowdown against the
   sequential run (interference), the simulator replaying the run's own stage times and predicting
   it from the sequential run's (simulator error);
4. fits MockJob stage distributions to the sequential run's stages, and the simulator's interference
   to the uncoordinated run, and simulates 10 to 1,000 jobs on 1 to 8 machines under every policy;
5. writes results.json, results.md, gantt.png and simulation.png to `workdir`.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from experiments.autotune.configs import StudyConfig
from experiments.autotune.report import markdown, plots
from jaxsched.autotune import (
    CPU,
    DEVICE,
    POLICIES,
    STAGES,
    Machine,
    MockJob,
    ProcessRunner,
    Trace,
    TuningJob,
    Workload,
    check_trace,
    fit_stage_distributions,
    local_machine,
    make_policy,
    measure_alone,
    mock_jobs,
    pin_to_cores,
    simulate_policy,
)
from jaxsched.common import Workdir, write_json, write_text


def make_jobs(config: StudyConfig) -> list[TuningJob]:
    """The real job mix, identical for every policy (same seeds)."""
    return [
        TuningJob(
            Workload(kind, size),
            config.rounds,
            config.batch,
            repeats=config.repeats,
            min_repeat_s=config.min_repeat_s,
            clock=config.clock,
            fit_steps=config.fit_steps,
            seed=config.seed + j,
        )
        for j, (kind, size) in enumerate(config.workloads)
    ]


def _trace_json(trace: Trace) -> dict:
    return {
        "names": list(trace.names),
        **{
            f: getattr(trace, f).tolist()
            for f in ("job", "round", "stage", "machine", "kind", "amount", "start", "finish")
        },
    }


def _trace_from_json(data: dict) -> Trace:
    rows = zip(
        data["job"],
        data["round"],
        data["stage"],
        data["machine"],
        [(CPU, DEVICE)[k] for k in data["kind"]],
        data["amount"],
        data["start"],
        data["finish"],
    )
    return Trace.from_rows(data["names"], rows)


def tune_with_policy(config: StudyConfig, policy: str, machine: Machine) -> dict:
    """Runs the job mix under `policy`; the trace and each job's best configuration, as JSON."""
    runner = ProcessRunner(machine, make_policy(policy))
    for job in make_jobs(config):
        runner.submit(job)
    run = runner.run()
    check_trace(run.trace, [config.rounds] * len(config.workloads), [machine], exclusive=POLICIES[policy].exclusive)
    best = {
        name: {"workload": r.workload, "config": r.best_config, "seconds": r.best_seconds}
        for name, r in run.results.items()
    }
    return {"trace": _trace_json(run.trace), "best": best}


def _replay(trace: Trace, rounds: int) -> list[MockJob]:
    """MockJobs whose stage durations are the ones measured in `trace`."""
    jobs = []
    for j, name in enumerate(trace.names):
        durations = np.zeros((rounds, len(STAGES)))
        rows = trace.job == j
        durations[trace.round[rows], trace.stage[rows]] = trace.seconds[rows]
        jobs.append(MockJob(name, durations))
    return jobs


def measured_summary(config: StudyConfig, runs: dict[str, dict], alone: dict[tuple, float], machine: Machine) -> dict:
    """Per policy: makespan, utilisation, stage slowdown, tuned quality, profiling and simulator error."""
    sim_machine = Machine(machine.cpu_cores, machine.devices)
    traces = {p: _trace_from_json(run["trace"]) for p, run in runs.items()}
    reference = traces["sequential"]
    summary = {}
    for policy, trace in traces.items():
        best = runs[policy]["best"]
        quality = [alone[_key(b)] / alone[_key(runs["sequential"]["best"][name])] for name, b in best.items()]
        profiling = [abs(b["seconds"] - alone[_key(b)]) / alone[_key(b)] for b in best.values()]
        # replay: the simulator fed this run's own stage times must reproduce its schedule (exclusive
        # policies only: under `parallel` a stage's time already includes the sharing); prediction:
        # fed the sequential run's stage times (each stage alone), it predicts this run before it happens
        replayed = (
            simulate_policy(_replay(trace, config.rounds), [sim_machine], make_policy(policy)).makespan
            if POLICIES[policy].exclusive
            else None
        )
        predicted = simulate_policy(_replay(reference, config.rounds), [sim_machine], make_policy(policy)).makespan
        own, ref = trace.mean_seconds(), reference.mean_seconds()
        summary[policy] = {
            "makespan_s": trace.makespan,
            "speedup_vs_sequential": reference.makespan / trace.makespan,
            "cpu_busy": trace.busy_fraction(0, CPU),
            "device_busy": trace.busy_fraction(0, DEVICE),
            "cpu_idle_s": trace.makespan * (1 - trace.busy_fraction(0, CPU)),
            "device_idle_s": trace.makespan * (1 - trace.busy_fraction(0, DEVICE)),
            "stage_slowdown": {s: own[s] / ref[s] for s in STAGES},
            "tuned_quality_vs_sequential": float(np.mean(quality)),
            "profiling_error": float(np.mean(profiling)),
            # below 1: tuning measured the best faster than alone (the fastest of many noisy measurements)
            "tuned_over_alone": float(np.exp(np.mean([np.log(b["seconds"] / alone[_key(b)]) for b in best.values()]))),
            "replayed_makespan_s": replayed,
            "replay_error": None if replayed is None else abs(replayed - trace.makespan) / trace.makespan,
            "predicted_makespan_s": predicted,
            "prediction_error": abs(predicted - trace.makespan) / trace.makespan,
        }
    return summary


def _key(best: dict) -> tuple:
    return best["workload"], json.dumps(best["config"], sort_keys=True)


def measure_best_alone(config: StudyConfig, runs: dict[str, dict], machine: Machine) -> dict[tuple, float]:
    """Seconds of every distinct chosen configuration, measured alone on the device core.

    The measurements run in a fresh process pinned to the device core before JAX starts, as the
    tuning workers are: XLA sizes its thread pool by the cores a process may use when it starts, so
    a process pinned later would time-slice a pool sized for every core and measure slower.
    """
    keys = sorted({_key(b) for run in runs.values() for b in run["best"].values()})
    tasks = [
        (Workload(*_split(workload)), json.loads(config_json), config.alone_repeats, config.min_repeat_s, config.clock)
        for workload, config_json in keys
    ]
    context = multiprocessing.get_context("spawn")
    pin = {"initializer": pin_to_cores, "initargs": (machine.device_ids,)} if machine.device_ids else {}
    with context.Pool(1, **pin) as pool:
        seconds = list(
            tqdm(pool.imap(_measure_alone, tasks), total=len(tasks), desc="re-measuring best configurations alone")
        )
    return dict(zip(keys, seconds))


def _split(workload: str) -> tuple[str, int]:
    kind, size = workload.rsplit("-", 1)
    return kind, int(size)


def _measure_alone(task: tuple) -> float:
    return measure_alone(*task)


def fit_interference(config: StudyConfig, reference: Trace, parallel: Trace, machine: Machine) -> float:
    """The simulator's `interference` (slowdown beyond a fair share) at which the uncoordinated
    policy, fed the sequential run's stage times, best reproduces the measured `parallel` makespan
    (a grid from 0 to 3 in steps of 0.05)."""
    jobs, machines = _replay(reference, config.rounds), [Machine(machine.cpu_cores, machine.devices)]
    grid = np.round(np.arange(0.0, 3.0001, 0.05), 2)
    makespans = [simulate_policy(jobs, machines, make_policy("parallel"), float(i)).makespan for i in grid]
    return float(grid[int(np.argmin(np.abs(np.asarray(makespans) - parallel.makespan)))])


def simulation_study(config: StudyConfig, reference: Trace, machine: Machine, interference: float = 0.0) -> list[dict]:
    """MockJobs drawn from stage distributions fitted to `reference`, simulated under every policy
    (`parallel` with `interference`)."""
    dists = fit_stage_distributions(reference.stage, np.maximum(reference.seconds, 1e-6))
    rows = []
    grid = [(n, m, p) for n in config.sim_jobs for m in config.sim_machines for p in config.policies]
    for count, machines, policy in tqdm(grid, desc="simulating"):
        jobs = mock_jobs(count, config.rounds, dists, seed=config.sim_seed)
        start = time.perf_counter()
        machine_list = [Machine(machine.cpu_cores, machine.devices)] * machines
        trace = simulate_policy(jobs, machine_list, make_policy(policy), interference if policy == "parallel" else 0.0)
        seconds = time.perf_counter() - start
        rows.append(
            {
                "jobs": count,
                "machines": machines,
                "policy": policy,
                "makespan_s": trace.makespan,
                "device_busy": float(np.mean([trace.busy_fraction(m, DEVICE) for m in range(machines)])),
                "cpu_busy": float(np.mean([trace.busy_fraction(m, CPU) for m in range(machines)])),
                "simulator_seconds": seconds,
            }
        )
    return rows


def run_study(config: StudyConfig, workdir: str | Path) -> dict[str, Any]:
    """Runs the whole study (see the module docstring); returns what it writes to results.json. Raises
    `ConfigMismatch` when `workdir` holds results of another configuration."""
    work = Workdir(workdir, config)
    machine = local_machine()
    runs = {
        policy: work.stage(f"runs/{policy}.json", lambda policy=policy: tune_with_policy(config, policy, machine))
        for policy in tqdm(config.policies, desc="tuning under each policy")
    }
    alone = measure_best_alone(config, runs, machine)
    summary = measured_summary(config, runs, alone, machine)
    reference = _trace_from_json(runs["sequential"]["trace"])
    interference = (
        fit_interference(config, reference, _trace_from_json(runs["parallel"]["trace"]), machine)
        if "parallel" in runs
        else 0.0
    )
    simulation = simulation_study(config, reference, machine, interference)
    results = {
        "config": dataclasses.asdict(config),
        "machine": dataclasses.asdict(machine),
        "measured": summary,
        "best": {p: run["best"] for p, run in runs.items()},
        "alone_seconds": {f"{w} {c}": s for (w, c), s in alone.items()},
        "fitted_interference": interference,
        "simulation": simulation,
    }
    write_json(work / "results.json", results)
    write_text(work / "results.md", markdown(results))
    plots(results, {p: _trace_from_json(run["trace"]) for p, run in runs.items()}, work.path)
    return results
