"""DeepSched end to end: `configs` (presets `test`, `default`, `full`), `evaluate` (the driver,
`train_and_evaluate(config, workdir)`), `report` (tables and figures) and `main` (the flags)."""

from experiments.deepsched.configs import CONFIGS, DeepSchedConfig
from experiments.deepsched.evaluate import train_and_evaluate
from experiments.deepsched.main import main, make_config, parse_args
from experiments.deepsched.report import markdown, plots

__all__ = ["CONFIGS", "DeepSchedConfig", "main", "make_config", "markdown", "parse_args", "plots",
           "train_and_evaluate"]
