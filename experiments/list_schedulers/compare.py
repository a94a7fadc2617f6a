"""Every scheduler on every workload family: makespan ratio to the best per instance, and runtime.

`workload_families` draws instances of each family (Topcuoglu random DAGs, Gaussian elimination,
FFT, fork-join, CloudSim-style, random out-trees and in-trees, independent chains, and WfCommons
recipes when that extra is installed);
`compare` runs the named schedulers (`jaxsched.SCHEDULER_NAMES`) on them through the NumPy reference,
appending one record per (family, instance, scheduler) to a JSON-lines file so that a killed run
resumes where it stopped; `summarise` turns records into the mean ratio to the best makespan per
family and scheduler, and the mean runtime per scheduler.
"""

from __future__ import annotations

import json
import pathlib
import time
from typing import Iterable

import numpy as np

from experiments.list_schedulers.configs import ComparisonConfig
from jaxsched import Problem, generate, schedule, validate
from jaxsched.common import write_text


def workload_families(config: ComparisonConfig) -> dict[str, list[Problem]]:
    """`config.instances` instances of about `config.num_tasks` tasks per family."""
    tasks, procs = config.num_tasks, config.num_procs
    matrix = max(2, round((2 * tasks) ** 0.5))
    points = 1 << max(1, (tasks // 4).bit_length() - 1)
    chains = max(2, tasks // 10)  # of about 10 tasks each
    makers = {
        "topcuoglu random": lambda seed: generate.random_dag(tasks, procs, seed=seed),
        "gaussian elimination": lambda seed: generate.gaussian_elimination(matrix, procs, seed=seed),
        "fft": lambda seed: generate.fft(points, procs, seed=seed),
        "fork-join": lambda seed: generate.fork_join(max(2, tasks // 6), 5, procs, seed=seed),
        "cloudsim": lambda seed: generate.cloudsim(tasks, procs, seed=seed),
        "out-tree": lambda seed: generate.out_tree(tasks, procs, branching=None, seed=seed),
        "in-tree": lambda seed: generate.in_tree(tasks, procs, branching=None, seed=seed),
        "chains": lambda seed: generate.chains(chains, tasks // chains, procs, seed=seed),
    }
    try:
        from jaxsched import wfcommons_problem

        makers["wfcommons montage"] = lambda seed: wfcommons_problem("montage", max(tasks, 110), procs, seed=seed)
    except ImportError:
        pass
    seeds = range(config.seed, config.seed + config.instances)
    return {family: [make(seed) for seed in seeds] for family, make in makers.items()}


def _run(problem: Problem, name: str, config: ComparisonConfig):
    options = {}
    if name == "GA":
        options = dict(population=config.ga_population, generations=config.ga_generations, seed=config.seed)
    start = time.perf_counter()
    result = schedule(problem, name, **options)
    seconds = time.perf_counter() - start
    validate(problem, result)
    return result.makespan, seconds


def compare(config: ComparisonConfig, records_path: pathlib.Path, progress: Iterable | None = None) -> list[dict]:
    """Runs every scheduler on every instance, appending records to `records_path` (JSON lines) and
    skipping those already there (a line torn by a kill is dropped and its record rerun); returns all records."""
    done = {}
    if records_path.exists():
        text = records_path.read_text()
        if not text.endswith("\n"):  # a run killed while writing a record: drop the torn line, rerun that record
            text = text[: text.rfind("\n") + 1]
            write_text(records_path, text)
        for line in text.splitlines():
            record = json.loads(line)
            done[(record["family"], record["instance"], record["scheduler"])] = record
    records = []
    with records_path.open("a") as out:
        for family, problems in workload_families(config).items():
            for index, problem in enumerate(problems):
                for name in config.names:
                    key = (family, index, name)
                    if key not in done:
                        makespan, seconds = _run(problem, name, config)
                        done[key] = dict(
                            family=family, instance=index, scheduler=name, makespan=makespan, seconds=seconds
                        )
                        out.write(json.dumps(done[key]) + "\n")
                        out.flush()
                    records.append(done[key])
                if progress is not None:
                    progress.update(1)
    return records


def summarise(records: list[dict], names: tuple[str, ...]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(families, mean ratio to the best makespan [F, S], mean seconds per schedule [S])."""
    families = sorted({r["family"] for r in records})
    best = {}
    for r in records:
        key = (r["family"], r["instance"])
        best[key] = min(best.get(key, np.inf), r["makespan"])
    ratio_sum, count = np.zeros((len(families), len(names))), np.zeros((len(families), len(names)))
    seconds = np.zeros(len(names))
    for r in records:
        f, s = families.index(r["family"]), names.index(r["scheduler"])
        reference = best[(r["family"], r["instance"])]
        ratio_sum[f, s] += r["makespan"] / reference if reference > 0 else 1.0
        count[f, s] += 1
        seconds[s] += r["seconds"]
    return families, ratio_sum / np.maximum(count, 1), seconds / np.maximum(count.sum(axis=0), 1)
