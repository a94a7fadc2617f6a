"""The graph encoder of the agents (thesis 4.1): message passing over the observation's GraphsTuple.

`GraphEncoder` embeds node, edge and global features, runs `message_steps` rounds of a full jraph
`GraphNetwork` (edge, node and global updates with segment-sum aggregation, residual connections) and
reads out a latent vector z from the final globals. Padding never reaches z: every edge and node update
is multiplied by its slot mask before it is aggregated, and the global update averages over the real
nodes and edges only (sums divided by the mask counts), so z is a function of the graph alone, not of
its capacity or of whatever the padded slots hold.

Observations are unbatched here (one graph, nodes `[C + 1, F]`); callers `vmap` over a batch.
"""

from __future__ import annotations

from typing import Sequence

import chex
import flax.linen as nn
import jax.numpy as jnp
import jraph
import numpy as np


def symlog(x: chex.Array) -> chex.Array:
    """sign(x) log(1 + |x|): compresses raw costs (microseconds to seconds) into a trainable range."""
    return jnp.sign(x) * jnp.log1p(jnp.abs(x))


class MLP(nn.Module):
    """Dense layers with layer norm and SiLU between them (none after the last)."""

    features: Sequence[int]

    @nn.compact
    def __call__(self, x: chex.Array) -> chex.Array:
        for i, width in enumerate(self.features):
            x = nn.Dense(width)(x)
            if i + 1 < len(self.features):
                x = nn.silu(nn.LayerNorm()(x))
        return x


class GraphEncoder(nn.Module):
    """GraphsTuple (one graph) + slot masks -> (node embeddings [C + 1, hidden], z [latent]).

    Node embeddings of padded slots are exactly zero, which location heads rely on when they pool
    the embeddings of a location's nodes (whose padding points at the dummy slot).
    """

    hidden: int = 64
    latent: int = 32
    message_steps: int = 2

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, node_mask: chex.Array,
                 edge_mask: chex.Array) -> tuple[chex.Array, chex.Array]:
        chex.assert_rank([graph.nodes, graph.edges, graph.globals, node_mask, edge_mask], [2, 2, 2, 1, 1])
        chex.assert_shape([graph.n_node, graph.n_edge], (1,))
        # One graph holds every row. Static counts keep jraph's repeats (globals to edges and nodes, nodes and edges
        # to their graph) unbatched under vmap: from a jitted environment the counts are constants, and XLA
        # constant-folded each repeat's cumsum once per observation of a batch (25 s a fold at 2,048 observations).
        graph = graph._replace(n_node=np.array([graph.nodes.shape[0]]), n_edge=np.array([graph.edges.shape[0]]))
        node_w = node_mask.astype(jnp.float32)[:, None]  # [N, 1]
        edge_w = edge_mask.astype(jnp.float32)[:, None]  # [E, 1]
        node_count = jnp.maximum(jnp.sum(node_w), 1.0)
        edge_count = jnp.maximum(jnp.sum(edge_w), 1.0)
        h = self.hidden
        graph = graph._replace(
            nodes=MLP((h, h))(graph.nodes) * node_w,
            edges=MLP((h, h))(graph.edges) * edge_w,
            globals=MLP((h, h))(symlog(graph.globals)),
        )
        for _ in range(self.message_steps):
            edge_mlp, node_mlp, global_mlp = MLP((h, h)), MLP((h, h)), MLP((h, h))

            def update_edge(edges, sent, received, globals_, edge_mlp=edge_mlp):
                return edge_mlp(jnp.concatenate([edges, sent, received, globals_], -1)) * edge_w

            def update_node(nodes, sent, received, globals_, node_mlp=node_mlp):
                return node_mlp(jnp.concatenate([nodes, sent, received, globals_], -1)) * node_w

            def update_global(nodes, edges, globals_, global_mlp=global_mlp):
                return global_mlp(jnp.concatenate([nodes / node_count, edges / edge_count, globals_], -1))

            network = jraph.GraphNetwork(update_edge_fn=update_edge, update_node_fn=update_node,
                                         update_global_fn=update_global)
            out = network(graph)
            graph = graph._replace(nodes=graph.nodes + out.nodes, edges=graph.edges + out.edges,
                                   globals=graph.globals + out.globals)
        z = nn.Dense(self.latent)(nn.LayerNorm()(graph.globals[0]))
        return graph.nodes, z
