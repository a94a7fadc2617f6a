"""NeuralScheduler: every decoded schedule validates, checkpoints round-trip exactly, clear errors,
one compilation per padded shape."""

import jax
import numpy as np
import pytest

import jaxsched
from jaxsched.batch import Shape
from jaxsched.deepsched import DeepSchedNet, NeuralScheduler, problem_features
from jaxsched.deepsched import decode as decode_module
from jaxsched.deepsched.features import bucket_shape
from jaxsched.generate import cloudsim, fft, fork_join, gaussian_elimination, random_dag
from tests.jaxsched.problems import random_problem, topcuoglu_example

# One padded shape for every problem below (one compilation per decoder): the test dataset's, so
# that the experiment's test (test_evaluate.py) reuses these compilations.
SHAPE = Shape(16, 4, 32, 16)


def _problems():
    for seed in range(6):
        yield random_problem(seed, max_tasks=16, max_procs=4, bandwidth=seed % 2 == 0, arrival=seed % 3 == 0,
                             instant=seed == 4)
    yield cloudsim(14, 4, seed=1)
    yield random_dag(16, 3, ccr=10.0, seed=2)
    yield gaussian_elimination(5, 4, seed=3)
    yield fft(4, 3, seed=4)
    yield fork_join(3, 3, 2, seed=5)


@pytest.fixture(scope="module")
def scheduler(trained):
    _, directory, _ = trained
    return NeuralScheduler.load(directory)


def _untrained(config, variant):
    config = config.replace(model={"variant": variant})
    features = problem_features(random_dag(8, 2, seed=0), SHAPE)
    return NeuralScheduler(config, jax.jit(DeepSchedNet(config.model).init)(jax.random.key(0), features))


def _check_all_valid(scheduler):
    for problem in _problems():
        greedy = scheduler.schedule(problem, shape=SHAPE)
        jaxsched.validate(problem, greedy)
        jaxsched.validate(problem, scheduler.schedule(problem, priority="start", shape=SHAPE))
        sampled = scheduler.schedule(problem, decoder="sampling", samples=8, shape=SHAPE)
        jaxsched.validate(problem, sampled)
        assert sampled.makespan <= greedy.makespan  # the greedy assignment is among the samples
        rule = jaxsched.simulate(problem, greedy.proc, jaxsched.upward_rank(problem))
        np.testing.assert_allclose(greedy.finish, rule.finish, rtol=1e-12)  # decoded as `simulate` (to 1 ulp)


def test_trained_feedback_schedules_always_validate(scheduler):
    _check_all_valid(scheduler)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["paper", "dag", "gnn"])
def test_untrained_networks_still_give_valid_schedules(test_config, variant):
    _check_all_valid(_untrained(test_config, variant))


def test_checkpoint_round_trip_gives_identical_predictions(trained, scheduler):
    config, _, result = trained
    best = int(np.argmin(result.history[-1]["val_loss"]))
    in_memory = NeuralScheduler(config, jax.tree.map(lambda x: x[best], result.state.params))
    for leaf, loaded in zip(jax.tree.leaves(in_memory.params), jax.tree.leaves(scheduler.params)):
        np.testing.assert_array_equal(np.asarray(leaf), np.asarray(loaded))
    problem = cloudsim(12, 4, seed=7)
    for decoder in ("greedy", "sampling"):
        first = in_memory.schedule(problem, decoder=decoder, samples=8, shape=SHAPE)
        second = scheduler.schedule(problem, decoder=decoder, samples=8, shape=SHAPE)
        np.testing.assert_array_equal(first.proc, second.proc)
        np.testing.assert_array_equal(first.start, second.start)


def test_padding_does_not_change_the_schedule(scheduler):
    problem = cloudsim(10, 3, seed=8)
    small = scheduler.schedule(problem)
    large = scheduler.schedule(problem, shape=SHAPE)
    np.testing.assert_array_equal(small.proc, large.proc)
    np.testing.assert_array_equal(small.finish, large.finish)
    proc, times = scheduler.predict(problem)  # raw outputs, for inspection
    np.testing.assert_array_equal(proc, small.proc)
    assert times.shape == (10, 2) and np.all(np.isfinite(times))


def test_one_compilation_per_padded_shape(scheduler):
    problems = [random_dag(12, 3, seed=s) for s in range(3)]
    scheduler.schedule(problems[0], shape=SHAPE)
    sizes = decode_module._greedy._cache_size(), decode_module._simulate_one._cache_size()
    for problem in problems[1:]:
        scheduler.schedule(problem, shape=SHAPE)
    assert (decode_module._greedy._cache_size(), decode_module._simulate_one._cache_size()) == sizes


def test_errors(scheduler, trained, tmp_path):
    too_big = random_dag(scheduler.config.model.max_tasks + 1, 2, seed=0)
    with pytest.raises(ValueError, match="at most"):
        scheduler.schedule(too_big)
    with pytest.raises(ValueError, match="decoder"):
        scheduler.schedule(random_dag(5, 2), decoder="beam")
    with pytest.raises(FileNotFoundError):
        NeuralScheduler.load(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no checkpoint in"):
        NeuralScheduler.load(tmp_path)
    _, directory, _ = trained
    for seed in (-1, 2, True):
        with pytest.raises(ValueError, match="seed must be one of the trained seeds 0..1"):
            NeuralScheduler.load(directory, seed=seed)
    for options, message in (
        (dict(temperature=float("nan")), "temperature"),
        (dict(samples=0), "samples"),
        (dict(seed=-3), "seed"),
    ):
        with pytest.raises(ValueError, match=message):
            scheduler.schedule(random_dag(5, 2), decoder="sampling", **options)
    assert bucket_shape(random_dag(5, 2)) == (8, 8, 8, 4)


@pytest.mark.slow
def test_eft_rule_without_a_template_equals_the_one_built_from_trained_parameters(trained, scheduler):
    config, _, _ = trained
    fresh, templated = NeuralScheduler.eft_rule(config), NeuralScheduler.eft_rule(config, like=scheduler.params)
    for a, b in zip(jax.tree.leaves(fresh.params), jax.tree.leaves(templated.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    problem = topcuoglu_example()  # the prior alone reproduces HEFT's processors here (test_model)
    np.testing.assert_array_equal(fresh.schedule(problem).proc, jaxsched.heft(problem).proc)
