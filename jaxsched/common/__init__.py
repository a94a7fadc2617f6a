"""Domain-free infrastructure of every package: argument checks, workdirs, checkpoints, presets, timing, machine,
and placing a batch across devices."""

from jaxsched.common.arguments import integer, number
from jaxsched.common.checkpoint import EpochCheckpointer, Restored
from jaxsched.common.machine import cpu_model, machine_description
from jaxsched.common.presets import STANDARD_NAMES, preset
from jaxsched.common.sharding import (
    BATCH_AXIS,
    add_devices_option,
    batch_mesh,
    batch_sharding,
    checked_devices,
    constrain_batch,
    gather,
    initialize_distributed,
    join_from_environment,
    pad_batch,
    padded_batch_size,
    replicate,
    replicated,
    shard_batch,
)
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
    "BATCH_AXIS",
    "Comparison",
    "ConfigMismatch",
    "EpochCheckpointer",
    "Restored",
    "STANDARD_NAMES",
    "Workdir",
    "add_devices_option",
    "alternated_times",
    "as_json",
    "batch_mesh",
    "batch_sharding",
    "best_time",
    "check_same_config",
    "checked_devices",
    "check_timing",
    "compare",
    "constrain_batch",
    "cpu_model",
    "differing_fields",
    "gather",
    "initialize_distributed",
    "integer",
    "join_from_environment",
    "machine_description",
    "median_time",
    "number",
    "pad_batch",
    "padded_batch_size",
    "preset",
    "read_json",
    "replicate",
    "replicated",
    "shard_batch",
    "write_json",
    "write_text",
]
