"""Real execution: one worker process per job, commanded stage by stage by the central scheduler.

As in the thesis's implementation (4.2), a job's runner does nothing on its own: its worker process
holds the job's state and waits for commands. A worker calls `job.prepare()` when it starts, before
the clock starts (a tuning job compiles its cost model there, as a TVM runner is up before tuning).
Before each stage the worker pins all its threads to the cores of the resource the scheduler
granted (`pin_to_cores`): the CPU cores for propose, build and update, the device core for profile.
Exclusive policies hand out distinct cores; the uncoordinated `parallel` policy pins every stage to
its whole resource, where the OS shares it and stages really interfere. Worker processes are started
with `spawn` (JAX does not survive `fork`) before the clock starts; jobs submitted during a run
(`submit` from another thread) start theirs then.

Faults stay inside their job. `submit` checks a job against the machine at once and raises ValueError
to the submitter, so a bad submission never reaches a running run. A stage that raises (out of
memory, a compile error, any exception) or a worker that dies fails its job only: the job is reported
with its cause in `RunResult.failures`, its finished rounds stay in the record database, and every
other job runs on. With `retries`, a job whose worker died gets a replacement worker that resumes
from the job's state at the start of the interrupted round (a worker's death may be a neighbour's
fault: the OOM killer, a signal); a raising stage is a function of its state and is not retried.
With `records`, each finished round's state is saved, and a run started again after the scheduler
was killed resumes every job after its last finished round.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing as mp
import queue
import threading
import time
import warnings
from multiprocessing.connection import wait
from typing import Any, Callable, NamedTuple

from jaxsched.autotune.jobs import STAGES, Job, check_placement
from jaxsched.autotune.policies import Policy
from jaxsched.autotune.records import TuningRecords
from jaxsched.autotune.resources import CPU, Machine, pin_to_cores
from jaxsched.autotune.scheduler import Scheduler, StageStart
from jaxsched.autotune.trace import Trace
from jaxsched.common.arguments import integer

LAST_STAGE = len(STAGES) - 1


class RunResult(NamedTuple):
    """A finished run: the trace (seconds from the start of the run; the stages whose work was kept),
    each finished job's result by name, and each failed job's cause by name."""

    trace: Trace
    results: dict[str, Any]
    failures: dict[str, str] = {}

    @property
    def summary(self) -> str:
        """One line: how many jobs finished and failed, and why each failed."""
        done, failed = len(self.results), len(self.failures)
        line = f"{done + failed} jobs: {done} finished, {failed} failed"
        return line + "".join(f"; {name}: {cause}" for name, cause in self.failures.items())


def failure_cause(error: BaseException) -> str:
    """One line naming an exception and its message (the first line: XLA's run on for pages)."""
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0]}" if message else type(error).__name__


def _worker(conn, job: Job, cores: tuple[int, ...] | None, resumed: tuple | None) -> None:
    """A job's runner: holds its state (`resumed[0]` when given, else the job's initial one), runs the
    stages it is told to, pinned where it is told, and sends its state back after each round."""
    try:
        if cores:
            pin_to_cores(cores)
        job.prepare()
        state = job.init_state() if resumed is None else resumed[0]
        conn.send(("ready", None))
        while True:
            command, *args = conn.recv()
            if command == "stage":
                stage, round_, stage_cores = args
                if stage_cores:
                    pin_to_cores(stage_cores)
                state = job.run_stage(stage, round_, state)
                conn.send(("done", state if stage == LAST_STAGE else None))
            elif command == "result":
                conn.send(("result", job.result(state)))
            else:
                return
    except Exception as error:  # noqa: BLE001 - reported to the scheduler, which fails this job only
        conn.send(("error", failure_cause(error)))


@dataclasses.dataclass
class _Slot:
    """One job in a run: its worker, its place in the scheduler and its state at the last round's end."""

    job: Job
    release: float  # seconds after the start of the run at which the job is submitted
    rounds_done: int = 0
    state: Any = None  # the job's state after `rounds_done` rounds (unused while rounds_done == 0)
    retries_left: int = 0
    index: int | None = None  # in the scheduler, once submitted
    process: Any = None
    conn: Any = None

    def resumed(self) -> tuple | None:
        return None if self.rounds_done == 0 else (self.state,)


