"""Training on HEFT labels: loss (paper Eq. 2), `make_train(config, data) -> train(key)`, and `fit`,
which runs the same epochs for several seeds at once with orbax checkpoints and resumes after a kill.

PureJaxRL style: `jax.jit(jax.vmap(make_train(config, data)))(keys)` trains one network per key in
a single compiled call; `fit` calls the same jitted, vmapped epoch once per epoch instead, so that
it can save a checkpoint after every epoch (`jaxsched.common.Workdir.checkpointer`: a directory of another
configuration or seed is refused before training starts, a damaged latest epoch falls back to the one before).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh
from tqdm.auto import tqdm

from jaxsched.common.sharding import Devices, batch_mesh, constrain_batch, pad_batch, padded_batch_size, replicate
from jaxsched.common.workdir import Workdir
from jaxsched.deepsched.configs import DeepSchedConfig, EvalConfig, TrainConfig
from jaxsched.deepsched.data import LabelledSet
from jaxsched.deepsched.model import UNOPTIMISED, DeepSchedNet


class TrainState(NamedTuple):
    """Parameters, optimiser state, shuffling key and epochs completed of one network (or, with a
    leading seed axis, of several)."""

    params: Any
    opt_state: Any
    key: jax.Array
    epoch: jax.Array  # [] int32 epochs completed


class Metrics(NamedTuple):
    """Means over real tasks (training metrics: over the epoch's minibatches)."""

    loss: jax.Array
    cross_entropy: jax.Array
    time_mse: jax.Array
    accuracy: jax.Array  # share of tasks whose argmax processor is HEFT's


class TrainFns(NamedTuple):
    """The pure functions of one training run (see `make_train_fns`)."""

    init: Callable[[jax.Array], TrainState]
    epoch: Callable[[TrainState, LabelledSet], tuple[TrainState, Metrics]]
    evaluate: Callable[[Any, LabelledSet], Metrics]


def loss_fn(model: DeepSchedNet, params, batch: LabelledSet, time_weight: float) -> tuple[jax.Array, Metrics]:
    """Masked cross-entropy on HEFT's processor + time_weight * masked MSE on its normalised
    (start, finish) at that processor (paper Eq. 2), averaged over the real tasks of the batch."""
    features, labels = batch
    prediction = jax.vmap(model.apply, in_axes=(None, 0, 0))(params, features, labels.proc)
    mask = features.task_mask.astype(prediction.logits.dtype)
    count = jnp.maximum(mask.sum(), 1.0)
    cross_entropy = (
        optax.softmax_cross_entropy_with_integer_labels(prediction.logits, labels.proc) * mask
    ).sum() / count
    time_mse = (jnp.square(prediction.times - labels.times).mean(axis=-1) * mask).sum() / count
    hits = (jnp.argmax(prediction.logits, axis=-1) == labels.proc).astype(mask.dtype)
    loss = cross_entropy + time_weight * time_mse
    return loss, Metrics(loss, cross_entropy, time_mse, (hits * mask).sum() / count)


def make_optimizer(config: TrainConfig, steps_per_epoch: int) -> optax.GradientTransformation:
    """Adam with the learning rate multiplied by `decay_factor` every `decay_every` epochs, after
    clipping the global gradient norm."""
    schedule = optax.exponential_decay(
        config.learning_rate,
        transition_steps=config.decay_every * steps_per_epoch,
        decay_rate=config.decay_factor,
        staircase=True,
    )
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(schedule))


def _take(data: LabelledSet, index: jax.Array) -> LabelledSet:
    return jax.tree.map(lambda x: x[index], data)


def _data_parallel(batch: LabelledSet, mesh: Mesh) -> LabelledSet:
    """`batch` padded to a multiple of the mesh's device count and split across it. Padding repeats the last
    instance with no real task (task_mask False), so the loss, its gradient and the metrics, all means over real
    tasks, are unchanged; the gradient's sum over the batch becomes a cross-device reduction."""
    size = batch.labels.proc.shape[0]
    padded = pad_batch(batch, padded_batch_size(size, mesh))
    real = (jnp.arange(padded.labels.proc.shape[0]) < size)[:, None]
    padded = padded._replace(features=padded.features._replace(task_mask=padded.features.task_mask & real))
    return constrain_batch(padded, mesh)


def make_train_fns(config: DeepSchedConfig, num_train: int, example: LabelledSet, mesh: Mesh | None = None
                   ) -> TrainFns:
    """Pure init / epoch / evaluate functions for a training set of `num_train` instances shaped like
    `example` (one instance or more, with a leading batch axis). With `mesh`, each minibatch is split across
    its devices (data parallel; parameters stay replicated)."""
    model = DeepSchedNet(config.model)
    batch_size = min(config.train.batch_size, num_train)
    steps = num_train // batch_size
    optimizer = make_optimizer(config.train, steps)
    one = jax.tree.map(lambda x: jnp.asarray(x[0]), example)

    def init(key: jax.Array) -> TrainState:
        init_key, key = jax.random.split(key)
        params = model.init(init_key, one.features, one.labels.proc)
        return TrainState(params, optimizer.init(params), key, jnp.zeros((), jnp.int32))

    def step(state: TrainState, batch: LabelledSet) -> tuple[TrainState, Metrics]:
        params, opt_state, key, epoch = state
        grads, metrics = jax.grad(lambda p: loss_fn(model, p, batch, config.train.time_weight), has_aux=True)(params)
        with jax.numpy_dtype_promotion("standard"):  # optax mixes Python floats with int32 step counts
            updates, opt_state = optimizer.update(grads, opt_state, params)
        return TrainState(optax.apply_updates(params, updates), opt_state, key, epoch), metrics

    def epoch(state: TrainState, data: LabelledSet) -> tuple[TrainState, Metrics]:
        key, shuffle_key = jax.random.split(state.key)
        order = jax.random.permutation(shuffle_key, num_train)[: steps * batch_size].reshape(steps, batch_size)

        def minibatch(state, index):
            batch = _take(data, index)
            return step(state, batch if mesh is None else _data_parallel(batch, mesh))

        state, metrics = jax.lax.scan(minibatch, state._replace(key=key), order)
        return state._replace(epoch=state.epoch + 1), jax.tree.map(jnp.mean, metrics)

    def evaluate(params, data: LabelledSet) -> Metrics:
        return loss_fn(model, params, data, config.train.time_weight)[1]

    return TrainFns(init, epoch, evaluate)


