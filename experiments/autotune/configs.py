"""The autotuning study's configuration and presets: `test` (seconds), `default` (four real jobs on this machine,
about 5 minutes on 2 quiet cores), `full` (eight bigger jobs, for a larger machine or an accelerator)."""

from __future__ import annotations

import dataclasses

from jaxsched.autotune import POLICIES, Workload, check_protocol
from jaxsched.common import integer


@dataclasses.dataclass(frozen=True)
class StudyConfig:
    """The job mix, the tuning knobs of every job and the simulator study's grid."""

    workloads: tuple[tuple[str, int], ...] = (("matmul", 256), ("scan", 1024), ("xla_options", 256), ("matmul", 128))
    rounds: int = 4
    batch: int = 4
    repeats: int = 5
    min_repeat_s: float = 0.02  # as precise as 0.1 s at a fifth of the cost (benchmarks/autotune_profiling.py)
    clock: str = "cpu"
    fit_steps: int = 2000
    seed: int = 0
    policies: tuple[str, ...] = ("sequential", "parallel", "load_aware", "predictive")
    alone_repeats: int = 7
    sim_jobs: tuple[int, ...] = (10, 100, 1000)
    sim_machines: tuple[int, ...] = (1, 2, 4, 8)
    sim_seed: int = 0

    def __post_init__(self):
        unknown = [p for p in self.policies if p not in POLICIES]
        if unknown or "sequential" not in self.policies:
            raise ValueError(f"policies must be known and include 'sequential' (the reference), got {self.policies}")
        check_protocol(self.repeats, self.min_repeat_s, self.clock, "StudyConfig")
        for name in ("rounds", "batch", "fit_steps", "alone_repeats"):
            integer(f"StudyConfig.{name}", getattr(self, name), 1)
        for name in ("sim_jobs", "sim_machines"):
            for value in getattr(self, name):
                integer(f"StudyConfig.{name}", value, 1)
        for kind, size in self.workloads:
            Workload(kind, size)  # raises on a bad workload
        if len({Workload(k, s).name for k, s in self.workloads}) != len(self.workloads):
            raise ValueError(f"workloads must differ, got {self.workloads}")


CONFIGS = {
    "default": StudyConfig(),
    "test": StudyConfig(
        workloads=(("matmul", 32), ("xla_options", 16)),
        rounds=1,
        batch=2,
        repeats=2,
        min_repeat_s=0.0,
        fit_steps=50,
        policies=("sequential", "load_aware"),
        alone_repeats=2,
        sim_jobs=(10,),
        sim_machines=(1, 2),
    ),
    "full": StudyConfig(
        workloads=(
            ("matmul", 512),
            ("scan", 4096),
            ("xla_options", 512),
            ("matmul", 256),
            ("scan", 2048),
            ("xla_options", 256),
            ("matmul", 128),
            ("scan", 1024),
        ),
        rounds=8,
        batch=8,
        min_repeat_s=0.1,  # the dearest protocol: 0.02 s was chosen on the CPU clock, not on an accelerator
        clock="wall",  # an accelerator's time is not the host process's CPU time
    ),
}
