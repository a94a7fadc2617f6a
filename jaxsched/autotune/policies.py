"""Scheduling policies for the stages of many tuning jobs, behind one interface.

A policy answers two questions for the central scheduler (`jaxsched.autotune.scheduler`): may a
stage start while its resource is busy (`exclusive`; and `one_job_per_machine` for the monolithic
baseline), and in which order do ready stages get a free resource (`priority`, smaller first,
fixed when the stage becomes ready). `observe` feeds measured stage durations back.

* `sequential`: one job at a time per machine, in submission order (the monolithic baseline).
* `parallel`: every job runs its own loop at once, uncoordinated; stages sharing a resource
  interfere (the thesis's shared-server setup, 3.4.2).
* `load_aware`: the thesis's scheduler (4.1.1): a stage starts only when its resource is free; ready
  stages are served first come, first served (fair: no job overtakes one that waited longer).
* `predictive`: the thesis's future work (5.2): stage durations are estimated online per job and
  stage, and ready stages are served by the estimated device work left in their job, most first
  (the upward rank of list scheduling restricted to the bottleneck: the exclusive device is what
  must not starve; equal estimates fall back to first come, first served). In simulations of random
  mixes this beat ranking by all work left, which starves the device behind long compiles.
"""

from __future__ import annotations

import numpy as np

from jaxsched.autotune.jobs import STAGES
from jaxsched.autotune.resources import DEVICE
from jaxsched.common.arguments import number


class Policy:
    """Base policy: exclusive resources, first come first served."""

    name = "policy"
    exclusive = True
    one_job_per_machine = False

    def priority(self, job: int, round_: int, stage: int, rounds: int, submitted: float, now: float) -> tuple:
        """Sort key of a stage that became ready at `now` (smaller starts first)."""
        return (now, submitted, job)

    def observe(self, job: int, stage: int, seconds: float) -> None:
        """A stage of `job` ran for `seconds`."""

    def register(self, job: int, demands) -> None:
        """Job `job` was submitted with one `Demand` per stage."""


class Sequential(Policy):
    """One job at a time per machine, in submission order."""

    name = "sequential"
    one_job_per_machine = True

    def priority(self, job, round_, stage, rounds, submitted, now):
        return (submitted, job)


class Parallel(Policy):
    """Every ready stage starts at once; resources are shared, not reserved."""

    name = "parallel"
    exclusive = False


class LoadAware(Policy):
    """A stage starts when its resource is free; first come, first served."""

    name = "load_aware"


class DurationEstimator:
    """Online estimates of stage durations: per job and stage an exponential moving average of what
    was measured; before a job's first measurement of a stage, the mean over all jobs (1 s before any)."""

    def __init__(self, smoothing: float = 0.5):
        self.smoothing = number("smoothing", smoothing, 0, 1, above=True)
        self.per_job: dict[int, list[float | None]] = {}  # plain floats: called once per stage in the simulator
        self.total = [0.0] * len(STAGES)
        self.count = [0] * len(STAGES)

    def observe(self, job: int, stage: int, seconds: float) -> None:
        """Folds one measured duration into the estimates."""
        own = self.per_job.setdefault(job, [None] * len(STAGES))
        own[stage] = seconds if own[stage] is None else (1 - self.smoothing) * own[stage] + self.smoothing * seconds
        self.total[stage] += seconds
        self.count[stage] += 1

    def estimate(self, job: int) -> np.ndarray:
        """Estimated seconds of each stage of `job` ([4])."""
        return np.asarray(self._estimate(job))

    def _estimate(self, job: int) -> list[float]:
        prior = [t / c if c else 1.0 for t, c in zip(self.total, self.count)]
        own = self.per_job.get(job)
        return prior if own is None else [p if o is None else o for o, p in zip(own, prior)]

    def remaining(self, job: int, round_: int, stage: int, rounds: int, counted=None) -> float:
        """Estimated seconds of the stages of `job` from (`round_`, `stage`) to its end, counting only
        the stages s with `counted[s]` when given."""
        per_stage = self._estimate(job)
        if counted is not None:
            per_stage = [e if c else 0.0 for e, c in zip(per_stage, counted)]
        return float(sum(per_stage[stage:]) + (rounds - round_ - 1) * sum(per_stage))


class Predictive(Policy):
    """Load-aware with estimated durations: the job with the most estimated device work left goes first."""

    name = "predictive"

    def __init__(self, smoothing: float = 0.5):
        self.estimator = DurationEstimator(smoothing)
        self.on_device: dict[int, tuple[bool, ...]] = {}  # job -> which of its stages use a device

    def register(self, job, demands):
        self.on_device[job] = tuple(kind == DEVICE for kind, _ in demands)

    def priority(self, job, round_, stage, rounds, submitted, now):
        device_left = self.estimator.remaining(job, round_, stage, rounds, self.on_device.get(job))
        return (-device_left, now, submitted, job)

    def observe(self, job, stage, seconds):
        self.estimator.observe(job, stage, seconds)


POLICIES = {cls.name: cls for cls in (Sequential, Parallel, LoadAware, Predictive)}


def make_policy(name: str) -> Policy:
    """A fresh policy by name (policies learn, so each run needs its own)."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; known policies are {sorted(POLICIES)}")
    return POLICIES[name]()
