"""Schedule a few DAGs of different kinds with HEFT and the GA; validate, tabulate, draw Gantt charts.

    python -m experiments.schedule_demo                       # small default, about a minute on CPU
    python -m experiments.schedule_demo --config full         # 200 tasks on 16 processors, the JAX GA
    python -m experiments.schedule_demo --config test         # seconds: the test suite's configuration
    python -m experiments.schedule_demo --tasks 200 --procs 16 --ga-backend jax --generations 200

Writes results/schedule_demo/{config.json, results.json, results.md, gantt.png} (the PNG needs the `plots`
extra) and each DAG's schedules under dags/ as soon as they are done: a rerun of the same configuration reuses
them, another configuration is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

import jaxsched
from jaxsched import generate
from jaxsched.common import (
    ConfigMismatch,
    Devices,
    Workdir,
    add_devices_option,
    checked_devices,
    named_config,
    write_json,
    write_text,
)

METHODS = ("HEFT", "GA")


GA_OBJECTIVE_NOTE = (
    "The GA minimises the average waiting time (its fitness, the DeepSched paper's Eq. 1), not the makespan that "
    "HEFT shortens: it can lose to HEFT on makespan while it wins on average waiting (compare the two columns).")
GA_BACKENDS = ("numpy", "numba", "jax")  # the reference, the compiled CPU path, the vmapped device path


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    """The DAGs' size, the machine and the GA's budget."""

    tasks: int = 40  # about this many tasks per DAG
    procs: int = 4
    population: int = 40
    generations: int = 40
    ga_backend: str = "numpy"
    seed: int = 0

    def __post_init__(self):
        for name, least in {"tasks": 4, "procs": 1, "population": 2, "generations": 0, "seed": 0}.items():
            if getattr(self, name) < least:
                raise ValueError(f"--{name} must be at least {least}, got {getattr(self, name)}")
        if self.ga_backend not in GA_BACKENDS:
            raise ValueError(f"--ga-backend must be one of {', '.join(GA_BACKENDS)}, got {self.ga_backend!r}")


CONFIGS = {
    "test": DemoConfig(tasks=12, procs=2, population=4, generations=2),
    "default": DemoConfig(),
    "full": DemoConfig(tasks=200, procs=16, population=100, generations=200, ga_backend="jax"),
}


def workloads(num_tasks: int, num_procs: int, seed: int) -> dict[str, jaxsched.Problem]:
    """One DAG of each kind, of about `num_tasks` tasks."""
    matrix = max(2, round((2 * num_tasks) ** 0.5))
    points = 1 << max(1, (num_tasks // 4).bit_length() - 1)
    problems = {
        "topcuoglu random": generate.random_dag(num_tasks, num_procs, seed=seed),
        "gaussian elimination": generate.gaussian_elimination(matrix, num_procs, seed=seed),
        "fft": generate.fft(points, num_procs, seed=seed),
        "fork-join": generate.fork_join(max(2, num_tasks // 6), 5, num_procs, seed=seed),
        "cloudsim": generate.cloudsim(num_tasks, num_procs, seed=seed),
    }
    try:
        from jaxsched import wfcommons_problem

        problems["wfcommons montage"] = wfcommons_problem("montage", max(num_tasks, 110), num_procs, seed=seed)
    except ImportError:
        print("wfcommons not installed (extra `workflows`): skipping the workflow DAG")
    return problems


def schedule_dag(problem: jaxsched.Problem, name: str, config: DemoConfig, devices: Devices = None) -> dict:
    """HEFT's and the GA's schedules of one DAG, validated, with their metrics and seconds (JSON-ready); the JAX GA
    splits each population across `devices` (default all)."""
    rows, schedules = [], {}
    for method in METHODS:
        t0 = time.perf_counter()
        if method == "HEFT":
            schedule = jaxsched.heft(problem)
        else:
            schedule = jaxsched.ga(problem, population=config.population, generations=config.generations,
                                   seed=config.seed, backend=config.ga_backend,
                                   devices=devices if config.ga_backend == "jax" else None)
        seconds = time.perf_counter() - t0
        jaxsched.validate(problem, schedule)
        schedules[method] = {field: getattr(schedule, field).tolist() for field in ("proc", "start", "finish")}
        rows.append({"dag": name, "tasks": problem.num_tasks, "edges": problem.num_edges, "method": method,
                     **jaxsched.summary(problem, schedule), "seconds": seconds})
    return {"rows": rows, "schedules": schedules}


def run(config: DemoConfig, workdir: str | Path, devices: Devices = None) -> list[dict]:
    """Schedule every DAG (each one a stage of the workdir), write the table, JSON and Gantt charts; the rows.
    Raises `ConfigMismatch` when `workdir` holds results of another configuration."""
    work = Workdir(workdir, config)
    problems = workloads(config.tasks, config.procs, config.seed)
    done = {name: work.stage(f"dags/{name.replace(' ', '_')}.json",
                             lambda name=name: schedule_dag(problems[name], name, config, devices))
            for name in tqdm(problems, desc="scheduling")}
    rows = [row for dag in done.values() for row in dag["rows"]]
    write_json(work / "results.json", rows)
    table = markdown(rows) + "\n\n" + GA_OBJECTIVE_NOTE
    write_text(work / "results.md", table + "\n")
    print(table)
    schedules = {(name, method): (problems[name], jaxsched.Schedule(*(np.asarray(dag["schedules"][method][field])
                                                                     for field in ("proc", "start", "finish"))))
                 for name, dag in done.items() for method in METHODS}
    _plot(schedules, work / "gantt.png")
    return rows


def markdown(rows: list[dict]) -> str:
    """The results table: per DAG and method, makespan, SLR, average turnaround and waiting, seconds."""
    lines = [
        "| DAG | tasks | method | makespan | SLR | avg turnaround | avg waiting | time (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dag']} | {r['tasks']} | {r['method']} | {r['makespan']:.1f} | {r['slr']:.3f} | "
            f"{r['avg_turnaround']:.1f} | {r['avg_waiting']:.1f} | {r['seconds']:.3f} |"
        )
    return "\n".join(lines)


def _plot(schedules, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (extra `plots`): no Gantt chart written")
        return
    from jaxsched import gantt

    names = sorted({name for name, _ in schedules})
    fig, axes = plt.subplots(len(names), 2, figsize=(16, 2.2 * len(names)), squeeze=False)
    for row, name in enumerate(names):
        for col, method in enumerate(("HEFT", "GA")):
            problem, schedule = schedules[name, method]
            gantt(problem, schedule, ax=axes[row, col], title=f"{name}: {method}, makespan {schedule.makespan:.1f}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"Gantt charts written to {path}")


def main(argv=None) -> list[dict]:
    """Parse the flags (each overrides one field of the chosen configuration) and run the demo; the rows."""
    parser = argparse.ArgumentParser(prog="python -m experiments.schedule_demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="default", help=f"one of {', '.join(CONFIGS)}")
    parser.add_argument("--tasks", type=int, help="about this many tasks per DAG")
    parser.add_argument("--procs", type=int)
    parser.add_argument("--population", type=int)
    parser.add_argument("--generations", type=int)
    parser.add_argument("--ga-backend", choices=GA_BACKENDS)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--workdir", default="results/schedule_demo")
    add_devices_option(parser)
    args = parser.parse_args(argv)
    checked_devices(parser, args.devices)
    flags = {f.name: getattr(args, f.name) for f in dataclasses.fields(DemoConfig)}
    changes = {name: value for name, value in flags.items() if value is not None}
    try:  # checked before any work: one line and exit code 2
        config = dataclasses.replace(named_config(CONFIGS, args.config), **changes)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    try:
        return run(config, args.workdir, args.devices)
    except ConfigMismatch as error:
        parser.exit(2, f"error: {error}\n")

if __name__ == "__main__":
    main()
