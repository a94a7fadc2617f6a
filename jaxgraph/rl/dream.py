"""Dream training (thesis 4.3.2): a PPO controller trained entirely inside the MDN-RNN world model.

`make_dream_train(config, model) -> train(key, tau, world_model_params, start)` is PureJaxRL's shape:
the whole loop (dream rollouts of `num_envs` vmapped dreams, GAE, PPO epochs) is one `lax.scan`, so
`jax.jit(train)` compiles once and `jax.vmap` over keys and temperatures runs a tau sweep times seeds
as a single program (tau is a traced argument). Dreams start from `DreamStart` states (the encoded
initial observations of real graphs), act with a `LatentPolicy` on [z, h] under the predicted masks,
and are reset to a start state when they terminate or reach `horizon` steps. `make_dream_trainer` gives the
same training in pieces (`init`, then `run` over chunks of update keys), to evaluate the controller between
chunks.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph.env import Env, Observation
from jaxgraph.rl.configs import DreamConfig
from jaxgraph.rl.episode import Episode, run_episode, split_keys
from jaxgraph.rl.policy import LatentPolicy, entropy, log_prob, sample_action
from jaxgraph.rl.ppo import TrainState, Trajectory, make_optimizer, make_update
from jaxgraph.rl.world_model import MDNRNN, DreamState, imagine
from jaxsched.common.sharding import Devices, batch_mesh, gather, replicate, shard_batch


class DreamStart(NamedTuple):
    """Start states of dreams, leaves [S, ...]: latents and masks of real initial observations."""

    z: chex.Array  # [S, D]
    xfer_mask: chex.Array  # [S, X + 1]
    location_mask: chex.Array  # [S, X, L]


class ControllerInput(NamedTuple):
    """What the controller sees (unbatched): [z, h] and the masks."""

    state: chex.Array  # [D + hidden]
    xfer_mask: chex.Array
    location_mask: chex.Array


class DreamEnvState(NamedTuple):
    """The batch of running dreams: world-model states, start index, steps taken, running return."""

    dream: DreamState  # leaves [N, ...]
    start: chex.Array  # [N] int32
    steps: chex.Array  # [N] int32
    episode_return: chex.Array  # [N]


class DreamResult(NamedTuple):
    """A trained controller and its per-update dream statistics (leaves [updates])."""

    params: Any
    metrics: dict


def controller_input(dream: DreamState) -> ControllerInput:
    """The controller's view of a dream state: Ha and Schmidhuber's [z_t, h_t]."""
    return ControllerInput(jnp.concatenate([dream.z, dream.carry[1]]), dream.xfer_mask, dream.location_mask)


def make_dream_rollout(config: DreamConfig, model: MDNRNN) -> tuple[LatentPolicy, Callable]:
    """(controller, `rollout(params, wm_params, env_state, key, tau, start) -> env_state, Trajectory,
    (finished returns sum, finished count)`): `rollout_steps` vmapped dream steps as one scan."""
    policy = LatentPolicy(model.num_xfers, model.max_locations, config.hidden)
    zero = model.initial_carry()

    def start_state(start: DreamStart, index):
        return DreamState(zero, start.z[index], start.xfer_mask[index], start.location_mask[index])

    def act_one(params, obs: ControllerInput, key):
        action, lp, out = sample_action(key, lambda choose: policy.apply(params, obs.state, obs.xfer_mask,
                                                                           obs.location_mask, choose))
        return action, lp, out.value

    def value_one(params, obs: ControllerInput):
        return policy.apply(params, obs.state, obs.xfer_mask, obs.location_mask, jnp.argmax).value

    def rollout(params, wm_params, env: DreamEnvState, key, tau, start: DreamStart):
        def step(env: DreamEnvState, step_key):
            act_key, world_key = jax.random.split(step_key)
            n = env.start.shape[0]
            obs = jax.vmap(controller_input)(env.dream)
            action, lp, value = jax.vmap(act_one, in_axes=(None, 0, 0))(params, obs, jax.random.split(act_key, n))
            dream, reward, terminated = jax.vmap(imagine, in_axes=(None, None, 0, 0, 0, None))(
                model, wm_params, env.dream, action, jax.random.split(world_key, n), tau)
            steps = env.steps + 1
            truncated = ~terminated & (steps >= config.horizon)
            done = terminated | truncated
            next_value = jax.vmap(value_one, in_axes=(None, 0))(params, jax.vmap(controller_input)(dream))
            episode_return = env.episode_return + reward
            finished = (jnp.sum(jnp.where(done, episode_return, 0.0)), jnp.sum(done.astype(jnp.float32)))
            restart = jax.vmap(start_state, in_axes=(None, 0))(start, env.start)
            dream = jax.tree.map(lambda new, fresh: jnp.where(done.reshape((n,) + (1,) * (new.ndim - 1)), fresh, new),
                                 dream, restart)
            env = DreamEnvState(dream, env.start, jnp.where(done, 0, steps), jnp.where(done, 0.0, episode_return))
            return env, (Trajectory(obs, action, lp, value, reward, next_value, terminated, done), finished)

        env, (trajectory, finished) = jax.lax.scan(step, env, jax.random.split(key, config.rollout_steps))
        return env, trajectory, jax.tree.map(jnp.sum, finished)

    return policy, rollout


def initial_env_state(config: DreamConfig, model: MDNRNN, start: DreamStart) -> DreamEnvState:
    """`num_envs` dreams at their start states (dream i starts from start state i mod S)."""
    index = jnp.arange(config.num_envs) % start.z.shape[0]
    zero = model.initial_carry()
    carry = jax.tree.map(lambda c: jnp.broadcast_to(c, (config.num_envs,) + c.shape), zero)
    dream = DreamState(carry, start.z[index], start.xfer_mask[index], start.location_mask[index])
    return DreamEnvState(dream, index, jnp.zeros(config.num_envs, jnp.int32), jnp.zeros(config.num_envs))


class DreamTrainer(NamedTuple):
    """Dream training in pieces: `init(key, start) -> carry` (a fresh controller and optimiser state, and
    `num_envs` dreams at their start states) and `run(carry, update_keys, tau, world_model_params, start) ->
    (carry, metrics)`, one PPO update per key of `update_keys` [U] (pure and jittable; one compilation per
    chunk length U)."""

    init: Callable[[chex.PRNGKey, DreamStart], tuple[TrainState, DreamEnvState]]
    run: Callable[..., tuple[tuple[TrainState, DreamEnvState], dict]]


def make_dream_trainer(config: DreamConfig, model: MDNRNN) -> DreamTrainer:
    """The pieces of `make_dream_train`: running `init` and then `run` on the update keys in several chunks
    gives exactly the controller of one `run` over all of them."""
    policy, rollout = make_dream_rollout(config, model)

    def evaluate(params, obs: ControllerInput, action):
        out = policy.apply(params, obs.state, obs.xfer_mask, obs.location_mask, lambda _: action[0])
        return (log_prob(out.xfer_logits, out.location_logits, action[0], action[1]),
                entropy(out.xfer_logits, out.location_logits, action[0]), out.value)

    update = make_update(evaluate, config.ppo)
    optimizer = make_optimizer(config.ppo)

    def init(key, start: DreamStart) -> tuple[TrainState, DreamEnvState]:
        env = initial_env_state(config, model, start)
        first = controller_input(jax.tree.map(lambda x: x[0], env.dream))
        params = policy.init(key, first.state, first.xfer_mask, first.location_mask, jnp.argmax)
        return TrainState(params, optimizer.init(params)), env

    def run(carry, update_keys, tau, world_model_params, start: DreamStart):
        chex.assert_rank(tau, 0)

        def one_update(carry, update_key):
            state, env = carry
            rollout_key, ppo_key = jax.random.split(update_key)
            env, trajectory, (return_sum, episodes) = rollout(state.params, world_model_params, env, rollout_key,
                                                              tau, start)
            state, metrics = update(state, trajectory, ppo_key)
            metrics = {**metrics, "episodes": episodes,
                       "mean_return": return_sum / jnp.maximum(episodes, 1.0),
                       "mean_reward": jnp.mean(trajectory.reward)}
            return (state, env), metrics

        return jax.lax.scan(one_update, carry, update_keys)

    return DreamTrainer(init, run)


def make_dream_train(config: DreamConfig, model: MDNRNN) -> Callable:
    """`train(key, tau, world_model_params, start) -> DreamResult`, pure and jittable (see module doc)."""
    trainer = make_dream_trainer(config, model)

    def train(key, tau, world_model_params, start: DreamStart) -> DreamResult:
        init_key, key = jax.random.split(key)
        (state, _), metrics = trainer.run(trainer.init(init_key, start), jax.random.split(key, config.updates), tau,
                                          world_model_params, start)
        return DreamResult(state.params, metrics)

    return train


def make_dream_sweep(config: DreamConfig, model: MDNRNN, devices: Devices = None) -> Callable:
    """`sweep(keys [S], taus [U], world_model_params, start) -> DreamResult` with leaves [U, S, ...]: one controller
    trained per (tau, seed), the U x S members as one batch split across `devices` (`jaxsched.common.batch_mesh`:
    default all devices, of every process in a multi-process run; padded to a multiple of the device count).
    Members never interact, so each result equals the one-device run within float rounding (XLA may fuse and
    order a member's sums differently per device count; Adam's steps amplify the last-bit differences over the
    updates). One compilation per (U, S)."""
    mesh = batch_mesh(devices)
    train = jax.jit(jax.vmap(make_dream_train(config, model), in_axes=(0, 0, None, None)))

    def sweep(keys: jax.Array, taus: jax.Array, world_model_params, start: DreamStart) -> DreamResult:
        chex.assert_rank([keys, taus], [1, 1])
        grid = (jnp.repeat(taus, keys.shape[0]), jnp.tile(keys, taus.shape[0]))  # tau-major, as [U, S]
        (member_taus, member_keys), size = shard_batch(grid, mesh)
        result = gather(train(member_keys, member_taus, *replicate((world_model_params, start), mesh)), size)
        return jax.tree.map(lambda x: x.reshape((taus.shape[0], keys.shape[0]) + x.shape[1:]), result)

    return sweep


def controller_episode(env: Env, encode: Callable[[Observation], chex.Array], model: MDNRNN, world_model_params,
                       policy: LatentPolicy, params, max_steps: int = 1000, key: chex.PRNGKey | None = None) -> Episode:
    """Run a dream-trained controller in the real environment: the real observation is encoded to z, the world
    model's LSTM tracks h from the real (z, action) pairs, and the real masks constrain the actions. The most
    likely action at every step, or actions sampled from the controller with `key`."""
    act_and_remember = _controller_step(model, policy)
    carry = model.initial_carry()
    step_keys = iter(split_keys(key, max_steps)) if key is not None else None

    def choose(obs: Observation):
        nonlocal carry
        carry, action = act_and_remember(params, world_model_params, carry, encode(obs), obs.xfer_mask,
                                         obs.location_mask, None if step_keys is None else next(step_keys))
        return np.asarray(action)

    return run_episode(env, choose, max_steps)


@functools.lru_cache(maxsize=16)
def _controller_step(model: MDNRNN, policy: LatentPolicy) -> Callable:
    """Jitted (params, wm_params, carry, z, masks, key or None) -> (carry, action: the most likely one, or
    one sampled with the key), cached per architecture so that evaluating many controllers (a tau sweep)
    compiles once."""

    @jax.jit
    def act_and_remember(params, world_model_params, carry, z, xfer_mask, location_mask, key):
        obs = ControllerInput(jnp.concatenate([z, carry[1]]), xfer_mask, location_mask)
        action, _, _ = sample_action(key, lambda choose: policy.apply(params, obs.state, obs.xfer_mask,
                                                                        obs.location_mask, choose))
        carry, _ = model.apply(world_model_params, carry, z, action)
        return carry, action

    return act_and_remember
