"""Shared tiny configurations, data and one trained population for the jaxquant tests."""

import jax
import numpy as np
import pytest

import jaxquant as jq

# A tiny ResNet (4/8/16 channels, one block per stage) at a constant learning rate: 4 epochs of
# 20 steps on the tiny digits below.
TINY = jq.TrainConfig(
    model=jq.ModelConfig(blocks_per_stage=1, base_width=4),
    epochs=4,
    batch_size=16,
    eval_batch_size=64,
    learning_rates=(5e-3,),
    lr_epochs=(0,),
    regime="linear",
    delta0=0.02,
    m=0.5,
    delta_max=0.9,
)


@pytest.fixture(scope="session")
def tiny_digits():
    """A stratified subset of the digits: 320 training and 128 test images."""
    digits = jq.load_digits()
    rng = np.random.default_rng(0)
    train = rng.permutation(len(digits.train_labels))[:320]
    test = rng.permutation(len(digits.test_labels))[:128]
    return jq.Dataset(
        "tiny-digits", digits.train_images[train], digits.train_labels[train], digits.test_images[test],
        digits.test_labels[test], digits.mean, digits.std, 10, pad=1, flip=False,
    )


@pytest.fixture(scope="session")
def population_members():
    """Two members with different regimes and seeds."""
    return [jq.SweepMember("linear", 0.02, 0.5, 0.9, seed=0), jq.SweepMember("log", 0.05, 1.0, 0.3, seed=1)]


@pytest.fixture(scope="session")
def whole_run(tiny_digits, population_members):
    """(final states, per-epoch metrics [2, epochs]) of `jit(vmap(make_train(TINY)))`."""
    keys, regimes = jq.member_inputs(population_members)
    return jax.jit(jax.vmap(jq.make_train(TINY, tiny_digits)))(keys, regimes)


@pytest.fixture(scope="session")
def trained_population(tiny_digits, population_members):
    """Both members trained for TINY.epochs epochs in one vmapped program (no checkpoints), on one device like
    `whole_run` (other device counts: tests/jaxsched/common/device_counts.py)."""
    return jq.run_sweep(TINY, population_members, dataset=tiny_digits, progress=False, devices=1)


def fit_killed_after_epoch_two(workdir, dataset, members, devices=None) -> list[int]:
    """Start `jq.fit(TINY, ...)` of `members` in `workdir` and kill it (KeyboardInterrupt) after its second epoch's
    checkpoint; returns the epochs it reached, to which a resumed run's `on_epoch_end` can append."""
    keys, regimes = jq.member_inputs(members)
    seen = []

    def kill_after_epoch_two(epoch, metrics):
        seen.append(epoch)
        if epoch == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        jq.fit(TINY, keys, regimes, workdir=workdir, dataset=dataset, progress=False,
               on_epoch_end=kill_after_epoch_two, devices=devices)
    return seen
