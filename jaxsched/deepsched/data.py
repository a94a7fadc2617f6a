"""Labelled datasets: problems, their network features and HEFT's schedule as labels.

Labels are HEFT's schedules: on the CPU from the compiled HEFT (`jaxsched.numba.heft_batch`, float64:
equal to the NumPy reference to the last bit), on an accelerator from the batched JAX HEFT
(`jaxsched.jax.heft_batch`, float32), in chunks with a progress bar. A dataset is built once per
`DataConfig` and saved under `<directory>/<config hash>/` (problems as ragged arrays, features and
labels as padded arrays; a `jaxsched.common.Workdir` that records the configuration), so every later run and
every variant reuses it.

Splits: "train", "val", "test" draw from the training distribution at every size in
`DataConfig.sizes` ("seen" instances for evaluation are the first training instances of each size,
"unseen" are the test instances); "ood" holds other generators (classic application graphs, and
WfCommons workflows when the `workflows` extra is installed) at similar sizes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import NamedTuple, Sequence

import jax
import numpy as np
from tqdm.auto import tqdm

from jaxsched import generate
from jaxsched.batch import Shape, pad_problems, stack
from jaxsched.common.sharding import Devices, batch_mesh, gather, shard_batch
from jaxsched.common.workdir import Workdir, as_json, write_text
from jaxsched.deepsched.configs import DataConfig
from jaxsched.deepsched.features import Features, padded_size, problem_features, time_scale
from jaxsched.jax_listsched import heft_batch
from jaxsched.numba_heft import heft_batch_numba
from jaxsched.problem import Problem, read_npz

SPLITS = ("train", "val", "test", "ood")
# Topcuoglu et al. (2002) parameter grid, one value of each drawn per instance.
TOPCUOGLU_GRID = {
    "alpha": (0.5, 1.0, 2.0),
    "out_degree": (1, 2, 3, 4, 5),
    "ccr": (0.1, 0.5, 1.0, 5.0, 10.0),
    "beta": (0.1, 0.25, 0.5, 0.75, 1.0),
}


class Labels(NamedTuple):
    """HEFT's schedule of each problem (stacked: leading batch axis)."""

    proc: np.ndarray  # [T] int32 processor, 0 where padded
    times: np.ndarray  # [T, 2] (start, finish) / time_scale, 0 where padded


class LabelledSet(NamedTuple):
    """Padded features and labels of one split, ready to go to the device."""

    features: Features
    labels: Labels


@dataclasses.dataclass(frozen=True)
class Split:
    """One split: its problems (unpadded), the generator and size each was drawn with, and their
    padded features and labels."""

    problems: tuple[Problem, ...]
    kinds: tuple[str, ...]  # generator of each problem
    sizes: tuple[int, ...]  # requested number of tasks (application graphs come close to it)
    data: LabelledSet

    def groups(self) -> dict[tuple[str, int], list[int]]:
        """Instance indices grouped by (generator, size)."""
        groups: dict[tuple[str, int], list[int]] = {}
        for index, key in enumerate(zip(self.kinds, self.sizes)):
            groups.setdefault(key, []).append(index)
        return groups


def training_problem(config: DataConfig, num_tasks: int, rng: np.random.Generator) -> Problem:
    """One instance of the training distribution (`config.generator`) with `num_tasks` tasks."""
    alpha = float(rng.choice(TOPCUOGLU_GRID["alpha"]))
    out_degree = float(rng.choice(TOPCUOGLU_GRID["out_degree"]))
    ccr = float(rng.choice(TOPCUOGLU_GRID["ccr"]))
    seed = int(rng.integers(2**31))
    if config.generator == "topcuoglu":
        beta = float(rng.choice(TOPCUOGLU_GRID["beta"]))
        return generate.random_dag(
            num_tasks, config.num_procs, alpha=alpha, out_degree=out_degree, ccr=ccr, beta=beta, seed=seed
        )
    if config.generator == "cloudsim":
        return generate.cloudsim(num_tasks, config.num_procs, alpha=alpha, out_degree=out_degree, ccr=ccr, seed=seed)
    raise ValueError(f"unknown generator {config.generator!r}; choose 'topcuoglu' or 'cloudsim'")


