"""Autotuning as a service (Stiller 2019, 4.3): submit workloads, get tuned configurations back.

A submission first consults the tuning-record database: when the best known time of the workload
on this machine already meets the submitter's target, the answer comes back at once, untuned.
Otherwise a `TuningJob` is created, warm-started from the records of similar workloads, and handed
to the runner, which may already be running other jobs. Every measurement goes back into the database.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

from jaxsched.autotune.records import TuningRecords
from jaxsched.autotune.runner import ProcessRunner
from jaxsched.autotune.tuning import TuningJob
from jaxsched.autotune.workloads import Workload
from jaxsched.common.machine import machine_description


class Answer(NamedTuple):
    """The service's answer for one submission: best configuration and time, and whether it was tuned
    now (False: answered from the records)."""

    workload: str
    config: dict[str, int]
    seconds: float
    tuned: bool


class TuningService:
    """Takes tuning requests for `runner`'s machine and answers them from `records` or by tuning.

    `job_options` are passed to every `TuningJob` (batch, repeats, ...). `submit` may be called from
    another thread while `run` runs.
    """

    def __init__(
        self,
        records: TuningRecords,
        runner: ProcessRunner,
        machine: str | None = None,
        job_options: dict[str, Any] | None = None,
    ):
        self.records = records
        self.runner = runner
        self.machine = machine or machine_description()
        self.job_options = dict(job_options or {})
        self.answers: dict[str, Answer] = {}
        self.jobs: dict[str, TuningJob] = {}
        self._lock = threading.Lock()

    def submit(self, workload: Workload, rounds: int, target_seconds: float | None = None) -> str:
        """Requests a tuned configuration of `workload`; returns the ticket under which `run` answers.

        With `target_seconds`, a known configuration at least that fast is answered at once.
        """
        if target_seconds is not None and not target_seconds > 0:
            raise ValueError(f"target_seconds must be positive, got {target_seconds!r}")
        with self._lock:
            ticket = f"{workload.name}#{len(self.answers) + len(self.jobs)}"
            best = self.records.best(workload, self.machine)
            if best is not None and target_seconds is not None and best.seconds <= target_seconds:
                self.answers[ticket] = Answer(workload.name, best.config, best.seconds, tuned=False)
                return ticket
            job = TuningJob(
                workload,
                rounds,
                name=ticket,
                warm_start=self.records.warm_start(workload, self.machine),
                **self.job_options,
            )
            self.jobs[ticket] = job
        self.runner.submit(job)
        return ticket

    def run(self) -> dict[str, Answer]:
        """Tunes every submitted workload that needs it, stores the measurements, returns all answers."""
        if self.jobs:
            results = self.runner.run().results
            for ticket, result in results.items():
                workload = self.jobs[ticket].workload
                for config, seconds in result.measured:
                    self.records.add(workload, config, seconds, self.machine)
                self.answers[ticket] = Answer(workload.name, result.best_config, result.best_seconds, tuned=True)
        return dict(self.answers)
