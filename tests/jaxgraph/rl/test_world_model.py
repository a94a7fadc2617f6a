"""The MDN-RNN world model: its mixture density against SciPy, the temperature, fitting a known
deterministic transition, no retrace."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from jaxgraph.rl import mixture_log_likelihood, observe, sample_component

from .conftest import counter_sequences


def test_mixture_log_likelihood_equals_scipy():
    rng = np.random.default_rng(0)
    for k, d in [(1, 1), (3, 2), (8, 5)]:
        logits = rng.normal(size=k).astype(np.float32)
        means = rng.normal(size=(k, d)).astype(np.float32)
        log_stds = rng.normal(scale=0.5, size=(k, d)).astype(np.float32)
        x = rng.normal(size=d).astype(np.float32)
        weights = np.exp(logits - logsumexp(logits))
        reference = np.log(sum(w * stats.multivariate_normal(m, np.diag(np.exp(2 * s))).pdf(x)
                               for w, m, s in zip(weights, means, log_stds)))
        np.testing.assert_allclose(float(mixture_log_likelihood(logits, means, log_stds, x)), reference, rtol=1e-5)


def test_temperature_to_zero_picks_the_most_likely_component():
    logits = jnp.array([0.3, 1.0, 0.9, -2.0])
    draw = jax.jit(jax.vmap(sample_component, in_axes=(0, None, None)))
    keys = jax.random.split(jax.random.key(0), 4000)
    cold = np.asarray(draw(keys, logits, jnp.float32(1e-4)))
    assert (cold == 1).all()
    counts = np.bincount(np.asarray(draw(keys, logits, jnp.float32(1.0))), minlength=4)
    assert stats.chisquare(counts, 4000 * np.asarray(jax.nn.softmax(logits))).pvalue > 1e-3
    hot = np.bincount(np.asarray(draw(keys, logits, jnp.float32(100.0))), minlength=4) / 4000
    np.testing.assert_allclose(hot, 0.25, atol=0.03)  # tau -> infinity: uniform


@pytest.mark.numerics
def test_tiny_world_model_fits_a_deterministic_transition(counter_world_model):
    model, params, metrics = counter_world_model
    assert float(metrics["latent_nll"]) < -2.0  # sharp Gaussians around the right successor
    test = counter_sequences(np.random.default_rng(1), 16)
    pred = jax.vmap(lambda s: observe(model, params, s))(test)
    best = np.argmax(np.asarray(pred.mixture_logits), -1)
    means = np.take_along_axis(np.asarray(pred.means), best[..., None, None], axis=2)[:, :, 0]
    np.testing.assert_allclose(means, test.next_z, atol=0.05)
    np.testing.assert_allclose(np.asarray(pred.reward), test.reward, atol=0.03)
    assert ((np.asarray(pred.terminal_logit) > 0) == test.terminated).all()
    assert ((np.asarray(pred.xfer_mask_logits) > 0) == test.next_xfer_mask).all()
    assert ((np.asarray(pred.location_mask_logits) > 0) == test.next_location_mask).all()
