"""Domain-free pieces shared by every package: placing a batch across devices."""

from jaxsched.common.sharding import (
    BATCH_AXIS,
    batch_mesh,
    batch_sharding,
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

__all__ = [
    "BATCH_AXIS",
    "batch_mesh",
    "batch_sharding",
    "constrain_batch",
    "gather",
    "initialize_distributed",
    "join_from_environment",
    "pad_batch",
    "padded_batch_size",
    "replicate",
    "replicated",
    "shard_batch",
]
