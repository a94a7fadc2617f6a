"""Sparsity, entropy, accuracy and peak epoch on distributions with known answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxquant import accuracy, entropy, peak_epoch, per_layer, sparsity


def codes(negative, zero, positive):
    return jnp.asarray(np.repeat(np.array([-1, 0, 1], np.int8), [negative, zero, positive]))


def test_uniform_ternary_has_log2_3_bits():
    tree = codes(4, 4, 4)
    np.testing.assert_allclose(entropy(tree), np.log2(3), rtol=1e-6)
    np.testing.assert_allclose(sparsity(tree), 1 / 3, rtol=1e-6)


def test_known_distributions():
    # p = (1/4, 1/2, 1/4): H = 1.5 bits; sparsity 1/2
    np.testing.assert_allclose(entropy(codes(2, 4, 2)), 1.5, rtol=1e-6)
    # binary balanced: 1 bit, no zeros
    np.testing.assert_allclose(entropy(codes(5, 0, 5)), 1.0, rtol=1e-6)
    assert sparsity(codes(5, 0, 5)) == 0.0
    # all zeros: 0 bits (a positive zero), sparsity 1
    assert entropy(codes(0, 8, 0)) == 0.0 and not np.signbit(entropy(codes(0, 8, 0)))
    assert sparsity(codes(0, 8, 0)) == 1.0
    # p = (1/8, 3/4, 1/8): H = 2 * (1/8) * 3 + (3/4) * log2(4/3) = 0.75 + 0.311278 = 1.061278
    np.testing.assert_allclose(entropy(codes(1, 6, 1)), 1.0612781, rtol=1e-6)


def test_global_metrics_pool_layers_and_per_layer_separates_them():
    tree = {"a": codes(0, 6, 0), "b": jnp.reshape(codes(1, 0, 1), (1, 2))}
    np.testing.assert_allclose(sparsity(tree), 6 / 8, rtol=1e-6)
    # pooled p = (1/8, 6/8, 1/8) as above
    np.testing.assert_allclose(entropy(tree), 1.0612781, rtol=1e-6)
    layers = per_layer(sparsity, tree)
    assert list(layers) == ["a", "b"]
    np.testing.assert_allclose([layers["a"], layers["b"]], [1.0, 0.0])
    np.testing.assert_allclose(per_layer(entropy, tree)["b"], 1.0)


def test_metrics_of_an_empty_tree_are_nan():
    assert np.isnan(sparsity({})) and np.isnan(entropy({}))


def test_metrics_are_jittable():
    values = jax.jit(lambda t: (sparsity(t), entropy(t)))(codes(2, 4, 2))
    np.testing.assert_allclose(values, [0.5, 1.5], rtol=1e-6)


def test_accuracy_and_peak_epoch():
    logits = jnp.array([[0.0, 1.0], [2.0, 0.0], [0.0, 3.0], [1.0, 0.0]], jnp.float32)
    np.testing.assert_allclose(accuracy(logits, jnp.array([1, 0, 0, 1])), 0.5)
    assert peak_epoch([0.5, 0.9, 0.7, 0.9]) == 2  # 1-based, first of ties
    with pytest.raises(ValueError, match="non-empty 1-D"):
        peak_epoch([])
