"""Quantization-aware training as pure functions, PureJaxRL style.

`make_train(config)(key, regime)` runs a whole training as one jittable function, so
`jax.jit(jax.vmap(train))(keys, regimes)` trains a population of models in one program. `fit` runs
the same epoch function epoch by epoch (one jitted, vmapped program per epoch) with orbax
checkpoints, resume after a kill, a progress bar and per-epoch metrics.

Each step: sample a batch, augment it on device, quantize the latent weights with the epoch's Δ
(Eq. 7), back-propagate through the saturating STE (Eq. 2), take an Adam step with the paper's
piecewise learning rate, and project the latent weights back to [-1, 1]. The data order and the
augmentation depend only on `config.data_seed` and the epoch, never on the member, so all members
of a vmapped population see the same data stream (and XLA computes it once).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from jaxquant.data import DATASETS, Dataset, augment, load_dataset, normalize
from jaxquant.delta import DeltaRegime, delta_at, delta_regime
from jaxquant.layers import project_latent, quantized_codes
from jaxquant.metrics import entropy, sparsity
from jaxquant.resnet import ModelConfig, ResNet
from jaxsched.common.arguments import integer
from jaxsched.common.sharding import Devices, batch_mesh, gather, replicate, shard_batch
from jaxsched.common.workdir import Workdir

# The offline default: a small ResNet (1 block per stage, 16/32/64 channels, ~78k parameters)
# that trains on 8x8 digits in seconds per epoch on a CPU.
DIGITS_MODEL = ModelConfig(blocks_per_stage=1)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run except the member's seed and Δ regime values.

    The learning rate follows the paper: `learning_rates[i]` from epoch `lr_epochs[i]` of a
    `reference_epochs`-long run, with the epochs rescaled to `epochs`. The Δ regime fields are the
    default for members that are not given their own `DeltaRegime`.
    """

    dataset: str = "digits"
    data_dir: str | None = None  # CIFAR-10 directory (else $JAXQUANT_CIFAR10)
    model: ModelConfig = DIGITS_MODEL
    epochs: int = 60
    batch_size: int = 32
    eval_batch_size: int = 500
    learning_rates: tuple[float, ...] = (5e-3, 1e-3, 5e-4, 1e-4, 1e-5)
    lr_epochs: tuple[int, ...] = (0, 101, 142, 184, 220)
    reference_epochs: int = 500
    regime: str = "log"
    delta0: float = 0.1
    m: float = 1.9
    delta_max: float = 0.9
    data_seed: int = 0

    def __post_init__(self):
        if self.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}; expected one of {DATASETS}")
        for name in ("epochs", "batch_size", "eval_batch_size", "reference_epochs"):
            integer(f"TrainConfig.{name}", getattr(self, name), 1)
        integer("TrainConfig.data_seed", self.data_seed)
        if len(self.learning_rates) != len(self.lr_epochs) or not self.lr_epochs:
            raise ValueError("learning_rates and lr_epochs must be non-empty and of equal length")
        if self.lr_epochs[0] != 0 or list(self.lr_epochs) != sorted(self.lr_epochs):
            raise ValueError(f"lr_epochs must start at 0 and increase, got {self.lr_epochs}")
        if any(not math.isfinite(rate) or rate <= 0 for rate in self.learning_rates):
            raise ValueError(f"learning rates must be positive and finite, got {self.learning_rates}")
        self.delta_regime()  # validates the regime fields

    def delta_regime(self) -> DeltaRegime:
        return delta_regime(self.regime, self.delta0, self.m, self.delta_max)


class TrainState(NamedTuple):
    params: Any
    batch_stats: Any
    opt_state: Any


class EpochMetrics(NamedTuple):
    """Per-epoch metrics of one member (fields are scalars; histories stack them)."""

    delta: jax.Array
    learning_rate: jax.Array
    train_loss: jax.Array
    train_accuracy: jax.Array
    test_loss: jax.Array
    test_accuracy: jax.Array
    sparsity: jax.Array
    entropy: jax.Array


class DeviceData(NamedTuple):
    """A dataset as device arrays; the test set is padded into equal batches with a mask."""

    train_images: jax.Array  # [N, H, W, C] raw
    train_labels: jax.Array  # [N]
    test_images: jax.Array  # [batches, B, H, W, C] raw
    test_labels: jax.Array  # [batches, B]
    test_mask: jax.Array  # [batches, B] float32, 1 for real examples
    mean: jax.Array  # [C]
    std: jax.Array  # [C]


