"""One description of the machine a number was measured on, for every record, report and benchmark."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import jax


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one, else what `platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description(load: bool = False) -> str:
    """Architecture, CPU model, usable cores, JAX's default device and JAX's version, e.g. `x86_64 AMD EPYC 7B13
    x2, cpu, jax 0.10.0`; with `load`, the 1-minute load average too. Measurements are comparable only between
    equal descriptions (tuning records are keyed by it), so the load is left out unless asked for."""
    device = jax.devices()[0]
    kind = device.platform if device.platform == "cpu" else f"{device.platform} {device.device_kind}"
    text = f"{platform.machine()} {cpu_model()} x{len(os.sched_getaffinity(0))}, {kind}, jax {jax.__version__}"
    return f"{text}, load {os.getloadavg()[0]:.1f}" if load else text
