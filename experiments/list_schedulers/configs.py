"""The list-scheduler comparison's configuration and its presets: `test` (seconds, CI), `default` (10 instances of
50 tasks on 4 processors per family), `full` (50 instances of 100 tasks on 8 processors)."""

from __future__ import annotations

import dataclasses

from jaxsched import SCHEDULER_NAMES as NAMES
from jaxsched.common import integer_fields


@dataclasses.dataclass(frozen=True)
class ComparisonConfig:
    """Instances per family, their size, the schedulers compared and the GA's budget."""

    instances: int = 10
    num_tasks: int = 50
    num_procs: int = 4
    names: tuple[str, ...] = NAMES
    ga_population: int = 50
    ga_generations: int = 50
    seed: int = 0

    def __post_init__(self):
        unknown = [n for n in self.names if n not in NAMES]
        if unknown:
            raise ValueError(f"unknown scheduler(s) {', '.join(unknown)}; known: {', '.join(NAMES)}")
        integer_fields(self, 1, "instances", "num_procs", "ga_population", "ga_generations")
        integer_fields(self, 4, "num_tasks")
        integer_fields(self, 0, "seed")


CONFIGS = {
    "test": ComparisonConfig(instances=1, num_tasks=12, num_procs=3, ga_population=6, ga_generations=2),
    "default": ComparisonConfig(),
    "full": ComparisonConfig(instances=50, num_tasks=100, num_procs=8, ga_population=100, ga_generations=100),
}
