"""Vmapped hyperparameter sweeps over (regime, Δ0, M, Δ_max, seed).

All members train in one jitted, vmapped program (`jaxquant.fit`) and share the data stream, so
members that share a seed start from the same weights and see the same batches: differences
between them come from the Δ regime alone.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import NamedTuple, Sequence

import jax
import numpy as np

from jaxquant.data import Dataset
from jaxquant.delta import DeltaRegime, delta_regime, stack_regimes
from jaxquant.metrics import peak_epoch
from jaxquant.train import EpochMetrics, TrainConfig, TrainState, fit
from jaxsched.common.arguments import integer
from jaxsched.common.sharding import Devices


@dataclasses.dataclass(frozen=True)
class SweepMember:
    """One configuration of a sweep: a Δ regime (Eq. 7) and the seed of its initial weights."""

    regime: str = "log"
    delta0: float = 0.1
    m: float = 1.9
    delta_max: float = 0.9
    seed: int = 0

    def __post_init__(self):
        integer("SweepMember.seed", self.seed, 0)
        self.delta_regime()  # validates the regime fields

    def delta_regime(self) -> DeltaRegime:
        return delta_regime(self.regime, self.delta0, self.m, self.delta_max)

    @property
    def label(self) -> str:
        return f"{self.regime} Δ0={self.delta0:g} M={self.m:g} Δmax={self.delta_max:g} seed={self.seed}"


def sweep_grid(
    regimes: Sequence[str] = ("log",),
    delta0s: Sequence[float] = (0.1,),
    ms: Sequence[float] = (1.9,),
    delta_maxes: Sequence[float] = (0.9,),
    seeds: Sequence[int] = (0,),
) -> list[SweepMember]:
    """The cartesian product of the given values, as sweep members."""
    return [
        SweepMember(regime, delta0, m, delta_max, seed)
        for regime, delta0, m, delta_max, seed in itertools.product(regimes, delta0s, ms, delta_maxes, seeds)
    ]


def member_inputs(members: Sequence[SweepMember]) -> tuple[jax.Array, DeltaRegime]:
    """Stacked keys [K] and regimes (leaves [K]) for `members`, the inputs of a vmapped run."""
    if not members:
        raise ValueError("a sweep needs at least one member")
    keys = jax.numpy.stack([jax.random.key(member.seed) for member in members])
    return keys, stack_regimes([member.delta_regime() for member in members])


class SweepResult(NamedTuple):
    members: tuple[SweepMember, ...]
    state: TrainState  # leaves [K, ...]
    history: EpochMetrics  # leaves [epochs, K]


def run_sweep(
    config: TrainConfig,
    members: Sequence[SweepMember],
    *,
    workdir: str | None = None,
    dataset: Dataset | None = None,
    progress: bool = True,
    devices: Devices = None,
) -> SweepResult:
    """Train every member in one vmapped program (checkpointed under `workdir` if given), the members split
    across `devices` (default all devices; see `fit`)."""
    keys, regimes = member_inputs(members)
    result = fit(config, keys, regimes, workdir=workdir, dataset=dataset, progress=progress, devices=devices)
    return SweepResult(tuple(members), result.state, result.history)


def summarize(result: SweepResult) -> list[dict]:
    """One row per member: its settings, final and peak accuracy, peak epoch, sparsity, entropy."""
    rows = []
    for index, member in enumerate(result.members):
        column = EpochMetrics(*(np.asarray(field)[:, index] for field in result.history))
        rows.append({
            **dataclasses.asdict(member),
            "final_accuracy": float(column.test_accuracy[-1]),
            "peak_accuracy": float(np.max(column.test_accuracy)),
            "peak_epoch": peak_epoch(column.test_accuracy),
            "sparsity": float(column.sparsity[-1]),
            "entropy": float(column.entropy[-1]),
            "final_delta": float(column.delta[-1]),
        })
    return rows
