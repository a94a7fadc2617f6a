"""Hierarchical masked policies: never a masked action, log-probs of a normalised distribution,
entropies equal to a NumPy reference."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxgraph import Env
from jaxgraph.rl import (
    GraphPolicy,
    LatentPolicy,
    PolicyOutput,
    entropy,
    log_prob,
    masked_logits,
    sample_action,
    toy_graph,
)

from ..conftest import jit


def random_masks(rng, num_xfers, num_locations):
    xfer_mask = rng.random(num_xfers + 1) < 0.5
    xfer_mask[-1] = True  # NO-OP
    location_mask = (rng.random((num_xfers, num_locations)) < 0.4) & xfer_mask[:-1, None]
    for x in np.flatnonzero(xfer_mask[:-1]):  # a valid xfer has a location
        location_mask[x, rng.integers(num_locations)] = True
    return xfer_mask, location_mask


def np_log_softmax(logits):
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


NUM_XFERS, NUM_LOCATIONS = 6, 5  # fixed shapes (one compilation); the masks vary


def location_logits(raw_locations, location_mask, xfer):
    row = jnp.minimum(xfer, NUM_XFERS - 1)
    return masked_logits(raw_locations[row], jnp.where(xfer < NUM_XFERS, location_mask[row], False))


@jit
def sample_many(key, xfer_logits, raw_locations, location_mask):
    def apply(choose):
        xfer = choose(xfer_logits)
        return PolicyOutput(xfer_logits, xfer, location_logits(raw_locations, location_mask, xfer), jnp.float32(0.0))

    return jax.vmap(lambda k: sample_action(k, apply))(jax.random.split(key, 64))[:2]


@jit
def log_prob_and_entropy(xfer_logits, raw_locations, location_mask, xfer, location):
    logits = location_logits(raw_locations, location_mask, xfer)
    return log_prob(xfer_logits, logits, xfer, location), entropy(xfer_logits, logits, xfer)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_masked_hierarchical_distribution(seed):
    num_xfers, num_locations = NUM_XFERS, NUM_LOCATIONS
    rng = np.random.default_rng(seed)
    xfer_mask, location_mask = random_masks(rng, num_xfers, num_locations)
    xfer_logits = masked_logits(jnp.asarray(rng.normal(size=num_xfers + 1) * 3, jnp.float32), xfer_mask)
    raw_locations = jnp.asarray(rng.normal(size=(num_xfers, num_locations)) * 3, jnp.float32)
    actions, log_probs = sample_many(jax.random.key(seed), xfer_logits, raw_locations, location_mask)
    for (xfer, location), lp in zip(np.asarray(actions), np.asarray(log_probs)):
        assert xfer_mask[xfer]
        assert xfer == num_xfers or location_mask[xfer, location]
        assert xfer < num_xfers or location == 0
        assert np.isfinite(lp)
    # exp(log_prob) over every valid action sums to 1; the reference distribution is NumPy's
    ref_x = np_log_softmax(np.where(xfer_mask, np.asarray(xfer_logits), -np.inf))
    total, ref_entropy = 0.0, -np.sum(np.exp(ref_x[xfer_mask]) * ref_x[xfer_mask])
    for xfer in np.flatnonzero(xfer_mask):
        locs = [0] if xfer == num_xfers else np.flatnonzero(location_mask[xfer])
        ref_l = (None if xfer == num_xfers
                 else np_log_softmax(np.where(location_mask[xfer], raw_locations[xfer], -np.inf)))
        for location in locs:
            lp, h = log_prob_and_entropy(xfer_logits, raw_locations, location_mask, xfer, location)
            lp = float(lp)
            want = ref_x[xfer] + (0.0 if ref_l is None else ref_l[location])
            np.testing.assert_allclose(lp, want, rtol=1e-5, atol=1e-5)
            total += np.exp(lp)
        cond = 0.0 if ref_l is None else -np.sum(np.exp(ref_l[locs]) * ref_l[locs])
        np.testing.assert_allclose(float(h), ref_entropy + cond, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(total, 1.0, rtol=1e-5)


def test_graph_policy_never_samples_a_masked_action():
    env = Env(toy_graph(3).graph, max_locations=4)
    obs = jax.tree.map(jnp.asarray, env.reset().observation)
    policy = GraphPolicy(num_xfers=env.num_xfers, hidden=16, latent=8)
    params = jit(lambda key, obs: policy.init(key, obs, jnp.argmax))(jax.random.key(0), obs)  # eager: seconds

    @jit
    def sample(key, xfer_mask, location_mask):
        masked = obs._replace(xfer_mask=xfer_mask, location_mask=location_mask)
        return jax.vmap(lambda k: sample_action(k, lambda choose: policy.apply(params, masked, choose)))(
            jax.random.split(key, 256))

    rng = np.random.default_rng(0)
    for _ in range(5):
        xfer_mask, location_mask = random_masks(rng, env.num_xfers, env.max_locations)
        actions, log_probs, out = sample(jax.random.key(int(rng.integers(1 << 30))), xfer_mask, location_mask)
        for xfer, location in np.asarray(actions):
            assert xfer_mask[xfer] and (xfer == env.num_xfers or location_mask[xfer, location])
        assert np.isfinite(np.asarray(log_probs)).all() and len(set(np.asarray(actions)[:, 0])) > 1
        # the value does not depend on the sampled action
        assert np.ptp(np.asarray(out.value)) < 1e-5


def test_latent_policy_respects_masks():
    num_xfers, num_locations = 5, 3
    policy = LatentPolicy(num_xfers, num_locations, hidden=16)
    rng = np.random.default_rng(1)
    xfer_mask, location_mask = random_masks(rng, num_xfers, num_locations)
    state = jnp.asarray(rng.normal(size=12), jnp.float32)
    params = jit(lambda key: policy.init(key, state, xfer_mask, location_mask, jnp.argmax))(jax.random.key(0))
    actions, _, _ = jit(jax.vmap(lambda k: sample_action(
        k, lambda choose: policy.apply(params, state, xfer_mask, location_mask, choose))))(
        jax.random.split(jax.random.key(2), 256))
    for xfer, location in np.asarray(actions):
        assert xfer_mask[xfer] and (xfer == num_xfers or location_mask[xfer, location])
