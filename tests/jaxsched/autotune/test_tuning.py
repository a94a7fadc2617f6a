"""Real tuning jobs: knobs that matter, the cost model, stages as functions of a picklable state."""

import functools
import pickle

import numpy as np
import pytest
import scipy.stats

from jaxsched.autotune import _cost_model as cost_model
from jaxsched.autotune import tuning
from jaxsched.autotune.tuning import TuningJob, measure_alone
from jaxsched.autotune.workloads import Workload
from jaxsched.common.timing import alternated_times


@pytest.mark.parametrize(
    "workload, fast, slow, ratio",
    [
        (Workload("matmul", 128), {"tm": 128, "tk": 128}, {"tm": 4, "tk": 4}, 2.0),
        (Workload("scan", 1024), {"chunk": 1, "unroll": 1}, {"chunk": 64, "unroll": 1}, 2.0),
        (
            Workload("xla_options", 256),
            {"opt_level": 3, "vector_width": 256, "fast_math": 0},
            {"opt_level": 0, "vector_width": 64, "fast_math": 0},
            1.5,  # about 2x measured; CI once read 1.96, so the bound keeps a margin over noise
        ),
    ],
)
def test_knobs_change_runtime_and_not_the_result(workload, fast, slow, ratio):
    """Timed in alternation, so that another program on the machine (a second test run sharing the two
    cores made this flaky when each variant was timed in one block) slows both variants alike. Wall clock:
    the process CPU clock is too coarse for the 0.1 ms matmul."""
    args = workload.inputs()
    executables = {name: workload.build(config) for name, config in (("fast", fast), ("slow", slow))}
    outputs = [np.asarray(executables[name](*args)) for name in ("fast", "slow")]
    times = alternated_times({name: functools.partial(e, *args) for name, e in executables.items()}, repeats=7,
                             warmup=1)
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=2e-4, atol=2e-4)
    assert times["slow"].min() / times["fast"].min() >= ratio


def test_workloads_compute_their_reference():
    a, b = Workload("matmul", 64).inputs()
    np.testing.assert_allclose(
        Workload("matmul", 64).build({"tm": 8, "tk": 16})(a, b), np.asarray(a) @ np.asarray(b), rtol=1e-4, atol=1e-4
    )
    decay, x = Workload("scan", 64).inputs()
    h, expected = np.zeros(64), []
    for row in np.asarray(x, np.float64):
        h = np.asarray(decay, np.float64) * h + row
        expected.append(h)
    out = Workload("scan", 64).build({"chunk": 8, "unroll": 2})(decay, x)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="unknown workload kind 'conv'"):
        Workload("conv", 64)
    with pytest.raises(ValueError, match="size must be a power of two"):
        Workload("matmul", 100)


def test_cost_model_ranks_unseen_configurations():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 6, size=(60, 4))
    truth = lambda x: 0.3 * (x[:, 0] - 3) ** 2 + 0.5 * x[:, 1] - 0.2 * x[:, 2]  # noqa: E731
    model = cost_model.fit(x[:40], truth(x[:40]), seed=0, steps=300)
    mean, spread = cost_model.predict(model, x[40:])
    assert scipy.stats.spearmanr(mean, truth(x[40:])).statistic > 0.9
    assert spread.shape == (20,) and np.all(spread >= 0)
    with pytest.raises(ValueError, match="must be finite"):
        cost_model.fit(np.array([[np.nan, 0, 0, 0]]), np.array([0.0]))


def test_select_without_exploration_is_lowest_bound_first():
    mean = np.array([3.0, 1.0, 2.0, 0.5, 4.0])
    spread = np.array([0.0, 0.0, 2.0, 0.0, 0.0])
    available = np.array([True, True, True, False, True])
    rng = np.random.default_rng(0)
    # bounds with kappa 1: 3, 1, 0, (taken), 4 -> 2, 1
    np.testing.assert_array_equal(cost_model.select(mean, spread, available, 2, 1.0, 0.0, rng), [2, 1])
    np.testing.assert_array_equal(cost_model.select(mean, spread, available, 9, 0.0, 0.0, rng), [1, 2, 0, 4])


def test_tuning_job_stages_on_picklable_state():
    job = TuningJob(Workload("matmul", 32), rounds=2, batch=3, repeats=2, min_repeat_s=0.0, fit_steps=300, seed=1)
    state = job.init_state()
    for round_ in range(2):
        for stage in range(4):
            state = pickle.loads(pickle.dumps(job.run_stage(stage, round_, state)))  # as between processes
    result = job.result(state)
    assert len(result.measured) == 6 and len({tuple(c.items()) for c, _ in result.measured}) == 6
    assert result.best_seconds == min(s for _, s in result.measured)
    assert measure_alone(Workload("matmul", 32), result.best_config, repeats=2, min_repeat_s=0.0) > 0
    with pytest.raises(ValueError, match="warm_start must be features"):
        TuningJob(Workload("matmul", 32), 1, warm_start=(np.zeros((3, 2)), np.zeros(3)))
    with pytest.raises(ValueError, match=r"job 'matmul-32': batch must be an integer >= 1, got 0"):
        TuningJob(Workload("matmul", 32), 1, batch=0)


def test_repeats_last_min_repeat_s_even_when_the_warm_up_call_is_slow(monkeypatch):
    clock = [0.0]  # a fake clock: deterministic on a loaded machine
    monkeypatch.setitem(tuning.CLOCKS, "wall", lambda: clock[0])

    def call():  # a fresh executable: the first call takes 0.5 s, later ones 0.25 s
        clock[0] += 0.5 if clock[0] == 0.0 else 0.25

    # warm-up; one call lasts 0.25 s < 1 s, so number = max(1 / 0.25 + 1, 1.618 * 1) = 5, and five
    # calls last 1.25 s >= 1 s (the old rule, from the warm-up call, gave ceil(1 / 0.5) = 2: 0.5 s)
    assert tuning.calls_per_repeat(call, 1.0) == 5
    assert clock[0] == 0.5 + 0.25 + 5 * 0.25
    clock[0] = 0.0
    # no minimum: the warm-up and one measurable call
    assert tuning.calls_per_repeat(call, 0.0) == 1 and clock[0] == 0.5 + 0.25
