"""Training: learning-rate schedule, an end-to-end run that learns, vmapped populations, resume."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxquant as jq
from tests.jaxquant.conftest import TINY, fit_killed_after_epoch_two


def test_paper_learning_rate_schedule_scaled_to_run_length():
    config = jq.TrainConfig(epochs=50)  # paper epochs 101, 142, 184, 220 of 500 -> 10, 14, 18, 22
    schedule = jq.learning_rate_schedule(config, steps_per_epoch=10)
    steps = [0, 99, 100, 139, 140, 179, 180, 219, 220, 10_000]
    expected = [5e-3, 5e-3, 1e-3, 1e-3, 5e-4, 5e-4, 1e-4, 1e-4, 1e-5, 1e-5]
    np.testing.assert_allclose([schedule(step) for step in steps], expected, rtol=1e-6)


@pytest.mark.numerics
def test_whole_run_is_one_vmappable_function_that_learns(whole_run):
    state, metrics = whole_run
    chex.assert_shape(metrics.test_accuracy, (2, TINY.epochs))
    # Δ per epoch from each member's regime: 0.02 (1 + 0.5 e) and min(0.05 (1 + ln e), 0.3)
    np.testing.assert_allclose(metrics.delta[0], [0.03, 0.04, 0.05, 0.06], rtol=1e-6)
    np.testing.assert_allclose(metrics.delta[1], [0.05, 0.0846574, 0.1049306, 0.1193147], rtol=1e-6)
    assert np.all(np.asarray(metrics.test_accuracy[:, -1]) > 0.3)  # chance is 0.1
    assert np.all(np.asarray(metrics.train_loss[:, -1]) < 0.85 * np.asarray(metrics.train_loss[:, 0]))
    latent = jq.latent_kernels(state.params)
    assert latent and all(float(jnp.max(jnp.abs(w))) <= 1.0 for w in latent.values())


def test_fit_equals_the_whole_run_program(whole_run, trained_population):
    _, metrics = whole_run
    # Δ follows from the epoch and the regime alone; the learned quantities go through two differently compiled
    # programs (XLA reassociates sums differently across versions), whose rounding Adam and the thresholds amplify
    # after the first epoch (on jax 0.11: train loss 1.7e-3 relative, 5 of 128 test images by the fourth epoch).
    for name, tolerance in (("delta", dict(rtol=1e-6)), ("train_loss", dict(rtol=1e-2)),
                            ("test_accuracy", dict(atol=0.08)), ("sparsity", dict(atol=0.02)),
                            ("entropy", dict(atol=0.02))):
        ours, theirs = getattr(trained_population.history, name), np.asarray(getattr(metrics, name)).T
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-4, atol=1e-5, err_msg=f"{name}, first epoch")
        np.testing.assert_allclose(ours, theirs, err_msg=name, **tolerance)


@pytest.mark.slow
def test_population_member_equals_a_separate_run(tiny_digits, population_members, trained_population):
    alone = jq.run_sweep(TINY, population_members[1:], dataset=tiny_digits, progress=False).history
    together = jq.EpochMetrics(*(column[:, 1:] for column in trained_population.history))
    # Identical up to float rounding in the first epoch; rounding differences between the two
    # programs can flip a weight across Δ and the trajectories then drift apart slowly.
    first_epoch = lambda history: jax.tree.map(lambda column: column[:1], history)  # noqa: E731
    chex.assert_trees_all_close(first_epoch(alone), first_epoch(together), rtol=1e-4)
    np.testing.assert_allclose(alone.train_loss, together.train_loss, rtol=2e-2)


def test_resume_after_a_kill_equals_an_uninterrupted_run(tmp_path, tiny_digits, population_members, trained_population):
    keys, regimes = jq.member_inputs(population_members)
    seen = fit_killed_after_epoch_two(tmp_path, tiny_digits, population_members, devices=1)
    resumed = jq.fit(TINY, keys, regimes, workdir=tmp_path, dataset=tiny_digits, progress=False,
                     on_epoch_end=lambda epoch, metrics: seen.append(epoch), devices=1)  # as trained_population
    assert seen == [1, 2, 3, 4]  # epochs 3 and 4 are the only ones trained after the restart
    chex.assert_trees_all_equal(resumed.history, trained_population.history)
    chex.assert_trees_all_equal(resumed.state, trained_population.state)


def test_resume_refuses_a_checkpoint_of_another_run(tmp_path, tiny_digits, population_members, trained_population):
    keys, regimes = jq.member_inputs(population_members)

    def stop(epoch, metrics):
        raise KeyboardInterrupt

    # On one device, as trained_population, whose compiled program serves (the default, every device, compiles
    # another: the sharded run is tested end to end by tests/experiments/ternary_sweep).
    with pytest.raises(KeyboardInterrupt):
        jq.fit(TINY, keys, regimes, workdir=tmp_path, dataset=tiny_digits, progress=False, on_epoch_end=stop,
               devices=1)
    other_keys, _ = jq.member_inputs([dataclasses.replace(m, seed=m.seed + 7) for m in population_members])
    with pytest.raises(ValueError, match="different run"):
        jq.fit(TINY, other_keys, regimes, workdir=tmp_path, dataset=tiny_digits, progress=False, devices=1)


def test_fit_validates_its_inputs(tiny_digits):
    with pytest.raises(ValueError, match="typed keys"):
        jq.fit(TINY, jnp.zeros((2, 2), jnp.uint32), dataset=tiny_digits)
    keys = jax.random.split(jax.random.key(0), 2)
    with pytest.raises(ValueError, match="leading axis of 2"):
        jq.fit(TINY, keys, jq.stack_regimes([TINY.delta_regime()] * 3), dataset=tiny_digits)
    with pytest.raises(ValueError, match="exceeds"):
        jq.make_trainer(dataclasses.replace(TINY, batch_size=1000), tiny_digits)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"epochs": 0}, "epochs"),
        ({"dataset": "mnist"}, "unknown dataset"),
        ({"lr_epochs": (1, 2, 3, 4, 5)}, "start at 0"),
        ({"learning_rates": (1e-3,)}, "equal length"),
        ({"regime": "cubic"}, "unknown Δ regime"),
    ],
)
def test_train_config_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(jq.TrainConfig(), **changes)