class ProcessRunner:
    """Runs jobs on this machine under `policy`, one worker process per job.

    `machine` should name its cores (`local_machine()`); without core ids stages are not pinned.
    `records`: the database where each finished round's state is saved and a restarted run resumes
    from. `retries`: how many replacement workers each job may get after its worker died (0: none).
    """

    def __init__(self, machine: Machine, policy: Policy, records: TuningRecords | None = None, retries: int = 0):
        retries = integer("retries", retries, 0)
        self.machine = machine
        self.policy = policy
        self.records = records
        self.retries = retries
        self._submissions: queue.Queue = queue.Queue()
        self._context = mp.get_context("spawn")
        self._finished = False
        self._names: set[str] = set()
        self._lock = threading.Lock()

    def submit(self, job: Job) -> None:
        """Adds a job, before `run` (it is submitted at `job.arrival` seconds into the run) or from
        another thread while `run` runs (it is submitted as soon as its worker has started).

        Raises ValueError at once, and the run does not notice, for a job this machine cannot run
        (`check_placement`), a name already submitted, or a name the record database holds with
        another definition."""
        if self._finished:
            raise RuntimeError("this runner has finished; submit to a new one")
        check_placement(job, 0 if job.machine is None else job.machine, [self.machine])
        with self._lock:
            if job.name in self._names:
                raise ValueError(f"job names must be unique, {job.name!r} was submitted twice")
            progress = None if self.records is None else self.records.progress(job.name, job.definition())
            self._names.add(job.name)
        rounds_done, state = progress or (0, None)
        self._submissions.put(_Slot(job, job.arrival, rounds_done, state, self.retries))

    def _spawn(self, slot: _Slot) -> _Slot:
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=_worker, args=(child, slot.job, self.machine.cpu_ids, slot.resumed()), daemon=True
        )
        process.start()
        child.close()
        slot.process, slot.conn = process, parent
        return slot

    def run(self, on_round: Callable[[Job, int, Any, Any], None] | None = None) -> RunResult:
        """Runs every submitted job (and those submitted meanwhile) to its end or its failure; returns
        the trace, the results and the failures (and warns with the summary line when a job failed).
        `on_round(job, round, before, after)` is called as each round finishes, with the job's state
        before it (None before the first) and after it. Workers are spawned, so a script calls this
        under `if __name__ == "__main__":`."""
        scheduler = Scheduler([self.machine], self.policy)
        slots: list[_Slot] = []  # by scheduler index once submitted
        starting: list[_Slot] = []
        failures: dict[str, str] = {}
        while not self._submissions.empty():  # known jobs: workers start before the clock does
            starting.append(self._spawn(self._submissions.get()))
        waiting: list[_Slot] = []  # ready workers whose job is not submitted yet, by release time
        for slot in starting:
            self._started(slot, scheduler, waiting, failures, None)
        starting = []
        free = {CPU: list(self.machine.cpu_ids or ()), "device": list(self.machine.device_ids or ())}
        running: dict[Any, tuple[StageStart, float, list[int]]] = {}  # conn -> (stage, start, cores)
        rows = []
        ended: list[tuple[_Slot, Any]] = []  # rounds ended since the last dispatch, and the states after them
        begin = time.perf_counter()
        try:
            while True:
                now = time.perf_counter() - begin
                while not self._submissions.empty():  # submitted during the run
                    slot = self._submissions.get()
                    slot.release = math.inf  # released once its worker is ready
                    starting.append(self._spawn(slot))
                for slot in [s for s in starting if s.conn.poll()]:
                    starting.remove(slot)
                    self._started(slot, scheduler, waiting, failures, time.perf_counter() - begin)
                while waiting and waiting[0].release <= now:
                    slot = waiting.pop(0)
                    slot.index = scheduler.submit(slot.job, max(slot.release, 0.0), slot.rounds_done)
                    slots.append(slot)
                for start in scheduler.dispatch():
                    cores = self._take_cores(free, start)
                    try:
                        slots[start.job].conn.send(("stage", start.stage, start.round, tuple(cores) or None))
                    except OSError:  # died since its last reply: `wait` returns its end of file at once
                        pass
                    running[slots[start.job].conn] = (start, time.perf_counter() - begin, cores)
                for slot, state in ended:  # kept after the dispatch: the stages run meanwhile
                    self._round_done(slot, state, on_round)
                ended = []
                if not running and not starting and not waiting and self._submissions.empty():
                    break
                timeout = 0.02 if starting or not self._submissions.empty() else None
                if waiting:
                    timeout = max(0.0, min(timeout or math.inf, waiting[0].release - now))
                for conn in wait(list(running) + [s.conn for s in starting], timeout=timeout):
                    if conn not in running:
                        continue  # a starting worker: handled at the top of the loop
                    start, started, cores = running.pop(conn)
                    slot = slots[start.job]
                    got, payload = self._receive(slot)
                    finish = time.perf_counter() - begin
                    if self.policy.exclusive:
                        free[start.kind].extend(cores)
                    if got == "done":
                        rows.append((start.job, start.round, start.stage, 0, start.kind, start.amount, started, finish))
                        if start.stage == LAST_STAGE:
                            ended.append((slot, payload))
                        scheduler.finish(start, finish, finish - started)
                        continue
                    where = f"stage {STAGES[start.stage]!r} of round {start.round}: {payload}"
                    if got == "died" and slot.retries_left > 0:
                        slot.retries_left -= 1
                        scheduler.interrupt(start)
                        rows = [r for r in rows if (r[0], r[1]) != (start.job, start.round)]
                        slot.release = math.inf
                        starting.append(self._spawn(slot))
                        warnings.warn(f"job {slot.job.name!r}: {where}; resuming in a replacement worker", stacklevel=2)
                    else:
                        scheduler.fail(start.job, start)
                        failures[slot.job.name] = where
            self._finished = True
            results = {}
            for slot in slots:
                if slot.job.name in failures:
                    continue
                try:
                    slot.conn.send(("result",))
                except OSError:
                    pass
                got, payload = self._receive(slot)
                if got == "result":
                    results[slot.job.name] = payload
                else:
                    failures[slot.job.name] = f"result: {payload}"
        finally:
            for slot in slots + starting + waiting:
                self._stop(slot)
        run = RunResult(Trace.from_rows([s.job.name for s in slots], rows), results, failures)
        if failures:
            warnings.warn(run.summary, stacklevel=2)
        return run

    def _started(self, slot: _Slot, scheduler, waiting: list[_Slot], failures: dict, now: float | None) -> None:
        """Handles the first reply of a new worker (`now`: seconds into the run; None before it starts):
        a replacement resumes its interrupted job, a new job waits for its release, a failure fails it."""
        got, payload = self._receive(slot)
        if got != "ready":
            if got == "died" and slot.index is None:  # the usual cause: an unguarded script calls `run`
                payload += (
                    " before it was ready; workers are spawned and import the main module again, so a "
                    'script must call `ProcessRunner.run` under `if __name__ == "__main__":`'
                )
            if slot.index is not None:
                scheduler.fail(slot.index)
            failures[slot.job.name] = f"start: {payload}"
            self._stop(slot)
        elif slot.index is not None:
            scheduler.resume(slot.index, now)
        else:
            if now is not None:
                slot.release = now
            waiting.append(slot)
            waiting.sort(key=lambda s: s.release)

    def _round_done(self, slot: _Slot, state: Any, on_round) -> None:
        """Keeps the job's state at the end of a round: for a replacement worker, the callback, the database."""
        if on_round is not None:
            on_round(slot.job, slot.rounds_done, slot.state if slot.rounds_done else None, state)
        slot.rounds_done, slot.state = slot.rounds_done + 1, state
        if self.records is not None:
            self.records.save_progress(slot.job.name, slot.job.definition(), slot.rounds_done, state)

    def _take_cores(self, free: dict[str, list[int]], start: StageStart) -> list[int]:
        """Cores for a starting stage: distinct free ones under an exclusive policy, else the whole resource."""
        cores = self.machine.cores_of(start.kind)
        if cores is None:
            return []
        if not self.policy.exclusive:
            return list(cores)
        taken, free[start.kind][:] = free[start.kind][: start.amount], free[start.kind][start.amount :]
        return taken

    @staticmethod
    def _receive(slot: _Slot) -> tuple[str, Any]:
        """The worker's next reply, or ("died", its exit code) when its process has ended."""
        try:
            return slot.conn.recv()
        except (EOFError, OSError):
            slot.process.join(timeout=5)
            return "died", f"worker process exited with code {slot.process.exitcode}"

    @staticmethod
    def _stop(slot: _Slot) -> None:
        if slot.process.is_alive():
            try:
                slot.conn.send(("stop",))
            except OSError:
                pass
        slot.process.join(timeout=5)
        if slot.process.is_alive():
            slot.process.kill()
