"""Dream training: a tau sweep x seeds is one vmapped, jitted program that compiles once, and every member
learns the counter world's optimal policy (4 x (xfer 0, location 1), return 0.8) from the fitted MDN-RNN."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph.rl import (
    DreamConfig,
    DreamStart,
    DreamState,
    LatentPolicy,
    PPOConfig,
    imagine,
    initial_env_state,
    make_dream_rollout,
    make_dream_train,
    make_dream_trainer,
    sample_action,
)

from ..conftest import jit
from .conftest import D, L, X, latent, masks

CONFIG = DreamConfig(ppo=PPOConfig(learning_rate=3e-3, minibatches=4), hidden=32, num_envs=64, rollout_steps=8,
                     updates=40, horizon=8)
START = DreamStart(latent(0)[None], masks(0)[0][None], masks(0)[1][None])


def true_counter_episode(model, wm_params, params):
    """The controller's most likely actions in the real counter (the world model only tracks h)."""
    policy = LatentPolicy(X, L, CONFIG.hidden)
    k, carry, actions, total = 0, model.initial_carry(), [], 0.0
    while k < 4 and len(actions) < 10:
        z = jnp.asarray(latent(k))
        xfer_mask, location_mask = masks(k)
        action, _, _ = sample_action(None, functools.partial(
            policy.apply, params, jnp.concatenate([z, carry[1]]), xfer_mask, location_mask))
        carry, _ = model.apply(wm_params, carry, z, action)
        xfer, location = (int(a) for a in action)
        actions.append((xfer, location))
        if xfer == X:
            break
        total += 0.1 * (1 + location) if xfer == 0 else 0.3
        k += 1 + xfer
    return actions, total


def dream_value_of_the_optimum(model, wm_params, key, tau):
    """The world model's return for the optimal actions (0, 1) from k = 0: what a dream can pay at best."""
    def step(carry, step_key):
        state, total, done = carry
        state, reward, terminated = imagine(model, wm_params, state, jnp.array([0, 1], jnp.int32), step_key, tau)
        return (state, total + jnp.where(done, 0.0, reward), done | terminated), None

    state = DreamState(model.initial_carry(), START.z[0], START.xfer_mask[0], START.location_mask[0])
    (_, total, done), _ = jax.lax.scan(step, (state, jnp.float32(0.0), jnp.bool_(False)), jax.random.split(key, 6))
    return total, done


def test_tau_sweep_times_seeds_is_one_program_that_learns_the_optimum(counter_world_model):
    model, wm_params, _ = counter_world_model
    value, done = jit(jax.vmap(lambda k: dream_value_of_the_optimum(model, wm_params, k, jnp.float32(1.0))))(
        jax.random.split(jax.random.key(2), 32))
    assert np.asarray(done).all()
    np.testing.assert_allclose(np.asarray(value), 0.8, atol=0.01)  # the dreams pay the true optimum
    train = make_dream_train(CONFIG, model)
    sweep = jit(jax.vmap(jax.vmap(chex.assert_max_traces(train, n=1), in_axes=(0, None, None, None)),
                             in_axes=(None, 0, None, None)))
    taus = jnp.array([0.1, 1.0, 3.0])
    result = sweep(jax.random.split(jax.random.key(0), 2), taus, wm_params, START)
    returns = np.asarray(result.metrics["mean_return"])
    chex.assert_shape(returns, (3, 2, CONFIG.updates))
    assert (returns[..., 0] < 0.6).all()  # the optimum is 0.8
    assert (returns[:2, :, -1] > 0.78).all() and (returns[2, :, -1] > 0.7).all()  # tau 3 dreams are noisier
    params = jax.tree.map(lambda x: x[1, 0], result.params)
    actions, total = true_counter_episode(model, wm_params, params)
    assert actions == [(0, 1)] * 4 and abs(total - 0.8) < 1e-9
    again = sweep(jax.random.split(jax.random.key(1), 2), taus * 2.0, wm_params, START)  # no retrace
    assert np.isfinite(np.asarray(again.metrics["mean_return"])).all()


def test_dream_rollout_shapes_and_no_retrace(counter_world_model):
    model, wm_params, _ = counter_world_model
    policy, rollout = make_dream_rollout(CONFIG, model)
    env = initial_env_state(CONFIG, model, START)
    first = jax.tree.map(lambda x: x[0], env.dream)
    params = jit(lambda key, state, xfer_mask, location_mask: policy.init(
        key, state, xfer_mask, location_mask, jnp.argmax))(jax.random.key(0), jnp.concatenate(
            [first.z, first.carry[1]]), first.xfer_mask, first.location_mask)
    run = jit(chex.assert_max_traces(rollout, n=1))
    for seed, tau in [(0, 1.0), (1, 0.5)]:
        env, trajectory, (return_sum, episodes) = run(params, wm_params, env, jax.random.key(seed), jnp.float32(tau),
                                                      START)
        chex.assert_shape(trajectory.action, (CONFIG.rollout_steps, CONFIG.num_envs, 2))
        chex.assert_shape(trajectory.obs.state, (CONFIG.rollout_steps, CONFIG.num_envs, D + model.config.hidden))
        actions = np.asarray(trajectory.action).reshape(-1, 2)
        xfer_masks = np.asarray(trajectory.obs.xfer_mask).reshape(-1, X + 1)
        assert xfer_masks[np.arange(len(actions)), actions[:, 0]].all()  # never a masked xfer in a dream
        assert float(episodes) > 0 and np.asarray(env.steps).max() < CONFIG.horizon


def test_dream_training_in_chunks_equals_one_program(counter_world_model):
    """`make_dream_trainer`'s pieces: four updates in two chunks of two end where `make_dream_train`'s one program
    of four does (so a caller can evaluate the controller between chunks)."""
    model, wm_params, _ = counter_world_model
    config = DreamConfig(ppo=PPOConfig(minibatches=2), hidden=16, num_envs=8, rollout_steps=4, updates=4, horizon=8)
    whole = jit(make_dream_train(config, model))(jax.random.key(5), jnp.float32(1.0), wm_params, START)
    trainer = make_dream_trainer(config, model)
    init_key, key = jax.random.split(jax.random.key(5))
    run = jit(chex.assert_max_traces(trainer.run, n=1))
    keys = jax.random.split(key, config.updates)
    carry = jit(trainer.init)(init_key, START)
    carry, first = run(carry, keys[:2], jnp.float32(1.0), wm_params, START)
    (state, _), rest = run(carry, keys[2:], jnp.float32(1.0), wm_params, START)
    chex.assert_trees_all_close(state.params, whole.params, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.concatenate([first["mean_return"], rest["mean_return"]]),
                               whole.metrics["mean_return"], rtol=1e-5, atol=1e-6)
