"""Deterministic jobs and injected faults for the fault-isolation tests (the process runner and Ray).

A `Tally` job sleeps through its stages and keeps, as its state, which (round, stage) ran and a
deterministic choice per round (its "configuration"), so a run's results can be compared with a
replay of the same job in this process, and with a run that had no faulty neighbour.
"""

import os
import time
from pathlib import Path

import numpy as np

from jaxsched.autotune import Demand, Job

SECONDS = 0.02


class Tally(Job):
    """Stages sleep `SECONDS`; the state lists (round, stage, choice); the result is that list."""

    def init_state(self):
        return ()

    def run_stage(self, stage, round_, state):
        time.sleep(SECONDS)
        choice = int(np.random.default_rng([len(self.name), round_, stage]).integers(1000))
        return state + ((round_, stage, choice),)

    def result(self, state):
        return state


def replay(job):
    """The result of `job` run stage after stage in this process (the reference)."""
    state = job.init_state()
    for round_ in range(job.rounds):
        for stage in range(4):
            state = job.run_stage(stage, round_, state)
    return job.result(state)


class Raising(Tally):
    """Its build stage of round 1 raises."""

    def run_stage(self, stage, round_, state):
        if (round_, stage) == (1, 1):
            raise ArithmeticError("the compiler fell over")
        return super().run_stage(stage, round_, state)


class Dying(Tally):
    """Its worker exits (code 3) in the build stage of round 1, the first time only when `marker` is
    given (a file it creates: a replacement worker then gets through)."""

    def __init__(self, name, rounds, marker=None):
        super().__init__(name, rounds)
        self.marker = marker

    def run_stage(self, stage, round_, state):
        if (round_, stage) == (1, 1) and (self.marker is None or not Path(self.marker).exists()):
            if self.marker is not None:
                Path(self.marker).touch()
            os._exit(3)
        return super().run_stage(stage, round_, state)


class Hungry(Tally):
    """Its profile stage asks JAX for a petabyte (XLA refuses at once: out of memory)."""

    def run_stage(self, stage, round_, state):
        if stage == 2:
            import jax
            import jax.numpy as jnp

            jax.block_until_ready(jnp.ones(2**50, jnp.uint8))
        return super().run_stage(stage, round_, state)


WIDE = (Demand("cpu"), Demand("cpu", 64), Demand("device"), Demand("cpu"))  # a build on 64 cores


class Logged(Tally):
    """Appends `name round stage` to the file `log` as each stage starts, and takes 0.1 s longer."""

    def __init__(self, name, rounds, log):
        super().__init__(name, rounds)
        self.log = log

    def run_stage(self, stage, round_, state):
        with open(self.log, "a") as out:
            out.write(f"{self.name} {round_} {stage}\n")
        time.sleep(0.1)
        return super().run_stage(stage, round_, state)
