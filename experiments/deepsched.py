"""DeepSched end to end: HEFT-labelled data, one network per variant, evaluation like the paper.

    python -m experiments.deepsched                   # tiny CPU default (a few minutes)
    python -m experiments.deepsched --config full     # the GPU configuration (188 processors)

Writes `<workdir>/` (default results/deepsched): results.json, results.md (the tables printed at
the end), PNG plots (with matplotlib), and checkpoints/<variant>/ (orbax; a rerun resumes or reuses
them). The labelled dataset is cached under `--data-dir`.

Tables: per split (seen = training instances, unseen = test instances, ood = application graphs)
and size: makespan ratio to HEFT (mean, p95) of the main variant's greedy and sampling decoders,
average turnaround relative to HEFT (the paper's Fig. 4 metric), processor agreement with HEFT,
the GA's ratio (paper fitness, Eq. 1), and the share of instances where the network beats HEFT.
Then every variant on unseen instances, and a timing table like the paper's Table I.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import platform
import time
from pathlib import Path
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

import jaxsched
from jaxsched.batch import pad_problem
from jaxsched.deepsched import DeepSchedNet, NeuralScheduler, configs, fit, load_or_build, problem_features
from jaxsched.deepsched.configs import VARIANTS
from jaxsched.deepsched.data import Split, training_problem
from jaxsched.deepsched.decode import DECODERS
from jaxsched.deepsched.features import bucket_shape
from jaxsched.deepsched.train import UNOPTIMISED
from jaxsched.metrics import average_turnaround

SPLIT_SOURCES = {"seen": "train", "unseen": "test", "ood": "ood"}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=("tiny", "full"), default="tiny")
    parser.add_argument("--workdir", default="results/deepsched")
    parser.add_argument("--data-dir", default="results/deepsched/data")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--main", choices=VARIANTS, default="feedback", help="variant of the main table")
    parser.add_argument(
        "--no-ablation", action="store_true", help="skip the feedback variant trained without its EFT prior"
    )
    parser.add_argument("--epochs", type=int, help="override the config's epochs")
    parser.add_argument("--eval-count", type=int, default=8, help="instances per split, generator and size")
    parser.add_argument("--samples", type=int, default=32, help="assignments drawn by the sampling decoder")
    parser.add_argument("--ga-population", type=int, default=50)
    parser.add_argument("--ga-generations", type=int, default=50)
    parser.add_argument("--no-ga", action="store_true")
    parser.add_argument("--timing-sizes", type=int, nargs="*", default=[100, 486, 1000, 10000])
    parser.add_argument("--timing-procs", type=int, default=188)
    parser.add_argument("--timing-ga-max", type=int, default=1000, help="largest size the GA is timed at")
    return parser.parse_args(argv)


def padded_shape(split: Split) -> tuple[int, int, int, int]:
    """(T, P, E, K) of a split's stored features: every problem of the split fits it."""
    features = split.data.features
    return features.comp.shape[1], features.comp.shape[2], features.edge_src.shape[1], features.pred.shape[2]


def evaluation_sets(splits: dict[str, Split], count: int) -> dict[str, list[tuple[str, int, int]]]:
    """Per evaluation split, (generator, size, index into the source split) of `count` instances per
    (generator, size)."""
    chosen = {}
    for name, source in SPLIT_SOURCES.items():
        chosen[name] = [
            (kind, size, index)
            for (kind, size), indices in splits[source].groups().items()
            for index in indices[:count]
        ]
    return chosen


def run_ga(
    problems: list[jaxsched.Problem], shape, population: int, generations: int, seed: int
) -> list[jaxsched.Schedule]:
    """The paper's GA (jaxsched.ga, fitness Eq. 1) on each problem, all padded to one shape so that
    the JAX GA compiles once; the best chromosome is re-simulated in float64 by `simulate`."""
    from jaxsched.ga import GAConfig, evolve_padded

    config = GAConfig(population=population, generations=generations)
    num_tasks, num_procs, num_edges, num_preds = shape
    schedules = []
    for index, problem in enumerate(tqdm(problems, desc="GA", leave=False)):
        padded = pad_problem(problem, num_tasks, num_procs, num_preds, num_edges)
        state, _ = evolve_padded(padded, jax.random.key(seed + index), config)
        best = int(np.argmin(np.asarray(state.fitness)))
        proc = np.asarray(state.proc[best][: problem.num_tasks], np.int64)
        priority = np.asarray(state.priority[best][: problem.num_tasks], np.float64)
        schedules.append(jaxsched.simulate(problem, proc, priority))
    return schedules


