"""A batch axis across every device: a 1-D mesh, padded placement, gathered results, multi-process start.

Batched programs (vmapped sweeps, data-parallel training, environment batches, GA populations) call
`batch_mesh` for a 1-D `jax.sharding.Mesh` over the devices (all of them by default, every process's after
`initialize_distributed`), `shard_batch` to pad the first axis to a multiple of the device count and place it
across the mesh, `replicate` for what every device needs whole (parameters, datasets), and `gather` to bring
the results back to this host with the padding dropped. Jitted programs then follow their inputs' sharding
(XLA's SPMD partitioner): a vmapped program runs each device's slice of the batch, and a mean over the batch
becomes a cross-device reduction. Programs that build their batch inside (environments reset in the program)
pin it with `constrain_batch`. Padding repeats the batch's last element, so padded rows compute something
valid (no NaN from zeros) and are dropped by `gather`.

Only `Mesh`, `NamedSharding`, `PartitionSpec`, `jax.device_put` and `jax.lax.with_sharding_constraint` are
used: they mean the same in jax 0.10 and 0.11 (no `pmap`, no `jax.make_mesh`, whose default axis types differ).
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

BATCH_AXIS = "batch"
Devices = Mesh | Sequence[jax.Device] | int | None


def batch_mesh(devices: Devices = None) -> Mesh:
    """A 1-D mesh with axis `BATCH_AXIS` over `devices`: a device list, an existing 1-D mesh (returned as is),
    a count (the first that many of `jax.devices()`), or None for all of `jax.devices()` (this process's
    devices, and every other process's after `initialize_distributed`). All devices must share one platform."""
    if isinstance(devices, Mesh):
        if len(devices.axis_names) != 1:
            raise ValueError(f"a batch mesh has one axis, got axes {devices.axis_names}")
        _check_one_platform(list(devices.devices.flat))
        return devices
    if devices is None:
        devices = jax.devices()
    elif isinstance(devices, int) and not isinstance(devices, bool):
        available = jax.devices()
        if not 1 <= devices <= len(available):
            raise ValueError(f"asked for {devices} devices, {len(available)} are available")
        devices = available[:devices]
    devices = list(devices)
    if not devices:
        raise ValueError("a mesh needs at least one device")
    _check_one_platform(devices)
    return Mesh(np.array(devices), (BATCH_AXIS,))


def _check_one_platform(devices: list) -> None:
    platforms = sorted({device.platform for device in devices})
    if len(platforms) > 1:
        listed = ", ".join(f"{device} ({device.platform})" for device in devices)
        raise ValueError(f"a mesh's devices must share one platform, got {platforms}: {listed}")


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """The sharding of an array whose leading axis is split across `mesh` (any rank)."""
    return NamedSharding(mesh, PartitionSpec(mesh.axis_names[0]))


def replicated(mesh: Mesh) -> NamedSharding:
    """The sharding of an array that every device of `mesh` holds whole."""
    return NamedSharding(mesh, PartitionSpec())


def padded_batch_size(size: int, mesh: Mesh, *, pad: bool = True) -> int:
    """`size` rounded up to a multiple of the mesh's device count; without `pad`, `size` itself, which must
    then divide evenly (a batch smaller than the device count cannot, so it is refused)."""
    count = mesh.devices.size
    if size < 1:
        raise ValueError(f"a batch needs at least one element, got {size}")
    if pad:
        return -(-size // count) * count
    if size < count:
        raise ValueError(f"a batch of {size} cannot be split across {count} devices without padding")
    if size % count:
        raise ValueError(f"a batch of {size} does not divide across {count} devices and padding is off")
    return size


def batch_size(tree: Any) -> int:
    """The shared leading-axis length of every leaf of `tree` (a ValueError if they differ)."""
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in jax.tree.leaves(tree)}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"every leaf of a batch needs the same leading axis, got lengths {sorted(map(str, sizes))}")
    return sizes.pop()


def pad_batch(tree: Any, size: int) -> Any:
    """Every leaf's leading axis extended to `size` by repeating its last element."""

    def pad(leaf):
        leaf = jnp.asarray(leaf)
        extra = size - leaf.shape[0]
        return leaf if extra == 0 else jnp.concatenate([leaf, jnp.repeat(leaf[-1:], extra, axis=0)])

    return jax.tree.map(pad, tree)


def shard_batch(tree: Any, mesh: Mesh, *, pad: bool = True) -> tuple[Any, int]:
    """`(placed, size)`: `tree` with its leading (batch) axis padded to a multiple of the device count and split
    across `mesh`, and the real batch size for `gather`. In several processes every process passes the same
    `tree` (the same seeds give the same batch) and keeps its own devices' slices."""
    size = batch_size(tree)
    padded = pad_batch(tree, padded_batch_size(size, mesh, pad=pad))
    return jax.tree.map(lambda leaf: _place(leaf, batch_sharding(mesh)), padded), size


