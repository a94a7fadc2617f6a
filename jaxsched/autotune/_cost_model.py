"""The learned cost model of a tuning job: an ensemble of small MLPs on log runtime, with exploration.

TVM fits gradient-boosted trees to measured configurations and explores with epsilon-greedy
sampling. Here an ensemble of `members` MLPs (Flax, trained together in one jitted, vmapped program)
predicts log seconds; its spread is the uncertainty that a lower confidence bound trades against
the mean (`select`: UCB for minimisation), and an epsilon share of each batch is drawn at random.
Training data is padded to a power-of-two capacity with a mask, so a job compiles the trainer a
handful of times, not once per round.
"""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax


class _MLP(nn.Module):
    hidden: int = 32

    @nn.compact
    def __call__(self, x):
        x = nn.tanh(nn.Dense(self.hidden)(x))
        x = nn.tanh(nn.Dense(self.hidden)(x))
        return nn.Dense(1)(x)[..., 0]


class CostModel(NamedTuple):
    """Fitted ensemble parameters (leading axis: members) and the normalisation of inputs and targets."""

    params: dict
    x_mean: np.ndarray  # [F]
    x_scale: np.ndarray  # [F]
    y_mean: float
    y_scale: float


def _train(params, x, y, mask, weights, steps: int, learning_rate: float):
    """Adam on the masked, per-member weighted squared error, for all members at once."""
    tx = optax.adam(learning_rate)

    def member_loss(p, w):
        error = _MLP().apply(p, x) - y
        return jnp.sum(w * mask * error**2) / jnp.maximum(jnp.sum(w * mask), 1.0)

    def step(carry, _):
        p, opt = carry
        grads = jax.vmap(jax.grad(member_loss))(p, weights)
        updates, opt = jax.vmap(tx.update)(grads, opt, p)
        return (optax.apply_updates(p, updates), opt), None

    (params, _), _ = jax.lax.scan(step, (params, jax.vmap(tx.init)(params)), None, length=steps)
    return params


_train_jit = jax.jit(_train, static_argnames=("steps", "learning_rate"))
_init = jax.jit(jax.vmap(lambda key, x: _MLP().init(key, x)))
_predict = jax.jit(jax.vmap(lambda p, x: _MLP().apply(p, x), in_axes=(0, None)))


def fit(
    features: np.ndarray,
    log_seconds: np.ndarray,
    seed: int = 0,
    members: int = 4,
    steps: int = 300,
    learning_rate: float = 0.01,
) -> CostModel:
    """Fits the ensemble to `features[N, F]` -> `log_seconds[N]`; each member sees a bootstrap
    resample (Poisson weights) from its own initialisation, so members disagree where data is thin."""
    features = np.asarray(features, np.float32)
    log_seconds = np.asarray(log_seconds, np.float32)
    if features.ndim != 2 or log_seconds.shape != (features.shape[0],) or features.shape[0] == 0:
        raise ValueError(
            f"fit needs features [N, F] and targets [N] with N >= 1, got {features.shape} and {log_seconds.shape}"
        )
    if not (np.all(np.isfinite(features)) and np.all(np.isfinite(log_seconds))):
        raise ValueError("cost model training data must be finite")
    count = features.shape[0]
    capacity = max(64, 1 << (count - 1).bit_length())
    x_mean, x_std = features.mean(0), features.std(0)
    x_scale = np.where(x_std > 1e-6, x_std, 1.0).astype(np.float32)  # a constant feature (one size) stays in units
    y_mean, y_scale = float(log_seconds.mean()), float(log_seconds.std() + 1e-3)
    x = np.zeros((capacity, features.shape[1]), np.float32)
    x[:count] = (features - x_mean) / x_scale
    y = np.zeros(capacity, np.float32)
    y[:count] = (log_seconds - y_mean) / y_scale
    mask = (np.arange(capacity) < count).astype(np.float32)
    rng = np.random.default_rng(seed)
    weights = rng.poisson(1.0, size=(members, capacity)).astype(np.float32)
    weights[0] = 1.0  # one member sees every point once
    keys = jax.random.split(jax.random.key(seed), members)
    params = _init(keys, jnp.zeros((members, 1, features.shape[1]), jnp.float32))
    with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes Python floats with int32 step counts
        params = _train_jit(params, x, y, mask, weights, steps=steps, learning_rate=learning_rate)
    params = jax.tree.map(np.asarray, params)
    return CostModel(params, x_mean, x_scale, y_mean, y_scale)


def predict(model: CostModel, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and spread over members of the predicted log seconds of `features[M, F]`."""
    x = ((np.asarray(features, np.float32) - model.x_mean) / model.x_scale).astype(np.float32)
    out = np.asarray(_predict(model.params, x)) * model.y_scale + model.y_mean  # [members, M]
    return out.mean(0), out.std(0)


def select(
    mean: np.ndarray,
    spread: np.ndarray,
    available: np.ndarray,
    batch: int,
    kappa: float,
    epsilon: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Indices of `batch` available candidates: lowest `mean - kappa * spread` first, each slot
    replaced with probability `epsilon` by a random other available candidate (fewer when fewer
    are available)."""
    candidates = np.flatnonzero(available)
    batch = min(batch, candidates.size)
    ranked = candidates[np.argsort(mean[candidates] - kappa * spread[candidates], kind="stable")]
    chosen = list(ranked[:batch])
    rest = list(ranked[batch:])
    for slot in range(batch):
        if rest and rng.random() < epsilon:
            chosen[slot] = rest.pop(int(rng.integers(len(rest))))
    return np.asarray(chosen, dtype=np.int64)