def evaluate(
    schedulers: dict[str, NeuralScheduler],
    splits: dict[str, Split],
    chosen: dict[str, list[tuple[str, int, int]]],
    args: argparse.Namespace,
) -> list[dict]:
    """One record per evaluated instance: HEFT, GA and every (variant, decoder)."""
    records = []
    for name, entries in chosen.items():
        split = splits[SPLIT_SOURCES[name]]
        shape = padded_shape(split)
        problems = [split.problems[index] for _, _, index in entries]
        ga = None if args.no_ga else run_ga(problems, shape, args.ga_population, args.ga_generations, seed=1)
        for position, ((kind, size, _), problem) in enumerate(zip(tqdm(entries, desc=f"evaluating {name}"), problems)):
            heft = jaxsched.heft(problem)
            record = {
                "split": name,
                "kind": kind,
                "size": size,
                "tasks": problem.num_tasks,
                "heft_makespan": heft.makespan,
                "heft_turnaround": average_turnaround(problem, heft),
            }
            if ga is not None:
                record["ga_makespan"] = ga[position].makespan
                record["ga_turnaround"] = average_turnaround(problem, ga[position])
            for variant, scheduler in schedulers.items():
                for decoder in DECODERS:
                    schedule = scheduler.schedule(problem, decoder=decoder, samples=args.samples, shape=shape)
                    jaxsched.validate(problem, schedule)
                    record[f"{variant}/{decoder}"] = {
                        "makespan": schedule.makespan,
                        "turnaround": average_turnaround(problem, schedule),
                        "agreement": float(np.mean(schedule.proc == heft.proc)),
                    }
            records.append(record)
    return records


def summarise(records: list[dict], method: str) -> dict:
    """Ratio statistics of `method` ("variant/decoder") over `records`."""
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


