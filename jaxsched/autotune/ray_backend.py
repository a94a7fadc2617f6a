"""Many machines through Ray (extra `distributed`): the scheduler is one actor, stages are Ray tasks.

Machine m's CPU cores and devices are the custom Ray resources `autotune_m{m}_cpu` (its core count)
and `autotune_m{m}_device` (its device count, 1 per device), declared by the node that owns the
machine (`node_resources`; `ray start --resources=...` on a real cluster). A stage task asks for
its resource, so it runs on that node and a device runs one profile at a time by construction;
the scheduler actor asks only for what the central `Scheduler` has granted, so Ray never has to
queue. Job states travel between stage tasks as Ray objects (the stateless client of the thesis,
4.3), so stages of one job may run in different worker processes. Stages on Ray are not pinned to
cores: Ray's resource accounting is the exclusivity.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from jaxsched.autotune.jobs import Job, assign_machines
from jaxsched.autotune.policies import make_policy
from jaxsched.autotune.resources import Machine
from jaxsched.autotune.runner import RunResult
from jaxsched.autotune.scheduler import Scheduler
from jaxsched.autotune.trace import Trace


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


class _SchedulerActor:
    """The central scheduler as a Ray actor: dispatches stage tasks, waits for them, records the trace."""

    def __init__(self, machines: Sequence[Machine], policy: str):
        self.machines = tuple(machines)
        self.policy = policy

    def run(self, jobs: Sequence[Job]) -> tuple[list[tuple], dict[str, Any], list[str]]:
        ray = _ray()
        stage_task = ray.remote(_run_stage)
        result_task = ray.remote(_result).options(num_cpus=0)
        scheduler = Scheduler(self.machines, make_policy(self.policy))
        order = sorted(range(len(jobs)), key=lambda j: (jobs[j].arrival, j))
        job_refs, states, submitted = [], [], 0
        running, rows, nodes = {}, [], []
        begin = time.perf_counter()
        while True:
            now = time.perf_counter() - begin
            while submitted < len(order) and jobs[order[submitted]].arrival <= now:
                job = jobs[order[submitted]]
                scheduler.submit(job, job.arrival)
                job_refs.append(ray.put(job))
                states.append(job.init_state())
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
                nodes.append(ray.get(ref))
                finish = time.perf_counter() - begin
                rows.append(
                    (start.job, start.round, start.stage, start.machine, start.kind, start.amount, started, finish)
                )
                scheduler.finish(start, finish, finish - started)
        results = ray.get([result_task.remote(job_refs[j], states[j]) for j in range(len(job_refs))])
        names = [scheduler.jobs[j].name for j in range(len(job_refs))]
        return rows, dict(zip(names, results)), nodes


def run_on_ray(
    jobs: Sequence[Job], machines: Sequence[Machine], policy: str = "load_aware", address: str | None = None
) -> tuple[RunResult, list[str]]:
    """Runs `jobs` on the Ray cluster under `policy`; returns the run and, per trace row, the id of
    the node the stage ran on.

    Connects to `address` when given; otherwise uses the running Ray, or starts a local one whose
    single node owns every machine. Raises ValueError naming a machine resource the cluster lacks
    (its stages would wait forever).
    """
    ray = _ray()
    assign_machines(jobs, machines)
    make_policy(policy)  # fails early on an unknown name
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
    actor = ray.remote(_SchedulerActor).options(num_cpus=0).remote(machines, policy)
    rows, results, nodes = ray.get(actor.run.remote(list(jobs)))
    ray.kill(actor)
    order = sorted(range(len(jobs)), key=lambda j: (jobs[j].arrival, j))
    return RunResult(Trace.from_rows([jobs[j].name for j in order], rows), results), nodes
