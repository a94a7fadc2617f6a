"""Real tuning jobs: propose with a learned cost model, build (lower + compile), profile, update.

Each stage is a function of an explicit, picklable `TuningState`: the build stage ships compiled
executables as serialized bytes (`jax.experimental.serialize_executable`), as TVM ships built
modules to its device runner, so the profile stage may run in another process or on a Ray node.
Profiling follows TVM's measure loop (`profile_calls`): a warm-up call, then `repeats` timed repeats of
`number` calls each (`number` chosen so a repeat lasts at least `min_repeat_s`), interleaved across
the batch's candidates (`jaxsched.common.timing.alternated_times`) so a slow spell hits them alike. A
candidate's time is its fastest repeat per call.

The clock is the process's CPU time by default (`clock="cpu"`): the profiling worker has every
thread pinned to the device core, so its CPU time is the device time the candidate used. Wall time
also counts the slices the OS gives any other process on that core, and, since `number` is
calibrated on the same clock, a wall-clock profile does less work when the core is shared: its
duration is bounded by `repeats * min_repeat_s`, not by the work (`benchmarks/autotune_profiling.py`
measures both effects). On an accelerator, or where the threads are not pinned, use `clock="wall"`.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Sequence

import jax
import numpy as np
from jax.experimental import serialize_executable

from jaxsched.autotune import _cost_model as cost_model
from jaxsched.autotune.jobs import DEFAULT_DEMANDS, Job
from jaxsched.autotune.resources import Demand, Machine
from jaxsched.autotune.workloads import Workload
from jaxsched.common.arguments import integer, number
from jaxsched.common.timing import CLOCKS, alternated_times, check_timing


@dataclasses.dataclass
class TuningState:
    """Everything a tuning job knows between stages."""

    measured: list[tuple[int, float]]  # (index into the workload's space, seconds per call)
    pending: list[int]  # the batch proposed this round
    executables: list[tuple]  # serialized compiled programs of the pending batch
    model: cost_model.CostModel | None


class TuningResult(NamedTuple):
    """A finished job: its workload, best configuration and its time, and every measurement."""

    workload: str
    best_config: dict[str, int]
    best_seconds: float
    measured: list[tuple[dict[str, int], float]]


class TuningJob(Job):
    """Tunes `workload` for `rounds` rounds of `batch` candidates.

    `warm_start` = (features[N, F], log_seconds[N]) of earlier measurements of similar workloads
    (from the tuning-record database): they train the cost model before the first proposal and stay
    in its training data. Exploration: lower confidence bound with `kappa`, `epsilon`-greedy slots.
    `repeats`, `min_repeat_s` and `clock` are the profiling protocol (`profile_calls`).
    """

    def __init__(
        self,
        workload: Workload,
        rounds: int,
        batch: int = 4,
        name: str | None = None,
        repeats: int = 5,
        min_repeat_s: float = 0.05,
        clock: str = "cpu",
        kappa: float = 1.0,
        epsilon: float = 0.1,
        fit_steps: int = 2000,
        seed: int = 0,
        warm_start: tuple[np.ndarray, np.ndarray] | None = None,
        demands: Sequence[Demand] = DEFAULT_DEMANDS,
        arrival: float = 0.0,
        machine: int | None = None,
    ):
        super().__init__(name or workload.name, rounds, demands, arrival, machine)
        where = f"job {self.name!r}"
        batch = integer(f"{where}: batch", batch, 1)
        check_protocol(repeats, min_repeat_s, clock, where)
        number(f"{where}: kappa", kappa, 0)  # checked, kept as given: the values enter `definition`
        number(f"{where}: epsilon", epsilon, 0, 1)
        fit_steps = integer(f"{where}: fit_steps", fit_steps, 1)
        self.workload, self.batch, self.repeats, self.min_repeat_s = workload, batch, repeats, min_repeat_s
        self.clock = clock
        self.kappa, self.epsilon, self.fit_steps, self.seed = kappa, epsilon, fit_steps, seed
        self.space = workload.space()
        self.features = np.stack([workload.features(config) for config in self.space])  # [C, F]
        if warm_start is not None:
            warm_x, warm_y = (np.asarray(a, np.float64) for a in warm_start)
            if warm_x.ndim != 2 or warm_x.shape[1] != self.features.shape[1] or warm_y.shape != warm_x.shape[:1]:
                raise ValueError(
                    f"job {self.name!r}: warm_start must be features [N, {self.features.shape[1]}] and "
                    f"log seconds [N], got {warm_x.shape} and {warm_y.shape}"
                )
            warm_start = (warm_x, warm_y)
        self.warm_start = warm_start

    def check(self, machine: Machine) -> None:
        """Raises ValueError when the workload's arguments and result alone exceed `machine`'s memory
        (a profile that would run out of memory), found from shapes without allocating."""
        if machine.memory_bytes is not None and self.workload.memory_bytes() > machine.memory_bytes:
            raise ValueError(
                f"job {self.name!r}: workload {self.workload.name!r} needs at least {self.workload.memory_bytes()} "
                f"bytes for its arguments and result, the machine has {machine.memory_bytes}"
            )

    def definition(self) -> str:
        """The workload and every knob that changes what the job measures (not the warm start, which
        grows with the record database)."""
        knobs = (self.batch, self.repeats, self.min_repeat_s, self.clock, self.kappa, self.epsilon, self.fit_steps)
        return (
            f"{super().definition()} {self.workload.name} batch/repeats/min_repeat_s/clock/kappa/epsilon/"
            f"fit_steps/seed {knobs + (self.seed,)}"
        )

    def init_state(self) -> TuningState:
        """No measurements, no model."""
        return TuningState([], [], [], None)

    def prepare(self) -> None:
        """Compiles the cost model's trainer and predictor once, so no stage pays for it."""
        model = cost_model.fit(self.features[:2], np.zeros(2), seed=self.seed, steps=self.fit_steps)
        cost_model.predict(model, self.features)

    def run_stage(self, stage: int, round_: int, state: TuningState) -> TuningState:
        """Runs propose, build, profile or update on the resource the scheduler granted."""
        return (self._propose, self._build, self._profile, self._update)[stage](round_, state)

    def _training_data(self, state: TuningState) -> tuple[np.ndarray, np.ndarray]:
        x = [self.features[[i for i, _ in state.measured]]]
        y = [np.log([s for _, s in state.measured])]
        if self.warm_start is not None:
            x.append(self.warm_start[0])
            y.append(self.warm_start[1])
        return np.concatenate(x), np.concatenate(y)

    def _propose(self, round_: int, state: TuningState) -> TuningState:
        rng = np.random.default_rng([self.seed, round_])
        available = np.ones(len(self.space), dtype=bool)
        available[[i for i, _ in state.measured]] = False
        model = state.model
        if model is None and self.warm_start is not None:
            model = cost_model.fit(*self._training_data(state), seed=self.seed, steps=self.fit_steps)
        if model is None:  # nothing known yet: a random batch
            pending = rng.choice(np.flatnonzero(available), size=min(self.batch, int(available.sum())), replace=False)
        else:
            mean, spread = cost_model.predict(model, self.features)
            pending = cost_model.select(mean, spread, available, self.batch, self.kappa, self.epsilon, rng)
        return dataclasses.replace(state, pending=[int(i) for i in pending], model=model)

    def _build(self, round_: int, state: TuningState) -> TuningState:
        executables = [serialize_executable.serialize(self.workload.build(self.space[i])) for i in state.pending]
        return dataclasses.replace(state, executables=executables)

    def _profile(self, round_: int, state: TuningState) -> TuningState:
        args = jax.block_until_ready(self.workload.inputs())
        calls = {}
        for i, payload in zip(state.pending, state.executables):
            executable = serialize_executable.deserialize_and_load(*payload, execution_devices=jax.devices()[:1])
            calls[i] = _blocking(executable, args)
        seconds = profile_calls(calls, self.repeats, self.min_repeat_s, self.clock)
        measured = state.measured + [(i, seconds[i]) for i in state.pending]
        return dataclasses.replace(state, measured=measured, pending=[], executables=[])

    def _update(self, round_: int, state: TuningState) -> TuningState:
        model = cost_model.fit(*self._training_data(state), seed=self.seed + round_, steps=self.fit_steps)
        return dataclasses.replace(state, model=model)

    def result(self, state: TuningState) -> TuningResult:
        """The fastest configuration measured."""
        if not state.measured:
            raise ValueError(f"job {self.name!r} has measured nothing yet")
        best, seconds = min(state.measured, key=lambda m: m[1])
        return TuningResult(
            self.workload.name, self.space[best], seconds, [(self.space[i], s) for i, s in state.measured]
        )


