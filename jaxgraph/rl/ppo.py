"""PPO with a clipped objective (thesis Algorithm 3), GAE advantages, value loss and entropy bonus.

The maths are small unbatched pure functions over one trajectory segment `[T]` with rank asserts at
entry (rlax's style); callers `vmap` them. `make_update` builds the one jitted update that turns a
batch of segments `[T, B]` into new parameters (several epochs of shuffled minibatch Adam steps), for
any policy given as `evaluate(params, obs, action) -> (log_prob, entropy, value)`: the same update
trains the model-free agent on real rollouts and the controller inside the world model.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax

from jaxgraph.rl.configs import PPOConfig


class Trajectory(NamedTuple):
    """Rollout segments, time-major `[T, B, ...]`.

    `next_value` is the value of the state each step led to: V(obs[t + 1]) inside an episode, the value
    of the final observation when the episode was truncated there, and unused (0) when it terminated.
    """

    obs: Any  # policy input pytree, leaves [T, B, ...]
    action: chex.Array  # [T, B, 2] (xfer, location)
    log_prob: chex.Array  # [T, B] under the behaviour policy
    value: chex.Array  # [T, B]
    reward: chex.Array  # [T, B]
    next_value: chex.Array  # [T, B]
    terminated: chex.Array  # [T, B] bool: the episode ended (no bootstrap)
    done: chex.Array  # [T, B] bool: terminated or truncated (advantages do not flow across)


def gae(rewards: chex.Array, values: chex.Array, next_values: chex.Array, terminated: chex.Array,
        done: chex.Array, gamma: float, lam: float) -> chex.Array:
    """Generalised advantage estimates A_t = delta_t + gamma lambda (1 - done_t) A_{t+1},
    delta_t = r_t + gamma (1 - terminated_t) V(s_{t+1}) - V(s_t); A_T = 0 after the segment."""
    chex.assert_rank([rewards, values, next_values, terminated, done], 1)
    chex.assert_equal_shape([rewards, values, next_values, terminated, done])
    deltas = rewards + gamma * jnp.where(terminated, 0.0, next_values) - values
    carry_on = gamma * lam * jnp.where(done, 0.0, 1.0)

    def backward(advantage, inputs):
        delta, factor = inputs
        advantage = delta + factor * advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(backward, jnp.zeros((), rewards.dtype), (deltas, carry_on), reverse=True)
    return advantages


def clipped_policy_loss(log_probs: chex.Array, old_log_probs: chex.Array, advantages: chex.Array,
                        clip: float) -> chex.Array:
    """-mean_t min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t), r_t = pi(a_t|s_t) / pi_old(a_t|s_t)."""
    chex.assert_rank([log_probs, old_log_probs, advantages], 1)
    chex.assert_equal_shape([log_probs, old_log_probs, advantages])
    ratio = jnp.exp(log_probs - old_log_probs)
    return -jnp.mean(jnp.minimum(ratio * advantages, jnp.clip(ratio, 1.0 - clip, 1.0 + clip) * advantages))


def value_loss(values: chex.Array, returns: chex.Array) -> chex.Array:
    """Mean squared error of the value function (thesis Algorithm 3)."""
    chex.assert_rank([values, returns], 1)
    chex.assert_equal_shape([values, returns])
    return jnp.mean(jnp.square(values - returns))


def ppo_loss(log_probs: chex.Array, old_log_probs: chex.Array, advantages: chex.Array, values: chex.Array,
             returns: chex.Array, entropies: chex.Array, config: PPOConfig,
             entropy_coef: chex.Array | float | None = None) -> tuple[chex.Array, dict]:
    """policy loss + value_coef x value loss - entropy_coef x mean entropy, and its parts; `entropy_coef`
    (a traced scalar, for schedules) replaces `config.entropy_coef` when given."""
    chex.assert_rank(entropies, 1)
    policy = clipped_policy_loss(log_probs, old_log_probs, advantages, config.clip)
    value = value_loss(values, returns)
    bonus = jnp.mean(entropies)
    ratio = jnp.exp(log_probs - old_log_probs)
    metrics = {"policy_loss": policy, "value_loss": value, "entropy": bonus,
               "clip_fraction": jnp.mean((jnp.abs(ratio - 1.0) > config.clip).astype(jnp.float32))}
    coef = config.entropy_coef if entropy_coef is None else entropy_coef
    return policy + config.value_coef * value - coef * bonus, metrics


class TrainState(NamedTuple):
    """Parameters and optimiser state of one agent."""

    params: Any
    opt_state: Any


def make_optimizer(config: PPOConfig) -> optax.GradientTransformation:
    """Adam with global-norm gradient clipping."""
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(config.learning_rate))


def make_update(evaluate: Callable, config: PPOConfig) -> Callable:
    """`update(state, trajectory, key, entropy_coef=None) -> (state, metrics)`: advantages, then
    `update_epochs` passes of `minibatches` shuffled minibatch steps. Pure and jittable; `evaluate(params,
    obs, action) -> (log_prob, entropy, value)` acts on one unbatched state. `entropy_coef` (a scalar, traced
    under jit) overrides `config.entropy_coef`, so a schedule changes it without recompiling."""
    optimizer = make_optimizer(config)
    batched_evaluate = jax.vmap(evaluate, in_axes=(None, 0, 0))

    def update(state: TrainState, trajectory: Trajectory, key: chex.PRNGKey,
               entropy_coef: chex.Array | float | None = None) -> tuple[TrainState, dict]:

        def loss_fn(params, batch):
            log_probs, entropies, values = batched_evaluate(params, batch["obs"], batch["action"])
            return ppo_loss(log_probs, batch["log_prob"], batch["advantage"], values, batch["return"], entropies,
                            config, entropy_coef)

        advantages = jax.vmap(gae, in_axes=(1, 1, 1, 1, 1, None, None), out_axes=1)(
            trajectory.reward, trajectory.value, trajectory.next_value, trajectory.terminated, trajectory.done,
            config.gamma, config.lam)
        returns = advantages + trajectory.value
        if config.normalize_advantages:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        data = {"obs": trajectory.obs, "action": trajectory.action, "log_prob": trajectory.log_prob,
                "advantage": advantages, "return": returns}
        size = trajectory.reward.size
        data = jax.tree.map(lambda x: x.reshape((size,) + x.shape[2:]), data)
        if size % config.minibatches:
            raise ValueError(f"{size} samples do not split into {config.minibatches} minibatches")

        def minibatch_step(state, batch):
            (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, batch)
            with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes Python floats and int32 counts
                updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
            return TrainState(optax.apply_updates(state.params, updates), opt_state), metrics

        def epoch(state, epoch_key):
            order = jax.random.permutation(epoch_key, size)
            batches = jax.tree.map(lambda x: x[order].reshape((config.minibatches, -1) + x.shape[1:]), data)
            return jax.lax.scan(minibatch_step, state, batches)

        state, metrics = jax.lax.scan(epoch, state, jax.random.split(key, config.update_epochs))
        return state, jax.tree.map(jnp.mean, metrics)

    return update
