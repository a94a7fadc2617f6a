"""Categorical sampling with one uniform draw per sample (inverse transform sampling).

`jax.random.categorical` adds a Gumbel draw to every logit; a dream step samples an xfer (X + 1 logits), a
location (L) and a mixture component (K), so on a CPU the random bits alone took about half the time of a
batched dream step. Inverting the cumulative distribution needs one uniform per sample and gives the same
distribution. Entries of probability 0 (masked logits) are never drawn: their cumulative value equals their
predecessor's, and the drawn index is the first whose cumulative value reaches the uniform.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp


def categorical(key: chex.PRNGKey, logits: chex.Array) -> chex.Array:
    """An index drawn from softmax(logits) (unbatched; vmap for batches), int32."""
    chex.assert_rank(logits, 1)
    cdf = jnp.cumsum(jax.nn.softmax(logits))
    # u in (0, 1): never 0, so an index of probability 0 at the front cannot be drawn
    u = jax.random.uniform(key, minval=jnp.finfo(cdf.dtype).tiny, dtype=cdf.dtype) * cdf[-1]
    return jnp.minimum(jnp.sum(cdf < u), logits.shape[0] - 1).astype(jnp.int32)