def ood_problem(kind: str, num_tasks: int, num_procs: int, rng: np.random.Generator) -> Problem:
    """An application graph of `kind` with about `num_tasks` tasks (CCR and beta drawn per instance)."""
    costs = {
        "ccr": float(rng.choice(TOPCUOGLU_GRID["ccr"])),
        "beta": float(rng.choice(TOPCUOGLU_GRID["beta"])),
        "seed": int(rng.integers(2**31)),
    }
    if kind == "gaussian_elimination":  # (m^2 + m - 2) / 2 tasks
        matrix_size = min(range(2, 200), key=lambda m: abs((m * m + m - 2) / 2 - num_tasks))
        return generate.gaussian_elimination(matrix_size, num_procs, **costs)
    if kind == "fft":  # 2m - 1 + m log2 m tasks, m a power of two
        points = min((1 << k for k in range(1, 16)), key=lambda m: abs(2 * m - 1 + m * np.log2(m) - num_tasks))
        return generate.fft(points, num_procs, **costs)
    if kind == "fork_join":  # 1 + stages (width + 1) tasks
        stages = int(rng.integers(1, 5))
        width = max(1, round((num_tasks - 1) / stages) - 1)
        return generate.fork_join(width, stages, num_procs, **costs)
    if kind.startswith("wfcommons:"):
        from jaxsched.workflows import wfcommons_problem

        return wfcommons_problem(kind.split(":", 1)[1], num_tasks, num_procs, beta=costs["beta"], seed=costs["seed"])
    raise ValueError(f"unknown out-of-distribution generator {kind!r}")


def generate_problems(config: DataConfig, split: str) -> tuple[list[Problem], list[str], list[int]]:
    """(problems, generator of each, size of each) of `split` ("train", "val", "test" or "ood"),
    deterministic for `config.seed`."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
    counts = {"train": config.num_train, "val": config.num_val, "test": config.num_test, "ood": config.num_ood}
    problems, kinds, sizes = [], [], []
    for size_index, size in enumerate(config.sizes):
        rng = np.random.default_rng([config.seed, SPLITS.index(split), size_index])
        for i in range(counts[split]):
            if split == "ood":
                kind = config.ood_generators[i % len(config.ood_generators)]
                problems.append(ood_problem(kind, size, config.num_procs, rng))
            else:
                kind = config.generator
                problems.append(training_problem(config, size, rng))
            kinds.append(kind)
            sizes.append(size)
    return problems, kinds, sizes


def label(problems: Sequence[Problem], shape: Shape, chunk: int = 128, progress: bool = True,
          devices: Devices = None) -> LabelledSet:
    """Features and HEFT labels padded to `shape`, `chunk` problems per call: compiled on the CPU, batched in
    JAX on an accelerator with each chunk split across `devices` (`jaxsched.common.batch_mesh`: default all
    devices; the labels do not depend on it). The last chunk is filled up with repeats, so every call has one
    shape and compiles once. A `devices` count outside [1, device count] is a ValueError on every backend."""
    on_cpu = jax.default_backend() == "cpu"
    mesh = batch_mesh(devices)  # checked on the CPU too, where the compiled path does not use it
    features, procs, times = [], [], []
    for begin in tqdm(range(0, len(problems), chunk), desc="HEFT labels", disable=not progress, unit="chunk"):
        part = problems[begin : begin + chunk]
        filled = list(part) + [part[-1]] * (chunk - len(part))
        batch = pad_problems(filled, shape, dtype=np.float64 if on_cpu else np.float32)
        if on_cpu:
            heft = heft_batch_numba(batch)
        else:
            placed, size = shard_batch(batch, mesh)
            heft = gather(heft_batch(placed), size)
        for index, problem in enumerate(part):
            scale = time_scale(problem)
            features.append(problem_features(problem, shape))
            procs.append(np.where(batch.task_mask[index], np.asarray(heft.proc[index]), 0).astype(np.int32))
            stacked = np.stack([np.asarray(heft.start[index]), np.asarray(heft.finish[index])], axis=1) / scale
            times.append(np.where(batch.task_mask[index][:, None], stacked, 0).astype(np.float32))
    return LabelledSet(stack(features), Labels(np.stack(procs), np.stack(times)))


def padded_shape(problems: Sequence[Problem]) -> Shape:
    """The dataset's `Shape`: `Shape.of(problems)` with tasks, edges and predecessors per task rounded
    up by `padded_size` (processors exactly)."""
    fit = Shape.of(problems)
    return Shape(padded_size(fit.num_tasks), fit.num_procs, padded_size(fit.num_edges), padded_size(fit.max_in_degree))


FORMAT = 3  # bump when the saved arrays change, so that old caches are not read (3: float64 labels on the CPU)


def _identity(config: DataConfig) -> dict:
    """What a saved dataset must match to be read back: the data configuration and the file format."""
    return {"format": FORMAT, **dataclasses.asdict(config)}


def save_problems(path: str | os.PathLike, problems: Sequence[Problem]) -> None:
    """Writes problems of any sizes to one .npz: each field's arrays concatenated, with each
    problem's shape and whether it has the field at all."""
    arrays = {}
    for field in dataclasses.fields(Problem):
        values = [getattr(p, field.name) for p in problems]
        present = np.array([v is not None for v in values])
        if not present.any():
            continue
        ndim = np.ndim(values[int(present.argmax())])
        arrays[f"{field.name}/present"] = present
        arrays[f"{field.name}/shape"] = np.array([np.shape(v) if v is not None else (0,) * ndim for v in values])
        arrays[f"{field.name}/values"] = np.concatenate([np.ravel(v) for v in values if v is not None])
    np.savez_compressed(path, **arrays)


