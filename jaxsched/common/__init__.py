"""Domain-free infrastructure of every package: argument checks, workdirs, checkpoints, presets, timing, machine."""

from jaxsched.common.arguments import integer, number
from jaxsched.common.checkpoint import EpochCheckpointer, Restored
from jaxsched.common.machine import cpu_model, machine_description
from jaxsched.common.presets import STANDARD_NAMES, preset
from jaxsched.common.timing import Comparison, alternated_times, best_time, check_timing, compare, median_time
from jaxsched.common.workdir import (
    ConfigMismatch,
    Workdir,
    as_json,
    check_same_config,
    differing_fields,
    read_json,
    write_json,
    write_text,
)

__all__ = [
    "Comparison",
    "ConfigMismatch",
    "EpochCheckpointer",
    "Restored",
    "STANDARD_NAMES",
    "Workdir",
    "alternated_times",
    "as_json",
    "best_time",
    "check_same_config",
    "check_timing",
    "compare",
    "cpu_model",
    "differing_fields",
    "integer",
    "machine_description",
    "median_time",
    "number",
    "preset",
    "read_json",
    "write_json",
    "write_text",
]