def make_train(config: DeepSchedConfig, data: LabelledSet) -> Callable[[jax.Array], tuple[TrainState, Metrics]]:
    """`train(key) -> (final state, per-epoch training metrics)`, pure and jittable; vmap it over
    keys to train several seeds at once."""
    num_train = int(data.labels.proc.shape[0])
    fns = make_train_fns(config, num_train, data)
    data = jax.tree.map(jnp.asarray, data)

    def train(key: jax.Array) -> tuple[TrainState, Metrics]:
        return jax.lax.scan(lambda state, _: fns.epoch(state, data), fns.init(key), None, length=config.train.epochs)

    return train


class FitResult(NamedTuple):
    """What `fit` returns: the trained states of every seed and the per-epoch metric history."""

    state: TrainState  # leading seed axis
    history: list[dict[str, list[float]]]  # per epoch: "train_*" and "val_*" metrics, one value per seed


def _to_saved(state: TrainState) -> dict:
    return {
        "params": state.params,
        "opt_state": state.opt_state,
        "key": jax.random.key_data(state.key),
        "epoch": state.epoch,
    }


@functools.lru_cache(maxsize=16)
def _seed_vmapped(config: DeepSchedConfig, num_train: int, treedef, signature: tuple, mesh: Mesh):
    """Jitted init and (epoch, then validation) vmapped over seeds, cached per configuration (epochs
    aside), data shape and mesh, so that resuming or refitting in one process does not compile again."""
    example = jax.tree.unflatten(treedef, [np.zeros((1,) + shape, dtype) for shape, dtype in signature])
    fns = make_train_fns(config, num_train, example, mesh)

    def epoch_and_validate(state: TrainState, train_set: LabelledSet, val_set: LabelledSet):
        state, train_metrics = fns.epoch(state, train_set)
        return state, train_metrics, fns.evaluate(state.params, val_set)

    init = jax.jit(jax.vmap(fns.init), compiler_options=UNOPTIMISED)
    return init, jax.jit(jax.vmap(epoch_and_validate, in_axes=(0, None, None)))


def fit(
    config: DeepSchedConfig,
    train_set: LabelledSet,
    val_set: LabelledSet,
    checkpoint_dir: str | Path,
    *,
    seed: int = 0,
    progress: bool = True,
    devices: Devices = None,
) -> FitResult:
    """Trains `config.train.num_seeds` networks at once (vmap over seeds), saving an orbax checkpoint
    of all of them after every epoch; if `checkpoint_dir` holds one, training resumes from it, so a
    killed run loses at most the epoch in progress (a directory written with another configuration or
    `seed` raises ValueError). Validation metrics are recorded per epoch. Each minibatch is split across
    `devices` (`jaxsched.common.batch_mesh`: default all devices, of every process in a multi-process run),
    the parameters replicated and the gradients summed across devices: the result equals a one-device run up
    to the order of that sum (float rounding)."""
    num_train = int(train_set.labels.proc.shape[0])
    leaves, treedef = jax.tree.flatten(train_set)
    signature = tuple((leaf.shape[1:], np.dtype(leaf.dtype).name) for leaf in leaves)
    training = dataclasses.replace(config.replace(train={"epochs": 0}), eval=EvalConfig())  # what compiles
    mesh = batch_mesh(devices)
    init, epoch = _seed_vmapped(training, num_train, treedef, signature, mesh)
    keys = jax.random.split(jax.random.key(seed), config.train.num_seeds)
    train_set, val_set, keys = replicate((train_set, val_set, keys), mesh)
    state = init(keys)
    history: list[dict[str, list[float]]] = []
    with Workdir(checkpoint_dir, config.identity(seed)).checkpointer() as checkpointer:
        restored = checkpointer.restore_latest(_to_saved(state))
        if restored is not None:
            saved = jax.tree.map(jnp.asarray, restored.tree)
            state = replicate(TrainState(
                saved["params"], saved["opt_state"], jax.random.wrap_key_data(saved["key"]), saved["epoch"]
            ), mesh)
            history = restored.meta["history"]
        start = len(history)
        bar = tqdm(
            range(start, config.train.epochs),
            desc=f"training {config.model.variant}",
            disable=not progress,
            initial=start,
            total=config.train.epochs,
        )
        for _ in bar:
            state, train_metrics, val_metrics = epoch(state, train_set, val_set)
            record = {f"train_{k}": np.asarray(v).tolist() for k, v in train_metrics._asdict().items()}
            record.update({f"val_{k}": np.asarray(v).tolist() for k, v in val_metrics._asdict().items()})
            history.append(record)
            bar.set_postfix(
                loss=f"{np.mean(record['train_loss']):.3f}", val_acc=f"{np.mean(record['val_accuracy']):.3f}"
            )
            meta = {"config": json.loads(config.to_json()), "history": history}
            checkpointer.save(len(history), _to_saved(state), meta)
    return FitResult(state, history)
