"""Every list scheduler (and the GA) on every workload family: `configs` (presets `test`, `default`, `full`),
`compare` (the driver, resumable from its records), `report` (table and heatmap) and `main` (the flags)."""

from experiments.list_schedulers.compare import compare, summarise, workload_families
from experiments.list_schedulers.configs import CONFIGS, ComparisonConfig
from experiments.list_schedulers.main import main

__all__ = ["CONFIGS", "ComparisonConfig", "compare", "main", "summarise", "workload_families"]
