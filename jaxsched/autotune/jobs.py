"""Autotuning jobs as state machines over four stages, and the MockJob that replays stage times.

A tuning job (TVM's loop, Stiller 2019 4.1.2) repeats `propose -> build -> profile -> update` for a
budget of `rounds`. Decomposed, a job does nothing on its own: it waits for the scheduler to command
its next stage, and each stage declares the resource it needs. Stages are functions of an explicit
job state (`run_stage(stage, round, state) -> state`), so a job can live in a worker process, or be
passed between Ray tasks on different processes (the thesis's stateless client, 4.3).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, NamedTuple, Sequence

import numpy as np

from jaxsched.autotune.resources import CPU, DEVICE, Demand, Machine, check_demand
from jaxsched.common.arguments import integer, number

STAGES = ("propose", "build", "profile", "update")
PROPOSE, BUILD, PROFILE, UPDATE = range(4)
DEFAULT_DEMANDS = (Demand(CPU, 1), Demand(CPU, 1), Demand(DEVICE, 1), Demand(CPU, 1))


class Job:
    """A tuning job: `rounds` rounds of the four stages, each on the resource of `demands[stage]`.

    Subclasses implement `run_stage`; `arrival` is when the job is submitted (seconds from the start
    of a run) and `machine` the index of the machine that owns its target device (None: assigned
    round-robin by submission order).
    """

    def __init__(
        self,
        name: str,
        rounds: int,
        demands: Sequence[Demand] = DEFAULT_DEMANDS,
        arrival: float = 0.0,
        machine: int | None = None,
    ):
        if not isinstance(name, str) or not name:
            raise ValueError(f"job name must be a non-empty string, got {name!r}")
        self.rounds = integer(f"job {name!r}: budget (rounds)", rounds, 1)
        if len(demands) != len(STAGES):
            raise ValueError(f"job {name!r}: needs one demand per stage {STAGES}, got {len(demands)}")
        self.arrival = number(f"job {name!r}: arrival (seconds)", arrival, 0)
        self.machine = None if machine is None else integer(f"job {name!r}: machine index", machine, 0)
        self.name = name
        self.demands = tuple(check_demand(d, f"job {name!r} stage {s!r}") for s, d in zip(STAGES, demands))

    def init_state(self) -> Any:
        """The state before the first stage."""
        return None

    def check(self, machine: Machine) -> None:
        """Raises ValueError for parameters `machine` cannot run, found without running anything (nothing
        by default; a tuning job checks that its workload's arrays fit in the machine's memory)."""

    def definition(self) -> str:
        """What makes this job the job it is, as text: a run resumed from the record database refuses a
        job of the same name with another definition."""
        return f"{type(self).__qualname__}(rounds={self.rounds}, demands={self.demands})"

    def prepare(self) -> None:
        """One-time setup of a long-lived runner process before the job starts (nothing by default)."""

    def run_stage(self, stage: int, round_: int, state: Any) -> Any:
        """Runs one stage on the resource it was granted; returns the new state."""
        raise NotImplementedError

    def result(self, state: Any) -> Any:
        """What the finished job reports (for tuning jobs: the best configuration and its time)."""
        return None


class MockJob(Job):
    """A job whose stages only sleep for given durations (`durations[rounds, 4]`, seconds).

    The thesis's debugging aid (4.2.3): scheduling decisions can be tested without hours of tuning,
    and the simulator, fed the same durations, must reproduce a real run of MockJobs.
    """

    def __init__(
        self,
        name: str,
        durations,
        demands: Sequence[Demand] = DEFAULT_DEMANDS,
        arrival: float = 0.0,
        machine: int | None = None,
    ):
        durations = np.asarray(durations, dtype=np.float64)
        if durations.ndim != 2 or durations.shape[1] != len(STAGES):
            raise ValueError(f"job {name!r}: durations must have shape [rounds, {len(STAGES)}], got {durations.shape}")
        if not np.all(np.isfinite(durations)) or np.any(durations < 0):
            raise ValueError(f"job {name!r}: durations must be finite and non-negative")
        super().__init__(name, durations.shape[0], demands, arrival, machine)
        durations.setflags(write=False)
        self.durations = durations

    def definition(self) -> str:
        """The base definition and a digest of the durations."""
        return f"{super().definition()} durations {hashlib.sha256(self.durations.tobytes()).hexdigest()[:16]}"

    def run_stage(self, stage: int, round_: int, state: Any) -> Any:
        """Sleeps for the stage's duration (a stage that waits, using no CPU)."""
        time.sleep(float(self.durations[round_, stage]))
        return state


class StageDistributions(NamedTuple):
    """Log-normal stage durations: log(seconds) of stage s ~ Normal(mu[s], sigma[s])."""

    mu: np.ndarray  # [4]
    sigma: np.ndarray  # [4]

    def sample(self, rounds: int, rng: np.random.Generator) -> np.ndarray:
        """Durations [rounds, 4] drawn independently per stage."""
        return np.exp(rng.normal(self.mu, self.sigma, size=(rounds, len(STAGES))))


