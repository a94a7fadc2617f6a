"""The process runner: real runs of MockJobs agree with the simulator; pinning; submission while
others run; failures name the job and stage (the isolation of faults: test_faults)."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsched.autotune import Job, Machine, MockJob, check_trace, make_policy, simulate_policy, thread_affinities
from jaxsched.autotune.runner import ProcessRunner
from tests.jaxsched.autotune.reference import brute_force_check

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores")


def machine():
    cores = sorted(os.sched_getaffinity(0))
    return Machine(1, 1, (cores[0],), (cores[1],))


def sleep_jobs():
    # distinct durations (0.2 s apart) keep every decision away from ties that timing noise could flip,
    # and are long against the dispatch jitter of a loaded machine (tens of ms per stage at load 8-10)
    durations = 0.2 * np.array([[[1, 3, 2, 1]], [[2, 1, 3, 2]], [[1, 2, 1, 3]]])
    return [MockJob(f"m{j}", d) for j, d in enumerate(durations)]


def start_order(trace, kind):
    rows = np.flatnonzero(trace.kind == kind)
    return [(int(trace.job[r]), int(trace.stage[r])) for r in rows[np.argsort(trace.start[rows], kind="stable")]]


# `parallel` is left out: sleeping stages share no resource, so a real run has none of the processor
# sharing the simulator models for it (its sharing is checked by hand in test_simulator)
@pytest.mark.parametrize("name", ["load_aware", "sequential", "predictive"])
def test_real_run_of_mock_jobs_agrees_with_simulator(name):
    jobs, m = sleep_jobs(), machine()
    simulated = simulate_policy(jobs, [m], make_policy(name))
    runner = ProcessRunner(m, make_policy(name))
    for job in jobs:
        runner.submit(job)
    real = runner.run().trace
    brute_force_check(real, jobs, [m], exclusive=True)
    assert start_order(real, 0) == start_order(simulated, 0)
    assert start_order(real, 1) == start_order(simulated, 1)
    assert real.makespan == pytest.approx(simulated.makespan, rel=0.1)


class ProbeJob(Job):
    """Records the cores each of its stages ran on: those every thread of its worker may use, XLA's
    thread pool included (started in `prepare`, before the worker is first pinned to a stage's cores)."""

    def prepare(self):
        jax.block_until_ready(jax.jit(lambda x: x @ x)(jnp.ones((64, 64))))

    def init_state(self):
        return []

    def run_stage(self, stage, round_, state):
        threads = thread_affinities()
        assert len(threads) > 1  # XLA's threads are there to check
        return state + [(stage, sorted(set().union(*threads.values())))]

    def result(self, state):
        return state


def test_stages_are_pinned_and_jobs_can_join_a_running_run():
    m = machine()
    runner = ProcessRunner(m, make_policy("load_aware"))
    runner.submit(MockJob("long", [[0.2, 0.4, 0.4, 0.2]] * 2))
    late = ProbeJob("late", 1)
    timer = threading.Timer(0.3, runner.submit, args=(late,))
    timer.start()
    result = runner.run()
    timer.join()
    assert result.trace.names == ("long", "late")
    check_trace(result.trace, [2, 1], [m])
    first_late = result.trace.start[result.trace.job == 1].min()
    assert first_late > 0.3
    assert result.results["late"] == [
        (0, list(m.cpu_ids)),
        (1, list(m.cpu_ids)),
        (2, list(m.device_ids)),
        (3, list(m.cpu_ids)),
    ]
    with pytest.raises(RuntimeError, match="has finished"):
        runner.submit(MockJob("too_late", [[0, 0, 0, 0]]))


class FailingJob(Job):
    def run_stage(self, stage, round_, state):
        if stage == 2:
            raise ArithmeticError("device fell over")
        return state


def test_failing_stage_names_job_and_stage():
    runner = ProcessRunner(machine(), make_policy("load_aware"))
    runner.submit(FailingJob("fragile", 1))
    with pytest.warns(UserWarning, match="1 jobs: 0 finished, 1 failed; fragile: stage 'profile' of round 0"):
        run = runner.run()
    assert run.failures == {"fragile": "stage 'profile' of round 0: ArithmeticError: device fell over"}


def test_unguarded_script_is_told_to_guard_its_main(tmp_path):
    # a spawned worker imports the main module again, so a script that calls `run` at top level starts its
    # workers from inside a worker, and each dies before it is ready
    script = tmp_path / "unguarded.py"
    script.write_text("import numpy as np\n"
                      "from jaxsched.autotune import Machine, MockJob, make_policy\n"
                      "from jaxsched.autotune.runner import ProcessRunner\n"
                      "runner = ProcessRunner(Machine(1, 1), make_policy('load_aware'))\n"
                      "runner.submit(MockJob('m', 0.01 * np.ones((1, 4))))\n"
                      "runner.run()\n")
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root), "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0  # the job failed, the run did not
    warning = next(line for line in done.stderr.splitlines() if "UserWarning" in line)
    assert "1 jobs: 0 finished, 1 failed; m: start: worker process exited with code 1 before it was ready" in warning
    assert 'if __name__ == "__main__":' in warning