def load_problems(path: str | os.PathLike) -> list[Problem]:
    """Reads problems written by `save_problems` (validated again on construction); raises
    ValueError naming the file when it is not such a file."""
    required = {f"{name}/{part}" for name in ("comp", "src", "dst", "data") for part in ("present", "shape", "values")}
    arrays = read_npz(path, "problems", required)
    try:
        fields: dict[str, list] = {}
        for name in {key.split("/")[0] for key in arrays}:
            present, shapes, values = arrays[f"{name}/present"], arrays[f"{name}/shape"], arrays[f"{name}/values"]
            pieces = np.split(values, np.cumsum([int(np.prod(shape)) for shape in shapes])[:-1])
            fields[name] = [p.reshape(shape) if here else None for p, shape, here in zip(pieces, shapes, present)]
        return [Problem(**{name: column[i] for name, column in fields.items()}) for i in range(len(fields["comp"]))]
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise ValueError(f"{path} does not hold problems written by save_problems ({error!r})") from error


def load_or_build(config: DataConfig, directory: str | os.PathLike, progress: bool = True,
                  devices: Devices = None) -> dict[str, Split]:
    """Every split of `config`'s dataset, read from `directory` or built (HEFT-labelled across `devices`, see
    `label`) and saved there.

    All splits share one padded shape, so one compilation serves them all.
    """
    identity = _identity(config)
    digest = hashlib.sha256(json.dumps(as_json(identity), sort_keys=True).encode()).hexdigest()[:12]
    root = Workdir(Path(directory) / digest, identity).path
    done = root / "complete"
    if not done.exists():
        drawn = {
            split: generate_problems(config, split) for split in tqdm(SPLITS, desc="generating", disable=not progress)
        }
        shape = padded_shape([p for problems, _, _ in drawn.values() for p in problems])
        for split, (problems, kinds, sizes) in drawn.items():
            save_problems(root / f"{split}_problems.npz", problems)
            data = label(problems, shape, progress=progress, devices=devices)
            np.savez_compressed(root / f"{split}_data.npz", *data.features, *data.labels, kinds=kinds, sizes=sizes)
        write_text(done, "ok\n")
    splits = {}
    for split in SPLITS:
        count = len(Features._fields) + len(Labels._fields)
        names = {f"arr_{i}" for i in range(count)} | {"kinds", "sizes"}
        npz = read_npz(root / f"{split}_data.npz", "labelled data", names)
        arrays = [npz[f"arr_{i}"] for i in range(count)]
        kinds, sizes = tuple(str(k) for k in npz["kinds"]), tuple(int(s) for s in npz["sizes"])
        data = LabelledSet(Features(*arrays[: len(Features._fields)]), Labels(*arrays[len(Features._fields) :]))
        splits[split] = Split(tuple(load_problems(root / f"{split}_problems.npz")), kinds, sizes, data)
    return splits
