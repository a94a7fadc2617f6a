"""Sample efficiency: the best cost an agent has found against the real-environment steps it has used.

A curve is a list of [real steps so far, best cost so far] points, non-increasing in cost. The model-free
agent's points come from evaluating its most-likely-action episode during training (`model_free_recorder`, an
`on_epoch` callback of `jaxgraph.rl.train.make_train`; those evaluation steps are counted too); the model-based
agent's from every state its random data collection visited, then its evaluation episodes (dream training uses
no real steps). `steps_to_reach` reads how many steps a curve needed to reach a cost; `curve_table` and
`plot_curves` show the curves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from jaxgraph.rl.episode import Episode
from jaxsched.common.workdir import read_json, write_json

Curve = list[list[float]]


def best_so_far(points: Iterable[tuple[int, float]]) -> Curve:
    """[[steps, best cost]] at every point where the best cost so far drops (and the first point); `points` are
    (real steps so far, cost found then) in step order."""
    curve: Curve = []
    for steps, found in points:
        if not curve or found < curve[-1][1]:
            curve.append([int(steps), float(found)])
    return curve


def extend(curve: Curve, start: int, episodes: Sequence[Episode]) -> tuple[Curve, int]:
    """`curve` continued by `episodes` run one after the other from `start` real steps (each one's cheapest
    visited state counted once it has run); the curve and the step count after them."""
    points = [tuple(p) for p in curve]
    for episode in episodes:
        start += episode.env_steps
        points.append((start, episode.best_cost))
    return best_so_far(points), start


def model_free_recorder(evaluate: Callable[[object], list[Episode]], initial_cost: float, every: int,
                        path: str | Path | None = None
                        ) -> tuple[Callable[[object], bool], Callable[[], tuple[Curve, int]]]:
    """(on_epoch, read): `on_epoch(agent)` evaluates the agent every `every` epochs with `evaluate(agent) ->
    episodes` and never stops training; `read()` -> (curve, real steps spent on these evaluations), with
    training steps and evaluation steps both on the curve's axis.

    With `path`, every evaluation is also written there (JSON, atomically) and a new recorder on the same path
    starts from what is written, so training resumed from a checkpoint keeps the curve of the epochs it skips
    (`make_train` calls `on_epoch` before saving the epoch's checkpoint, so every checkpointed epoch has its
    record). An evaluation of an epoch at or after the one being recorded (its checkpoint was not saved or was
    lost) is dropped and redone: the curve holds each epoch of the resumed run once."""
    records = (read_json(path) if path is not None else None) or []  # [{"epoch", "points", "steps"}]

    def on_epoch(agent) -> bool:
        epoch = len(agent.history)
        records[:] = [r for r in records if r["epoch"] < epoch]
        if epoch % every == 0:
            start = agent.env_steps + sum(r["steps"] for r in records)
            episodes = evaluate(agent)
            points, end = extend([], start, episodes)
            records.append({"epoch": epoch, "points": points, "steps": end - start})
            if path is not None:
                write_json(path, records)
        return False

    def read() -> tuple[Curve, int]:
        points = [(0, float(initial_cost))] + [tuple(p) for r in records for p in r["points"]]
        return best_so_far(points), sum(r["steps"] for r in records)

    return on_epoch, read


def value_at(curve: Curve, steps: int) -> float:
    """The curve's best cost after `steps` real steps (its first point's cost before that)."""
    found = curve[0][1]
    for at, best in curve:
        if at > steps:
            break
        found = best
    return found


def steps_to_reach(curve: Curve, target: float, rtol: float = 1e-9) -> int | None:
    """The real steps the curve needed to reach a cost at most `target` (up to `rtol`), None if it never did."""
    for steps, best in curve:
        if best <= target * (1 + rtol):
            return steps
    return None


def checkpoints(curves: Sequence[Curve], count: int = 5) -> list[int]:
    """`count` step counts, log-spaced up to the longest curve's last point, for a table of the curves."""
    last = max((c[-1][0] for c in curves if c), default=1)
    return sorted({int(s) for s in np.geomspace(max(1, last / 10 ** (count - 1)), max(1, last), count).round()})


def curve_table(curves: dict[str, dict[str, Curve]], initial: dict[str, float]) -> list[str]:
    """Markdown rows: per model and agent, the best cost (and its reduction of the initial cost) after a few
    step counts common to the model's agents, and the steps each agent took to its final best."""
    lines = []
    for name, agents in curves.items():
        steps = checkpoints(list(agents.values()))
        lines += [f"\n{name} (initial {initial[name]:.4f}):\n", "| agent | " + " | ".join(
            f"after {s} steps" for s in steps) + " | final best (steps) |", "|---|" + "---|" * (len(steps) + 1)]
        for agent, curve in agents.items():
            cells = [f"{value_at(curve, s):.4f} ({100 * (1 - value_at(curve, s) / initial[name]):.1f}%)"
                     for s in steps]
            lines.append(f"| {agent} | " + " | ".join(cells) + f" | {curve[-1][1]:.4f} ({curve[-1][0]}) |")
    return lines


def plot_curves(curves: dict[str, dict[str, Curve]], initial: dict[str, float], title: str, path: Path) -> None:
    """One panel per model: each agent's best cost (as % of the initial cost saved) against real steps, log x."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(4.2 * len(curves), 3.6), squeeze=False)
    for ax, (name, agents) in zip(axes[0], curves.items()):
        for agent, curve in agents.items():
            steps = [max(1, s) for s, _ in curve] + [max(max(1, c[-1][0]) for c in agents.values())]
            saved = [100 * (1 - b / initial[name]) for _, b in curve] + [100 * (1 - curve[-1][1] / initial[name])]
            ax.step(steps, saved, where="post", label=agent)
        ax.set(xscale="log", xlabel="real-environment steps", ylabel="best cost reduction so far (%)", title=name)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
