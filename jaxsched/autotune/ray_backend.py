"""Many machines through Ray (extra `distributed`): the scheduler is one actor, stages are Ray tasks.

Machine m's CPU cores and devices are the custom Ray resources `autotune_m{m}_cpu` (its core count)
and `autotune_m{m}_device` (its device count, 1 per device), declared by the node that owns the
machine (`node_resources`; `ray start --resources=...` on a real cluster). A stage task asks for
its resource, so it runs on that node and a device runs one profile at a time by construction;
the scheduler actor asks only for what the central `Scheduler` has granted, so Ray never has to
queue. Job states travel between stage tasks as Ray objects (the stateless client of the thesis,
4.3), so stages of one job may run in different worker processes. Stages on Ray are not pinned to
cores: Ray's resource accounting is the exclusivity.

Faults stay inside their job, as on the process runner: a stage task that raises (a `RayTaskError`)
or whose worker dies fails its job only, and every other job runs on. With `retries`, a job whose
worker died (or whose node died) restarts the interrupted round, in a worker Ray starts anew, from the
state at the round's start (a Ray object, which outlives the worker); Ray's own task retries are off,
so the bound is the scheduler's.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Sequence

from jaxsched.autotune.jobs import STAGES, Job, assign_machines
from jaxsched.autotune.policies import make_policy
from jaxsched.autotune.resources import Machine
from jaxsched.autotune.runner import LAST_STAGE, RunResult, failure_cause
from jaxsched.autotune.scheduler import Scheduler
from jaxsched.autotune.trace import Trace
from jaxsched.common.arguments import integer


def _ray():
    try:
        import ray
    except ImportError as error:
        raise ImportError("the Ray backend needs the extra: pip install 'jax-research-systems[distributed]'") from error
    return ray


def resource_name(machine: int, kind: str) -> str:
    """The Ray resource holding resource `kind` of machine `machine`."""
    return f"autotune_m{machine}_{kind}"


def node_resources(index: int, machine: Machine) -> dict[str, float]:
    """Custom resources the Ray node owning machine `index` must declare."""
    return {
        resource_name(index, "cpu"): float(machine.cpu_cores),
        resource_name(index, "device"): float(machine.devices),
    }


def _run_stage(job: Job, stage: int, round_: int, state: Any) -> tuple[Any, str]:
    """A stage as a Ray task: the new state and the id of the node it ran on."""
    ray = _ray()
    return job.run_stage(stage, round_, state), ray.get_runtime_context().get_node_id()


def _result(job: Job, state: Any) -> Any:
    return job.result(state)


def _cause(ray, error: Exception) -> tuple[str, bool]:
    """One line of why a Ray task failed, and whether its worker (or node) died rather than raised."""
    died = tuple(
        getattr(ray.exceptions, name)
        for name in ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError", "OutOfMemoryError")
        if hasattr(ray.exceptions, name)
    )
    if isinstance(error, ray.exceptions.RayTaskError) and error.cause is not None:
        return failure_cause(error.cause), False
    return failure_cause(error), isinstance(error, died)


class _SchedulerActor:
    """The central scheduler as a Ray actor: dispatches stage tasks, waits for them, records the trace."""

    def __init__(self, machines: Sequence[Machine], policy: str, retries: int):
        self.machines = tuple(machines)
        self.policy = policy
        self.retries = retries

    def run(self, jobs: Sequence[Job]) -> tuple[list[tuple], dict[str, Any], dict[str, str]]:
        ray = _ray()
        stage_task = ray.remote(max_retries=0)(_run_stage)  # retries are the scheduler's
        result_task = ray.remote(num_cpus=0, max_retries=0)(_result)
        scheduler = Scheduler(self.machines, make_policy(self.policy))
        order = sorted(range(len(jobs)), key=lambda j: (jobs[j].arrival, j))
        job_refs, states, round_start, retries_left, submitted = [], [], [], [], 0
        running, rows, failures = {}, [], {}
        begin = time.perf_counter()
        while True:
            now = time.perf_counter() - begin
            while submitted < len(order) and jobs[order[submitted]].arrival <= now:
                job = jobs[order[submitted]]
                scheduler.submit(job, job.arrival)
                job_refs.append(ray.put(job))
                states.append(job.init_state())
                round_start.append(states[-1])
                retries_left.append(self.retries)
                submitted += 1
            for start in scheduler.dispatch():
                state_ref, node_ref = stage_task.options(
                    num_cpus=0, num_returns=2, resources={resource_name(start.machine, start.kind): start.amount}
                ).remote(job_refs[start.job], start.stage, start.round, states[start.job])
                states[start.job] = state_ref
                running[node_ref] = (start, time.perf_counter() - begin)
            if not running and submitted == len(order):
                break
            timeout = None if submitted == len(order) else max(0.0, jobs[order[submitted]].arrival - now)
            done, _ = ray.wait(list(running), num_returns=1, timeout=timeout)
            for ref in done:
                start, started = running.pop(ref)
                j = start.job
                try:
                    node = ray.get(ref)
                except ray.exceptions.RayError as error:
                    cause, died = _cause(ray, error)
                    where = f"stage {STAGES[start.stage]!r} of round {start.round}: {cause}"
                    if died and retries_left[j] > 0:
                        retries_left[j] -= 1
                        scheduler.interrupt(start)
                        states[j] = round_start[j]
                        rows = [r for r in rows if (r[0], r[1]) != (j, start.round)]
                        scheduler.resume(j, time.perf_counter() - begin)
                    else:
                        scheduler.fail(j, start)
                        failures[scheduler.jobs[j].name] = where
                    continue
                finish = time.perf_counter() - begin
                rows.append(
                    (j, start.round, start.stage, start.machine, start.kind, start.amount, started, finish, node)
                )
                if start.stage == LAST_STAGE:
                    round_start[j] = states[j]
                scheduler.finish(start, finish, finish - started)
        results = {}
        pending = {
            scheduler.jobs[j].name: result_task.remote(job_refs[j], states[j])
            for j in range(len(job_refs))
            if scheduler.jobs[j].name not in failures
        }
        for name, ref in pending.items():
            try:
                results[name] = ray.get(ref)
            except ray.exceptions.RayError as error:
                failures[name] = f"result: {_cause(ray, error)[0]}"
        return rows, results, failures


def run_on_ray(
    jobs: Sequence[Job],
    machines: Sequence[Machine],
    policy: str = "load_aware",
    address: str | None = None,
    retries: int = 0,
) -> tuple[RunResult, list[str]]:
    """Runs `jobs` on the Ray cluster under `policy`; returns the run (failed jobs and their causes in
    `failures`) and, per trace row, the id of the node the stage ran on.

    Connects to `address` when given; otherwise uses the running Ray, or starts a local one whose
    single node owns every machine. Raises ValueError, before anything runs, for a job the machines
    cannot run (see `assign_machines`), negative `retries`, or a machine resource the cluster lacks
    (its stages would wait forever). `retries`: replacement workers per job after its worker died.
    """
    ray = _ray()
    assign_machines(jobs, machines)
    make_policy(policy)  # fails early on an unknown name
    retries = integer("retries", retries, 0)
    if not ray.is_initialized():
        local = {}
        for m, machine in enumerate(machines):
            local.update(node_resources(m, machine))
        ray.init(
            address=address,
            resources=None if address else local,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    available = ray.cluster_resources()
    for m, machine in enumerate(machines):
        for name, amount in node_resources(m, machine).items():
            if amount and available.get(name, 0) < amount:
                raise ValueError(
                    f"the Ray cluster has {available.get(name, 0)} of resource {name!r}, machine {m} needs {amount}"
                )
    actor = ray.remote(_SchedulerActor).options(num_cpus=0).remote(machines, policy, retries)
    rows, results, failures = ray.get(actor.run.remote(list(jobs)))
    ray.kill(actor)
    order = sorted(range(len(jobs)), key=lambda j: (jobs[j].arrival, j))
    run = RunResult(Trace.from_rows([jobs[j].name for j in order], [r[:8] for r in rows]), results, failures)
    if failures:
        warnings.warn(run.summary, stacklevel=2)
    return run, [r[8] for r in rows]
