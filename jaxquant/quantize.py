"""Weight quantizers with saturating straight-through gradients.

Every quantizer maps latent full-precision weights, kept in [-1, 1] by the training loop, to a few
levels in the forward pass. The backward pass is the saturating straight-through estimator of the
paper's Eq. 2, `g * 1{|w| <= 1}`, written as an explicit `jax.custom_vjp` so that the gradient is
exactly 1 at |w| = 1 (a `jnp.clip`-based estimator gives 0.5 there) and 0 beyond.

Quantizer kinds (`QUANTIZERS`):
  fp       no quantization (full-precision baseline);
  binary   sign(w), the paper's binary baseline (BinaryConnect);
  ternary  sign(w) * 1{|w| > delta}, the paper's quantizer (Eq. 5) with a scheduled threshold;
  twn      Ternary Weight Networks: threshold 0.7 * mean|w|, scaled by alpha (Li et al.);
  ttq      Trained Ternary Quantization: threshold t * max|w| (Eq. 3), learned scales (Zhu et al.).
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

QUANTIZERS = ("fp", "binary", "ternary", "twn", "ttq")


@dataclasses.dataclass(frozen=True)
class QuantConfig:
    """Which quantizer the network uses and which layers it applies to.

    By default every convolution is quantized (including the 1x1 projection shortcuts) except the
    first convolution and the final dense layer, which hold few weights but carry the input and
    the logits; `quantize_first` / `quantize_last` include them.
    """

    kind: str = "ternary"
    quantize_first: bool = False
    quantize_last: bool = False
    ttq_threshold: float = 0.05  # TTQ's t in Eq. 3

    def __post_init__(self):
        if self.kind not in QUANTIZERS:
            raise ValueError(f"unknown quantizer kind {self.kind!r}; expected one of {QUANTIZERS}")
        if not 0.0 <= self.ttq_threshold < 1.0:
            raise ValueError(f"ttq_threshold must be in [0, 1), got {self.ttq_threshold}")


def _saturation_mask(w: jax.Array) -> jax.Array:
    """1{|w| <= 1}: the saturating straight-through gradient of Eq. 2."""
    return (jnp.abs(w) <= 1).astype(w.dtype)


def ternary_code(w: jax.Array, threshold: jax.Array) -> jax.Array:
    """sign(w) * 1{|w| > threshold} in w's dtype (Eq. 5); exactly ±threshold maps to +0."""
    return jnp.where(jnp.abs(w) > threshold, jnp.sign(w), jnp.zeros_like(w))


@jax.custom_vjp
def _ternarize(w, delta):
    return ternary_code(w, delta)


def _ternarize_fwd(w, delta):
    return ternary_code(w, delta), (w, delta)


def _ternarize_bwd(residuals, g):
    w, delta = residuals
    return g * _saturation_mask(w), jnp.zeros_like(delta)


_ternarize.defvjp(_ternarize_fwd, _ternarize_bwd)


def _check_floating(w: jax.Array) -> jax.Array:
    w = jnp.asarray(w)
    if not jnp.issubdtype(w.dtype, jnp.floating):
        raise ValueError(f"quantizers need floating-point weights, got dtype {w.dtype}")
    return w


def ternarize(w: jax.Array, delta: jax.Array | float) -> jax.Array:
    """Ternary weights sign(w) * 1{|w| > delta} (Eq. 5) with the saturating STE (Eq. 2).

    `delta` is an ordinary traced argument (its cotangent is zero), so one compilation serves every
    threshold and a vmapped sweep can give each member its own delta.
    """
    w = _check_floating(w)
    chex.assert_rank(delta, 0)  # one threshold per call; vmap for one per member
    return _ternarize(w, jnp.asarray(delta, w.dtype))


@jax.custom_vjp
def binarize(w: jax.Array) -> jax.Array:
    """Binary weights sign(w) with sign(0) = +1 (so every weight costs one bit), saturating STE."""
    return jnp.where(w >= 0, 1, -1).astype(w.dtype)


def _binarize_fwd(w):
    return binarize(w), w


def _binarize_bwd(w, g):
    return (g * _saturation_mask(w),)


binarize.defvjp(_binarize_fwd, _binarize_bwd)


def twn_threshold_and_scale(w: jax.Array) -> tuple[jax.Array, jax.Array]:
    """TWN's approximate optimum: threshold 0.7 * mean|w| and alpha = mean of |w| above it."""
    magnitude = jax.lax.stop_gradient(jnp.abs(_check_floating(w)))
    threshold = 0.7 * jnp.mean(magnitude)
    above = (magnitude > threshold).astype(w.dtype)
    alpha = jnp.sum(magnitude * above) / jnp.maximum(jnp.sum(above), 1)
    return threshold, alpha


def twn_ternarize(w: jax.Array) -> jax.Array:
    """alpha * ternarize(w, 0.7 mean|w|): TWN weights; gradient alpha * g * 1{|w| <= 1}."""
    threshold, alpha = twn_threshold_and_scale(w)
    return alpha * ternarize(w, threshold)


def ttq_threshold(w: jax.Array, threshold_ratio: float) -> jax.Array:
    """TTQ's layer threshold t * max|w| (Eq. 3), without gradient."""
    return threshold_ratio * jax.lax.stop_gradient(jnp.max(jnp.abs(_check_floating(w))))


def ttq_levels(code: jax.Array, w_pos: jax.Array, w_neg: jax.Array) -> jax.Array:
    """Map a ternary code to TTQ's levels {-w_neg, 0, +w_pos}.

    Written as w_pos * code / w_neg * code / code so that autodiff yields TTQ's gradients: the sum
    of g over positive (resp. minus the sum over negative) positions for the scales, and
    w_pos * g, g, w_neg * g for the code (then the STE) in the three regions.
    """
    return jnp.where(code > 0, w_pos * code, jnp.where(code < 0, w_neg * code, code))


def ttq_ternarize(
    w: jax.Array, w_pos: jax.Array, w_neg: jax.Array, threshold_ratio: float = 0.05
) -> jax.Array:
    """Trained ternary quantization: levels {-w_neg, 0, +w_pos} at threshold t * max|w|."""
    return ttq_levels(ternarize(w, ttq_threshold(w, threshold_ratio)), w_pos, w_neg)


def code(kind: str, w: jax.Array, delta: jax.Array | float, ttq_threshold_ratio: float) -> jax.Array:
    """The int8 code in {-1, 0, +1} (binary: {-1, +1}) that quantizer `kind` assigns to `w`.

    The code carries no gradient; metrics and export use it. The forward pass of each quantizer is
    its scale(s) applied to exactly this code.
    """
    w = _check_floating(w)
    if kind == "binary":
        return jnp.where(w >= 0, 1, -1).astype(jnp.int8)
    if kind == "ternary":
        threshold = jnp.asarray(delta, w.dtype)
    elif kind == "twn":
        threshold, _ = twn_threshold_and_scale(w)
    elif kind == "ttq":
        threshold = ttq_threshold(w, ttq_threshold_ratio)
    else:
        raise ValueError(f"quantizer kind {kind!r} has no code; expected one of {QUANTIZERS[1:]}")
    return ternary_code(w, threshold).astype(jnp.int8)
