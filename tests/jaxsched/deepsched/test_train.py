"""Training: the loss decreases, PureJaxRL train(key) agrees with fit, checkpoints resume exactly,
padding does not change the loss, and batches of one padded shape compile once."""

import os
import shutil
import signal
import subprocess
import sys
import time

import chex
import jax
import numpy as np
import pytest

from jaxsched.deepsched import NeuralScheduler, fit, loss_fn, make_train
from jaxsched.deepsched.data import LabelledSet, Labels
from jaxsched.deepsched.features import Features
from jaxsched.deepsched.model import UNOPTIMISED, DeepSchedNet


def _assert_trees_equal(a, b, **tolerance):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        if tolerance:
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), **tolerance)
        else:
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_loss_decreases(trained):
    _, _, result = trained
    train_loss = np.mean([epoch["train_loss"] for epoch in result.history], axis=1)
    val_loss = np.mean([epoch["val_loss"] for epoch in result.history], axis=1)
    assert train_loss[-1] < 0.9 * train_loss[0]
    assert val_loss[-1] < val_loss[0]
    assert len(result.history) == 3 and int(result.state.epoch[0]) == 3


def test_resume_after_interruption_continues_exactly(trained, splits, tmp_path):
    config, _, uninterrupted = trained
    first = fit(config.replace(train={"epochs": 2}), splits["train"].data, splits["val"].data, tmp_path, progress=False)
    assert len(first.history) == 2
    resumed = fit(config, splits["train"].data, splits["val"].data, tmp_path, progress=False)
    assert len(resumed.history) == 3 and resumed.history[:2] == first.history
    _assert_trees_equal(resumed.state.params, uninterrupted.state.params)
    _assert_trees_equal(resumed.state.opt_state, uninterrupted.state.opt_state)
    # The last epoch without its saved tree (was an orbax KeyError): loading falls back to epoch 2...
    shutil.rmtree(tmp_path / "3" / "tree")
    with pytest.warns(UserWarning, match="damaged"):
        scheduler = NeuralScheduler.load(tmp_path, seed=1)
    _assert_trees_equal(scheduler.params, jax.tree.map(lambda x: x[1], first.state.params))
    with pytest.raises(ValueError, match=r"seed must be one of the trained seeds 0\.\.1 .* got 99"):
        NeuralScheduler.load(tmp_path, seed=99)  # JAX used to clamp it to seed 1
    # ... and training redoes only epoch 3, exactly; a different configuration is refused.
    again = fit(config, splits["train"].data, splits["val"].data, tmp_path, progress=False)
    assert again.history[:2] == first.history
    _assert_trees_equal(again.state.params, uninterrupted.state.params)
    with pytest.raises(ValueError, match="different run"):
        fit(config.replace(train={"learning_rate": 0.1}), splits["train"].data, splits["val"].data, tmp_path)


def test_train_is_a_pure_function_of_the_key_that_vmaps(trained, splits):
    """PureJaxRL style: jax.vmap(train) over keys traces (no compilation here; the numbers are
    compared with fit in the slow test below)."""
    config, _, _ = trained
    keys = jax.random.split(jax.random.key(0), 3)
    state, metrics = jax.eval_shape(jax.vmap(make_train(config, splits["train"].data)), keys)
    assert metrics.loss.shape == (3, config.train.epochs) and state.epoch.shape == (3,)


@pytest.mark.slow
def test_jitted_vmapped_train_matches_fit(trained, splits):
    config, _, result = trained
    keys = jax.random.split(jax.random.key(0), config.train.num_seeds)  # fit's keys for seed=0
    state, metrics = jax.jit(jax.vmap(make_train(config, splits["train"].data)))(keys)
    assert metrics.loss.shape == (config.train.num_seeds, config.train.epochs)
    _assert_trees_equal(state.params, result.state.params, rtol=1e-4, atol=1e-5)
    first_layer = jax.tree.leaves(state.params)[0]
    assert not np.allclose(first_layer[0], first_layer[1])  # the seeds train different networks


def _pad_batch(batch: LabelledSet, extra: int) -> LabelledSet:
    """The same instances with `extra` more padded tasks (orders and predecessor sentinels shifted)."""
    f, labels = batch
    num_tasks = f.comp.shape[1]

    def grow(x, axis=1, value=0):
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, extra)
        return np.pad(np.asarray(x), widths, constant_values=value)

    tail = np.broadcast_to(np.arange(num_tasks, num_tasks + extra, dtype=np.int32), (f.comp.shape[0], extra))
    pred = np.asarray(f.pred).copy()
    pred[pred == num_tasks] = num_tasks + extra
    features = Features(
        task=grow(f.task),
        proc=f.proc,
        comp=grow(f.comp),
        arrival_order=np.concatenate([f.arrival_order, tail], axis=1),
        rank_order=np.concatenate([f.rank_order, tail], axis=1),
        task_mask=grow(f.task_mask),
        proc_mask=f.proc_mask,
        edge_src=f.edge_src,
        edge_dst=f.edge_dst,
        edge_data=f.edge_data,
        edge_mask=f.edge_mask,
        pred=grow(pred, value=num_tasks + extra),
        pred_data=grow(f.pred_data),
    )
    return LabelledSet(features, Labels(grow(labels.proc), grow(labels.times)))


def test_masked_loss_ignores_padding_and_compiles_once_per_shape(trained, splits):
    config, _, result = trained
    model = DeepSchedNet(config.model)
    params = jax.tree.map(lambda x: x[0], result.state.params)
    loss = jax.jit(chex.assert_max_traces(lambda p, b: loss_fn(model, p, b, 1.0)[0], n=1), compiler_options=UNOPTIMISED)
    data = splits["train"].data
    first = jax.tree.map(lambda x: x[:8], data)
    second = jax.tree.map(lambda x: x[8:16], data)
    loss(params, first), loss(params, second)  # same padded shape: one trace
    padded = jax.jit(lambda p, b: loss_fn(model, p, b, 1.0)[0], compiler_options=UNOPTIMISED)(
        params, _pad_batch(first, 8)
    )
    np.testing.assert_allclose(padded, loss(params, first), rtol=1e-5)


@pytest.mark.slow
def test_killed_training_resumes_without_losing_finished_epochs(test_config, splits, tmp_path):
    """SIGKILL a training process after its second checkpoint; a new run starts from it."""
    data_dir = tmp_path / "data"
    script = (
        "import sys; from jaxsched.deepsched import configs, fit, load_or_build\n"
        "config = configs.CONFIGS['test'].replace(train={'epochs': 50})\n"
        f"splits = load_or_build(config.data, {str(data_dir)!r}, progress=False)\n"
        f"fit(config, splits['train'].data, splits['val'].data, {str(tmp_path / 'ckpt')!r}, progress=False)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ, JAX_PLATFORMS="cpu"))
    deadline = time.time() + 300
    while time.time() < deadline and not (tmp_path / "ckpt" / "2").exists():
        time.sleep(0.5)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (tmp_path / "ckpt" / "2").exists()
    config = test_config.replace(train={"epochs": 4})
    from jaxsched.deepsched import load_or_build

    splits = load_or_build(config.data, data_dir, progress=False)
    resumed = fit(config, splits["train"].data, splits["val"].data, tmp_path / "ckpt", progress=False)
    assert len(resumed.history) == 4 and int(resumed.state.epoch[0]) == 4
