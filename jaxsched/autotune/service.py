"""Autotuning as a service (Stiller 2019, 4.3): submit workloads, get tuned configurations back.

A submission first consults the tuning-record database: when the best known time of the workload
on this machine already meets the submitter's target, the answer comes back at once, untuned.
Otherwise a `TuningJob` is created, warm-started from the records of similar workloads, and handed
to the runner, which may already be running other jobs. Every measurement goes into the database as
its round finishes, so a job that fails later (out of memory, a dead worker) keeps what it measured.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

from jaxsched.autotune.records import TuningRecords
from jaxsched.autotune.runner import ProcessRunner
from jaxsched.autotune.tuning import TuningJob
from jaxsched.autotune.workloads import Workload
from jaxsched.common.arguments import number
from jaxsched.common.machine import machine_description


class Answer(NamedTuple):
    """The service's answer for one submission: best configuration and time, whether it was tuned
    now (False: answered from the records), and why tuning failed ("" when it did not; when it did, the
    configuration is the best the records hold for the workload, or empty with `seconds` NaN)."""

    workload: str
    config: dict[str, int]
    seconds: float
    tuned: bool
    failure: str = ""


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

        With `target_seconds`, a known configuration at least that fast is answered at once. Raises
        ValueError at once for a job the runner refuses (see `ProcessRunner.submit`).
        """
        if target_seconds is not None:
            target_seconds = number("target_seconds", target_seconds, 0, above=True, finite=False)
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
            self.runner.submit(job)
            self.jobs[ticket] = job
        return ticket

    def run(self) -> dict[str, Answer]:
        """Tunes every submitted workload that needs it, storing each round's measurements as it ends;
        returns all answers, failed tickets with their cause."""
        if self.jobs:
            run = self.runner.run(on_round=self._store_round)
            for ticket, result in run.results.items():
                workload = self.jobs[ticket].workload
                self.answers[ticket] = Answer(workload.name, result.best_config, result.best_seconds, tuned=True)
            for ticket, cause in run.failures.items():
                workload = self.jobs[ticket].workload
                best = self.records.best(workload, self.machine)
                config, seconds = (best.config, best.seconds) if best else ({}, float("nan"))
                self.answers[ticket] = Answer(workload.name, config, seconds, tuned=True, failure=cause)
        return dict(self.answers)

    def _store_round(self, job: TuningJob, round_: int, before, after) -> None:
        """Adds the measurements a round of `job` made (those in `after` and not in `before`)."""
        for index, seconds in after.measured[len(before.measured) if before is not None else 0 :]:
            self.records.add(job.workload, job.space[index], seconds, self.machine)
