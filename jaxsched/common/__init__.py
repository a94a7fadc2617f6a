"""Domain-free infrastructure of every package: argument checks, workdirs, checkpoints, presets, timing, machine,
and placing a batch across devices. Each name is imported from its module on first use (`jaxsched.common.lazy`), so
that a package needing one check loads neither orbax nor the timing tools."""

from jaxsched.common.lazy import lazy_face

__all__ = lazy_face(__name__, {
    "jaxsched.common.arguments": ("integer", "integer_fields", "number", "number_fields"),
    "jaxsched.common.checkpoint": ("EpochCheckpointer", "Restored"),
    "jaxsched.common.machine": ("cpu_model", "machine_description"),
    "jaxsched.common.presets": ("STANDARD_NAMES", "named_config"),
    "jaxsched.common.sharding": (
        "BATCH_AXIS", "Devices", "add_devices_option", "batch_mesh", "batch_sharding", "checked_devices",
        "constrain_batch", "gather", "initialize_distributed", "join_from_environment", "pad_batch",
        "padded_batch_size", "replicate", "replicated", "shard_batch",
    ),
    "jaxsched.common.timing": (
        "CLOCKS", "Comparison", "alternated_times", "best_time", "check_timing", "compare", "median_time",
    ),
    "jaxsched.common.workdir": (
        "ConfigMismatch", "Workdir", "as_json", "check_same_config", "differing_fields", "read_json", "write_json",
        "write_text",
    ),
})
