"""Frozen configurations of the neural scheduler: model, data, training; tiny (CPU), full (GPU), test.

A `DeepSchedConfig` is saved as JSON next to every checkpoint, so `NeuralScheduler.load` rebuilds the
exact network that was trained.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from jaxsched.common.arguments import integer_fields, number_fields

VARIANTS = ("paper", "dag", "gnn", "feedback")
RECURRENCES = ("gru", "mingru")
GENERATORS = ("topcuoglu", "cloudsim")


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
        integer_fields(self, 1, "hidden", "max_tasks", "max_procs")
        integer_fields(self, 0, "graph_layers")
        number_fields(self, 0.0, "eft_prior")


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

    def __post_init__(self):
        if self.generator not in GENERATORS:
            raise ValueError(f"unknown generator {self.generator!r}; choose one of {GENERATORS}")
        integer_fields(self, 1, "num_procs", "num_train", "num_val", "num_test", "num_ood")
        integer_fields(self, 0, "seed")
        if not self.sizes or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in self.sizes):
            raise ValueError(f"DataConfig.sizes must be integers >= 1, got {self.sizes!r}")
        if not self.ood_generators:
            raise ValueError("DataConfig.ood_generators must name at least one generator")


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

    def __post_init__(self):
        integer_fields(self, 0, "epochs")
        integer_fields(self, 1, "batch_size", "decay_every", "num_seeds")
        number_fields(self, 0.0, "learning_rate", "decay_factor", "max_grad_norm", above=True)
        number_fields(self, 0.0, "time_weight")


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """What `experiments.deepsched.evaluate.train_and_evaluate` measures after training (not part of a run's identity).

    variants: the networks trained and compared; main: the variant of the main table; ablation: also
      train the feedback variant without its EFT prior. count: instances per split, generator and
      size; samples: assignments drawn by the sampling decoder. ga: run the paper's GA (population,
      generations) on every instance. timing_sizes: problem sizes (tasks) of the timing table, on
      `timing_procs` processors; the GA is timed up to `timing_ga_max` tasks.
    """

    variants: tuple[str, ...] = VARIANTS
    main: str = "feedback"
    ablation: bool = True
    count: int = 8
    samples: int = 32
    ga: bool = True
    ga_population: int = 50
    ga_generations: int = 50
    timing_sizes: tuple[int, ...] = (100, 486, 1000, 10000)
    timing_procs: int = 188
    timing_ga_max: int = 1000

    def __post_init__(self):
        if not self.variants or any(v not in VARIANTS for v in self.variants):
            raise ValueError(f"EvalConfig.variants must be some of {VARIANTS}, got {self.variants!r}")
        if self.main not in VARIANTS:
            raise ValueError(f"EvalConfig.main must be one of {VARIANTS}, got {self.main!r}")
        integer_fields(self, 1, "count", "samples", "timing_procs", "timing_ga_max")
        integer_fields(self, 2, "ga_population")
        integer_fields(self, 0, "ga_generations")
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in self.timing_sizes):
            raise ValueError(f"EvalConfig.timing_sizes must be integers >= 1, got {self.timing_sizes!r}")


@dataclasses.dataclass(frozen=True)
class DeepSchedConfig:
    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()

    def replace(self, **sections: Any) -> "DeepSchedConfig":
        """A copy with fields replaced per section: `config.replace(model={"variant": "paper"})`."""
        updated = {name: dataclasses.replace(getattr(self, name), **fields) for name, fields in sections.items()}
        return dataclasses.replace(self, **updated)

    def to_json(self) -> str:
        """The configuration as JSON (saved with every checkpoint)."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "DeepSchedConfig":
        """The configuration saved by `to_json` (a missing `eval` section takes the defaults)."""
        raw = json.loads(text)
        data = dict(raw["data"], sizes=tuple(raw["data"]["sizes"]), ood_generators=tuple(raw["data"]["ood_generators"]))
        evaluation = raw.get("eval", {})
        for name in ("variants", "timing_sizes"):
            if name in evaluation:
                evaluation = dict(evaluation, **{name: tuple(evaluation[name])})
        return cls(
            model=ModelConfig(**raw["model"]),
            data=DataConfig(**data),
            train=TrainConfig(**raw["train"]),
            eval=EvalConfig(**evaluation),
        )

    def identity(self, seed: int) -> dict:
        """What a training checkpoint must match to be resumed: model, data and training settings
        (all but the number of epochs, so that a finished run can be extended) and the seed."""
        sections = {name: dataclasses.asdict(getattr(self, name)) for name in ("model", "data", "train")}
        sections["train"]["epochs"] = None
        return {"config": sections, "seed": seed}


# The experiment's presets (look one up with `jaxsched.common.named_config`):
# - `test`: seconds, for the test suite;
# - `default`: CPU, 16 to 64 tasks on 8 processors, 384 training instances per size, 12 epochs;
# - `full`: GPU, at the paper's scale of machines: 188 processors (the paper's count), DAGs of 128 to 512 tasks
#   (the paper's smallest instance has 486), 2,048 training instances per size (the padded comp array alone is
#   about 3 GB), hidden size 64, 100 epochs (the paper's count).
CONFIGS = {
    "test": DeepSchedConfig(
        model=ModelConfig(hidden=8, graph_layers=1, max_tasks=64, max_procs=8),
        data=DataConfig(num_procs=4, sizes=(8, 12), num_train=32, num_val=8, num_test=8, num_ood=4),
        train=TrainConfig(epochs=3, batch_size=8, learning_rate=3e-3, decay_every=2, num_seeds=2),
        eval=EvalConfig(
            variants=("feedback",),
            ablation=False,
            count=1,
            samples=8,
            ga_population=4,
            ga_generations=2,
            timing_sizes=(16,),
            timing_procs=4,
            timing_ga_max=16,
        ),
    ),
    "default": DeepSchedConfig(),
    "full": DeepSchedConfig(
        model=ModelConfig(hidden=64, graph_layers=3),
        data=DataConfig(num_procs=188, sizes=(128, 256, 512), num_train=2048, num_val=128, num_test=128, num_ood=64),
        train=TrainConfig(epochs=100, batch_size=32, learning_rate=1e-3, decay_every=20, num_seeds=2),
    ),
}
