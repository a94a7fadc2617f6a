"""2-D convolution whose gradients are themselves plain NHWC convolutions.

Inside a loop body (`lax.scan`, as in a whole-epoch training program) XLA:CPU lays out the
convolutions that autodiff generates for the kernel and input gradients in non-canonical
dimension orders and runs them through a slow generic kernel: a ResNet step was about 6x slower
in a scan than alone. Writing both gradients as canonical NHWC/HWIO convolutions with explicit
transposes (a cheap copy) gives the same numbers at full speed.

Under `vmap` over members with their own kernels, XLA turns a convolution into a grouped
convolution, which XLA:CPU runs several times slower than the separate convolutions. On CPU the
three convolutions therefore batch as a loop over members (`jax.custom_batching.sequential_vmap`);
on accelerators they keep XLA's grouped convolution. Either way the vmapped program computes the
same values as separate runs.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import chex
import jax
import jax.numpy as jnp

_DIMENSIONS = ("NHWC", "HWIO", "NHWC")


def _batched_by_member_loop_on_cpu(fn: Callable[[jax.Array, jax.Array], jax.Array]):
    """`fn` as is on accelerators; on CPU, `vmap(fn)` runs as a loop over the batch."""
    if jax.default_backend() == "cpu":
        return jax.custom_batching.sequential_vmap(fn)
    return fn


def _forward(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    pad = kernel.shape[0] // 2
    return jax.lax.conv_general_dilated(
        x, kernel, (stride, stride), ((pad, pad), (pad, pad)), dimension_numbers=_DIMENSIONS
    )


def _primal(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    chex.assert_rank([x, kernel], 4)  # x [B, H, W, Cin], kernel [k, k, Cin, Cout]
    return _batched_by_member_loop_on_cpu(partial(_forward, stride=stride))(x, kernel)


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def conv2d(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    """Convolve x [B, H, W, Cin] with a square odd kernel [k, k, Cin, Cout], padding k // 2."""
    return _primal(x, kernel, stride)


def _conv2d_fwd(x, kernel, stride):
    return _primal(x, kernel, stride), (x, kernel)


def _input_gradient(g: jax.Array, kernel: jax.Array, input_shape, stride: int) -> jax.Array:
    """Transposed convolution: g dilated by the stride, convolved with the flipped kernel."""
    size = kernel.shape[0]
    pad = size // 2
    edge = size - 1 - pad
    # Input rows the forward pass never reached (when (H + 2 pad - k) % stride != 0) get zero.
    extra = [(n + 2 * pad - size) % stride for n in input_shape[1:3]]
    flipped = jnp.transpose(kernel[::-1, ::-1], (0, 1, 3, 2))  # [k, k, Cout, Cin]
    return jax.lax.conv_general_dilated(
        g, flipped, (1, 1), ((edge, edge + extra[0]), (edge, edge + extra[1])),
        lhs_dilation=(stride, stride), dimension_numbers=_DIMENSIONS,
    )


def _kernel_gradient(x: jax.Array, g: jax.Array, kernel_shape, stride: int) -> jax.Array:
    """dK[i, j, c, o] = sum_{b, h, w} x_pad[b, s h + i, s w + j, c] g[b, h, w, o] as one convolution.

    Input channels act as the batch and the batch as the contracted feature dimension.
    """
    size = kernel_shape[0]
    pad = size // 2
    lhs = jnp.transpose(x, (3, 1, 2, 0))  # [Cin, H, W, B]
    rhs = jnp.transpose(g, (1, 2, 0, 3))  # [Ho, Wo, B, Cout]
    out = jax.lax.conv_general_dilated(
        lhs, rhs, (1, 1), ((pad, pad), (pad, pad)), rhs_dilation=(stride, stride),
        dimension_numbers=_DIMENSIONS,
    )  # [Cin, >= k, >= k, Cout]
    return jnp.transpose(out[:, :size, :size, :], (1, 2, 0, 3))


def _conv2d_bwd(stride, residuals, g):
    x, kernel = residuals
    input_gradient = partial(_input_gradient, input_shape=x.shape, stride=stride)
    kernel_gradient = partial(_kernel_gradient, kernel_shape=kernel.shape, stride=stride)
    return (
        _batched_by_member_loop_on_cpu(input_gradient)(g, kernel),
        _batched_by_member_loop_on_cpu(kernel_gradient)(x, g),
    )


conv2d.defvjp(_conv2d_fwd, _conv2d_bwd)
