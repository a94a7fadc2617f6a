"""Evaluation metrics of the paper (Sec. 4.2): accuracy, sparsity, entropy, epoch of peak accuracy.

`sparsity` and `entropy` take a pytree of quantized weights (e.g. the int8 codes from
`jaxquant.quantized_codes`) and pool all its leaves, so the global value weighs every weight
equally; `per_layer` applies either metric to each leaf separately. Both are jittable and return
NaN for an empty tree (a full-precision model has no quantized weights).
"""

from __future__ import annotations

from typing import Any, Callable

import chex
import jax
import jax.numpy as jnp
import numpy as np


def _symbol_counts(tree: Any) -> jax.Array:
    """Counts of (negative, zero, positive) values over all leaves: [3] float32."""
    counts = jnp.zeros((3,), jnp.float32)
    for leaf in jax.tree.leaves(tree):
        negative = jnp.sum(leaf < 0)
        zero = jnp.sum(leaf == 0)
        counts = counts + jnp.stack([negative, zero, leaf.size - negative - zero]).astype(jnp.float32)
    return counts


def sparsity(tree: Any) -> jax.Array:
    """Share of exact zeros among all quantized weights in `tree` (0..1)."""
    counts = _symbol_counts(tree)
    return counts[1] / jnp.sum(counts)


def entropy(tree: Any) -> jax.Array:
    """Empirical entropy of the sign pattern {-1, 0, +1} in bits/symbol (binary weights: <= 1)."""
    counts = _symbol_counts(tree)
    total = jnp.sum(counts)
    p = counts / total
    safe_p = jnp.where(p > 0, p, 1.0)
    bits = jnp.sum(jnp.where(p > 0, p * jnp.log2(1 / safe_p), 0.0))
    return jnp.where(total > 0, bits, jnp.nan)


def per_layer(metric: Callable[[Any], jax.Array], tree: dict[str, Any]) -> dict[str, jax.Array]:
    """`metric` (sparsity or entropy) of each layer of a {name: weights} mapping."""
    return {name: metric(weights) for name, weights in tree.items()}


def accuracy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Top-1 accuracy of logits [N, classes] against integer labels [N]."""
    chex.assert_rank([logits, labels], [2, 1])
    chex.assert_equal_shape_prefix([logits, labels], 1)
    return jnp.mean((jnp.argmax(logits, axis=-1) == labels).astype(jnp.float32))


def peak_epoch(accuracy_per_epoch) -> int:
    """1-based epoch of the highest accuracy (the first one on ties): the paper's training speed."""
    values = np.asarray(accuracy_per_epoch)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"peak_epoch needs a non-empty 1-D accuracy history, got shape {values.shape}")
    return int(np.argmax(values)) + 1