def group(records: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    for record in records:
        groups.setdefault(tuple(record[k] for k in keys), []).append(record)
    return groups


def eft_rule(config) -> NeuralScheduler:
    """The feedback variant's prior alone (every learned weight zero): HEFT's earliest-finish rule on
    the partial schedule, the baseline that training has to improve on."""
    model_config = dataclasses.replace(config.model, variant="feedback")
    model = DeepSchedNet(model_config)
    problem = training_problem(config.data, 8, np.random.default_rng(0))
    features = problem_features(problem, *bucket_shape(problem))
    params = jax.tree.map(
        jnp.zeros_like, jax.jit(model.init, compiler_options=UNOPTIMISED)(jax.random.key(0), features)
    )
    params["params"]["eft_sharpness"] = jnp.asarray(model_config.eft_prior, jnp.float32)
    return NeuralScheduler(config.replace(model={"variant": "feedback"}), params)


def timing(schedulers: dict[str, NeuralScheduler], config, args: argparse.Namespace) -> list[dict]:
    """Seconds to schedule one instance of the training generator at each size with
    `args.timing_procs` processors: NumPy HEFT, the GA (JAX, 10 generations, up to
    `timing_ga_max` tasks) and each network end to end (features, forward, decode) after compiling."""
    rows = []
    for size in tqdm(args.timing_sizes, desc="timing"):
        data_config = dataclasses.replace(config.data, num_procs=args.timing_procs)
        problem = training_problem(data_config, size, np.random.default_rng(size))
        row = {"tasks": size, "procs": args.timing_procs, "heft": _best_time(functools.partial(jaxsched.heft, problem))}
        if not args.no_ga and size <= args.timing_ga_max:
            row["ga"] = _ga_time(problem)
        for variant, scheduler in schedulers.items():
            if variant not in args.variants:
                continue  # ablations cost the same as their variant
            if (
                problem.num_tasks <= scheduler.config.model.max_tasks
                and problem.num_procs <= scheduler.config.model.max_procs
            ):
                run = functools.partial(scheduler.schedule, problem)
                run()  # compile
                row[variant] = _best_time(run)
        rows.append(row)
    return rows


def _best_time(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _ga_time(problem: jaxsched.Problem) -> float:
    """Seconds for `jaxsched.ga` (JAX backend, population 100, 10 generations) after compilation; its
    busy-slot capacity is sized from the population, as a user's call would be."""
    run = functools.partial(jaxsched.ga, problem, population=100, generations=10, backend="jax")
    run(seed=0)  # compile every capacity the run needs
    return _best_time(functools.partial(run, seed=0), repeats=1)


def markdown(results: dict) -> str:
    main = results["main"]
    lines = [f"### Main variant `{main}`: greedy and sampling ({results['samples']} samples) decoders", ""]
    has_ga = any("ga_ratio" in row["greedy"] for row in results["by_split"])
    columns = ["split", "size", "n", "ratio greedy (mean / p95)", "ratio sampling (mean / p95)"]
    columns += ["turnaround vs HEFT", "agreement", "beats HEFT (greedy / sampling)"] + ["GA ratio"] * has_ga
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in results["by_split"]:
        greedy, sampling = row["greedy"], row["sampling"]
        cells = [
            row["split"],
            str(row["size"]),
            str(greedy["n"]),
            f"{greedy['ratio_mean']:.3f} / {greedy['ratio_p95']:.3f}",
            f"{sampling['ratio_mean']:.3f} / {sampling['ratio_p95']:.3f}",
            f"{greedy['turnaround_ratio']:.3f}",
            f"{greedy['agreement']:.2f}",
            f"{greedy['beats_heft']:.2f} / {sampling['beats_heft']:.2f}",
        ] + [f"{greedy['ga_ratio']:.3f}"] * has_ga
        lines.append("| " + " | ".join(cells) + " |")
    sizes = sorted(results["variants"][0]["by_size"], key=int)
    lines += ["", "### Every variant on unseen instances: makespan / HEFT makespan", ""]
    columns = ["variant", "decoder"] + [f"mean, {size} tasks" for size in sizes]
    columns += ["mean", "p95", "agreement", "beats HEFT"]
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in results["variants"]:
        s = row["summary"]
        cells = [row["variant"], row["decoder"]] + [f"{row['by_size'][size]:.3f}" for size in sizes]
        cells += [f"{s['ratio_mean']:.3f}", f"{s['ratio_p95']:.3f}", f"{s['agreement']:.2f}", f"{s['beats_heft']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    if results["timing"]:
        variants = [v for v in results["variant_names"] if any(v in row for row in results["timing"])]
        lines += ["", f"### Seconds to schedule one instance ({results['machine']})", ""]
        columns = ["tasks x procs", "HEFT (NumPy)", "GA (pop 100, 10 generations)"]
        columns += [f"network `{v}` (speed-up)" for v in variants]
        lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        for row in results["timing"]:
            cells = [
                f"{row['tasks']} x {row['procs']}",
                f"{row['heft']:.4f}",
                f"{row['ga']:.3f}" if "ga" in row else "-",
            ]
            cells += [f"{row[v]:.4f} ({row['heft'] / row[v]:.1f}x)" if v in row else "-" for v in variants]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "Network: features, forward and decode to a valid schedule, after compilation (best of 3)."]
    return "\n".join(lines) + "\n"


def plots(results: dict, records: list[dict], workdir: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: skipping plots (pip install 'jax-research-systems[plots]')")
        return
    main = results["main"]
    figure, axes = plt.subplots(1, 3, figsize=(15, 4))
    for axis, split in zip(axes, SPLIT_SOURCES):
        chosen = [r for r in records if r["split"] == split]
        sizes = sorted({r["size"] for r in chosen})
        series = {"HEFT": "heft_turnaround", f"{main} greedy": f"{main}/greedy", f"{main} sampling": f"{main}/sampling"}
        if "ga_turnaround" in chosen[0]:
            series["GA"] = "ga_turnaround"
        for label, key in series.items():
            values = [
                np.mean(
                    [r[key] if isinstance(r[key], float) else r[key]["turnaround"] for r in chosen if r["size"] == size]
                )
                for size in sizes
            ]
            axis.plot(sizes, values, marker="o", label=label)
        axis.set(title=f"{split}: average turnaround time (paper Fig. 4)", xlabel="tasks", ylabel="time")
        axis.legend()
    figure.tight_layout()
    figure.savefig(workdir / "turnaround.png", dpi=120)
    figure, axis = plt.subplots(figsize=(7, 4))
    names = [f"{row['variant']}\n{row['decoder']}" for row in results["variants"]]
    axis.bar(names, [row["summary"]["ratio_mean"] for row in results["variants"]])
    axis.axhline(1.0, color="black", linewidth=1)
    axis.set(title="unseen instances: makespan / HEFT makespan (mean)", ylabel="ratio")
    figure.tight_layout()
    figure.savefig(workdir / "variants.png", dpi=120)
    if results["timing"]:
        figure, axis = plt.subplots(figsize=(7, 4))
        sizes = [row["tasks"] for row in results["timing"]]
        axis.loglog(sizes, [row["heft"] for row in results["timing"]], marker="o", label="HEFT (NumPy)")
        ga_rows = [row for row in results["timing"] if "ga" in row]
        if ga_rows:
            axis.loglog(
                [r["tasks"] for r in ga_rows], [r["ga"] for r in ga_rows], marker="o", label="GA (10 generations)"
            )
        for variant in results["variant_names"]:
            rows = [row for row in results["timing"] if variant in row]
            axis.loglog([r["tasks"] for r in rows], [r[variant] for r in rows], marker="o", label=f"network {variant}")
        axis.set(title="time to schedule one instance (paper Table I)", xlabel="tasks", ylabel="seconds")
        axis.legend()
        figure.tight_layout()
        figure.savefig(workdir / "timing.png", dpi=120)
    plt.close("all")


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    config = configs.tiny() if args.config == "tiny" else configs.full()
    if args.epochs is not None:
        config = config.replace(train={"epochs": args.epochs})
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    splits = load_or_build(config.data, args.data_dir)
    runs = {variant: {"variant": variant} for variant in args.variants}
    if "feedback" in args.variants and not args.no_ablation:
        runs["feedback-noprior"] = {"variant": "feedback", "eft_prior": 0.0}
    schedulers = {}
    for name, model_fields in runs.items():
        checkpoint_dir = workdir / "checkpoints" / name
        fit(config.replace(model=model_fields), splits["train"].data, splits["val"].data, checkpoint_dir)
        schedulers[name] = NeuralScheduler.load(checkpoint_dir)
    if "feedback" in args.variants:
        schedulers["eft-rule"] = eft_rule(config)
    main_variant = args.main if args.main in schedulers else args.variants[0]
    records = evaluate(schedulers, splits, evaluation_sets(splits, args.eval_count), args)
    results = {
        "config": json.loads(config.to_json()),
        "machine": f"{platform.processor() or platform.machine()}, {jax.devices()[0].platform}, jax {jax.__version__}",
        "main": main_variant,
        "samples": args.samples,
        "variant_names": list(schedulers),
        "by_split": [
            {
                "split": split,
                "size": size,
                "greedy": summarise(chosen, f"{main_variant}/greedy"),
                "sampling": summarise(chosen, f"{main_variant}/sampling"),
            }
            for (split, size), chosen in group(records, "split", "size").items()
        ],
        "variants": [
            {"variant": v, "decoder": d, **variant_summary(records, f"{v}/{d}")} for v in schedulers for d in DECODERS
        ],
        "timing": timing(schedulers, config, args) if args.timing_sizes else [],
        "records": records,
    }
    (workdir / "results.json").write_text(json.dumps(results, indent=2))
    table = markdown(results)
    (workdir / "results.md").write_text(table)
    plots(results, records, workdir)
    print(table)
    return results


if __name__ == "__main__":
    main()
