"""Hierarchical masked policies over (xfer, location) actions (thesis 3.3.3 and 4.2).

An action is chosen in two levels: an xfer from `xfer_mask` (the last xfer, the NO-OP, is always
allowed), then a location of that xfer from `location_mask[xfer]`. The NO-OP has no location: its
location is 0 and contributes nothing to the log-probability or the entropy. Masked logits are set
to a large negative finite number (not -inf), so a fully masked row stays finite (uniform) instead
of producing NaN in entropies and gradients.

Two policies share these maths:
* `GraphPolicy` (model-free, real environment): a `GraphEncoder`, xfer logits and a value from z, and
  a pointer-style location head that scores each location from the embeddings of its nodes.
* `LatentPolicy` (model-based controller, thesis 4.3.2): the same heads on the world model's state
  [z, h], with location logits from a dense layer (in a dream there are no node embeddings).

Both are called as `apply(params, inputs, choose_xfer)`: `choose_xfer(xfer_logits) -> xfer` is a
sampler when acting and returns the stored action when evaluating, so one forward pass computes the
location logits of exactly the chosen xfer.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxgraph.env import Observation
from jaxgraph.rl._sampling import categorical
from jaxgraph.rl.encoder import MLP, GraphEncoder

MASKED = -1e9


class PolicyOutput(NamedTuple):
    """One state's policy: masked xfer logits [X + 1], the chosen xfer, its masked location logits [L],
    and the state value."""

    xfer_logits: chex.Array
    xfer: chex.Array
    location_logits: chex.Array
    value: chex.Array


def masked_logits(logits: chex.Array, mask: chex.Array) -> chex.Array:
    """Logits with masked-out entries set to `MASKED`."""
    chex.assert_equal_shape([logits, mask])
    return jnp.where(mask, logits, MASKED)


def _entropy(logits: chex.Array) -> chex.Array:
    log_p = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.exp(log_p) * log_p)


def log_prob(xfer_logits: chex.Array, location_logits: chex.Array, xfer: chex.Array,
             location: chex.Array) -> chex.Array:
    """log pi(xfer) + log pi(location | xfer); the NO-OP (last xfer) has no location term."""
    chex.assert_rank([xfer_logits, location_logits, xfer, location], [1, 1, 0, 0])
    noop = xfer_logits.shape[0] - 1
    xfer_term = jax.nn.log_softmax(xfer_logits)[xfer]
    location_term = jax.nn.log_softmax(location_logits)[location]
    return xfer_term + jnp.where(xfer == noop, 0.0, location_term)


def entropy(xfer_logits: chex.Array, location_logits: chex.Array, xfer: chex.Array) -> chex.Array:
    """H(xfer) + H(location | chosen xfer): the entropy bonus (the location term is a one-sample
    estimate of the expected conditional entropy; it is 0 for the NO-OP)."""
    chex.assert_rank([xfer_logits, location_logits, xfer], [1, 1, 0])
    noop = xfer_logits.shape[0] - 1
    return _entropy(xfer_logits) + jnp.where(xfer == noop, 0.0, _entropy(location_logits))


def sample_action(key: chex.PRNGKey, apply: Callable[[Callable], PolicyOutput]
                  ) -> tuple[chex.Array, chex.Array, PolicyOutput]:
    """Sample (xfer, location) from a policy `apply(choose_xfer)`; returns them, their joint
    log-probability and the policy output. `greedy` sampling is `sample_action(None, ...)`."""
    xfer_key, location_key = (None, None) if key is None else jax.random.split(key)

    def choose(logits):
        return jnp.argmax(logits) if xfer_key is None else categorical(xfer_key, logits)

    out = apply(choose)
    noop = out.xfer_logits.shape[0] - 1
    location = (jnp.argmax(out.location_logits) if location_key is None
                else categorical(location_key, out.location_logits))
    location = jnp.where(out.xfer == noop, 0, location).astype(jnp.int32)
    xfer = out.xfer.astype(jnp.int32)
    return jnp.stack([xfer, location]), log_prob(out.xfer_logits, out.location_logits, xfer, location), out


def _row(location_mask: chex.Array, xfer: chex.Array) -> chex.Array:
    """location_mask[xfer], all False for the NO-OP (which has no row)."""
    location_mask = jnp.asarray(location_mask)
    num_xfers = location_mask.shape[0]
    return jnp.where(xfer < num_xfers, location_mask[jnp.minimum(xfer, num_xfers - 1)], False)


class GraphPolicy(nn.Module):
    """Model-free actor-critic over one observation: encoder, xfer head, location head, value head.

    The location head scores location l of xfer x from [root node embedding, mean of the location's
    node embeddings, an embedding of x, z]: locations are pointers into the graph, so the head
    generalises across graphs and location counts.
    """

    num_xfers: int  # X, the NO-OP excluded
    hidden: int = 64
    latent: int = 32
    message_steps: int = 2

    @nn.compact
    def __call__(self, obs: Observation, choose_xfer: Callable[[chex.Array], chex.Array]) -> PolicyOutput:
        chex.assert_shape(obs.xfer_mask, (self.num_xfers + 1,))
        nodes, z = GraphEncoder(self.hidden, self.latent, self.message_steps)(obs.graph, obs.node_mask,
                                                                             obs.edge_mask)
        h = self.hidden
        xfer_logits = masked_logits(MLP((h, self.num_xfers + 1))(z), obs.xfer_mask)
        value = MLP((h, 1))(z)[0]
        xfer = choose_xfer(xfer_logits)
        row = jnp.minimum(xfer, self.num_xfers - 1)
        members = obs.location_nodes[row]  # [L, M] node slots, padded with the dummy slot
        dummy = obs.node_mask.shape[0] - 1
        member_w = (members != dummy).astype(jnp.float32)[..., None]  # [L, M, 1]
        pooled = jnp.sum(nodes[members], axis=1) / jnp.maximum(jnp.sum(member_w, axis=1), 1.0)  # [L, H]
        root = nodes[members[:, 0]]
        xfer_emb = nn.Embed(self.num_xfers + 1, h)(xfer)
        num_locations = members.shape[0]
        context = jnp.broadcast_to(jnp.concatenate([xfer_emb, z]), (num_locations, h + self.latent))
        scores = MLP((h, 1))(jnp.concatenate([root, pooled, context], -1))[:, 0]
        location_logits = masked_logits(scores, _row(obs.location_mask, xfer))
        return PolicyOutput(xfer_logits, xfer, location_logits, value)


class LatentPolicy(nn.Module):
    """Model-based controller over the world-model state [z, h] with (predicted) masks."""

    num_xfers: int
    max_locations: int
    hidden: int = 64

    @nn.compact
    def __call__(self, state: chex.Array, xfer_mask: chex.Array, location_mask: chex.Array,
                 choose_xfer: Callable[[chex.Array], chex.Array]) -> PolicyOutput:
        chex.assert_rank(state, 1)
        chex.assert_shape([xfer_mask, location_mask], [(self.num_xfers + 1,), (self.num_xfers, self.max_locations)])
        h = self.hidden
        trunk = nn.silu(nn.LayerNorm()(nn.Dense(h)(state)))
        xfer_logits = masked_logits(MLP((h, self.num_xfers + 1))(trunk), xfer_mask)
        value = MLP((h, 1))(trunk)[0]
        xfer = choose_xfer(xfer_logits)
        xfer_emb = nn.Embed(self.num_xfers + 1, h)(xfer)
        scores = MLP((h, self.max_locations))(jnp.concatenate([trunk, xfer_emb]))
        location_logits = masked_logits(scores, _row(location_mask, xfer))
        return PolicyOutput(xfer_logits, xfer, location_logits, value)
