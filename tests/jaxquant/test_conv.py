"""conv2d: values and both gradients against XLA's own convolution and its autodiff, on every vmap path."""

import re
from functools import partial

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxquant import conv2d
from jaxquant.conv import VMAP_CONV_PATHS, resolve_vmap_conv


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


@pytest.mark.parametrize("path", VMAP_CONV_PATHS)
@pytest.mark.parametrize("size, stride, kernel_size", [(7, 2, 3), (5, 1, 3), (6, 2, 1)])
def test_vmapped_conv2d_equals_separate_convolutions(path, size, stride, kernel_size):
    """Each member's value and both gradients (kernel and input) under vmap, shared or own inputs, against
    XLA's convolution of that member alone."""
    x, kernel = random_problem(size, 3, 4, kernel_size)
    kernels = jnp.stack([kernel, 2 * kernel, -kernel])
    xs = jnp.stack([x, 0.5 * x, x[:, ::-1]])

    def loss(k, x, conv):
        return jnp.sum(jnp.tanh(conv(x, k, stride)))

    ours = lambda k, x: loss(k, x, lambda a, b, s: conv2d(a, b, s, path))  # noqa: E731
    theirs = lambda k, x: loss(k, x, reference_conv)  # noqa: E731
    for in_axes, inputs in (((0, None), x), ((0, 0), xs)):
        batched = jax.jit(jax.vmap(jax.value_and_grad(ours, argnums=(0, 1)), in_axes=in_axes))(kernels, inputs)
        for member in range(3):
            member_x = inputs if in_axes[1] is None else inputs[member]
            value, (dk, dx) = jax.value_and_grad(theirs, argnums=(0, 1))(kernels[member], member_x)
            np.testing.assert_allclose(batched[0][member], value, rtol=1e-5)
            np.testing.assert_allclose(batched[1][0][member], dk, rtol=1e-5, atol=1e-4)
            np.testing.assert_allclose(batched[1][1][member], dx, rtol=1e-5, atol=1e-4)


def test_auto_path_is_the_loop_on_cpu_and_unknown_paths_are_refused():
    assert resolve_vmap_conv("auto") == ("loop" if jax.default_backend() == "cpu" else "im2col")
    with pytest.raises(ValueError, match="vmap_conv"):
        conv2d(jnp.zeros((1, 4, 4, 1)), jnp.zeros((3, 3, 1, 1)), 1, "fft")


def _convolution_group_counts(hlo: str) -> list[tuple[int, int]]:
    """(feature_group_count, batch_group_count) of every convolution in StableHLO text (absent: 1)."""
    counts = []
    for line in hlo.splitlines():
        if "stablehlo.convolution" in line:
            feature = re.search(r"feature_group_count = (\d+)", line)
            batch = re.search(r"batch_group_count = (\d+)", line)
            counts.append((int(feature.group(1)) if feature else 1, int(batch.group(1)) if batch else 1))
    return counts


def test_im2col_training_step_of_vmapped_members_has_no_grouped_convolution():
    """The accelerator path, forced and lowered on CPU: the gradient of a vmapped ResNet's loss, whose convolutions
    (forward, both gradients) are all ungrouped, where XLA's own rule groups them."""
    import jaxquant as jq

    images = jax.ShapeDtypeStruct((8, 8, 8, 3), jnp.float32)

    def gradient_hlo(path):
        model = jq.ResNet(jq.ModelConfig(blocks_per_stage=1, base_width=4, vmap_conv=path))
        variables = jax.eval_shape(partial(model.init, delta=0.1), jax.random.key(0), images)
        members = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct((2, *leaf.shape), leaf.dtype), variables)

        def loss(variables, x):
            logits, _ = model.apply(variables, x, delta=0.1, train=True, mutable=["batch_stats"])
            return jnp.sum(logits)

        return jax.jit(jax.vmap(jax.grad(loss), in_axes=(0, None))).lower(members, images).as_text()

    grouped = _convolution_group_counts(gradient_hlo("grouped"))
    assert any(counts != (1, 1) for counts in grouped), "XLA's rule should group (the test's premise)"
    im2col = _convolution_group_counts(gradient_hlo("im2col"))
    chex.assert_equal(all(counts == (1, 1) for counts in im2col), True)
