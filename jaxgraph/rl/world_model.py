"""The MDN-RNN world model (thesis 4.3.1, Ha and Schmidhuber's "memory" model) over latent graph states.

One single-step core, `MDNRNN.__call__(carry, z, action) -> (carry, Prediction)`: an LSTM reads the
latent z_t and the one-hot action (xfer, location); a dense layer over its output h_{t+1} and the same
inputs (a skip connection: a deterministic rewrite is a direct function of z_t and the action)
parameterises

* a K-component mixture of diagonal Gaussians over the next latent z_{t+1} (one mixture over the whole
  vector, so that a component is one coherent successor state, rather than Ha's independent
  per-dimension mixtures),
* the reward of the step, whether it terminated the episode, and the next state's action masks
  (`xfer_mask`, `location_mask`), which the controller needs to act in a dream.

`observe` scans the core over a recorded `LatentSequence` (resetting the carry where an episode starts, as
DreamerV3's reset mask in the carry), `world_model_loss` is the negative log-likelihood of what was observed, and
`imagine` advances a dream by one action: the temperature tau divides the mixture logits before the component is
drawn (thesis 4.3.1: tau -> 0 picks the most likely component, large tau spreads over all of them).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from jaxgraph.rl._sampling import categorical
from jaxgraph.rl.configs import WorldModelConfig

LOG_SQRT_2PI = 0.5 * jnp.log(2.0 * jnp.pi)


class Prediction(NamedTuple):
    """The world model's prediction after one step (unbatched)."""

    mixture_logits: chex.Array  # [K]
    means: chex.Array  # [K, D]
    log_stds: chex.Array  # [K, D]
    reward: chex.Array  # []
    terminal_logit: chex.Array  # []
    xfer_mask_logits: chex.Array  # [X + 1]
    location_mask_logits: chex.Array  # [X, L]


class LatentSequence(NamedTuple):
    """A recorded sequence of real steps in latent space, leaves [T, ...] (one sequence, unbatched)."""

    z: chex.Array  # [T, D] latent of the observation acted on
    action: chex.Array  # [T, 2] (xfer, location)
    next_z: chex.Array  # [T, D] latent of the observation the step produced
    reward: chex.Array  # [T]
    terminated: chex.Array  # [T] bool
    next_xfer_mask: chex.Array  # [T, X + 1] bool
    next_location_mask: chex.Array  # [T, X, L] bool
    is_first: chex.Array  # [T] bool: the step starts an episode (the carry is reset before it)


class MDNRNN(nn.Module):
    """The single-step core; `carry` is the LSTM's (c, h), each [hidden]."""

    latent: int
    num_xfers: int
    max_locations: int
    config: WorldModelConfig = WorldModelConfig()

    @nn.compact
    def __call__(self, carry: tuple[chex.Array, chex.Array], z: chex.Array,
                 action: chex.Array) -> tuple[tuple[chex.Array, chex.Array], Prediction]:
        chex.assert_shape([z, action], [(self.latent,), (2,)])
        k, d, xfers, locations = self.config.mixtures, self.latent, self.num_xfers, self.max_locations
        inputs = jnp.concatenate([z, jax.nn.one_hot(action[0], xfers + 1), jax.nn.one_hot(action[1], locations)])
        carry, h = nn.OptimizedLSTMCell(self.config.hidden)(carry, inputs)
        h = nn.silu(nn.Dense(self.config.hidden)(jnp.concatenate([h, inputs])))  # heads see the step's inputs too
        mdn = nn.Dense(k * (1 + 2 * d))(h)
        logits, means, log_stds = mdn[:k], mdn[k:k + k * d].reshape(k, d), mdn[k + k * d:].reshape(k, d)
        log_stds = self.config.min_log_std + jax.nn.softplus(log_stds - self.config.min_log_std)
        reward, terminal = nn.Dense(2)(h)
        masks = nn.Dense(xfers + 1 + xfers * locations)(h)
        return carry, Prediction(logits, means, log_stds, reward, terminal, masks[:xfers + 1],
                                 masks[xfers + 1:].reshape(xfers, locations))

    def initial_carry(self) -> tuple[chex.Array, chex.Array]:
        """Zero LSTM state (the start of every episode)."""
        return jnp.zeros(self.config.hidden), jnp.zeros(self.config.hidden)


def mixture_log_likelihood(logits: chex.Array, means: chex.Array, log_stds: chex.Array,
                           x: chex.Array) -> chex.Array:
    """log sum_k pi_k prod_d N(x_d; mu_kd, sigma_kd), pi = softmax(logits)."""
    chex.assert_rank([logits, means, log_stds, x], [1, 2, 2, 1])
    chex.assert_equal_shape([means, log_stds])
    normalized = (x[None, :] - means) * jnp.exp(-log_stds)
    component = jnp.sum(-0.5 * jnp.square(normalized) - log_stds - LOG_SQRT_2PI, axis=-1)  # [K]
    return jax.nn.logsumexp(jax.nn.log_softmax(logits) + component)


