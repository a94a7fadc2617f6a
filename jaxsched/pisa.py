"""PISA's heatmap from the adversarial search: every ordered pair of schedulers, each cell the worst
makespan ratio found, its instance saved and replayed through the NumPy reference.

`heatmap_search(config, seed, devices)` runs `jaxsched.adversarial.search` once over every pair (the
chains split across the devices) and returns a `Heatmap`: the search's float32 ratios, the worst
instance of each cell, and the same ratios replayed in float64 by `jaxsched.listsched.schedule` (under
the search's rank convention), which is what the table and the figure show. `save_heatmap` writes the
instances (`instances.npz`, loadable by `load_instances`), the table (`heatmap.md`) and, with the
`plots` extra, the figure (`heatmap.png`: rows the base scheduler, columns the scheduler judged, as
PISA draws it).
"""

from __future__ import annotations

import pathlib
import time
from typing import NamedTuple

import jax
import numpy as np

from jaxsched.adversarial import SearchConfig, best_chains, search
from jaxsched.common.sharding import Devices
from jaxsched.dense import DenseInstance, to_problem
from jaxsched.listsched import list_schedule, make_plan, preset, schedule


class Heatmap(NamedTuple):
    """One heatmap: scheduler names, [S, S] ratios (row a / column b) as searched and as replayed in
    float64, the worst instance of each cell and its chain's WBA draws (stacked [S, S, ...]; the diagonal
    repeats cell (0, 1)), and the seconds the search took (compilation included)."""

    names: tuple[str, ...]
    searched: np.ndarray
    replayed: np.ndarray
    instances: DenseInstance
    draws: np.ndarray  # [S, S, T] int32
    seconds: float
    ranks: str = "topcuoglu"  # the search's rank convention, which the replays use


def replay(instance: DenseInstance, names: tuple[str, ...], ranks: str = "topcuoglu", draws=None) -> np.ndarray:
    """[S] makespans of one instance by the NumPy reference schedulers `names` (float64); WBA takes the
    search chain's `draws` [T] when given (else its seeded ones)."""
    problem = to_problem(instance)
    spans = []
    for name in names:
        if name == "WBA" and draws is not None:
            config = preset(name, ranks=ranks)
            plan = make_plan(problem, config)._replace(draws=np.asarray(draws)[: problem.num_tasks])
            spans.append(list_schedule(problem, config, plan).makespan)
        else:
            spans.append(schedule(problem, name, ranks=ranks).makespan)
    return np.array(spans)


def heatmap_search(config: SearchConfig, seed: int = 0, devices: Devices = None) -> Heatmap:
    """Runs the search of `config` from `jax.random.key(seed)` across `devices` and replays every cell's
    worst instance through the NumPy reference."""
    start = time.perf_counter()
    chains = jax.block_until_ready(search(jax.random.key(seed), config, devices))
    seconds = time.perf_counter() - start
    searched, index = best_chains(chains, config)
    index = np.where(index < 0, index[0, 1], index)
    instances = jax.tree.map(lambda leaf: np.asarray(leaf)[index], chains.best)
    draws = np.asarray(chains.draws)[index]
    replayed = np.ones_like(searched)
    for (a, b), _ in np.ndenumerate(searched):
        if a != b:
            cell = jax.tree.map(lambda leaf, a=a, b=b: leaf[a, b], instances)
            spans = replay(cell, (config.names[a], config.names[b]), config.ranks, draws[a, b])
            replayed[a, b] = spans[0] / spans[1]
    return Heatmap(tuple(config.names), searched, replayed, instances, draws, seconds, config.ranks)


def table_markdown(heatmap: Heatmap) -> str:
    """The replayed ratios as a markdown table (rows: the scheduler judged, columns: the base)."""
    names = heatmap.names
    lines = ["| scheduler \\ base | " + " | ".join(names) + " | worst |", "|---" * (len(names) + 2) + "|"]
    for a, name in enumerate(names):
        cells = [f"{heatmap.replayed[a, b]:.2f}" if a != b else "" for b in range(len(names))]
        worst = np.delete(heatmap.replayed[a], a).max()
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {worst:.2f} |")
    return "\n".join(lines)


def save_heatmap(heatmap: Heatmap, out: pathlib.Path) -> list[pathlib.Path]:
    """Writes `instances.npz`, `heatmap.md` and (extra `plots`) `heatmap.png` under `out`; returns the
    paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "instances.npz", out / "heatmap.md"]
    np.savez_compressed(
        written[0],
        names=np.array(heatmap.names),
        searched=heatmap.searched,
        replayed=heatmap.replayed,
        draws=heatmap.draws,
        **{field: np.asarray(value) for field, value in heatmap.instances._asdict().items()},
    )
    written[1].write_text(table_markdown(heatmap) + "\n")
    try:
        from jaxsched.plot import heatmap as draw

        ax = draw(
            heatmap.replayed.T,
            heatmap.names,
            heatmap.names,
            title="worst makespan ratio: scheduler (column) / base scheduler (row)",
            label="ratio",
        )
        ax.set_xlabel("scheduler")
        ax.set_ylabel("base scheduler")
        ax.figure.savefig(out / "heatmap.png", dpi=150, bbox_inches="tight")
        written.append(out / "heatmap.png")
    except ImportError:
        pass
    return written


def load_instances(path: pathlib.Path) -> tuple[tuple[str, ...], np.ndarray, DenseInstance]:
    """(names, [S, S] replayed ratios, stacked worst instances) from a `save_heatmap` file;
    FileNotFoundError when it is missing."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no heatmap instances at {path}")
    with np.load(path) as data:
        instance = DenseInstance(**{field: data[field] for field in DenseInstance._fields})
        return tuple(data["names"].tolist()), data["replayed"], instance


def judge(makespan_of, heatmap: Heatmap) -> np.ndarray:
    """[S, S] on each cell's worst instance, `makespan_of(problem)` (any scheduler, e.g. a trained
    DeepSched's) over the least makespan of the heatmap's heuristics there (1 on the diagonal): how far
    the judged scheduler falls behind the best heuristic on instances adversarial to the heuristics."""
    count = len(heatmap.names)
    ratios = np.ones((count, count))
    for (a, b), _ in np.ndenumerate(ratios):
        if a != b:
            cell = jax.tree.map(lambda leaf, a=a, b=b: leaf[a, b], heatmap.instances)
            best = replay(cell, heatmap.names, heatmap.ranks, heatmap.draws[a, b]).min()
            ratios[a, b] = makespan_of(to_problem(cell)) / best
    return ratios
