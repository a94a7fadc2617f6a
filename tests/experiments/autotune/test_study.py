"""`python -m experiments.autotune`: bad input and the interference fit (the test config end to end is
tests/experiments/test_autotune.py)."""

import os

import pytest

from experiments import autotune
from experiments.autotune import CONFIGS, fit_interference
from jaxsched.autotune import Machine, MockJob, make_policy, simulate_policy

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores")


def test_unknown_config_exits_2_with_one_line(tmp_path, capsys):
    assert autotune.main(["--config", "huge", "--workdir", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "unknown config 'huge'" in error


def test_fitted_interference_recovers_the_slowdown_of_an_uncoordinated_run():
    # two one-round jobs, alone: the sequential run is their stages back to back
    jobs = [MockJob("a", [[1.0, 2.0, 1.0, 1.0]]), MockJob("b", [[1.0, 1.0, 2.0, 1.0]])]
    machine = Machine(1, 1)
    sequential = simulate_policy(jobs, [machine], make_policy("sequential"))
    slowed = simulate_policy(jobs, [machine], make_policy("parallel"), interference=0.6)
    config = CONFIGS["test"]  # one round per job, as above
    assert fit_interference(config, sequential, slowed, machine) == pytest.approx(0.6)
