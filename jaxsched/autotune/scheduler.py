"""The central scheduler: job state machines, ready queues per resource, capacity accounting.

Agnostic of what stages do (Stiller 2019, 4.1.1): it knows which resource each job's next stage
needs and which resources are free. The event simulator, the process runner and the Ray backend
all drive this one class, so a policy decides identically in simulation and for real:
`submit` a job when it arrives, `dispatch` to get the stages to start now, `finish` when one ends.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple, Sequence

from jaxsched.autotune.jobs import Job, Progress, check_placement
from jaxsched.autotune.policies import Policy
from jaxsched.autotune.resources import Machine


class StageStart(NamedTuple):
    """A stage the scheduler started: which job, round and stage, on which machine's resource."""

    job: int
    round: int
    stage: int
    machine: int
    kind: str
    amount: int


class Scheduler:
    """Decides which stages run when, for jobs on `machines` under `policy`."""

    def __init__(self, machines: Sequence[Machine], policy: Policy):
        if not machines:
            raise ValueError("at least one machine is needed")
        self.machines = tuple(machines)
        self.policy = policy
        self.jobs: list[Job] = []
        self.machine_of: list[int] = []
        self.progress: list[Progress] = []
        self.submitted: list[float] = []
        self.free = {
            (m, kind): machine.capacity(kind) for m, machine in enumerate(self.machines) for kind in ("cpu", "device")
        }
        self.queues: dict[tuple[int, str], list] = {pool: [] for pool in self.free}
        self.running_on = [0] * len(self.machines)  # stages running per machine
        self.unfinished = 0
        self._dirty: set[tuple[int, str]] = set()  # pools whose queue or free capacity changed since dispatch
        self._seq = 0
        self._names: set[str] = set()

    def submit(self, job: Job, now: float, first_round: int = 0) -> int:
        """Registers `job`, arrived at `now`; returns its index. A job resumed after `first_round`
        finished rounds starts there (all finished: it is done at once). Raises ValueError for a job
        whose stages its machine cannot run (see `check_placement`) or a name already submitted."""
        index = len(self.jobs)
        machine = index % len(self.machines) if job.machine is None else job.machine
        check_placement(job, machine, self.machines)
        if job.name in self._names:
            raise ValueError(f"job names must be unique, {job.name!r} was submitted twice")
        progress = Progress(job.rounds, first_round)
        self._names.add(job.name)
        self.jobs.append(job)
        self.machine_of.append(machine)
        self.progress.append(progress)
        self.submitted.append(now)
        self.policy.register(index, job.demands)
        if progress.phase != Progress.DONE:
            self.unfinished += 1
            self.resume(index, now)
        return index

    def resume(self, job: int, now: float) -> None:
        """Job `job` (waiting: submitted, or interrupted and its replacement worker now ready) is ready."""
        self.progress[job].arrive()
        self._enqueue(job, now)

    def _pool(self, job: int) -> tuple[int, str]:
        return self.machine_of[job], self.jobs[job].demands[self.progress[job].stage].kind

    def _enqueue(self, job: int, now: float) -> None:
        state = self.progress[job]
        key = self.policy.priority(job, state.round, state.stage, self.jobs[job].rounds, self.submitted[job], now)
        pool = self._pool(job)
        heapq.heappush(self.queues[pool], (key, self._seq, job))
        self._dirty.add(pool)
        self._seq += 1

    def _start(self, job: int) -> StageStart:
        state = self.progress[job]
        kind, amount = self.jobs[job].demands[state.stage]
        machine = self.machine_of[job]
        state.start()
        self.free[machine, kind] -= amount
        self.running_on[machine] += 1
        return StageStart(job, state.round, state.stage, machine, kind, amount)

    def dispatch(self) -> list[StageStart]:
        """Starts every stage the policy allows now and returns them.

        Only pools whose queue or free capacity changed since the last call are looked at (nothing
        else can start), in a fixed order (machine, then cpu before device).
        """
        started = []
        dirty, self._dirty = sorted(self._dirty), set()
        if self.policy.one_job_per_machine:
            for m in sorted({m for m, _ in dirty}):
                heads = [self.queues[pool][0] for pool in ((m, "cpu"), (m, "device")) if self.queues[pool]]
                if self.running_on[m] == 0 and heads:
                    job = min(heads)[2]
                    heapq.heappop(self.queues[self._pool(job)])
                    started.append(self._start(job))
            return started
        for pool in dirty:
            queue = self.queues[pool]
            while queue:
                job = queue[0][2]
                if self.policy.exclusive and self.jobs[job].demands[self.progress[job].stage].amount > self.free[pool]:
                    break  # strict order: a waiting stage is never overtaken on its resource
                heapq.heappop(queue)
                started.append(self._start(job))
        return started

    def _release(self, start: StageStart) -> Progress:
        state = self.progress[start.job]
        if (state.phase, state.round, state.stage) != (Progress.RUNNING, start.round, start.stage):
            raise RuntimeError(f"end of a stage that is not running: {start}")
        self.free[start.machine, start.kind] += start.amount
        self.running_on[start.machine] -= 1
        self._dirty.add((start.machine, start.kind))
        return state

    def finish(self, start: StageStart, now: float, seconds: float) -> bool:
        """Records that `start` ended at `now` after running `seconds`; returns whether its job is done."""
        state = self._release(start)
        self.policy.observe(start.job, start.stage, seconds)
        state.finish()
        if state.phase == Progress.DONE:
            self.unfinished -= 1
            return True
        self._enqueue(start.job, now)
        return False

    def fail(self, job: int, start: StageStart | None = None) -> None:
        """Job `job` failed, in its running stage `start` (whose resource is freed) or while waiting for
        a replacement worker: it is never dispatched again, and every other job goes on."""
        state = self._release(start) if start is not None else self.progress[job]
        state.fail()
        self.unfinished -= 1

    def interrupt(self, start: StageStart) -> None:
        """The worker running `start` died: its resource is freed and the job waits, at the first stage
        of the round, for `resume` once a replacement worker holds the state of the round's start."""
        self._release(start).interrupt()
