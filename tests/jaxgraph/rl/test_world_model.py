"""The MDN-RNN world model: its mixture density against SciPy, the temperature, fitting a known
deterministic transition, no retrace."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats
from scipy.special import logsumexp

from jaxgraph.rl import (MDNRNN, LatentSequence, WorldModelConfig, make_world_model_update,
                         mixture_log_likelihood, observe, sample_component)


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


# A deterministic toy: a counter k in 0..4, latent z = [k / 4, 1 - k / 4]. xfer 0 (location 0 or 1) adds
# 1 and earns 0.1 x (1 + location); xfer 1 (location 0) adds 2 and earns 0.3; the NO-OP (2) ends the
# episode with reward 0, reaching k >= 4 ends it too. xfer 0 needs k < 4, xfer 1 needs k <= 2.
X, L, D, T = 2, 2, 2, 8


def latent(k):
    return np.array([min(k, 4) / 4, 1 - min(k, 4) / 4], np.float32)


def masks(k):
    xfer = np.array([k < 4, k <= 2, True])
    location = np.array([[k < 4, k < 4], [k <= 2, False]])
    return xfer, location


def toy_sequences(rng, batch):
    out = []
    for _ in range(batch):
        rows, k, first = [], 0, True
        for _ in range(T):
            xfer_mask, location_mask = masks(k)
            xfer = rng.choice(np.flatnonzero(xfer_mask), p=None)
            location = 0 if xfer == X else rng.choice(np.flatnonzero(location_mask[xfer]))
            nk = k if xfer == X else k + 1 + xfer
            reward = 0.0 if xfer == X else (0.1 * (1 + location) if xfer == 0 else 0.3)
            terminated = xfer == X or nk >= 4
            nx, nl = masks(nk)
            rows.append((latent(k), [xfer, location], latent(nk), reward, terminated, nx, nl, first))
            k, first = (0, True) if terminated else (nk, False)
        out.append(LatentSequence(*(np.asarray(c) for c in zip(*rows))))
    return jax.tree.map(lambda *xs: np.stack(xs).astype(xs[0].dtype if xs[0].dtype != np.float64 else np.float32),
                        *out)


def test_tiny_world_model_fits_a_deterministic_transition():
    model = MDNRNN(D, X, L, WorldModelConfig(hidden=32, mixtures=2, learning_rate=1e-2))
    rng = np.random.default_rng(0)
    data = toy_sequences(rng, 64)
    params = jax.jit(model.init)(jax.random.key(0), model.initial_carry(), jnp.zeros(D), jnp.zeros(2, jnp.int32))
    optimizer, update = make_world_model_update(model)
    update = jax.jit(chex.assert_max_traces(update, n=1))
    opt_state = optimizer.init(params)
    for step in range(600):
        batch = jax.tree.map(lambda x: x[(step * 16) % 64:(step * 16) % 64 + 16], data)
        params, opt_state, metrics = update(params, opt_state, batch)
    assert float(metrics["latent_nll"]) < -2.0  # sharp Gaussians around the right successor
    test = toy_sequences(np.random.default_rng(1), 16)
    pred = jax.vmap(lambda s: observe(model, params, s))(test)
    best = np.argmax(np.asarray(pred.mixture_logits), -1)
    means = np.take_along_axis(np.asarray(pred.means), best[..., None, None], axis=2)[:, :, 0]
    np.testing.assert_allclose(means, test.next_z, atol=0.05)
    np.testing.assert_allclose(np.asarray(pred.reward), test.reward, atol=0.03)
    assert ((np.asarray(pred.terminal_logit) > 0) == test.terminated).all()
    assert ((np.asarray(pred.xfer_mask_logits) > 0) == test.next_xfer_mask).all()
    assert ((np.asarray(pred.location_mask_logits) > 0) == test.next_location_mask).all()
