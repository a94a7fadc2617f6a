"""Schedule a few DAGs of different kinds with HEFT and the GA; validate, tabulate, draw Gantt charts.

    python -m experiments.schedule_demo                       # small default, about a minute on CPU
    python -m experiments.schedule_demo --tasks 200 --procs 16 --ga-backend jax --generations 200

Writes results/schedule_demo/{results.json, results.md, gantt.png} (the PNG needs the `plots` extra).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

from tqdm.auto import tqdm

import jaxsched
from jaxsched import generate


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
        from jaxsched.workflows import wfcommons_problem

        problems["wfcommons montage"] = wfcommons_problem("montage", max(num_tasks, 110), num_procs, seed=seed)
    except ImportError:
        print("wfcommons not installed (extra `workflows`): skipping the workflow DAG")
    return problems


def run(args) -> list[dict]:
    rows = []
    problems = workloads(args.tasks, args.procs, args.seed)
    schedules = {}
    for name, problem in tqdm(problems.items(), desc="scheduling"):
        for method in ("HEFT", "GA"):
            t0 = time.perf_counter()
            if method == "HEFT":
                schedule = jaxsched.heft(problem)
            else:
                schedule = jaxsched.ga(
                    problem, population=args.population, generations=args.generations,
                    seed=args.seed, backend=args.ga_backend,
                )
            seconds = time.perf_counter() - t0
            jaxsched.validate(problem, schedule)
            schedules[name, method] = (problem, schedule)
            rows.append({
                "dag": name, "tasks": problem.num_tasks, "edges": problem.num_edges, "method": method,
                **jaxsched.summary(problem, schedule), "seconds": seconds,
            })
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(rows, indent=2))
    table = _markdown(rows)
    (out / "results.md").write_text(table + "\n")
    print(table)
    _plot(schedules, out / "gantt.png")
    return rows


def _markdown(rows: list[dict]) -> str:
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


def _plot(schedules, path: pathlib.Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (extra `plots`): no Gantt chart written")
        return
    from jaxsched.plot import gantt

    names = sorted({name for name, _ in schedules})
    fig, axes = plt.subplots(len(names), 2, figsize=(16, 2.2 * len(names)), squeeze=False)
    for row, name in enumerate(names):
        for col, method in enumerate(("HEFT", "GA")):
            problem, schedule = schedules[name, method]
            gantt(problem, schedule, ax=axes[row, col], title=f"{name}: {method}, makespan {schedule.makespan:.1f}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"Gantt charts written to {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=40, help="about this many tasks per DAG")
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--population", type=int, default=40)
    parser.add_argument("--generations", type=int, default=40)
    parser.add_argument("--ga-backend", choices=("numpy", "jax"), default="numpy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results/schedule_demo")
    args = parser.parse_args(argv)
    limits = {"tasks": 4, "procs": 1, "population": 2, "generations": 0, "seed": 0}
    for name, least in limits.items():  # checked before any work: one line and exit code 2
        if getattr(args, name) < least:
            print(f"error: --{name} must be at least {least}, got {getattr(args, name)}", file=sys.stderr)
            raise SystemExit(2)
    return run(args)


if __name__ == "__main__":
    main()
