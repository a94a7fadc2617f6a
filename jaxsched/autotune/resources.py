"""Resources of a tuning machine: N CPU cores and K exclusive devices.

A stage asks for a `Demand`: some CPU cores (propose, build, update) or one device (profile). A
device runs one stage at a time: profiling needs the device to itself, or its timings are distorted
(Stiller 2019, 3.4.2). On a CPU-only machine one core plays the device: `local_machine` keeps it out
of the CPU pool and the process runner pins profiling to it (`pin_to_cores`), so interference
between stages is real and measurable.
"""

from __future__ import annotations

import dataclasses
import os
from typing import NamedTuple

from jaxsched.common.arguments import integer

CPU = "cpu"
DEVICE = "device"
RESOURCE_KINDS = (CPU, DEVICE)


class Demand(NamedTuple):
    """What one stage occupies while it runs: `amount` units of resource `kind` ('cpu' or 'device')."""

    kind: str
    amount: int = 1


def check_demand(demand: Demand, where: str) -> Demand:
    """`demand` as a `Demand`, or a ValueError naming `where` for an unknown kind or a non-positive amount."""
    kind, amount = demand
    if kind not in RESOURCE_KINDS:
        raise ValueError(f"{where}: unknown resource {kind!r}; known resources are {RESOURCE_KINDS}")
    amount = integer(f"{where}: resource amount", amount, 1)
    if kind == DEVICE and amount != 1:
        raise ValueError(f"{where}: a stage uses one device at a time, got {amount} devices")
    return Demand(kind, amount)


@dataclasses.dataclass(frozen=True)
class Machine:
    """One server: `cpu_cores` cores for CPU stages and `devices` exclusive devices.

    `cpu_ids` and `device_ids` name the OS cores the process runner pins stages to (None: not
    pinned, as in the simulator and on Ray, where Ray's resources do the accounting). `memory_bytes`
    is the memory a job may use (None: unknown); `submit` refuses a job whose arrays cannot fit.
    """

    cpu_cores: int
    devices: int
    cpu_ids: tuple[int, ...] | None = None
    device_ids: tuple[int, ...] | None = None
    memory_bytes: int | None = None

    def __post_init__(self):
        for name in ("cpu_cores", "devices"):
            object.__setattr__(self, name, integer(f"Machine.{name}", getattr(self, name), 0))
        if self.memory_bytes is not None:
            memory = integer("Machine.memory_bytes (None: unknown)", self.memory_bytes, 1)
            object.__setattr__(self, "memory_bytes", memory)
        if self.cpu_cores + self.devices == 0:
            raise ValueError("Machine needs at least one CPU core or device")
        for name, count in (("cpu_ids", self.cpu_cores), ("device_ids", self.devices)):
            ids = getattr(self, name)
            if ids is not None:
                ids = tuple(int(i) for i in ids)
                object.__setattr__(self, name, ids)
                if len(ids) != count:
                    raise ValueError(f"Machine.{name} must name {count} cores, got {ids}")
        if self.cpu_ids is not None and self.device_ids is not None and set(self.cpu_ids) & set(self.device_ids):
            raise ValueError(
                f"Machine: cores {sorted(set(self.cpu_ids) & set(self.device_ids))} are both CPU and device"
            )

    def capacity(self, kind: str) -> int:
        """Units of resource `kind` this machine has."""
        if kind == CPU:
            return self.cpu_cores
        if kind == DEVICE:
            return self.devices
        raise ValueError(f"unknown resource {kind!r}; known resources are {RESOURCE_KINDS}")

    def cores_of(self, kind: str) -> tuple[int, ...] | None:
        """OS cores behind resource `kind` (None when the machine is not pinned)."""
        return self.cpu_ids if kind == CPU else self.device_ids


def local_machine(device_cores: int = 1) -> Machine:
    """This computer, with its last `device_cores` usable cores playing devices (CPU-only machines),
    and its physical memory.

    Raises ValueError when fewer than `device_cores + 1` cores are usable.
    """
    device_cores = integer("local_machine: device_cores", device_cores, 0)
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < device_cores + 1:
        raise ValueError(
            f"local_machine: {len(cores)} usable cores cannot give {device_cores} device cores plus a CPU core"
        )
    cpu_ids, device_ids = tuple(cores[: len(cores) - device_cores]), tuple(cores[len(cores) - device_cores :])
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else None
    return Machine(len(cpu_ids), len(device_ids), cpu_ids, device_ids, memory)


def pin_to_cores(cores: tuple[int, ...]) -> None:
    """Pins every thread of this process (XLA's thread pools included) to `cores`.

    `os.sched_setaffinity(0, ...)` moves only the calling thread on Linux, so each thread id under
    /proc/self/task is moved; threads started later inherit the affinity of their creator.
    """
    mask = set(cores)
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except FileNotFoundError:  # not Linux: the process affinity is the best there is
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, mask)
        except (ProcessLookupError, PermissionError):  # a thread that ended meanwhile
            continue


def thread_affinities() -> dict[int, frozenset[int]]:
    """The cores each thread of this process may run on, by thread id (from /proc/self/task on Linux;
    elsewhere only the calling thread's), to check that pinning reached every thread."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except FileNotFoundError:
        return {0: frozenset(os.sched_getaffinity(0))}
    cores = {}
    for tid in tids:
        try:
            cores[tid] = frozenset(os.sched_getaffinity(tid))
        except ProcessLookupError:  # a thread that ended meanwhile
            continue
    return cores
