"""The DeepSched experiment's presets: `test` (seconds, the test suite), `default` (CPU, minutes), `full` (GPU).

They stay defined beside the network (`jaxsched.deepsched.configs`): a `DeepSchedConfig` is saved with every
checkpoint and `NeuralScheduler.load` rebuilds the network from it, so the library must read them.
"""

from jaxsched.deepsched import CONFIGS, VARIANTS, DeepSchedConfig, EvalConfig

__all__ = ["CONFIGS", "VARIANTS", "DeepSchedConfig", "EvalConfig"]
