"""Dream training: a tau sweep x seeds is one vmapped, jitted program that compiles once, and every member
learns the counter world's optimal policy (4 x (xfer 0, location 1), return 0.8) from the fitted MDN-RNN."""

import functools
import operator

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

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


@functools.partial(jax.jit, static_argnums=0)
def greedy_step(model, wm_params, params, carry, z, xfer_mask, location_mask):
    """The controller's most likely action on latent z and the world model's next carry."""
    policy = LatentPolicy(X, L, CONFIG.hidden)
    action, _, _ = sample_action(None, functools.partial(
        policy.apply, params, jnp.concatenate([z, carry[1]]), xfer_mask, location_mask))
    return action, model.apply(wm_params, carry, z, action)[0]


def true_counter_episode(model, wm_params, params):
    """The controller's most likely actions in the real counter (the world model only tracks h)."""
    k, carry, actions, total = 0, model.initial_carry(), [], 0.0
    while k < 4 and len(actions) < 10:
        action, carry = greedy_step(model, wm_params, params, carry, jnp.asarray(latent(k)), *masks(k))
        xfer, location = (int(a) for a in action)
        actions.append((xfer, location))
        if xfer == X:
            break
        total += 0.1 * (1 + location) if xfer == 0 else 0.3
        k += 1 + xfer
    return actions, total


def counter_sequences_from(k=0):
    """Every legal action sequence of the real counter from k to the end of its episode, with its true return."""
    xfer_mask, location_mask = masks(k)
    out = [([(X, 0)], 0.0)]
    for xfer, location in [(0, 0), (0, 1), (1, 0)]:
        if xfer_mask[xfer] and location_mask[xfer][location]:
            reward, nk = (0.1 * (1 + location), k + 1) if xfer == 0 else (0.3, k + 2)
            tails = [([], 0.0)] if nk >= 4 else counter_sequences_from(nk)
            out += [([(xfer, location)] + tail, reward + value) for tail, value in tails]
    return out


def dream_value(model, wm_params, actions, key, tau):
    """The world model's return for a fixed action sequence ([6, 2], NO-OP padded) from k = 0, and whether the
    dream ended: what a controller that plays exactly these actions earns in the dream."""
    def step(carry, inputs):
        state, total, done = carry
        state, reward, terminated = imagine(model, wm_params, state, *inputs, tau)
        return (state, total + jnp.where(done, 0.0, reward), done | terminated), None

    state = DreamState(model.initial_carry(), START.z[0], START.xfer_mask[0], START.location_mask[0])
    (_, total, done), _ = jax.lax.scan(step, (state, jnp.float32(0.0), jnp.bool_(False)),
                                       (actions, jax.random.split(key, len(actions))))
    return total, done


@pytest.mark.numerics
def test_tau_sweep_times_seeds_is_one_program_that_learns_the_optimum(counter_world_model):
    model, wm_params, _ = counter_world_model
    taus = jnp.array([0.1, 1.0, 3.0])
    sequences, true_returns = zip(*counter_sequences_from(0))
    lengths = np.array([len(actions) for actions in sequences])
    padded = jnp.array([actions + [(X, 0)] * (6 - len(actions)) for actions in sequences], jnp.int32)
    values, done = jit(jax.vmap(jax.vmap(jax.vmap(functools.partial(dream_value, model, wm_params),
                                                  in_axes=(None, 0, None)), in_axes=(0, None, None)),
                                in_axes=(None, None, 0)))(padded, jax.random.split(jax.random.key(2), 32), taus)
    mean_values = np.asarray(values).mean(-1)  # [taus, sequences], over 32 dreams each
    optimum = int(np.argmax(true_returns))
    assert np.asarray(done).all() and len(sequences) == 49 and sequences[optimum] == [(0, 1)] * 4
    # Each step's predicted reward is within the world-model test's 0.03 of the truth, so a dream's return is too.
    assert (np.abs(mean_values[1] - np.array(true_returns)) <= 0.03 * lengths).all()
    # The dreams rank the true optimum (4 x (0, 1), 0.8) first at every tau: learning in them can find it.
    assert (mean_values.argmax(-1) == optimum).all()
    runner_up = np.sort(mean_values, -1)[:, -2]

    train = make_dream_train(CONFIG, model)
    sweep = jit(jax.vmap(jax.vmap(chex.assert_max_traces(train, n=1), in_axes=(0, None, None, None)),
                             in_axes=(None, 0, None, None)))
    result = sweep(jax.random.split(jax.random.key(0), 2), taus, wm_params, START)
    returns = np.asarray(result.metrics["mean_return"])
    chex.assert_shape(returns, (3, 2, CONFIG.updates))
    assert (returns[..., 0] < 0.6).all()  # a near-uniform controller: a uniform one earns 0.29 in expectation
    # Each member ends above what any other fixed sequence earns in its dreams, and every one plays the optimum
    # in the real counter.
    assert (returns[..., -1] > runner_up[:, None]).all()
    for tau_index, seed_index in np.ndindex(returns.shape[:2]):
        params = jax.tree.map(operator.itemgetter((tau_index, seed_index)), result.params)
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
