"""CIFAR-style ResNet-20 and the paper's ResNet-20* with quantized layers.

Layout (He et al. 2016, CIFAR variant): a 3x3 stem convolution, three stages of basic blocks with
`base_width * inflation * (1, 2, 4)` channels (strides 1, 2, 2), global average pooling and a dense
classifier. A block whose shape changes uses a 1x1 projection shortcut with BatchNorm.

Parameter counts (10 classes, 3 input channels; printed by `count_params`):
  ResNet-20   3 blocks/stage, inflation 1:   272,474
  2 blocks/stage, inflation 1:               175,258   (paper: 175,406)
  ResNet-20*  2 blocks/stage, inflation 5: 4,337,370   (paper: 4,338,030)
  3 blocks/stage, inflation 5:             6,758,810
The paper's "ResNet-20*" count (4.3M) is only reached with 2 blocks per stage, so `RESNET20_STAR`
uses 2 blocks per stage at inflation 5. The remaining gap to the paper's figures (128 * inflation
+ 20 parameters) matches two extra BatchNorm layers on the pooled features and the logits, which
the paper does not describe; we do not add them.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxquant.conv import VMAP_CONV_PATHS
from jaxquant.layers import QuantConv, QuantDense
from jaxquant.quantize import QuantConfig
from jaxsched.common.arguments import integer


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture of a CIFAR-style ResNet with quantized layers."""

    num_classes: int = 10
    blocks_per_stage: int = 3
    base_width: int = 16
    inflation: int = 1
    quant: QuantConfig = QuantConfig()
    # How the convolutions of vmapped members (a sweep) batch: "auto" (a loop over members on CPU, batched
    # im2col matrix products on accelerators), "loop", "grouped" (XLA's grouped convolution) or "im2col";
    # every path computes the same values (jaxquant.conv).
    vmap_conv: str = "auto"

    def __post_init__(self):
        for name in ("num_classes", "blocks_per_stage", "base_width", "inflation"):
            integer(f"ModelConfig.{name}", getattr(self, name), 1)
        if self.vmap_conv not in VMAP_CONV_PATHS:
            raise ValueError(f"ModelConfig.vmap_conv must be one of {VMAP_CONV_PATHS}, got {self.vmap_conv!r}")

    @property
    def stage_widths(self) -> tuple[int, int, int]:
        width = self.base_width * self.inflation
        return (width, 2 * width, 4 * width)


RESNET20 = ModelConfig(blocks_per_stage=3, inflation=1)
RESNET20_STAR = ModelConfig(blocks_per_stage=2, inflation=5)


def _batch_norm(train: bool, name: str) -> nn.BatchNorm:
    # PyTorch defaults (momentum 0.1 for the running average, eps 1e-5).
    return nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5, name=name)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with BatchNorm and a residual connection."""

    features: int
    strides: int
    quant: QuantConfig
    vmap_conv: str = "auto"

    @nn.compact
    def __call__(self, x: jax.Array, delta, train: bool) -> jax.Array:
        conv_kwargs = dict(kind=self.quant.kind, ttq_threshold=self.quant.ttq_threshold, vmap_conv=self.vmap_conv)
        y = QuantConv(self.features, 3, self.strides, name="conv1", **conv_kwargs)(x, delta)
        y = nn.relu(_batch_norm(train, "bn1")(y))
        y = QuantConv(self.features, 3, 1, name="conv2", **conv_kwargs)(y, delta)
        y = _batch_norm(train, "bn2")(y)
        if self.strides != 1 or x.shape[-1] != self.features:
            x = QuantConv(self.features, 1, self.strides, name="shortcut", **conv_kwargs)(x, delta)
            x = _batch_norm(train, "shortcut_bn")(x)
        return nn.relu(x + y)


class ResNet(nn.Module):
    """ResNet for small images: `apply(variables, images, delta=..., train=...)` -> logits.

    `delta` is the ternary threshold (ignored by other quantizers); `images` are NHWC float32.
    """

    config: ModelConfig

    @nn.compact
    def __call__(self, x: jax.Array, *, delta=None, train: bool = False) -> jax.Array:
        cfg, quant = self.config, self.config.quant
        edge_kind = lambda quantized: quant.kind if quantized else "fp"  # noqa: E731
        widths = cfg.stage_widths
        x = QuantConv(
            widths[0], 3, 1, kind=edge_kind(quant.quantize_first), ttq_threshold=quant.ttq_threshold,
            vmap_conv=cfg.vmap_conv, name="stem",
        )(x, delta)
        x = nn.relu(_batch_norm(train, "stem_bn")(x))
        for stage, width in enumerate(widths):
            for block in range(cfg.blocks_per_stage):
                strides = 2 if stage > 0 and block == 0 else 1
                x = BasicBlock(width, strides, quant, cfg.vmap_conv, name=f"stage{stage + 1}_block{block + 1}")(
                    x, delta, train
                )
        x = jnp.mean(x, axis=(1, 2))
        return QuantDense(
            cfg.num_classes, kind=edge_kind(quant.quantize_last), ttq_threshold=quant.ttq_threshold,
            name="classifier",
        )(x, delta)


def count_params(params) -> int:
    """Number of trainable parameters (BatchNorm running statistics are not parameters)."""
    return sum(int(leaf.size) for leaf in jax.tree.leaves(params))
