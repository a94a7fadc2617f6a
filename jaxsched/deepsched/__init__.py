"""DeepSched: a neural scheduler trained on HEFT labels and decoded to valid schedules.

    from jaxsched.deepsched import NeuralScheduler
    scheduler = NeuralScheduler.load("results/deepsched/checkpoints/feedback")
    schedule = scheduler.schedule(problem)                      # greedy, always valid
    schedule = scheduler.schedule(problem, decoder="sampling")  # best of 64 sampled assignments
    network = scheduler.dense()     # the same greedy scheduler on jaxsched.dense instances, inside jit
                                    # (the adversarial search's `learned`: experiments.pisa --deepsched)

Training: `data.load_or_build` (HEFT-labelled datasets), `train.fit` (seeds vmapped, orbax
checkpoints, resume) or `make_train(config, data)` for a pure `train(key)`. The whole experiment lives in
`experiments/deepsched/` (`python -m experiments.deepsched`). See docs/deepsched.md.
"""

from jaxsched.deepsched.configs import (
    CONFIGS,
    VARIANTS,
    DataConfig,
    DeepSchedConfig,
    EvalConfig,
    ModelConfig,
    TrainConfig,
)
from jaxsched.deepsched.data import (
    LabelledSet,
    Labels,
    Split,
    label,
    load_or_build,
    load_problems,
    save_problems,
    training_problem,
)
from jaxsched.deepsched.decode import DECODERS, NeuralScheduler
from jaxsched.deepsched.dense import DenseScheduler, dense_features
from jaxsched.deepsched.features import (
    PROC_FEATURES,
    TASK_FEATURES,
    Features,
    bucket_shape,
    padded_size,
    problem_features,
    time_scale,
)
from jaxsched.deepsched.model import STATE_FEATURES, DeepSchedNet, Encoding, Prediction, eft_rule_params
from jaxsched.deepsched.train import FitResult, Metrics, TrainState, fit, loss_fn, make_train

__all__ = [
    "CONFIGS",
    "DECODERS",
    "PROC_FEATURES",
    "STATE_FEATURES",
    "TASK_FEATURES",
    "VARIANTS",
    "DataConfig",
    "DeepSchedConfig",
    "DeepSchedNet",
    "DenseScheduler",
    "Encoding",
    "EvalConfig",
    "Features",
    "FitResult",
    "LabelledSet",
    "Labels",
    "Metrics",
    "ModelConfig",
    "NeuralScheduler",
    "Prediction",
    "Split",
    "TrainConfig",
    "TrainState",
    "bucket_shape",
    "dense_features",
    "eft_rule_params",
    "fit",
    "label",
    "load_or_build",
    "load_problems",
    "loss_fn",
    "make_train",
    "padded_size",
    "problem_features",
    "save_problems",
    "time_scale",
    "training_problem",
]
