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

from jaxsched.autotune.jobs import STAGES, MockJob, fit_stage_distributions, mock_jobs
from jaxsched.autotune.policies import POLICIES, make_policy
from jaxsched.autotune.resources import CPU, DEVICE, Machine, local_machine, pin_to_cores
from jaxsched.autotune.runner import ProcessRunner
from jaxsched.autotune.simulator import simulate_policy
from jaxsched.autotune.trace import Trace, check_trace, gantt
from jaxsched.autotune.tuning import TuningJob, check_protocol, measure_alone
from jaxsched.autotune.workloads import Workload
from jaxsched.common.arguments import integer
from jaxsched.common.workdir import Workdir, write_json, write_text


@dataclasses.dataclass(frozen=True)
class StudyConfig:
    """The job mix, the tuning knobs of every job and the simulator study's grid."""

    workloads: tuple[tuple[str, int], ...] = (("matmul", 256), ("scan", 1024), ("xla_options", 256), ("matmul", 128))
    rounds: int = 4
    batch: int = 4
    repeats: int = 5
    min_repeat_s: float = 0.02  # as precise as 0.1 s at a fifth of the cost (benchmarks/autotune_profiling.py)
    clock: str = "cpu"
    fit_steps: int = 2000
    seed: int = 0
    policies: tuple[str, ...] = ("sequential", "parallel", "load_aware", "predictive")
    alone_repeats: int = 7
    sim_jobs: tuple[int, ...] = (10, 100, 1000)
    sim_machines: tuple[int, ...] = (1, 2, 4, 8)
    sim_seed: int = 0

    def __post_init__(self):
        unknown = [p for p in self.policies if p not in POLICIES]
        if unknown or "sequential" not in self.policies:
            raise ValueError(f"policies must be known and include 'sequential' (the reference), got {self.policies}")
        check_protocol(self.repeats, self.min_repeat_s, self.clock, "StudyConfig")
        for name in ("rounds", "batch", "fit_steps", "alone_repeats"):
            integer(f"StudyConfig.{name}", getattr(self, name), 1)
        for name in ("sim_jobs", "sim_machines"):
            for value in getattr(self, name):
                integer(f"StudyConfig.{name}", value, 1)
        for kind, size in self.workloads:
            Workload(kind, size)  # raises on a bad workload
        if len({Workload(k, s).name for k, s in self.workloads}) != len(self.workloads):
            raise ValueError(f"workloads must differ, got {self.workloads}")


CONFIGS = {
    "default": StudyConfig(),
    "test": StudyConfig(
        workloads=(("matmul", 32), ("xla_options", 16)),
        rounds=1,
        batch=2,
        repeats=2,
        min_repeat_s=0.0,
        fit_steps=50,
        policies=("sequential", "load_aware"),
        alone_repeats=2,
        sim_jobs=(10,),
        sim_machines=(1, 2),
    ),
    "full": StudyConfig(
        workloads=(
            ("matmul", 512),
            ("scan", 4096),
            ("xla_options", 512),
            ("matmul", 256),
            ("scan", 2048),
            ("xla_options", 256),
            ("matmul", 128),
            ("scan", 1024),
        ),
        rounds=8,
        batch=8,
        min_repeat_s=0.1,  # the dearest protocol: 0.02 s was chosen on the CPU clock, not on an accelerator
        clock="wall",  # an accelerator's time is not the host process's CPU time
    ),
}


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
    _plots(results, {p: _trace_from_json(run["trace"]) for p, run in runs.items()}, work.path)
    return results


def markdown(results: dict) -> str:
    """The measured table and the simulation table."""
    lines = [
        "| policy | makespan s | vs sequential | CPU busy | CPU idle s | device busy | device idle s "
        "| slowdown propose/build/profile/update | tuned quality vs seq. | profiling error (tuned / alone) "
        "| replayed s (error) "
        "| predicted s (error) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for policy, r in results["measured"].items():
        slow = "/".join(f"{r['stage_slowdown'][s]:.2f}" for s in STAGES)
        lines.append(
            f"| {policy} | {r['makespan_s']:.1f} | {r['speedup_vs_sequential']:.2f}x | {r['cpu_busy']:.0%} | "
            f"{r['cpu_idle_s']:.1f} | {r['device_busy']:.0%} | {r['device_idle_s']:.1f} | {slow} | "
            f"{r['tuned_quality_vs_sequential']:.3f} | {r['profiling_error']:.1%} ({r['tuned_over_alone']:.2f}) | "
            f"{_seconds_and_error(r['replayed_makespan_s'], r['replay_error'])} | "
            f"{_seconds_and_error(r['predicted_makespan_s'], r['prediction_error'])} |"
        )
    lines += [
        "",
        f"Simulator study (`parallel` with fitted interference {results['fitted_interference']:.2f}):",
        "",
        "| jobs | machines | policy | makespan s | device busy | CPU busy | simulator s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["simulation"]:
        lines.append(
            f"| {r['jobs']} | {r['machines']} | {r['policy']} | {r['makespan_s']:.1f} | {r['device_busy']:.0%} | "
            f"{r['cpu_busy']:.0%} | {r['simulator_seconds']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def _seconds_and_error(seconds: float | None, error: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} ({error:.1%})"


def _plots(results: dict, traces: dict[str, Trace], workdir: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (extra `plots`): no PNGs")
        return
    machine = Machine(results["machine"]["cpu_cores"], results["machine"]["devices"])
    fig, axes = plt.subplots(len(traces), 1, figsize=(12, 1.6 * len(traces) + 1), sharex=True, squeeze=False)
    for ax, (policy, trace) in zip(axes[:, 0], traces.items()):
        gantt(trace, [machine], ax=ax, title=f"{policy}: makespan {trace.makespan:.1f} s")
    fig.tight_layout()
    fig.savefig(workdir / "gantt.png", dpi=120)
    plt.close(fig)
    rows = results["simulation"]
    counts = sorted({r["machines"] for r in rows})
    makespan = {(r["jobs"], r["machines"], r["policy"]): r["makespan_s"] for r in rows}
    fig, axes = plt.subplots(2, len(counts), figsize=(3.6 * len(counts), 5.5), sharex=True, squeeze=False)
    styles = ["-", "--", "-.", ":"]
    for column, machines in enumerate(counts):
        for i, policy in enumerate(dict.fromkeys(r["policy"] for r in rows)):
            mine = [r for r in rows if r["machines"] == machines and r["policy"] == policy]
            jobs = [r["jobs"] for r in mine]
            speedup = [makespan[r["jobs"], machines, "sequential"] / r["makespan_s"] for r in mine]
            style = {"marker": "o", "linestyle": styles[i % len(styles)], "label": policy}
            axes[0, column].plot(jobs, speedup, **style)
            axes[1, column].plot(jobs, [r["device_busy"] for r in mine], **style)
        axes[0, column].set(xscale="log", title=f"{machines} machine(s)")
        axes[1, column].set(xscale="log", xlabel="jobs", ylim=(0, 1.05))
    axes[0, 0].set_ylabel("makespan: sequential / policy")
    axes[1, 0].set_ylabel("device busy fraction")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(workdir / "simulation.png", dpi=120)
    plt.close(fig)
