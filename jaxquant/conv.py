"""2-D convolution whose gradients are themselves plain NHWC convolutions.

Inside a loop body (`lax.scan`, as in a whole-epoch training program) XLA:CPU lays out the
convolutions that autodiff generates for the kernel and input gradients in non-canonical
dimension orders and runs them through a slow generic kernel: a ResNet step was about 6x slower
in a scan than alone. Writing both gradients as canonical NHWC/HWIO convolutions with explicit
transposes (a cheap copy) gives the same numbers at full speed.

Under `vmap` over members with their own kernels, XLA turns a convolution into a grouped
convolution, which XLA:CPU runs several times slower than the separate convolutions and GPUs run
no faster than the members one after another. How vmapped members' three convolutions batch is
therefore a choice (`VMAP_CONV_PATHS`, the model's `vmap_conv` field):
- "loop": a loop over members (`jax.custom_batching.sequential_vmap`), each a plain convolution;
- "grouped": XLA's own rule, one grouped convolution;
- "im2col": every member's image patches (pad and strided slices, no convolution at all) times its
  kernel as one batched matrix product; both gradients are that product's transposes (batched
  matrix products and pads), so the whole layer is work an accelerator runs in parallel;
- "auto": "loop" on CPU (the fastest there), "im2col" on accelerators.
An unbatched call (one run) is a plain convolution on every path, and every path computes the same
values as separate runs.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import chex
import jax
import jax.numpy as jnp

_DIMENSIONS = ("NHWC", "HWIO", "NHWC")
VMAP_CONV_PATHS = ("auto", "loop", "grouped", "im2col")


def resolve_vmap_conv(path: str) -> str:
    """The concrete path of `path` on the default backend ("auto": "loop" on CPU, else "im2col")."""
    if path not in VMAP_CONV_PATHS:
        raise ValueError(f"unknown vmap_conv path {path!r}; expected one of {VMAP_CONV_PATHS}")
    if path == "auto":
        return "loop" if jax.default_backend() == "cpu" else "im2col"
    return path


def _patches(x: jax.Array, size: int, stride: int) -> jax.Array:
    """Image patches of x [M, B, H, W, C] for a k x k window, padding k // 2: [M, B, Ho, Wo, k * k * C],
    ordered (row, column, channel) like a flattened HWIO kernel. Pads and strided slices only."""
    pad = size // 2
    padded = jnp.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad), (0, 0)))
    rows, cols = ((n + 2 * pad - size) // stride + 1 for n in x.shape[2:4])
    windows = [
        jax.lax.slice(padded, (0, 0, i, j, 0),
                      (x.shape[0], x.shape[1], i + stride * (rows - 1) + 1, j + stride * (cols - 1) + 1, x.shape[4]),
                      (1, 1, stride, stride, 1))
        for i in range(size) for j in range(size)
    ]
    return jnp.concatenate(windows, axis=-1)


def _members_forward(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    """Each member's convolution, x [M, B, H, W, Cin] with kernel [M, k, k, Cin, Cout], as one batched matmul."""
    members, size, _, channels_in, channels_out = kernel.shape
    flat = kernel.reshape(members, size * size * channels_in, channels_out)
    return jnp.einsum("mbhwp,mpo->mbhwo", _patches(x, size, stride), flat)


def _members_input_gradient(g, kernel, input_shape, stride: int):
    """The input gradient of `_members_forward` (its transpose in x)."""
    x_shape = jax.ShapeDtypeStruct((kernel.shape[0], *input_shape), g.dtype)
    return jax.linear_transpose(lambda x: _members_forward(x, kernel, stride), x_shape)(g)[0]


def _members_kernel_gradient(x, g, kernel_shape, stride: int):
    """The kernel gradient of `_members_forward` (its transpose in the kernel)."""
    k_shape = jax.ShapeDtypeStruct((x.shape[0], *kernel_shape), g.dtype)
    return jax.linear_transpose(lambda kernel: _members_forward(x, kernel, stride), k_shape)(g)[0]


def _batched_by_path(fn: Callable[[jax.Array, jax.Array], jax.Array], members_fn: Callable, path: str):
    """`fn` for one member; under `vmap`, batched as `path` says (`members_fn`: the "im2col" form over a
    leading member axis)."""
    if path == "grouped":
        return fn
    if path == "loop":
        return jax.custom_batching.sequential_vmap(fn)
    batched = jax.custom_batching.custom_vmap(fn)

    @batched.def_vmap
    def rule(axis_size, in_batched, a, b):
        a, b = (v if is_batched else jnp.broadcast_to(v, (axis_size, *v.shape))
                for v, is_batched in zip((a, b), in_batched))
        return members_fn(a, b), True

    return batched


def _forward(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    pad = kernel.shape[0] // 2
    return jax.lax.conv_general_dilated(
        x, kernel, (stride, stride), ((pad, pad), (pad, pad)), dimension_numbers=_DIMENSIONS
    )


def _primal(x: jax.Array, kernel: jax.Array, stride: int, path: str) -> jax.Array:
    chex.assert_rank([x, kernel], 4)  # x [B, H, W, Cin], kernel [k, k, Cin, Cout]
    return _batched_by_path(partial(_forward, stride=stride), partial(_members_forward, stride=stride), path)(
        x, kernel)


def conv2d(x: jax.Array, kernel: jax.Array, stride: int, vmap_conv: str = "auto") -> jax.Array:
    """Convolve x [B, H, W, Cin] with a square odd kernel [k, k, Cin, Cout], padding k // 2; `vmap_conv` is how
    vmapped members batch (`VMAP_CONV_PATHS`, module docstring)."""
    return _conv2d(x, kernel, stride, resolve_vmap_conv(vmap_conv))


@partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _conv2d(x: jax.Array, kernel: jax.Array, stride: int, path: str) -> jax.Array:
    return _primal(x, kernel, stride, path)


def _conv2d_fwd(x, kernel, stride, path):
    return _primal(x, kernel, stride, path), (x, kernel)


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


def _conv2d_bwd(stride, path, residuals, g):
    x, kernel = residuals
    input_gradient = _batched_by_path(
        partial(_input_gradient, input_shape=x.shape, stride=stride),
        partial(_members_input_gradient, input_shape=x.shape, stride=stride), path)
    kernel_gradient = _batched_by_path(
        partial(_kernel_gradient, kernel_shape=kernel.shape, stride=stride),
        partial(_members_kernel_gradient, kernel_shape=kernel.shape, stride=stride), path)
    return input_gradient(g, kernel), kernel_gradient(x, g)


_conv2d.defvjp(_conv2d_fwd, _conv2d_bwd)