def fit_stage_distributions(stage: np.ndarray, seconds: np.ndarray) -> StageDistributions:
    """Fits a log-normal per stage to measured durations (`stage[n]` index into STAGES, `seconds[n]`).

    Raises ValueError when a stage has no measurement or a duration is not positive.
    """
    stage, seconds = np.asarray(stage), np.asarray(seconds, dtype=np.float64)
    if stage.shape != seconds.shape:
        raise ValueError(f"stage and seconds must have one shape, got {stage.shape} and {seconds.shape}")
    if not np.all(np.isfinite(seconds)) or np.any(seconds <= 0):
        raise ValueError("measured stage durations must be finite and positive")
    mu, sigma = np.empty(len(STAGES)), np.empty(len(STAGES))
    for s, name in enumerate(STAGES):
        logs = np.log(seconds[stage == s])
        if logs.size == 0:
            raise ValueError(f"no measured duration of stage {name!r} to fit")
        mu[s], sigma[s] = logs.mean(), logs.std()
    return StageDistributions(mu, sigma)


def mock_jobs(
    count: int,
    rounds: int,
    dists: StageDistributions,
    seed: int = 0,
    demands: Sequence[Demand] = DEFAULT_DEMANDS,
    arrival_rate: float = 0.0,
) -> list[MockJob]:
    """`count` MockJobs with durations drawn from `dists`; Poisson arrivals at `arrival_rate` jobs/s
    (0: all at time 0)."""
    count = integer("mock_jobs: count", count, 1)
    arrival_rate = number("mock_jobs: arrival_rate", arrival_rate, 0)
    rng = np.random.default_rng(seed)
    arrivals = np.zeros(count) if arrival_rate == 0 else np.cumsum(rng.exponential(1 / arrival_rate, count))
    return [MockJob(f"mock{j}", dists.sample(rounds, rng), demands, float(arrivals[j])) for j in range(count)]


def check_placement(job: Job, machine: int, machines: Sequence[Machine]) -> None:
    """Raises ValueError naming the job when `machines[machine]` does not exist or cannot run one of
    its stages (a device stage on a machine without devices, more cores than the machine has, or what
    `job.check` finds)."""
    if not 0 <= machine < len(machines):
        raise ValueError(f"job {job.name!r}: machine {machine} does not exist ({len(machines)} machines)")
    for name, (kind, amount) in zip(STAGES, job.demands):
        capacity = machines[machine].capacity(kind)
        if capacity == 0:
            raise ValueError(f"job {job.name!r}: stage {name!r} needs a {kind} but machine {machine} has 0 {kind}s")
        if amount > capacity:
            raise ValueError(
                f"job {job.name!r}: stage {name!r} needs {amount} {kind} units, machine {machine} has {capacity}"
            )
    job.check(machines[machine])


def assign_machines(jobs: Sequence[Job], machines: Sequence[Machine]) -> np.ndarray:
    """Machine index of every job (its own, or round-robin by position), checked with `check_placement`;
    raises ValueError for duplicate job names."""
    if not machines:
        raise ValueError("at least one machine is needed")
    names = [job.name for job in jobs]
    if len(set(names)) != len(names):
        raise ValueError(f"job names must be unique, got duplicates {sorted({n for n in names if names.count(n) > 1})}")
    where = np.array(
        [j % len(machines) if job.machine is None else job.machine for j, job in enumerate(jobs)], dtype=np.int64
    )
    for job, machine in zip(jobs, where):
        check_placement(job, int(machine), machines)
    return where


class Progress:
    """The state machine of one job: `round`, `stage` and `phase` (waiting, ready, running, done, failed).

    Legal moves: `arrive` (waiting -> ready), `start` (ready -> running), `finish` (running -> ready
    at the next stage, or done after the last stage of the last round), `fail` (running or waiting ->
    failed: the job is over) and `interrupt` (running -> waiting at the first stage of the round: its
    worker died and a replacement resumes from the state at the round's start). Anything else is a
    scheduler bug and raises RuntimeError. A job resumed after `first_round` finished rounds starts there.
    """

    WAITING, READY, RUNNING, DONE, FAILED = "waiting", "ready", "running", "done", "failed"

    def __init__(self, rounds: int, first_round: int = 0):
        first_round = integer("first_round", first_round, 0, rounds)
        self.rounds = rounds
        self.round = first_round
        self.stage = 0
        self.phase = Progress.WAITING if first_round < rounds else Progress.DONE

    def _move(self, source: str, target: str) -> None:
        if self.phase != source:
            raise RuntimeError(
                f"job cannot go {source} -> {target}: it is {self.phase} (round {self.round}, stage {self.stage})"
            )
        self.phase = target

    def arrive(self) -> None:
        """The job was submitted: its first stage is ready."""
        self._move(Progress.WAITING, Progress.READY)

    def start(self) -> None:
        """The scheduler started the current stage."""
        self._move(Progress.READY, Progress.RUNNING)

    def finish(self) -> None:
        """The current stage ended: the next one is ready, or the job is done."""
        self._move(Progress.RUNNING, Progress.READY)
        self.stage += 1
        if self.stage == len(STAGES):
            self.stage, self.round = 0, self.round + 1
            if self.round == self.rounds:
                self.phase = Progress.DONE

    def fail(self) -> None:
        """The running stage failed, or the job's worker died before it was ready: the job is over."""
        if self.phase not in (Progress.RUNNING, Progress.WAITING):
            raise RuntimeError(f"job cannot fail: it is {self.phase} (round {self.round}, stage {self.stage})")
        self.phase = Progress.FAILED

    def interrupt(self) -> None:
        """The running stage's worker died: the round starts again once a replacement is ready."""
        self._move(Progress.RUNNING, Progress.WAITING)
        self.stage = 0
