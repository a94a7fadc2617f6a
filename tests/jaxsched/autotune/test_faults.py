"""Faults stay inside their job on the process runner: a bad submission mid-run is refused to its
submitter, a raising stage, a dying worker and an out-of-memory profile fail their job only, the
other jobs' results equal a replay without the faulty ones; a dead worker is replaced when retries
allow; a killed scheduler resumes from the record database without redoing finished rounds."""

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jaxsched.autotune import Machine, ProcessRunner, TuningRecords, check_trace, make_policy
from tests.jaxsched.autotune.faulty import WIDE, Dying, Hungry, Raising, Tally, replay

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores")
ROOT = Path(__file__).resolve().parents[3]


def machine():
    cores = sorted(os.sched_getaffinity(0))
    return Machine(1, 1, (cores[0],), (cores[1],))


def rounds_of(trace, name):
    rows = trace.job == trace.names.index(name)
    return sorted({int(r) for r, s in zip(trace.round[rows], trace.stage[rows]) if s == 3})


def test_each_fault_fails_its_job_only(tmp_path):
    good = [Tally("g0", 3), Tally("g1", 3)]
    with TuningRecords(tmp_path / "r.sqlite") as records:
        runner = ProcessRunner(machine(), make_policy("load_aware"), records)
        for job in good + [Raising("raising", 3), Dying("dying", 3), Hungry("hungry", 2)]:
            runner.submit(job)
        refused = []

        def submit_bad():  # from another thread while the run runs
            for job in (Tally("g0", 1), Tally("wide", 1, WIDE)):
                try:
                    runner.submit(job)
                except ValueError as error:
                    refused.append(str(error))

        timer = threading.Timer(0.3, submit_bad)
        timer.start()
        with pytest.warns(UserWarning, match="5 jobs: 2 finished, 3 failed"):
            run = runner.run()
        timer.join()
        assert refused == [
            "job names must be unique, 'g0' was submitted twice",
            "job 'wide': stage 'build' needs 64 cpu units, machine 0 has 1",
        ]
        assert run.results == {job.name: replay(job) for job in good}
        assert run.failures == {
            "raising": "stage 'build' of round 1: ArithmeticError: the compiler fell over",
            "dying": "stage 'build' of round 1: worker process exited with code 3",
            "hungry": "stage 'profile' of round 0: JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating "
            "1125899906842624 bytes.",
        }
        assert run.summary.startswith("5 jobs: 2 finished, 3 failed; ")
        assert all(f"; {name}: {cause}" in run.summary for name, cause in run.failures.items())
        assert [rounds_of(run.trace, name) for name in run.trace.names] == [[0, 1, 2], [0, 1, 2], [0], [0], []]
        # finished rounds of the failed jobs stay in the record database
        assert records.progress("raising", Raising("raising", 3).definition())[0] == 1
        assert records.progress("dying", Dying("dying", 3).definition()) == (1, replay(Tally("dying", 1)))
        assert records.progress("hungry", Hungry("hungry", 2).definition()) is None


@pytest.mark.slow
def test_dead_worker_gets_one_replacement(tmp_path):
    jobs = [Tally("g0", 3), Dying("dying", 3, marker=tmp_path / "died-once")]
    runner = ProcessRunner(machine(), make_policy("load_aware"), retries=1)
    for job in jobs:
        runner.submit(job)
    with pytest.warns(UserWarning, match="'dying': stage 'build' of round 1: worker process exited with code 3; resum"):
        run = runner.run()
    assert run.failures == {} and run.summary == "2 jobs: 2 finished, 0 failed"
    assert run.results == {job.name: replay(Tally(job.name, 3)) for job in jobs}
    check_trace(run.trace, [3, 3], [machine()])  # the interrupted round once, as rerun
    with pytest.raises(ValueError, match="retries must be an integer >= 0, got -1"):
        ProcessRunner(machine(), make_policy("load_aware"), retries=-1)


SCRIPT = """
import sys
from jaxsched.autotune import Machine, ProcessRunner, TuningRecords, make_policy
from tests.jaxsched.autotune.faulty import Logged

if __name__ == "__main__":
    with TuningRecords(sys.argv[1]) as records:
        runner = ProcessRunner(Machine(1, 1), make_policy("load_aware"), records)
        for name in ("a", "b"):
            runner.submit(Logged(name, 6, sys.argv[2]))
        print(runner.run().results)
"""


@pytest.mark.slow
def test_killed_scheduler_resumes_without_redoing_finished_rounds(tmp_path):
    script, db = tmp_path / "tune.py", tmp_path / "r.sqlite"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    first = subprocess.Popen([sys.executable, str(script), str(db), str(tmp_path / "first.log")], env=env)
    done = {}
    deadline = time.monotonic() + 120
    while not done.get("a", 0) + done.get("b", 0) >= 2 and time.monotonic() < deadline:
        time.sleep(0.02)
        if db.exists():
            with sqlite3.connect(db) as probe:
                try:
                    done = dict(probe.execute("SELECT job, rounds FROM progress"))
                except sqlite3.OperationalError:  # the table is not created yet
                    pass
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    with sqlite3.connect(db) as probe:
        done = dict(probe.execute("SELECT job, rounds FROM progress"))
    assert 2 <= sum(done.values()) < 12  # killed mid-run
    second = subprocess.run(
        [sys.executable, str(script), str(db), str(tmp_path / "second.log")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stderr
    rerun = [line.split() for line in (tmp_path / "second.log").read_text().splitlines()]
    for name in ("a", "b"):
        rounds = [int(r) for n, r, s in rerun if n == name and s == "0"]
        assert rounds == list(range(done.get(name, 0), 6))  # each unfinished round once, no finished one again
    expected = {name: replay(Tally(name, 6)) for name in ("a", "b")}
    assert second.stdout.strip() == str(expected)


def test_resuming_another_definition_is_refused(tmp_path):
    with TuningRecords(tmp_path / "r.sqlite") as records:
        records.save_progress("a", Tally("a", 3).definition(), 1, ())
        runner = ProcessRunner(machine(), make_policy("load_aware"), records)
        with pytest.raises(ValueError, match=r"job 'a' in .*r.sqlite was defined as .Tally\(rounds=3.*refusing"):
            runner.submit(Tally("a", 4))
        runner.submit(Tally("b", 4))
