"""The tuning-record database and the service: round trip, answers from records, warm start,
submission while others run."""

import os
import threading

import numpy as np
import pytest

from jaxsched.autotune import make_policy
from jaxsched.autotune.records import TuningRecords
from jaxsched.autotune.resources import Machine
from jaxsched.autotune.runner import ProcessRunner
from jaxsched.autotune.service import TuningService
from jaxsched.autotune.tuning import TuningJob
from jaxsched.autotune.workloads import Workload

MATMUL = Workload("matmul", 64)


def synthetic_seconds(config):
    """A made-up runtime with its optimum at tm = tk = 32."""
    return 1e-3 * (1 + (np.log2(config["tm"]) - 5) ** 2 + (np.log2(config["tk"]) - 5) ** 2)


def test_round_trip_best_and_reopen(tmp_path):
    path = tmp_path / "records.sqlite"
    with TuningRecords(path) as records:
        for config in MATMUL.space():
            records.add(MATMUL, config, synthetic_seconds(config), "box")
        records.add(Workload("scan", 256), {"chunk": 4, "unroll": 2}, 0.5, "box")
    with TuningRecords(path) as records:
        got = records.records(MATMUL, "box")
        assert [(r.config, r.seconds) for r in got] == [(c, synthetic_seconds(c)) for c in MATMUL.space()]
        assert records.best(MATMUL, "box").config == {"tm": 32, "tk": 32}
        assert records.best(MATMUL, "other box") is None
        x, y = records.warm_start(Workload("matmul", 128), "box")
        assert x.shape == (len(MATMUL.space()), 4)
        np.testing.assert_allclose(np.exp(y), [synthetic_seconds(c) for c in MATMUL.space()])
        assert records.warm_start(Workload("xla_options", 64), "box") is None


def test_bad_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist: .*missing"):
        TuningRecords(tmp_path / "missing" / "records.sqlite")
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ValueError, match=r"garbage.sqlite is not a tuning-record database"):
        TuningRecords(garbage)
    with TuningRecords(tmp_path / "r.sqlite") as records:
        with pytest.raises(ValueError, match=r"measured seconds must be > 0, got -1.0"):
            records.add(MATMUL, {"tm": 4, "tk": 4}, -1.0, "box")
        with pytest.raises(ValueError, match="is not a configuration of workload 'matmul-64'"):
            records.add(MATMUL, {"tm": 3, "tk": 4}, 1.0, "box")


def test_warm_started_job_proposes_near_the_known_optimum(tmp_path):
    with TuningRecords(tmp_path / "r.sqlite") as records:
        for config in MATMUL.space():
            records.add(MATMUL, config, synthetic_seconds(config), "box")
        warm = records.warm_start(Workload("matmul", 128), "box")
    job = TuningJob(Workload("matmul", 128), rounds=1, batch=3, kappa=0.0, epsilon=0.0, fit_steps=300, warm_start=warm)
    state = job.run_stage(0, 0, job.init_state())  # propose, before any measurement of matmul-128
    truth = np.array([synthetic_seconds(c) for c in job.space])
    assert all(truth[i] <= np.quantile(truth, 0.25) for i in state.pending)


def test_known_best_meeting_the_target_is_answered_without_tuning(tmp_path):
    with TuningRecords(tmp_path / "r.sqlite") as records:
        for config in MATMUL.space():
            records.add(MATMUL, config, synthetic_seconds(config), "box")
        service = TuningService(records, ProcessRunner(Machine(1, 1), make_policy("load_aware")), "box")
        met = service.submit(MATMUL, rounds=1, target_seconds=1.5e-3)
        assert service.jobs == {}
        assert service.run()[met] == (MATMUL.name, {"tm": 32, "tk": 32}, 1e-3, False, "")
        missed = service.submit(MATMUL, rounds=1, target_seconds=0.5e-3)  # faster than anything known
        assert list(service.jobs) == [missed] and service.jobs[missed].warm_start[0].shape == (25, 4)
        with pytest.raises(ValueError, match="target_seconds must be > 0, got 0.0"):
            service.submit(MATMUL, rounds=1, target_seconds=0.0)


def test_workload_beyond_the_machines_memory_is_refused_at_submit(tmp_path):
    with TuningRecords(tmp_path / "r.sqlite") as records:
        small = Machine(1, 1, memory_bytes=2**30)
        service = TuningService(records, ProcessRunner(small, make_policy("load_aware")), "box")
        big = Workload("matmul", 2**14)  # arguments and result: 3 * 2**28 float32 = 3 GiB
        assert big.memory_bytes() == 3 * 2**30
        needs = r"job 'matmul-16384#0': workload 'matmul-16384' needs at least 3221225472 bytes"
        with pytest.raises(ValueError, match=needs):
            service.submit(big, rounds=1)
        assert service.jobs == {}
        service.submit(Workload("matmul", 2**13), rounds=1)  # 768 MiB fits
        with pytest.raises(ValueError, match=r"Machine.memory_bytes \(None: unknown\) must be an integer >= 1, got 0"):
            Machine(1, 1, memory_bytes=0)


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores")
def test_service_tunes_records_and_answers_resubmission_at_once(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    machine = Machine(1, 1, (cores[0],), (cores[1],))
    options = {"batch": 2, "repeats": 2, "min_repeat_s": 0.0, "fit_steps": 300}
    with TuningRecords(tmp_path / "r.sqlite") as records:
        service = TuningService(records, ProcessRunner(machine, make_policy("load_aware")), "box", options)
        first = service.submit(Workload("matmul", 32), rounds=1)
        timer = threading.Timer(0.5, service.submit, args=(Workload("matmul", 16), 1))  # joins the running run
        timer.start()
        answers = service.run()
        timer.join()
        assert set(answers) == {first, "matmul-16#1"}
        assert answers[first].tuned and answers[first].seconds == records.best(Workload("matmul", 32), "box").seconds
        assert len(records.records(Workload("matmul", 32), "box")) == 2
        # resubmitted with a target its best already meets: answered from the records, no job
        again = TuningService(records, ProcessRunner(machine, make_policy("load_aware")), "box", options)
        ticket = again.submit(Workload("matmul", 32), rounds=1, target_seconds=answers[first].seconds * 1.01)
        assert again.jobs == {} and not again.run()[ticket].tuned
        assert again.run()[ticket].config == answers[first].config
        # a target no record meets starts a job, warm-started from the records of matmul-32 and -16
        ticket = again.submit(Workload("matmul", 32), rounds=1, target_seconds=answers[first].seconds / 1000)
        assert again.jobs[ticket].warm_start[0].shape == (4, 4)
