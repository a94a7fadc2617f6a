"""Quantizers: forward values and gradients against hand-computed arrays."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxquant import QuantConfig, binarize, ternarize, ternary_code, ttq_ternarize, twn_ternarize
from jaxquant.quantize import code, twn_threshold_and_scale

# Includes exactly ±1, exactly ±Δ (Δ = 0.25, exact in float32), values beyond ±1 and 0.
W = jnp.array([-1.5, -1.0, -0.6, -0.25, -0.1, 0.0, 0.1, 0.25, 0.6, 1.0, 1.5], jnp.float32)
UPSTREAM = jnp.arange(1.0, 12.0, dtype=jnp.float32)  # distinct cotangents 1..11


def test_ternarize_forward_including_exact_threshold():
    expected = np.array([-1, -1, -1, 0, 0, 0, 0, 0, 1, 1, 1], np.float32)
    np.testing.assert_array_equal(ternarize(W, 0.25), expected)
    # exactly ±Δ is zeroed with a positive zero (|w| > Δ is strict)
    assert not np.signbit(np.asarray(ternarize(W, 0.25))[3])


def test_ternarize_gradient_is_saturating_ste():
    grad = jax.grad(lambda w: jnp.sum(ternarize(w, 0.25) * UPSTREAM))(W)
    # g * 1{|w| <= 1}: exactly 1 (not 0.5) at |w| = 1, and 0 beyond.
    expected = np.array([0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0], np.float32)
    np.testing.assert_array_equal(grad, expected)


def test_ternarize_delta_has_zero_gradient():
    grad = jax.grad(lambda delta: jnp.sum(ternarize(W, delta) * UPSTREAM))(jnp.float32(0.25))
    assert grad == 0.0


def test_ternarize_one_compilation_serves_every_delta():
    @jax.jit
    @chex.assert_max_traces(n=1)
    def quantize(w, delta):
        return ternarize(w, delta)

    for delta in (0.0, 0.1, 0.25, 0.5, 0.99):
        np.testing.assert_array_equal(quantize(W, delta), np.sign(W) * (np.abs(W) > delta))


def test_ternarize_vmaps_over_delta():
    deltas = jnp.array([0.0, 0.25, 1.0], jnp.float32)
    out = jax.vmap(ternarize, in_axes=(None, 0))(W, deltas)
    chex.assert_shape(out, (3, W.size))
    np.testing.assert_array_equal(out[2], np.array([-1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], np.float32))


def test_ternarize_rejects_integer_weights():
    with pytest.raises(ValueError, match="floating-point"):
        ternarize(jnp.arange(3), 0.5)


def test_binarize_forward_and_gradient():
    np.testing.assert_array_equal(binarize(W), np.array([-1, -1, -1, -1, -1, 1, 1, 1, 1, 1, 1], np.float32))
    grad = jax.grad(lambda w: jnp.sum(binarize(w) * UPSTREAM))(W)
    np.testing.assert_array_equal(grad, np.array([0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0], np.float32))


def test_twn_threshold_scale_and_gradient():
    w = jnp.array([-0.9, -0.2, 0.0, 0.1, 0.4, 0.8], jnp.float32)
    # mean|w| = 2.4 / 6 = 0.4 -> threshold 0.28; above: -0.9, 0.4, 0.8 -> alpha = 2.1 / 3 = 0.7
    threshold, alpha = twn_threshold_and_scale(w)
    np.testing.assert_allclose([threshold, alpha], [0.28, 0.7], rtol=1e-6)
    np.testing.assert_allclose(twn_ternarize(w), [-0.7, 0, 0, 0, 0.7, 0.7], rtol=1e-6)
    grad = jax.grad(lambda w: jnp.sum(twn_ternarize(w)))(w)
    np.testing.assert_allclose(grad, np.full(6, 0.7), rtol=1e-6)


def test_ttq_levels_and_gradients():
    w = jnp.array([-1.0, -0.5, -0.05, 0.0, 0.05, 0.5, 1.0], jnp.float32)
    w_pos, w_neg = jnp.float32(2.0), jnp.float32(3.0)
    # threshold = 0.1 * max|w| = 0.1
    np.testing.assert_array_equal(ttq_ternarize(w, w_pos, w_neg, 0.1), [-3, -3, 0, 0, 0, 2, 2])
    g = jnp.arange(1.0, 8.0, dtype=jnp.float32)
    grads = jax.grad(lambda w, p, n: jnp.sum(ttq_ternarize(w, p, n, 0.1) * g), argnums=(0, 1, 2))(w, w_pos, w_neg)
    # latent: w_neg * g | g | w_pos * g (TTQ Eq. 8), times 1{|w| <= 1}
    np.testing.assert_array_equal(grads[0], [3, 6, 3, 4, 5, 12, 14])
    assert grads[1] == 6 + 7  # sum of g over positive positions
    assert grads[2] == -(1 + 2)  # d(-w_neg)/d w_neg = -1 over negative positions


def test_codes_match_forward_pass():
    w = jax.random.uniform(jax.random.key(0), (64,), minval=-1, maxval=1)
    np.testing.assert_array_equal(code("ternary", w, 0.3, 0.05), ternarize(w, 0.3))
    np.testing.assert_array_equal(code("binary", w, 0.0, 0.05), binarize(w))
    np.testing.assert_array_equal(code("twn", w, 0.0, 0.05), jnp.sign(twn_ternarize(w)))
    np.testing.assert_array_equal(
        code("ttq", w, 0.0, 0.2), jnp.sign(ttq_ternarize(w, jnp.float32(1), jnp.float32(1), 0.2))
    )
    assert code("ternary", w, 0.3, 0.05).dtype == jnp.int8
    with pytest.raises(ValueError, match="no code"):
        code("fp", w, 0.3, 0.05)


def test_ternary_code_threshold():
    np.testing.assert_array_equal(ternary_code(W, jnp.float32(0.6)), [-1, -1, 0, 0, 0, 0, 0, 0, 0, 1, 1])


def test_quant_config_validation():
    with pytest.raises(ValueError, match="unknown quantizer"):
        QuantConfig(kind="quaternary")
    with pytest.raises(ValueError, match="ttq_threshold"):
        QuantConfig(kind="ttq", ttq_threshold=1.5)