def _blocking(executable, args):
    return lambda: jax.block_until_ready(executable(*args))


def _repeated(call, number: int):
    def run():
        for _ in range(number):
            call()

    return run


MEASURABLE_S = 1e-4  # shortest repeat: the process CPU clock steps by 2.6 us on the KVM guest measured


def check_protocol(repeats: int, min_repeat_s: float, clock: str, where: str) -> None:
    """ValueError naming `where` unless `repeats` >= 1, `min_repeat_s` >= 0 and `clock` is in `CLOCKS`."""
    try:
        check_timing(repeats, 0, clock)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    number(f"{where}: min_repeat_s", min_repeat_s, 0)


def calls_per_repeat(call, min_repeat_s: float, clock: str = "wall") -> int:
    """Calls per timed repeat so that a repeat lasts at least `min_repeat_s` on `clock` (TVM's min_repeat_ms).

    One untimed warm-up call (the first call of a fresh executable pays for allocation and caches),
    then TVM's rule: time `number` calls, and while that is shorter than `min_repeat_s` grow
    `number` to `max(min_repeat_s / per_call + 1, 1.618 * number)` and time again. A repeat lasts at
    least `MEASURABLE_S` whatever `min_repeat_s` is: the CPU clock advances in steps of microseconds.
    """
    now, target = CLOCKS[clock], max(min_repeat_s, MEASURABLE_S)
    call()
    number = 1
    while True:
        start = now()
        for _ in range(number):
            call()
        elapsed = now() - start
        if elapsed >= target:
            return number
        number = max(int(target / max(elapsed / number, 1e-9)) + 1, int(number * 1.618))


def profile_calls(calls: dict, repeats: int, min_repeat_s: float, clock: str = "cpu") -> dict:
    """Seconds per call of each of `calls` ({key: blocking call}): each calibrated by `calls_per_repeat`,
    then `repeats` repeats interleaved across the calls, the fastest repeat per call (TVM's measure loop)."""
    check_protocol(repeats, min_repeat_s, clock, "profile_calls")
    numbers = {key: calls_per_repeat(call, min_repeat_s, clock) for key, call in calls.items()}
    times = alternated_times(
        {key: _repeated(call, numbers[key]) for key, call in calls.items()}, repeats, warmup=0, clock=clock
    )
    return {key: float(np.min(times[key])) / numbers[key] for key in calls}


def measure_alone(
    workload: Workload, config: dict[str, int], repeats: int = 5, min_repeat_s: float = 0.05, clock: str = "cpu"
) -> float:
    """Seconds per call of `config`, compiled and profiled here (to re-measure a tuned best configuration
    on a quiet device after tuning)."""
    call = _blocking(workload.build(config), jax.block_until_ready(workload.inputs()))
    return profile_calls({0: call}, repeats, min_repeat_s, clock)[0]
