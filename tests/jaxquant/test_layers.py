"""Quantized layers and the helpers that find, project and encode their latent weights."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxquant import QuantConfig, QuantConv, QuantDense, latent_kernels, project_latent, quantized_codes


def test_quant_dense_uses_the_ternary_kernel():
    layer = QuantDense(3, kind="ternary")
    x = jnp.array([[1.0, 2.0]], jnp.float32)
    latent = jnp.array([[0.5, -0.05, -0.9], [0.02, 0.3, 1.0]], jnp.float32)
    params = {"params": {"latent_kernel": latent, "bias": jnp.array([0.0, 1.0, -1.0], jnp.float32)}}
    # ternary kernel at Δ = 0.1: [[1, 0, -1], [0, 1, 1]] -> x @ K = [1, 2, 1], plus bias
    np.testing.assert_array_equal(layer.apply(params, x, 0.1), [[1.0, 3.0, 0.0]])


def test_quant_conv_matches_convolution_with_hand_ternarized_kernel():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(1, 5, 5, 2)), jnp.float32)
    latent = jnp.asarray(rng.uniform(-1, 1, size=(3, 3, 2, 4)), jnp.float32)
    ternary = np.where(np.abs(latent) > 0.4, np.sign(latent), 0).astype(np.float32)
    out = QuantConv(4, 3, 1, kind="ternary").apply({"params": {"latent_kernel": latent}}, x, 0.4)
    expected = jax.lax.conv_general_dilated(
        x, jnp.asarray(ternary), (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_parameter_names_mark_quantized_layers():
    x = jnp.ones((1, 4, 4, 2), jnp.float32)
    names = {
        kind: set(jax.eval_shape(QuantConv(3, kind=kind).init, jax.random.key(0), x, 0.1)["params"])
        for kind in ("fp", "binary", "ternary", "twn", "ttq")
    }
    assert names["fp"] == {"kernel"}
    assert names["binary"] == names["ternary"] == names["twn"] == {"latent_kernel"}
    assert names["ttq"] == {"latent_kernel", "w_pos", "w_neg"}


def test_ternary_layer_without_delta_fails_clearly():
    with pytest.raises(ValueError, match="needs a delta"):
        jax.eval_shape(QuantDense(2, kind="ternary").init, jax.random.key(0), jnp.ones((1, 3), jnp.float32))


def test_projection_clips_only_latent_kernels():
    params = {
        "conv": {"latent_kernel": jnp.array([-2.0, -0.5, 1.0, 3.0], jnp.float32)},
        "dense": {"kernel": jnp.array([-2.0, 3.0], jnp.float32)},
    }
    projected = project_latent(params)
    np.testing.assert_array_equal(projected["conv"]["latent_kernel"], [-1.0, -0.5, 1.0, 1.0])
    np.testing.assert_array_equal(projected["dense"]["kernel"], [-2.0, 3.0])


def test_latent_kernels_and_codes_are_keyed_by_layer_path():
    params = {
        "block": {"conv": {"latent_kernel": jnp.array([0.05, -0.5, 0.9], jnp.float32)}},
        "head": {"kernel": jnp.array([1.0], jnp.float32)},
    }
    assert list(latent_kernels(params)) == ["block/conv/latent_kernel"]
    codes = quantized_codes(params, QuantConfig("ternary"), 0.1)
    np.testing.assert_array_equal(codes["block/conv/latent_kernel"], np.array([0, -1, 1], np.int8))
