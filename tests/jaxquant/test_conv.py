"""conv2d: values and both gradients against XLA's own convolution and its autodiff."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxquant import conv2d


def reference_conv(x, kernel, stride):
    pad = kernel.shape[0] // 2
    return jax.lax.conv_general_dilated(
        x, kernel, (stride, stride), ((pad, pad), (pad, pad)), dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def random_problem(size, channels_in, channels_out, kernel_size, seed=0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(size=(2, size, size, channels_in)), jnp.float32)
    kernel = jnp.asarray(rng.normal(size=(kernel_size, kernel_size, channels_in, channels_out)), jnp.float32)
    return x, kernel


@pytest.mark.parametrize("size, stride, kernel_size", [(6, 1, 3), (6, 2, 3), (7, 2, 3), (6, 2, 1), (5, 1, 1)])
def test_conv2d_value_and_gradients_match_xla(size, stride, kernel_size):
    x, kernel = random_problem(size, 3, 4, kernel_size)
    out, pullback = jax.vjp(lambda a, b: conv2d(a, b, stride), x, kernel)
    expected, reference_pullback = jax.vjp(lambda a, b: reference_conv(a, b, stride), x, kernel)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    cotangent = jnp.asarray(np.random.default_rng(1).normal(size=out.shape), jnp.float32)
    for ours, theirs in zip(pullback(cotangent), reference_pullback(cotangent)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-4)


def test_vmapped_conv2d_equals_separate_convolutions():
    x, kernel = random_problem(6, 3, 4, 3)
    kernels = jnp.stack([kernel, 2 * kernel, -kernel])

    def loss(k, x):
        return jnp.sum(jnp.tanh(conv2d(x, k, 2)))

    batched = jax.jit(jax.vmap(jax.value_and_grad(loss), in_axes=(0, None)))(kernels, x)
    for member in range(3):
        value, grad = jax.value_and_grad(loss)(kernels[member], x)
        np.testing.assert_allclose(batched[0][member], value, rtol=1e-5)
        np.testing.assert_allclose(batched[1][member], grad, rtol=1e-5, atol=1e-5)
