"""The ternary sparsification study (Dordoni et al., MLSP 2024): `configs` (the presets `test`, `default`, `full`),
`train` (the driver, `train_and_evaluate(study, workdir)`), `report` (tables, targets, figures) and `main` (the
flags); `python -m experiments.ternary_sweep --help` lists them."""

from experiments.ternary_sweep.configs import CONFIGS, GROWING, Study, ternary_members
from experiments.ternary_sweep.main import main, make_study
from experiments.ternary_sweep.report import plot
from experiments.ternary_sweep.train import StudyResult, train_and_evaluate

__all__ = ["CONFIGS", "GROWING", "Study", "StudyResult", "main", "make_study", "plot", "ternary_members",
           "train_and_evaluate"]