def replicate(tree: Any, mesh: Mesh) -> Any:
    """`tree` placed whole on every device of `mesh` (the same value in every process)."""
    return jax.tree.map(lambda leaf: _place(leaf, replicated(mesh)), tree)


def _place(leaf: Any, sharding: NamedSharding) -> jax.Array:
    """`leaf` (the same value in every process) laid out as `sharding`; with several processes, each process
    fills only its own devices' slices (`jax.device_put` only reaches this process's devices)."""
    if sharding.is_fully_addressable:
        return jax.device_put(leaf, sharding)
    if jnp.issubdtype(jnp.result_type(leaf), jax.dtypes.prng_key):
        return jax.random.wrap_key_data(_place(jax.random.key_data(leaf), sharding), impl=jax.random.key_impl(leaf))
    host = np.asarray(leaf)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def constrain_batch(tree: Any, mesh: Mesh) -> Any:
    """Inside a jitted program: split the first axis of every leaf of `tree` across `mesh` (whose device count
    must divide it), for batches the program builds itself (environment states after a reset)."""
    return jax.lax.with_sharding_constraint(tree, jax.tree.map(lambda _: batch_sharding(mesh), tree))


def gather(tree: Any, size: int | None = None) -> Any:
    """Every leaf of `tree` whole on this process's default device (collected from the other processes if some of
    it lives there), cut to its first `size` entries (the padding dropped). Shards are copied through the host,
    not gathered by a device collective, so this never waits on the other devices' threads."""

    def whole(leaf):
        if not isinstance(leaf, jax.Array):
            return leaf if size is None else leaf[:size]
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            return jax.random.wrap_key_data(whole(jax.random.key_data(leaf)), impl=jax.random.key_impl(leaf))
        host = np.asarray(leaf if leaf.is_fully_addressable else multihost_utils.process_allgather(leaf, tiled=True))
        return jax.device_put(host if size is None else host[:size])

    return jax.tree.map(whole, tree)


def initialize_distributed(coordinator_address: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None, *, timeout_s: int = 300) -> None:
    """Join a multi-process run (`jax.distributed.initialize`; one call per process, before any other JAX call).

    The arguments default to the environment variables `JAX_COORDINATOR_ADDRESS` (host:port of process 0),
    `JAX_NUM_PROCESSES` and `JAX_PROCESS_ID`. After the start, the process count the coordinator reports must
    equal `num_processes`, else a ValueError names both. CPU processes exchange data through gloo."""
    coordinator_address = coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS")
    num_processes = num_processes if num_processes is not None else _env_int("JAX_NUM_PROCESSES")
    process_id = process_id if process_id is not None else _env_int("JAX_PROCESS_ID")
    if not coordinator_address or num_processes is None or process_id is None:
        raise ValueError("a multi-process run needs a coordinator address, a process count and a process id "
                         "(arguments or JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID)")
    if num_processes < 1 or not 0 <= process_id < num_processes:
        raise ValueError(f"process id {process_id} is not in [0, {num_processes})")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address, num_processes, process_id, initialization_timeout=timeout_s)
    if jax.process_count() != num_processes:
        raise ValueError(f"this process was started for {num_processes} processes but the coordinator at "
                         f"{coordinator_address} reports {jax.process_count()}")


def join_from_environment() -> bool:
    """`initialize_distributed()` from the environment when `JAX_COORDINATOR_ADDRESS` is set (what an experiment
    calls first, so that one command per process runs one program over every process); True if it joined."""
    if "JAX_COORDINATOR_ADDRESS" not in os.environ:
        return False
    initialize_distributed()
    return True


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def add_devices_option(parser: argparse.ArgumentParser) -> None:
    """The `--devices N` option every experiment that batches takes (parsed as an int; None means all devices), with
    the environment variables that make one command per process join a multi-process run (`join_from_environment`)."""
    parser.add_argument("--devices", type=int, default=None,
                        help="devices to split batches across (default: all; with JAX_COORDINATOR_ADDRESS, "
                        "JAX_NUM_PROCESSES and JAX_PROCESS_ID set, one command per process runs one program over "
                        "every process's devices)")


def checked_devices(parser: argparse.ArgumentParser, devices: int | None) -> int | None:
    """Join a multi-process run if the environment says so (`join_from_environment`), then check `--devices`
    against the devices there are: fewer than 1 or more than there are ends the program with one line and exit
    code 2, before any work (the experiments' own paths that ignore devices, such as a NumPy GA, refuse it alike)."""
    join_from_environment()
    if devices is not None:
        try:
            batch_mesh(devices)
        except ValueError as error:
            parser.exit(2, f"{parser.prog}: error: --devices: {error}\n")
    return devices
