"""The TimeStep constructors give Jumanji's step types and discounts (worked out by hand from Jumanji's
`jumanji.types`: restart FIRST = 0 with reward 0 and discount 1, transition MID = 1 with discount 1, termination
LAST = 2 with discount 0, truncation LAST = 2 with discount 1), as Python scalars for a host environment and as
int8 / float32 arrays for a jitted or batched one; `outcome` picks among the last three per element."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgraph import StepType, outcome, restart, termination, transition, truncation

# constructor -> (step type, discount), Jumanji's
EXPECTED = {transition: (1, 1.0), termination: (2, 0.0), truncation: (2, 1.0)}


def test_restart_is_first_with_reward_zero_and_discount_one():
    step = restart("obs", {"cost": 3.0})
    assert (step.step_type, step.reward, step.discount, step.observation, step.extras) == (
        StepType.FIRST, 0.0, 1.0, "obs", {"cost": 3.0})
    assert isinstance(step.step_type, StepType) and isinstance(step.reward, float)
    assert step.first() and not step.last() and restart("obs").extras == {}
    batch = restart("obs", shape=(3,))
    chex.assert_trees_all_equal((batch.step_type, batch.reward, batch.discount),
                                (jnp.zeros(3, jnp.int8), jnp.zeros(3, jnp.float32), jnp.ones(3, jnp.float32)))


@pytest.mark.parametrize("make", list(EXPECTED), ids=lambda make: make.__name__)
def test_each_step_constructor_gives_jumanjis_step_type_and_discount(make):
    step_type, discount = EXPECTED[make]
    host = make(0.5, "obs")
    assert (host.step_type, host.reward, host.discount) == (step_type, 0.5, discount)
    assert isinstance(host.step_type, StepType) and isinstance(host.discount, float)
    traced = jax.jit(lambda reward: make(reward, None))(jnp.float32(0.5))
    chex.assert_trees_all_equal((traced.step_type, traced.reward, traced.discount),
                                (jnp.int8(step_type), jnp.float32(0.5), jnp.float32(discount)))
    assert bool(traced.terminated) == (make is termination) and bool(traced.truncated) == (make is truncation)


def test_outcome_picks_per_element():
    """Four environments: terminated, truncated, going on, terminated (terminated wins over truncated, which a
    step never sets together): step types 2, 2, 1, 2 and discounts 0, 1, 1, 0, on the host (NumPy) and in jit."""
    reward = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    terminated = np.array([True, False, False, True])
    truncated = np.array([False, True, False, True])
    expected = (np.array([2, 2, 1, 2], np.int8), reward, np.array([0.0, 1.0, 1.0, 0.0], np.float32))
    host = outcome(reward, "obs", terminated, truncated, {"cost": reward})
    assert all(isinstance(leaf, np.ndarray) for leaf in (host.step_type, host.reward, host.discount))
    chex.assert_trees_all_equal((host.step_type, host.reward, host.discount), expected)
    chex.assert_trees_all_equal((host.terminated, host.truncated), (terminated, np.array([False, True, False, False])))
    traced = jax.jit(lambda *args: outcome(*args[:1], None, *args[1:]))(reward, terminated, truncated)
    chex.assert_trees_all_equal((traced.step_type, traced.reward, traced.discount), jax.tree.map(jnp.asarray, expected))
    for flags, make in (((True, False), termination), ((False, True), truncation), ((False, False), transition)):
        assert outcome(0.5, "obs", *flags) == make(0.5, "obs")
