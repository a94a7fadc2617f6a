"""The comparison's report: the markdown table of mean makespan ratios and runtimes, and the heatmap."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def markdown(families: list[str], ratios: np.ndarray, seconds: np.ndarray, names: tuple[str, ...]) -> str:
    """Mean makespan ratio to the best per family and scheduler (`ratios [F, S]`), then seconds per schedule."""
    lines = ["| family | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {f} | " + " | ".join(f"{r:.3f}" for r in row) + " |" for f, row in zip(families, ratios)]
    lines += ["", "| scheduler | mean seconds per schedule |", "|---|---|"]
    lines += [f"| {n} | {s:.4f} |" for n, s in zip(names, seconds)]
    return "\n".join(lines)


def heatmap_png(families: list[str], ratios: np.ndarray, names: tuple[str, ...], path: Path) -> None:
    """The ratios as a heatmap PNG at `path` (says so and skips it without matplotlib, extra `plots`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        print("matplotlib not installed (extra `plots`): no heatmap written")
        return
    from jaxsched import heatmap

    ax = heatmap(ratios, families, names, title="mean makespan / best makespan", label="ratio")
    ax.figure.savefig(path, dpi=150, bbox_inches="tight")
    print(f"heatmap: {path}")
