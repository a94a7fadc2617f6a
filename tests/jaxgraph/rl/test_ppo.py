"""PPO maths against hand-computed values."""

import chex
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgraph.rl import PPOConfig, clipped_policy_loss, gae, ppo_loss, value_loss

R = jnp.array([1.0, 0.0, 2.0])
V = jnp.array([0.5, 1.0, 1.5])


def test_gae_terminal_episode_by_hand():
    # gamma 0.9, lambda 0.5: deltas 1 + .9 - .5 = 1.4, 0 + .9 * 1.5 - 1 = .35, 2 - 1.5 = .5 (terminal)
    # A2 = .5, A1 = .35 + .45 * .5 = .575, A0 = 1.4 + .45 * .575 = 1.65875
    next_v = jnp.array([1.0, 1.5, 0.7])
    term = jnp.array([False, False, True])
    adv = gae(R, V, next_v, term, term, 0.9, 0.5)
    chex.assert_trees_all_close(adv, jnp.array([1.65875, 0.575, 0.5]), rtol=1e-6)


def test_gae_truncation_bootstraps_and_cuts():
    # step 1 is truncated (bootstrap from V = 2.0 of its final observation, no flow across);
    # step 2 starts a new episode and is bootstrapped from 0.7 at the segment end.
    # deltas 1.4, 0 + .9 * 2 - 1 = .8, 2 + .9 * .7 - 1.5 = 1.13; A = [1.4 + .45 * .8, .8, 1.13]
    next_v = jnp.array([1.0, 2.0, 0.7])
    term = jnp.array([False, False, False])
    done = jnp.array([False, True, False])
    adv = gae(R, V, next_v, term, done, 0.9, 0.5)
    chex.assert_trees_all_close(adv, jnp.array([1.76, 0.8, 1.13]), rtol=1e-6)


def test_gae_with_lambda_one_is_the_discounted_return_minus_value():
    rewards = jnp.array([1.0, 2.0, 3.0, 4.0])
    values = jnp.array([0.3, -0.2, 0.9, 1.1])
    next_v = jnp.concatenate([values[1:], jnp.array([5.0])])
    no = jnp.zeros(4, bool)
    returns = [sum(0.5 ** (k - t) * rewards[k] for k in range(t, 4)) + 0.5 ** (4 - t) * 5.0 for t in range(4)]
    chex.assert_trees_all_close(gae(rewards, values, next_v, no, no, 0.5, 1.0), jnp.array(returns) - values,
                                rtol=1e-6)


def test_clipped_policy_loss_by_hand():
    # ratios 1.5, 0.5, 1.0, 0.5, advantages 1, 1, -2, -1, clip 0.3:
    # min(1.5, 1.3) = 1.3; min(.5, .7) = .5; -2; min(-.5, -.7) = -.7 -> loss = -(-0.9 / 4) = 0.225
    ratio = jnp.array([1.5, 0.5, 1.0, 0.5])
    adv = jnp.array([1.0, 1.0, -2.0, -1.0])
    old = jnp.array([-1.0, -2.0, -0.5, -0.1])
    loss = clipped_policy_loss(old + jnp.log(ratio), old, adv, 0.3)
    np.testing.assert_allclose(float(loss), 0.225, rtol=1e-6)
    config = PPOConfig(value_coef=0.5, entropy_coef=0.1)
    # value loss mean([1, 4, 0, 1]) = 1.5; entropy mean 0.5: total 0.225 + 0.75 - 0.05 = 0.925
    total, metrics = ppo_loss(old + jnp.log(ratio), old, adv, jnp.array([1.0, 2.0, 0.0, 1.0]),
                              jnp.array([0.0, 4.0, 0.0, 0.0]), jnp.array([0.2, 0.8, 0.5, 0.5]), config)
    np.testing.assert_allclose(float(total), 0.925, rtol=1e-6)
    np.testing.assert_allclose(float(metrics["clip_fraction"]), 0.75)
    # a scheduled coefficient of 0.4 instead: 0.225 + 0.75 - 0.4 x 0.5 = 0.775
    scheduled, _ = ppo_loss(old + jnp.log(ratio), old, adv, jnp.array([1.0, 2.0, 0.0, 1.0]),
                            jnp.array([0.0, 4.0, 0.0, 0.0]), jnp.array([0.2, 0.8, 0.5, 0.5]), config, 0.4)
    np.testing.assert_allclose(float(scheduled), 0.775, rtol=1e-6)


def test_entropy_schedule_decays_linearly_and_clamps():
    assert PPOConfig(entropy_coef=0.02).entropy_at(0.7) == 0.02
    config = PPOConfig(entropy_coef=0.1, entropy_final=0.02)
    for progress, expected in [(0.0, 0.1), (0.25, 0.08), (0.5, 0.06), (1.0, 0.02), (3.0, 0.02), (-1.0, 0.1)]:
        assert config.entropy_at(progress) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="entropy"):
        PPOConfig(entropy_final=-0.1)


def test_value_loss_and_rank_checks():
    np.testing.assert_allclose(float(value_loss(jnp.array([1.0, 2.0]), jnp.array([0.0, 4.0]))), 2.5)
    with pytest.raises(AssertionError):
        gae(R[None], V[None], V[None], R[None] > 0, R[None] > 0, 0.9, 0.9)
    with pytest.raises(ValueError, match="clip"):
        PPOConfig(clip=1.5)
