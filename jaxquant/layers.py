"""Quantized convolution and dense Linen layers, and helpers over their parameter pytrees.

A quantized layer stores its full-precision latent weights under the parameter name
`latent_kernel` (plus `w_pos`/`w_neg` for TTQ) and passes them through the quantizer on every call;
a layer with kind "fp" stores an ordinary `kernel`. The parameter name is what the training loop
(projection to [-1, 1]), the metrics and the exporter use to find quantized weights.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxquant.conv import conv2d
from jaxquant.quantize import QuantConfig, binarize, code, ternarize, ttq_ternarize, twn_ternarize

LATENT_KERNEL = "latent_kernel"

# The paper initialises conv weights from N(0, sqrt(2 / n)) with n = k * k * out_channels, as in
# the original CIFAR ResNet code.
conv_init = nn.initializers.variance_scaling(2.0, "fan_out", "normal")


def _kernel(module: nn.Module, shape: tuple[int, ...], init, delta) -> jax.Array:
    """Declare the layer's kernel parameter(s) and return the kernel its forward pass uses."""
    kind = module.kind
    if kind == "fp":
        return module.param("kernel", init, shape)
    latent = module.param(LATENT_KERNEL, init, shape)
    if kind == "binary":
        return binarize(latent)
    if kind == "ternary":
        if delta is None:
            raise ValueError(f"layer {module.name!r} uses the ternary quantizer and needs a delta")
        return ternarize(latent, delta)
    if kind == "twn":
        return twn_ternarize(latent)
    if kind == "ttq":
        w_pos = module.param("w_pos", nn.initializers.ones, ())
        w_neg = module.param("w_neg", nn.initializers.ones, ())
        return ttq_ternarize(latent, w_pos, w_neg, module.ttq_threshold)
    raise ValueError(f"unknown quantizer kind {kind!r}")


class QuantConv(nn.Module):
    """2-D convolution (NHWC, no bias, padding k // 2 as in PyTorch) with a quantized kernel."""

    features: int
    kernel_size: int = 3  # odd
    strides: int = 1
    kind: str = "ternary"
    ttq_threshold: float = 0.05
    vmap_conv: str = "auto"  # how vmapped members' convolutions batch (jaxquant.conv.VMAP_CONV_PATHS)

    @nn.compact
    def __call__(self, x: jax.Array, delta: jax.Array | float | None = None) -> jax.Array:
        k = self.kernel_size
        kernel = _kernel(self, (k, k, x.shape[-1], self.features), conv_init, delta)
        return conv2d(x, kernel.astype(x.dtype), self.strides, self.vmap_conv)


class QuantDense(nn.Module):
    """Dense layer with a quantized kernel and a full-precision bias."""

    features: int
    kind: str = "ternary"
    ttq_threshold: float = 0.05

    @nn.compact
    def __call__(self, x: jax.Array, delta: jax.Array | float | None = None) -> jax.Array:
        kernel = _kernel(self, (x.shape[-1], self.features), nn.initializers.lecun_normal(), delta)
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        return x @ kernel.astype(x.dtype) + bias[None, :].astype(x.dtype)


def _path_name(path) -> str:
    return "/".join(str(getattr(entry, "key", entry)) for entry in path)


def _is_latent(path) -> bool:
    return getattr(path[-1], "key", None) == LATENT_KERNEL


def latent_kernels(params: Any) -> dict[str, jax.Array]:
    """The latent (pre-quantization) kernels of all quantized layers, keyed by parameter path."""
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    return {_path_name(path): leaf for path, leaf in leaves if _is_latent(path)}


def project_latent(params: Any) -> Any:
    """Clip every latent kernel to [-1, 1] (the projection after each optimizer step)."""
    return jax.tree_util.tree_map_with_path(
        lambda path, leaf: jnp.clip(leaf, -1, 1) if _is_latent(path) else leaf, params
    )


def quantized_codes(params: Any, quant: QuantConfig, delta: jax.Array | float) -> dict[str, jax.Array]:
    """The int8 ternary (or binary) codes of every quantized layer, keyed by parameter path."""
    return {
        name: code(quant.kind, latent, delta, quant.ttq_threshold)
        for name, latent in latent_kernels(params).items()
    }
