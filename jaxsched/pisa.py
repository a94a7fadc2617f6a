"""PISA's heatmap from the adversarial search: every ordered pair of schedulers, each cell the worst
makespan ratio found, its instance saved and replayed through the NumPy reference.

`heatmap_search(config, seed, devices)` runs `jaxsched.adversarial.search` once over every pair (the
chains split across the devices) and returns a `Heatmap`: the search's float32 ratios, the worst
instance of each cell, and the same ratios replayed in float64 by `jaxsched.listsched.schedule` (under
the search's rank convention), which is what the table and the figure show. `save_heatmap` writes the
instances (`instances.npz`, loadable by `load_instances`), the table (`heatmap.md`) and, with the
`plots` extra, the figure (`heatmap.png`: rows the base scheduler, columns the scheduler judged, as
PISA draws it).

A trained network joins as one more scheduler (`heatmap_search(..., learned=NeuralScheduler)`: the name
`jaxsched.adversarial.LEARNED` in the config's names, usually with `targets=(LEARNED,)` so that only its
pairs are searched): the search runs it in JAX (`NeuralScheduler.dense`), the replay through
`NeuralScheduler.schedule`; `against_best` reads its worst ratio against the best heuristic off the
instances found for it. Cells not searched (a scheduler not among `targets`) are NaN.
"""

from __future__ import annotations

import pathlib
import time
from typing import NamedTuple

import jax
import numpy as np

from jaxsched.adversarial import LEARNED, SearchConfig, best_chains, search
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


def replay(
    instance: DenseInstance, names: tuple[str, ...], ranks: str = "topcuoglu", draws=None, learned=None
) -> np.ndarray:
    """[S] makespans of one instance by the NumPy reference schedulers `names` (float64); WBA takes the
    search chain's `draws` [T] when given (else its seeded ones); `LEARNED` is `learned.schedule`'s."""
    problem = to_problem(instance)
    spans = []
    for name in names:
        if name == LEARNED:
            spans.append(learned.schedule(problem).makespan)
        elif name == "WBA" and draws is not None:
            config = preset(name, ranks=ranks)
            plan = make_plan(problem, config)._replace(draws=np.asarray(draws)[: problem.num_tasks])
            spans.append(list_schedule(problem, config, plan).makespan)
        else:
            spans.append(schedule(problem, name, ranks=ranks).makespan)
    return np.array(spans)


def heatmap_search(config: SearchConfig, seed: int = 0, devices: Devices = None, learned=None) -> Heatmap:
    """Runs the search of `config` from `jax.random.key(seed)` across `devices` and replays every cell's
    worst instance through the NumPy reference; `learned` is the `NeuralScheduler` named `LEARNED`."""
    start = time.perf_counter()
    network = None if learned is None else learned.dense()
    chains = jax.block_until_ready(search(jax.random.key(seed), config, devices, learned=network))
    seconds = time.perf_counter() - start
    searched, index = best_chains(chains, config)
    cells = index >= 0
    searched[~cells & ~np.eye(len(searched), dtype=bool)] = np.nan
    index = np.where(cells, index, index[cells][0])
    instances = jax.tree.map(lambda leaf: np.asarray(leaf)[index], chains.best)
    draws = np.asarray(chains.draws)[index]
    replayed = np.where(np.isnan(searched), np.nan, 1.0)
    for a, b in zip(*np.nonzero(cells)):
        cell = jax.tree.map(lambda leaf, a=a, b=b: leaf[a, b], instances)
        spans = replay(cell, (config.names[a], config.names[b]), config.ranks, draws[a, b], learned)
        replayed[a, b] = spans[0] / spans[1]
    return Heatmap(tuple(config.names), searched, replayed, instances, draws, seconds, config.ranks)


def searched_rows(heatmap: Heatmap) -> np.ndarray:
    """[R] indices of the schedulers whose pairs were searched (all of them but without `targets`)."""
    off = ~np.eye(len(heatmap.names), dtype=bool)
    return np.flatnonzero((~np.isnan(heatmap.replayed) & off).any(axis=1))


def table_markdown(heatmap: Heatmap) -> str:
    """The replayed ratios as a markdown table (rows: the scheduler judged, columns: the base)."""
    names = heatmap.names
    lines = ["| scheduler \\ base | " + " | ".join(names) + " | worst |", "|---" * (len(names) + 2) + "|"]
    for a in searched_rows(heatmap):
        name = names[a]
        cells = [f"{heatmap.replayed[a, b]:.2f}" if a != b else "" for b in range(len(names))]
        worst = np.nanmax(np.delete(heatmap.replayed[a], a))
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

        rows = searched_rows(heatmap)
        ax = draw(
            np.nan_to_num(heatmap.replayed[rows].T, nan=1.0),
            heatmap.names,
            [heatmap.names[a] for a in rows],
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


def against_best(heatmap: Heatmap, judged: str = LEARNED, learned=None) -> np.ndarray:
    """[S] on the worst instance found for each pair (`judged`, b): the makespan of `judged` over the least
    makespan of the other schedulers of the heatmap there (NaN for b = `judged`): how far it falls behind
    the best of them on instances adversarial to it. `learned`: the `NeuralScheduler` named `LEARNED`."""
    a = heatmap.names.index(judged)
    others = np.arange(len(heatmap.names)) != a
    ratios = np.full(len(heatmap.names), np.nan)
    for b in np.flatnonzero(others):
        cell = jax.tree.map(lambda leaf, b=b: leaf[a, b], heatmap.instances)
        spans = replay(cell, heatmap.names, heatmap.ranks, heatmap.draws[a, b], learned)
        ratios[b] = spans[a] / spans[others].min()
    return ratios
