"""Frozen configurations of the neural scheduler: model, data, training; tiny (CPU), full (GPU), test.

A `DeepSchedConfig` is saved as JSON next to every checkpoint, so `NeuralScheduler.load` rebuilds the
exact network that was trained.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

VARIANTS = ("paper", "dag", "gnn", "feedback")
RECURRENCES = ("gru", "mingru")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The network (see `model.DeepSchedNet`).

    variant: "paper" (DAG-blind: paper features, tasks fed to the GRU in arrival order), "dag" (adds
      rank, degree and critical-path features and feeds tasks in HEFT's upward-rank order) or "gnn"
      (as "dag", plus `graph_layers` message-passing layers over the edges) or "feedback" (as "dag",
      but decoded one task at a time in upward-rank order, each decision seeing the earlier ones
      through per-processor load and communication features; trained with teacher forcing).
    eft_prior: feedback variant only: initial weight of the prior that prefers the processor with the
      earliest finish (HEFT's rule); 0 trains the network from scratch (the ablation).
    recurrence: the task encoder's bidirectional layer: "gru" (the paper's) or "mingru" (a GRU
      with input-only gates, computed by a parallel scan: much faster on 10,000-task problems).
    max_tasks, max_procs: the largest problem `NeuralScheduler` accepts. No parameter depends on
      them (every layer is shared across tasks and processors); they bound the padded shapes.
    """

    variant: str = "feedback"
    recurrence: str = "gru"
    hidden: int = 32
    graph_layers: int = 2
    eft_prior: float = 10.0
    max_tasks: int = 16384
    max_procs: int = 256

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; choose one of {VARIANTS}")
        if self.recurrence not in RECURRENCES:
            raise ValueError(f"unknown recurrence {self.recurrence!r}; choose one of {RECURRENCES}")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Labelled datasets: instances of `generator` with `num_procs` processors at each size.

    generator: "topcuoglu" (random DAGs, parameters drawn per instance from Topcuoglu's grid) or
      "cloudsim" (the paper's task and machine features). `num_train` etc. count instances per size.
    ood_generators: application graphs for the out-of-distribution split (sizes near `sizes`).
    """

    generator: str = "topcuoglu"
    num_procs: int = 8
    sizes: tuple[int, ...] = (16, 32, 64)
    num_train: int = 384
    num_val: int = 32
    num_test: int = 32
    ood_generators: tuple[str, ...] = ("gaussian_elimination", "fft", "fork_join")
    num_ood: int = 32
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation: Adam with step decay (the paper: 1e-5 halved every 20 epochs for 100 epochs).

    time_weight: weight of the regression MSE in the loss (paper Eq. 2 has 1 on raw times; ours are
      normalised by a makespan lower bound, see `features.time_scale`).
    """

    epochs: int = 12
    batch_size: int = 64
    learning_rate: float = 3e-3
    decay_every: int = 5
    decay_factor: float = 0.5
    max_grad_norm: float = 1.0
    time_weight: float = 1.0
    num_seeds: int = 2


@dataclasses.dataclass(frozen=True)
class DeepSchedConfig:
    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()

    def replace(self, **sections: Any) -> "DeepSchedConfig":
        """A copy with fields replaced per section: `config.replace(model={"variant": "paper"})`."""
        updated = {name: dataclasses.replace(getattr(self, name), **fields) for name, fields in sections.items()}
        return dataclasses.replace(self, **updated)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "DeepSchedConfig":
        raw = json.loads(text)
        data = dict(raw["data"], sizes=tuple(raw["data"]["sizes"]), ood_generators=tuple(raw["data"]["ood_generators"]))
        return cls(model=ModelConfig(**raw["model"]), data=DataConfig(**data), train=TrainConfig(**raw["train"]))


def tiny() -> DeepSchedConfig:
    """CPU default: 16 to 64 tasks on 8 processors, 384 training instances per size, 12 epochs."""
    return DeepSchedConfig()


def full() -> DeepSchedConfig:
    """GPU configuration at the paper's scale of machines: 188 processors (the paper's count), DAGs
    of 128 to 512 tasks (the paper's smallest instance has 486), 2,048 training instances per size
    (the padded comp array alone is about 3 GB), hidden size 64, 100 epochs (the paper's count)."""
    return DeepSchedConfig(
        model=ModelConfig(hidden=64, graph_layers=3),
        data=DataConfig(num_procs=188, sizes=(128, 256, 512), num_train=2048, num_val=128, num_test=128, num_ood=64),
        train=TrainConfig(epochs=100, batch_size=32, learning_rate=1e-3, decay_every=20, num_seeds=2),
    )


def test() -> DeepSchedConfig:
    """Seconds-long configuration for the test suite."""
    return DeepSchedConfig(
        model=ModelConfig(hidden=8, graph_layers=1, max_tasks=64, max_procs=8),
        data=DataConfig(num_procs=4, sizes=(8, 12), num_train=32, num_val=8, num_test=8, num_ood=4),
        train=TrainConfig(epochs=3, batch_size=8, learning_rate=3e-3, decay_every=2, num_seeds=2),
    )
