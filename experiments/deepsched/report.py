"""Tables and figures of the DeepSched experiment, from the results of `evaluate.train_and_evaluate`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.deepsched.evaluate import SPLIT_SOURCES


def markdown(results: dict) -> str:
    """The tables of `train_and_evaluate`'s results, as Markdown: the main variant per split and
    size, every variant on unseen instances, and the timing table (when timed)."""
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
        ] + ([f"{greedy['ga_ratio']:.3f}"] if has_ga else [])
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


def plots(results: dict, workdir: str | Path) -> bool:
    """Writes turnaround.png (paper Fig. 4), variants.png and timing.png (paper Table I) under
    `workdir`; returns False (writing nothing) when matplotlib is not installed (extra `plots`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    workdir, records = Path(workdir), results["records"]
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
    return True