def sample_component(key: chex.PRNGKey, logits: chex.Array, tau: chex.Array) -> chex.Array:
    """A mixture component drawn from softmax(logits / tau) (thesis 4.3.1); tau may be traced."""
    chex.assert_rank([logits, tau], [1, 0])
    return categorical(key, logits / jnp.maximum(tau, 1e-6))


def sample_latent(key: chex.PRNGKey, prediction: Prediction, tau: chex.Array) -> chex.Array:
    """z_{t+1}: a component at temperature tau, then a draw from its Gaussian."""
    component_key, noise_key = jax.random.split(key)
    k = sample_component(component_key, prediction.mixture_logits, tau)
    noise = jax.random.normal(noise_key, prediction.means.shape[1:])
    return prediction.means[k] + jnp.exp(prediction.log_stds[k]) * noise


def predicted_masks(prediction: Prediction) -> tuple[chex.Array, chex.Array]:
    """Boolean masks of the next state: locations with probability > 1/2; an xfer only when the model
    also predicts one of its locations; the NO-OP always."""
    location_mask = prediction.location_mask_logits > 0.0
    xfer_mask = prediction.xfer_mask_logits > 0.0
    xfer_mask = jnp.concatenate([xfer_mask[:-1] & location_mask.any(axis=1), jnp.ones(1, bool)])
    return xfer_mask, location_mask


def observe(model: MDNRNN, params, sequence: LatentSequence) -> Prediction:
    """Predictions [T] for a recorded sequence: the core scanned over time, reset where episodes start."""
    chex.assert_rank([sequence.z, sequence.is_first], [2, 1])
    zero = model.initial_carry()

    def step(carry, inputs):
        z, action, is_first = inputs
        carry = jax.tree.map(lambda c, c0: jnp.where(is_first, c0, c), carry, zero)
        return model.apply(params, carry, z, action)

    _, predictions = jax.lax.scan(step, zero, (sequence.z, sequence.action, sequence.is_first))
    return predictions


def _bce(logits: chex.Array, labels: chex.Array) -> chex.Array:
    return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, labels.astype(jnp.float32)))


def world_model_loss(model: MDNRNN, params, sequence: LatentSequence) -> tuple[chex.Array, dict]:
    """Negative log-likelihood of one sequence: latent mixture NLL (per latent dimension) + weighted
    reward squared error, terminal and mask binary cross-entropies."""
    config = model.config
    pred = observe(model, params, sequence)
    nll = -jnp.mean(jax.vmap(mixture_log_likelihood)(pred.mixture_logits, pred.means, pred.log_stds,
                                                      sequence.next_z)) / model.latent
    reward = jnp.mean(jnp.square(pred.reward - sequence.reward))
    terminal = _bce(pred.terminal_logit, sequence.terminated)
    masks = _bce(pred.xfer_mask_logits, sequence.next_xfer_mask) + _bce(pred.location_mask_logits,
                                                                          sequence.next_location_mask)
    total = nll + config.reward_coef * reward + config.terminal_coef * terminal + config.mask_coef * masks
    return total, {"latent_nll": nll, "reward_mse": reward, "terminal_bce": terminal, "mask_bce": masks}


def make_world_model_update(model: MDNRNN) -> tuple[optax.GradientTransformation, Callable]:
    """(optimizer, `update(params, opt_state, sequences [B]) -> params, opt_state, metrics`), pure."""
    config = model.config
    learning_rate = (config.learning_rate if config.decay_steps is None
                     else optax.cosine_decay_schedule(config.learning_rate, config.decay_steps))
    optimizer = optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(learning_rate))

    def batch_loss(params, sequences):
        losses, metrics = jax.vmap(lambda s: world_model_loss(model, params, s))(sequences)
        return jnp.mean(losses), jax.tree.map(jnp.mean, metrics)

    def update(params, opt_state, sequences):
        (value, metrics), grads = jax.value_and_grad(batch_loss, has_aux=True)(params, sequences)
        with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes Python floats and int32 counts
            updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, {"loss": value, **metrics}

    return optimizer, update


class DreamState(NamedTuple):
    """One dream's state: the LSTM carry, the current latent and masks (unbatched)."""

    carry: tuple[chex.Array, chex.Array]
    z: chex.Array  # [D]
    xfer_mask: chex.Array  # [X + 1]
    location_mask: chex.Array  # [X, L]


def imagine(model: MDNRNN, params, state: DreamState, action: chex.Array, key: chex.PRNGKey,
                 tau: chex.Array) -> tuple[DreamState, chex.Array, chex.Array]:
    """Advance a dream by one action: (next state, predicted reward, terminated). The NO-OP ends the
    episode with reward 0, as in the real environment; otherwise the model predicts both."""
    carry, pred = model.apply(params, state.carry, state.z, action)
    z = sample_latent(key, pred, tau)
    xfer_mask, location_mask = predicted_masks(pred)
    noop = action[0] == model.num_xfers
    terminated = noop | (pred.terminal_logit > 0.0) | ~xfer_mask[:-1].any()
    reward = jnp.where(noop, 0.0, pred.reward)
    return DreamState(carry, z, xfer_mask, location_mask), reward, terminated
