"""The DeepSched experiment's driver: `train_and_evaluate(config, workdir)`.

Trains one network per variant (`config.eval.variants`, plus the feedback variant without its EFT
prior as an ablation), adds the untrained EFT rule as a baseline, and evaluates every network with
both decoders against HEFT (and the paper's GA) on seen (training), unseen (test) and
out-of-distribution instances, then times scheduling one instance per size, like the paper's
Table I. Everything lands in `<workdir>/results.json`; `report.markdown` and `report.plots` turn it
into tables and figures.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from experiments.deepsched.configs import DeepSchedConfig, EvalConfig
from jaxsched import average_turnaround, ga, heft, validate
from jaxsched.common import Devices, Workdir, best_time, machine_description, write_json
from jaxsched.deepsched import DECODERS, NeuralScheduler, Split, fit, load_or_build, training_problem

SPLIT_SOURCES = {"seen": "train", "unseen": "test", "ood": "ood"}


def evaluation_sets(splits: dict[str, Split], count: int) -> dict[str, list[tuple[str, int, int]]]:
    """Per evaluation split, (generator, size, index into the source split) of `count` instances per
    (generator, size)."""
    chosen = {}
    for name, source in SPLIT_SOURCES.items():
        groups = splits[source].groups().items()
        chosen[name] = [(kind, size, index) for (kind, size), indices in groups for index in indices[:count]]
    return chosen


def evaluate(
    schedulers: dict[str, NeuralScheduler], splits: dict[str, Split], evaluation: EvalConfig, progress: bool = True
) -> list[dict]:
    """One record per evaluated instance: HEFT, the GA (`jaxsched.ga`, JAX, fitness Eq. 1, every
    instance padded to its split's shape so that it compiles once) and every (network, decoder)."""
    records = []
    for name, entries in evaluation_sets(splits, evaluation.count).items():
        split = splits[SPLIT_SOURCES[name]]
        shape = split.data.features.shape
        for position, (kind, size, index) in enumerate(tqdm(entries, desc=f"evaluating {name}", disable=not progress)):
            problem = split.problems[index]
            reference = heft(problem)
            record = {
                "split": name,
                "kind": kind,
                "size": size,
                "tasks": problem.num_tasks,
                "heft_makespan": reference.makespan,
                "heft_turnaround": average_turnaround(problem, reference),
            }
            if evaluation.ga:
                found = ga(
                    problem,
                    population=evaluation.ga_population,
                    generations=evaluation.ga_generations,
                    seed=1 + position,
                    backend="jax",
                    shape=shape,
                )
                record["ga_makespan"] = found.makespan
                record["ga_turnaround"] = average_turnaround(problem, found)
            for variant, scheduler in schedulers.items():
                for decoder in DECODERS:
                    schedule = scheduler.schedule(problem, decoder=decoder, samples=evaluation.samples, shape=shape)
                    validate(problem, schedule)
                    record[f"{variant}/{decoder}"] = {
                        "makespan": schedule.makespan,
                        "turnaround": average_turnaround(problem, schedule),
                        "agreement": float(np.mean(schedule.proc == reference.proc)),
                    }
            records.append(record)
    return records


def group(records: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    """`records` grouped by their values of `keys`."""
    groups: dict[tuple, list[dict]] = {}
    for record in records:
        groups.setdefault(tuple(record[k] for k in keys), []).append(record)
    return groups


def summarise(records: list[dict], method: str) -> dict:
    """Ratio statistics of `method` ("variant/decoder") over `records` (and the GA's mean ratio when
    the records have it)."""
    ratio = np.array([r[method]["makespan"] / r["heft_makespan"] for r in records])
    summary = {
        "n": len(records),
        "ratio_mean": float(ratio.mean()),
        "ratio_p95": float(np.percentile(ratio, 95)),
        "turnaround_ratio": float(np.mean([r[method]["turnaround"] / r["heft_turnaround"] for r in records])),
        "agreement": float(np.mean([r[method]["agreement"] for r in records])),
        "beats_heft": float(np.mean(ratio < 1 - 1e-9)),
    }
    if "ga_makespan" in records[0]:
        summary["ga_ratio"] = float(np.mean([r["ga_makespan"] / r["heft_makespan"] for r in records]))
    return summary


def variant_summary(records: list[dict], method: str) -> dict:
    """`method` on the unseen instances: pooled summary and mean ratio per size."""
    unseen = [r for r in records if r["split"] == "unseen"]
    by_size = {
        str(size): float(np.mean([r[method]["makespan"] / r["heft_makespan"] for r in chosen]))
        for (size,), chosen in group(unseen, "size").items()
    }
    return {"summary": summarise(unseen, method), "by_size": by_size}


def timing(schedulers: dict[str, NeuralScheduler], config: DeepSchedConfig, progress: bool = True) -> list[dict]:
    """Seconds to schedule one instance of the training generator at each `config.eval.timing_sizes`
    with `timing_procs` processors: NumPy HEFT (best of 3), the GA (JAX, population 100, 10
    generations, after compiling, up to `timing_ga_max` tasks) and each trained variant end to end
    (features, forward, decode; best of 3 after compiling)."""
    evaluation = config.eval
    data_config = dataclasses.replace(config.data, num_procs=evaluation.timing_procs)
    rows = []
    for size in tqdm(evaluation.timing_sizes, desc="timing", disable=not progress):
        problem = training_problem(data_config, size, np.random.default_rng(size))
        row = {"tasks": size, "procs": evaluation.timing_procs, "heft": best_time(functools.partial(heft, problem), 3)}
        if evaluation.ga and size <= evaluation.timing_ga_max:
            run = functools.partial(ga, problem, population=100, generations=10, seed=0, backend="jax")
            row["ga"] = best_time(run, repeats=1, warmup=1)  # the warm-up compiles every capacity it needs
        for variant, scheduler in schedulers.items():
            if variant not in evaluation.variants:
                continue  # ablations cost the same as their variant
            model = scheduler.config.model
            if problem.num_tasks <= model.max_tasks and problem.num_procs <= model.max_procs:
                row[variant] = best_time(functools.partial(scheduler.schedule, problem), repeats=3, warmup=1)
        rows.append(row)
    return rows


def train_and_evaluate(
    config: DeepSchedConfig, workdir: str | Path, data_dir: str | Path | None = None, progress: bool = True,
    devices: Devices = None,
) -> dict:
    """Trains (or resumes, or reuses) every network of `config.eval` under `<workdir>/checkpoints/`,
    evaluates and times them (module docstring; each a stage of the workdir: a rerun reuses them) and writes
    `<workdir>/results.json`; returns the results. The labelled dataset is cached under `data_dir` (default
    `<workdir>/data`). HEFT labelling and training split their batches across `devices` (default all). Raises
    `ConfigMismatch` when `workdir` holds results of another configuration."""
    evaluation = config.eval
    work = Workdir(workdir, config)
    workdir = work.path
    splits = load_or_build(config.data, workdir / "data" if data_dir is None else data_dir, progress=progress,
                           devices=devices)
    runs = {variant: {"variant": variant} for variant in evaluation.variants}
    if "feedback" in evaluation.variants and evaluation.ablation:
        runs["feedback-noprior"] = {"variant": "feedback", "eft_prior": 0.0}
    schedulers = {}
    for name, model_fields in runs.items():
        checkpoint_dir = workdir / "checkpoints" / name
        run_config = config.replace(model=model_fields)
        fit(run_config, splits["train"].data, splits["val"].data, checkpoint_dir, progress=progress, devices=devices)
        schedulers[name] = NeuralScheduler.load(checkpoint_dir)
    if "feedback" in evaluation.variants:
        schedulers["eft-rule"] = NeuralScheduler.eft_rule(config, like=schedulers["feedback"].params)
    main = evaluation.main if evaluation.main in schedulers else evaluation.variants[0]
    records = work.stage("records.json", lambda: evaluate(schedulers, splits, evaluation, progress))
    results = {
        "config": json.loads(config.to_json()),
        "machine": machine_description(),
        "main": main,
        "samples": evaluation.samples,
        "variant_names": list(schedulers),
        "by_split": [
            {
                "split": split,
                "size": size,
                "greedy": summarise(chosen, f"{main}/greedy"),
                "sampling": summarise(chosen, f"{main}/sampling"),
            }
            for (split, size), chosen in group(records, "split", "size").items()
        ],
        "variants": [
            {"variant": v, "decoder": d, **variant_summary(records, f"{v}/{d}")} for v in schedulers for d in DECODERS
        ],
        "timing": work.stage("timing.json", lambda: timing(schedulers, config, progress))
        if evaluation.timing_sizes else [],
        "records": records,
    }
    write_json(workdir / "results.json", results)
    return results
