"""Load-aware scheduling of autotuning jobs (Stiller 2019) on this machine plus a simulator study: `configs`
(presets `test`, `default`, `full`), `study` (the driver, `run_study(config, workdir)`), `report` (tables and
figures) and `main` (the flags)."""

from experiments.autotune.configs import CONFIGS, StudyConfig
from experiments.autotune.main import main
from experiments.autotune.report import markdown, plots
from experiments.autotune.study import fit_interference, run_study, simulation_study

__all__ = ["CONFIGS", "StudyConfig", "fit_interference", "main", "markdown", "plots", "run_study",
           "simulation_study"]
