"""A toy graph generator with a known optimal rewrite sequence (Jumanji-style), for agent tests.

`toy_graph(blocks)` chains `blocks` conv -> batchnorm -> relu blocks. The optimum is known by
construction: fold every batch norm into its conv (FuseConvBatchNorm), which makes the conv's sole
consumer the relu, then fuse the relu (FuseConvRelu); 2 x blocks rewrites in dependency order, then
nothing applies. The optimal graph is built directly (convs with a bias and a fused relu), so its
cost is an independent reference for what a search or an agent should reach.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxgraph.graph import Graph, GraphBuilder


class ToyInstance(NamedTuple):
    """A toy graph, the optimum it can be rewritten to, and the length of the optimal sequence."""

    graph: Graph
    optimal_graph: Graph
    optimal_steps: int


def toy_graph(blocks: int = 3, channels: int = 8, size: int = 8, seed: int = 0) -> ToyInstance:
    """`blocks` conv-batchnorm-relu blocks on a [1, channels, size, size] input (see module doc)."""
    if blocks < 1 or channels < 1 or size < 1:
        raise ValueError(f"blocks, channels and size must be positive, got {blocks}, {channels}, {size}")
    rng = np.random.default_rng(seed)

    def weights(g: GraphBuilder, name: str, shape: tuple[int, ...]):
        return g.weight(name, rng.standard_normal(shape).astype(np.float32))

    source, fused = GraphBuilder(), GraphBuilder()
    x = source.input("x", (1, channels, size, size))
    y = fused.input("x", (1, channels, size, size))
    conv = dict(stride=(1, 1), pads=(1, 1, 1, 1))
    for i in range(blocks):
        w = weights(source, f"conv{i}.weight", (channels, channels, 3, 3))
        x = source.add("conv2d", [x, w], f"conv{i}", **conv)
        bn = [weights(source, f"bn{i}.{p}", (channels,)) for p in ("weight", "bias", "mean")]
        var = source.weight(f"bn{i}.var", rng.uniform(0.5, 1.5, channels).astype(np.float32))
        x = source.add("batchnorm", [x, *bn, var], f"bn{i}", eps=1e-5)
        x = source.add("relu", [x], f"relu{i}")
        y = fused.add("conv2d", [y, weights(fused, f"w{i}", (channels, channels, 3, 3)),
                                 weights(fused, f"b{i}", (channels,))], f"conv{i}", activation="relu", **conv)
    return ToyInstance(source.build({"y": x}), fused.build({"y": y}), 2 * blocks)
