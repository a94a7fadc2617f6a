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
"""

from __future__ import annotations

import math
import multiprocessing as mp
import queue
import time
import traceback
from multiprocessing.connection import wait
from typing import Any, NamedTuple

from jaxsched.autotune.jobs import STAGES, Job
from jaxsched.autotune.policies import Policy
from jaxsched.autotune.resources import CPU, Machine, pin_to_cores
from jaxsched.autotune.scheduler import Scheduler, StageStart
from jaxsched.autotune.trace import Trace


class RunResult(NamedTuple):
    """A finished run: the trace (seconds from the start of the run) and each job's result by name."""

    trace: Trace
    results: dict[str, Any]


def _worker(conn, job: Job, cores: tuple[int, ...] | None) -> None:
    """A job's runner: holds its state, runs the stages it is told to, pinned where it is told."""
    try:
        if cores:
            pin_to_cores(cores)
        job.prepare()
        state = job.init_state()
        conn.send(("ready", None))
        while True:
            command, *args = conn.recv()
            if command == "stage":
                stage, round_, stage_cores = args
                if stage_cores:
                    pin_to_cores(stage_cores)
                state = job.run_stage(stage, round_, state)
                conn.send(("done", None))
            elif command == "result":
                conn.send(("result", job.result(state)))
            else:
                return
    except Exception:  # noqa: BLE001 - reported to the scheduler, which raises it
        conn.send(("error", traceback.format_exc()))


class _Worker(NamedTuple):
    process: Any
    conn: Any
    job: Job
    release: float  # seconds after the start of the run at which the job is submitted


class ProcessRunner:
    """Runs jobs on this machine under `policy`, one worker process per job.

    `machine` should name its cores (`local_machine()`); without core ids stages are not pinned.
    """

    def __init__(self, machine: Machine, policy: Policy):
        self.machine = machine
        self.policy = policy
        self._submissions: queue.Queue = queue.Queue()
        self._context = mp.get_context("spawn")
        self._finished = False

    def submit(self, job: Job) -> None:
        """Adds a job, before `run` (it is submitted at `job.arrival` seconds into the run) or from
        another thread while `run` runs (it is submitted as soon as its worker has started)."""
        if self._finished:
            raise RuntimeError("this runner has finished; submit to a new one")
        self._submissions.put(job)

    def _spawn(self, job: Job, release: float) -> _Worker:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=_worker, args=(child, job, self.machine.cpu_ids), daemon=True)
        process.start()
        child.close()
        return _Worker(process, parent, job, release)

    def run(self) -> RunResult:
        """Runs every submitted job (and those submitted meanwhile) to the end; returns the trace
        and the results. Raises RuntimeError naming the job and stage when a stage fails. Workers are
        spawned, so a script calls this under `if __name__ == "__main__":`."""
        scheduler = Scheduler([self.machine], self.policy)
        workers: list[_Worker] = []  # by scheduler index once submitted
        starting: list[_Worker] = []
        while not self._submissions.empty():  # known jobs: workers start before the clock does
            job = self._submissions.get()
            starting.append(self._spawn(job, job.arrival))
        for worker in starting:
            self._expect(worker, "ready")
        ready_workers = sorted(starting, key=lambda w: w.release)
        starting = []
        free = {CPU: list(self.machine.cpu_ids or ()), "device": list(self.machine.device_ids or ())}
        running: dict[Any, tuple[StageStart, float, list[int]]] = {}  # conn -> (stage, start, cores)
        rows = []
        begin = time.perf_counter()
        try:
            while True:
                now = time.perf_counter() - begin
                while not self._submissions.empty():  # submitted during the run
                    starting.append(self._spawn(self._submissions.get(), now))
                for worker in list(starting):
                    if worker.conn.poll():
                        self._expect(worker, "ready")
                        starting.remove(worker)
                        ready_workers.append(worker._replace(release=time.perf_counter() - begin))
                while ready_workers and ready_workers[0].release <= now:
                    worker = ready_workers.pop(0)
                    scheduler.submit(worker.job, max(worker.release, 0.0))
                    workers.append(worker)
                for start in scheduler.dispatch():
                    cores = self._take_cores(free, start)
                    workers[start.job].conn.send(("stage", start.stage, start.round, tuple(cores) or None))
                    running[workers[start.job].conn] = (start, time.perf_counter() - begin, cores)
                if not running and not starting and not ready_workers and self._submissions.empty():
                    break
                timeout = 0.02 if starting or not self._submissions.empty() else None
                if ready_workers:
                    timeout = max(0.0, min(timeout or math.inf, ready_workers[0].release - now))
                for conn in wait(list(running) + [w.conn for w in starting], timeout=timeout):
                    if conn not in running:
                        continue  # a starting worker: handled at the top of the loop
                    start, started, cores = running.pop(conn)
                    self._expect(workers[start.job], "done", start)
                    finish = time.perf_counter() - begin
                    if self.policy.exclusive:
                        free[start.kind].extend(cores)
                    rows.append((start.job, start.round, start.stage, 0, start.kind, start.amount, started, finish))
                    scheduler.finish(start, finish, finish - started)
            self._finished = True
            results = {}
            for worker in workers:
                worker.conn.send(("result",))
                results[worker.job.name] = self._expect(worker, "result")
        finally:
            for worker in workers + starting + ready_workers:
                if worker.process.is_alive():
                    try:
                        worker.conn.send(("stop",))
                    except (BrokenPipeError, OSError):
                        pass
                worker.process.join(timeout=5)
                if worker.process.is_alive():
                    worker.process.kill()
        return RunResult(Trace.from_rows([w.job.name for w in workers], rows), results)

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
    def _expect(worker: _Worker, kind: str, start: StageStart | None = None) -> Any:
        try:
            got, payload = worker.conn.recv()
        except EOFError:
            worker.process.join(timeout=5)
            got, payload = "error", f"worker process exited with code {worker.process.exitcode}"
            if kind == "ready":  # the usual cause: a spawned worker re-ran an unguarded script that calls `run`
                payload += (" before it was ready; workers are spawned and import the main module again, so a "
                            "script must call `ProcessRunner.run` under `if __name__ == \"__main__\":`")
        if got == "error":
            where = f" in stage {STAGES[start.stage]!r} of round {start.round}" if start else ""
            raise RuntimeError(f"job {worker.job.name!r} failed{where}:\n{payload}")
        if got != kind:
            raise RuntimeError(f"job {worker.job.name!r}: expected {kind!r} from its worker, got {got!r}")
        return payload