def device_data(dataset: Dataset, eval_batch_size: int) -> DeviceData:
    """Move `dataset` to the device, padding the test set to whole evaluation batches."""
    n_test = len(dataset.test_labels)
    batch = min(eval_batch_size, n_test)
    batches = -(-n_test // batch)
    padding = batches * batch - n_test
    test_images = np.concatenate(
        [dataset.test_images, np.zeros((padding,) + dataset.image_shape, dataset.test_images.dtype)]
    )
    test_labels = np.concatenate([dataset.test_labels, np.zeros(padding, np.int32)])
    test_mask = np.concatenate([np.ones(n_test, np.float32), np.zeros(padding, np.float32)])
    return DeviceData(
        train_images=jnp.asarray(dataset.train_images),
        train_labels=jnp.asarray(dataset.train_labels, jnp.int32),
        test_images=jnp.asarray(test_images.reshape((batches, batch) + dataset.image_shape)),
        test_labels=jnp.asarray(test_labels.reshape(batches, batch), jnp.int32),
        test_mask=jnp.asarray(test_mask.reshape(batches, batch)),
        mean=jnp.asarray(dataset.mean, jnp.float32),
        std=jnp.asarray(dataset.std, jnp.float32),
    )


def learning_rate_schedule(config: TrainConfig, steps_per_epoch: int) -> Callable[[jax.Array], jax.Array]:
    """The paper's piecewise-constant learning rate, its epochs rescaled to `config.epochs`."""
    boundaries = [
        round(epoch * config.epochs / config.reference_epochs) * steps_per_epoch
        for epoch in config.lr_epochs
    ]
    values = jnp.asarray(config.learning_rates, jnp.float32)
    starts = jnp.asarray(boundaries, jnp.int32)

    def schedule(step: jax.Array) -> jax.Array:
        index = jnp.sum((jnp.asarray(step, jnp.int32) >= starts).astype(jnp.int32)) - 1
        return values[jnp.maximum(index, 0)]

    return schedule


def _evaluate(model: ResNet, variables, delta, data: DeviceData) -> tuple[jax.Array, jax.Array]:
    """Mean test loss and accuracy over the padded test batches (BatchNorm in inference mode)."""

    def batch_totals(_, batch):
        images, labels, mask = batch
        logits = model.apply(variables, normalize(images, data.mean, data.std), delta=delta, train=False)
        correct = (jnp.argmax(logits, -1) == labels).astype(jnp.float32)
        return None, (jnp.sum(_cross_entropy(logits, labels) * mask), jnp.sum(correct * mask))

    _, (losses, corrects) = jax.lax.scan(batch_totals, None, (data.test_images, data.test_labels, data.test_mask))
    count = jnp.sum(data.test_mask)
    return jnp.sum(losses) / count, jnp.sum(corrects) / count


def evaluate_model(model: ResNet, variables, dataset: Dataset, *, delta=None, batch_size: int = 500) -> float:
    """Test accuracy of `model` with `variables` on `dataset` (e.g. a model from `load_model`)."""
    data = device_data(dataset, batch_size)
    _, accuracy = jax.jit(lambda variables, data: _evaluate(model, variables, delta, data))(variables, data)
    return float(accuracy)


def _cheap_random(fn: Callable) -> Callable:
    """Trace `fn`'s random draws with the non-partitionable threefry: XLA:CPU compiles it ~4x
    faster. It is a different, equally valid and deterministic stream; these arrays are never
    sharded."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with jax.threefry_partitionable(False):
            return fn(*args, **kwargs)

    return wrapped


def _cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


class Trainer(NamedTuple):
    """The pure pieces of a training run, for one member (vmap them for a population).

    init(key) -> TrainState
    run_epoch(state, regime, epoch, data) -> (state, EpochMetrics)   # epoch is 1-based
    evaluate(state, delta, data) -> (test_loss, test_accuracy)
    """

    model: ResNet
    steps_per_epoch: int
    learning_rate: Callable[[jax.Array], jax.Array]
    init: Callable[[jax.Array], TrainState]
    run_epoch: Callable[[TrainState, DeltaRegime, jax.Array, DeviceData], tuple[TrainState, EpochMetrics]]
    evaluate: Callable[[TrainState, jax.Array, DeviceData], tuple[jax.Array, jax.Array]]


def make_trainer(config: TrainConfig, dataset: Dataset) -> Trainer:
    """Build the pure init / epoch / evaluation functions for `config` on `dataset`."""
    n_train = len(dataset.train_labels)
    if config.batch_size > n_train:
        raise ValueError(f"batch_size {config.batch_size} exceeds the {n_train} training examples")
    if config.model.num_classes != dataset.num_classes:
        raise ValueError(
            f"model has {config.model.num_classes} classes but {dataset.name} has {dataset.num_classes}"
        )
    model = ResNet(config.model)
    steps_per_epoch = n_train // config.batch_size
    schedule = learning_rate_schedule(config, steps_per_epoch)
    optimizer = optax.adam(schedule)
    quant = config.model.quant
    data_key = jax.random.key(config.data_seed)

    @_cheap_random
    def init(key: jax.Array) -> TrainState:
        dummy = jnp.zeros((1,) + dataset.image_shape, jnp.float32)
        variables = model.init(key, dummy, delta=jnp.float32(0), train=False)
        params = project_latent(variables["params"])
        return TrainState(params, variables["batch_stats"], optimizer.init(params))

    def loss_fn(params, batch_stats, images, labels, delta):
        logits, updates = model.apply(
            {"params": params, "batch_stats": batch_stats},
            images, delta=delta, train=True, mutable=["batch_stats"],
        )
        return jnp.mean(_cross_entropy(logits, labels)), (logits, updates["batch_stats"])

    def train_step(state: TrainState, batch, delta, data: DeviceData):
        indices, key = batch
        images = augment(key, normalize(data.train_images[indices], data.mean, data.std),
                         dataset.pad, dataset.flip)
        labels = data.train_labels[indices]
        (loss, (logits, batch_stats)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state.params, state.batch_stats, images, labels, delta
        )
        with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes float and int32 counts
            updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = project_latent(optax.apply_updates(state.params, updates))
        correct = jnp.mean((jnp.argmax(logits, -1) == labels).astype(jnp.float32))
        return TrainState(params, batch_stats, opt_state), (loss, correct)

    def evaluate(state: TrainState, delta: jax.Array, data: DeviceData):
        return _evaluate(model, {"params": state.params, "batch_stats": state.batch_stats}, delta, data)

    @_cheap_random
    def run_epoch(state: TrainState, regime: DeltaRegime, epoch: jax.Array, data: DeviceData):
        delta = delta_at(regime, epoch)
        order_key, augment_key = jax.random.split(jax.random.fold_in(data_key, epoch))
        order = jax.random.permutation(order_key, n_train)[: steps_per_epoch * config.batch_size]
        batches = (
            order.reshape(steps_per_epoch, config.batch_size),
            jax.random.split(augment_key, steps_per_epoch),
        )
        learning_rate = schedule((epoch - 1) * steps_per_epoch)
        state, (losses, corrects) = jax.lax.scan(
            lambda carry, batch: train_step(carry, batch, delta, data), state, batches
        )
        test_loss, test_accuracy = evaluate(state, delta, data)
        codes = quantized_codes(state.params, quant, delta)
        metrics = EpochMetrics(
            delta=delta, learning_rate=learning_rate,
            train_loss=jnp.mean(losses), train_accuracy=jnp.mean(corrects),
            test_loss=test_loss, test_accuracy=test_accuracy,
            sparsity=sparsity(codes), entropy=entropy(codes),
        )
        return state, metrics

    return Trainer(model, steps_per_epoch, schedule, init, run_epoch, evaluate)


def _dataset(config: TrainConfig, dataset: Dataset | None) -> Dataset:
    return _load_dataset_once(config.dataset, config.data_dir) if dataset is None else dataset


@functools.lru_cache(maxsize=2)
def _load_dataset_once(name: str, path: str | None) -> Dataset:
    """The same Dataset object for repeated runs, so their compiled programs are reused."""
    return load_dataset(name, path)


def make_train(config: TrainConfig, dataset: Dataset | None = None):
    """`train(key, regime=None) -> (final TrainState, EpochMetrics with [epochs] leaves)`.

    The whole run is one pure function of the member's key and Δ regime (default: the config's),
    so `jax.jit(jax.vmap(train))(keys, regimes)` trains a sweep in one program. The dataset's
    device arrays are captured by the closure; JAX passes captured arrays to the compiled program
    as arguments rather than embedding them, so this also works for CIFAR-10.
    """
    dataset = _dataset(config, dataset)
    trainer = make_trainer(config, dataset)
    data = device_data(dataset, config.eval_batch_size)
    epochs = jnp.arange(1, config.epochs + 1, dtype=jnp.int32)

    def train(key: jax.Array, regime: DeltaRegime | None = None):
        regime = config.delta_regime() if regime is None else regime
        return jax.lax.scan(
            lambda state, epoch: trainer.run_epoch(state, regime, epoch, data),
            trainer.init(key), epochs,
        )

    return train


class FitResult(NamedTuple):
    state: TrainState  # leaves [K, ...]: one trained model per member
    history: EpochMetrics  # numpy leaves [epochs, K]


def _broadcast_regime(regime: DeltaRegime, members: int) -> DeltaRegime:
    return jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (members,)), regime)


def fit(
    config: TrainConfig,
    keys: jax.Array,
    regimes: DeltaRegime | None = None,
    *,
    workdir: str | None = None,
    dataset: Dataset | None = None,
    progress: bool = True,
    on_epoch_end: Callable[[int, EpochMetrics], None] | None = None,
    devices: Devices = None,
) -> FitResult:
    """Train K members (one per key, with optional stacked regimes) epoch by epoch.

    The members are split across `devices` (`jaxsched.common.batch_mesh`: default all devices, of every
    process in a multi-process run), padded to a multiple of the device count; each member's result equals
    the one-device run within float rounding (XLA may order a member's sums differently per device count,
    and Adam amplifies the last-bit differences over the epochs: up to about 5e-5 in the metrics of a
    5-member sweep on 4 CPU devices). With `workdir`, the population is checkpointed with orbax after
    every epoch (without the padding, so a run resumes on another device count) and a rerun with the
    same arguments resumes after the last finished epoch; the result equals an uninterrupted run (a workdir of
    other arguments is refused, `jaxsched.common.Workdir`).
    `on_epoch_end(epoch, metrics)` is called after each epoch's checkpoint is written.
    """
    keys = jnp.asarray(keys)
    if keys.ndim != 1 or not jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
        raise ValueError(f"fit needs a 1-D array of typed keys (jax.random.split), got {keys.dtype}{keys.shape}")
    members = keys.shape[0]
    regimes = _broadcast_regime(config.delta_regime(), members) if regimes is None else regimes
    if any(leaf.shape != (members,) for leaf in jax.tree.leaves(regimes)):
        raise ValueError(f"regimes must have a leading axis of {members} members")
    dataset = _dataset(config, dataset)
    init, run_epoch = _population_programs(config, dataset)
    data = device_data(dataset, config.eval_batch_size)
    history = EpochMetrics(*(np.full((config.epochs, members), np.nan, np.float32) for _ in EpochMetrics._fields))
    start, state, checkpointer = 0, None, None
    if workdir is not None:
        checkpointer = Workdir(workdir, _run_identity(config, keys, regimes)).checkpointer()
        restored = checkpointer.restore_latest({"state": jax.eval_shape(init, keys), "history": history})
        if restored is not None:
            start, tree = restored.epoch, restored.tree
            state, history = jax.tree.map(jnp.asarray, tree["state"]), EpochMetrics(*map(np.array, tree["history"]))
    mesh = batch_mesh(devices)
    sharded_regimes, _ = shard_batch(regimes, mesh)
    data = replicate(data, mesh)
    state = init(shard_batch(keys, mesh)[0]) if state is None else shard_batch(state, mesh)[0]

    bar = tqdm(range(start + 1, config.epochs + 1), initial=start, total=config.epochs,
               desc=f"train x{members}", unit="epoch", disable=not progress)
    try:
        for epoch in bar:
            state, metrics = run_epoch(state, sharded_regimes, jnp.int32(epoch), data)
            metrics = EpochMetrics(*map(np.asarray, gather(metrics, members)))
            for column, value in zip(history, metrics):
                column[epoch - 1] = value
            if checkpointer is not None:
                checkpointer.save(epoch, {"state": gather(state, members), "history": history})
            bar.set_postfix(acc=f"{metrics.test_accuracy.mean():.3f}", sparsity=f"{metrics.sparsity.mean():.3f}",
                            delta=f"{metrics.delta.mean():.3f}")
            if on_epoch_end is not None:
                on_epoch_end(epoch, metrics)
    finally:
        bar.close()
        if checkpointer is not None:
            checkpointer.close()
    return FitResult(gather(state, members), history)


@functools.lru_cache(maxsize=8)
def _population_programs(config: TrainConfig, dataset: Dataset):
    """Jitted, vmapped init and epoch functions, kept so that reruns (resume) reuse compilations."""
    trainer = make_trainer(config, dataset)
    return jax.jit(jax.vmap(trainer.init)), jax.jit(jax.vmap(trainer.run_epoch, in_axes=(0, 0, None, None)))


def _run_identity(config: TrainConfig, keys: jax.Array, regimes: DeltaRegime) -> dict:
    """What a checkpoint must match to be resumed: the config, the member keys and regimes."""
    return {
        "config": dataclasses.asdict(config),
        "keys": np.asarray(jax.random.key_data(keys)).tolist(),
        "regimes": {name: np.asarray(leaf).tolist() for name, leaf in regimes._asdict().items()},
    }
