"""Instance generators for `JaxEnv.reset(key, params)` (Jumanji's generators, as pools).

A generator returns `Instances`: the graphs `reset` draws from and, where the generator knows it, each graph's
optimum cost. `JaxEnv(instances.graphs)` sizes one environment (capacities, ranks, root lists) for all of them, so
one compilation serves every instance, and `reset(key, params)` draws one uniformly with its key. The draw is from a
pool generated on the host beforehand (the generators write `Graph`s with the IR's shape inference, which does not
jit); a pool of N graphs costs N times one graph's `GraphState` in `EnvParams`.

- `graph_list(graphs)`: a fixed list (the builders, imported models, ...);
- `random_instances(count, seed, ...)`: `jaxgraph.random_graphs.random_graph` at seeds `seed .. seed + count - 1`
  (blocks of conv, batch norm, relu, concat, split, matmul, attention; size parameters passed through);
- `trap_instances(count, seed, ...)`: `jaxgraph.traps.trap_graph` at those seeds, with the optimum each trap graph
  is built with (known by construction; reaching it needs a dearer step first).

Impossible sizes (a count below 1, the generators' own bounds) raise `ValueError`; a graph over the environment's
capacities raises in `JaxEnv`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from jaxgraph.cost import CostModel
from jaxgraph.graph import Graph
from jaxgraph.random_graphs import random_graph
from jaxgraph.traps import trap_graph
from jaxsched.common.arguments import integer


@dataclass(frozen=True)
class Instances:
    """The graphs `reset` draws from and their known optimum costs (None where unknown)."""

    graphs: tuple[Graph, ...]
    optima: tuple[float | None, ...]

    def __post_init__(self) -> None:
        if not self.graphs:
            raise ValueError("an instance pool needs at least one graph")
        if len(self.optima) != len(self.graphs):
            raise ValueError(f"{len(self.graphs)} graphs but {len(self.optima)} optima")

    def __len__(self) -> int:
        return len(self.graphs)


def graph_list(graphs: Sequence[Graph]) -> Instances:
    """A fixed list of graphs, optima unknown."""
    graphs = tuple(graphs)
    if not all(isinstance(g, Graph) for g in graphs):
        raise ValueError("graph_list takes Graphs")
    return Instances(graphs, (None,) * len(graphs))


def random_instances(count: int, seed: int = 0, blocks: int = 6, channels: int = 8, image_size: int = 8,
                     features: int = 8) -> Instances:
    """`count` seeded random graphs (`random_graph(seed + i, blocks, channels, image_size, features)`), optima
    unknown. ValueError for `count` < 1 or sizes `random_graph` rejects."""
    count, seed = integer("count", count, 1), integer("seed", seed, 0)
    graphs = tuple(random_graph(seed + i, blocks, channels, image_size, features) for i in range(count))
    return Instances(graphs, (None,) * count)


def trap_instances(count: int, seed: int = 0, min_ops: int = 10, max_ops: int = 60, max_traps: int = 4,
                   size: int = 16, cost_model: CostModel | None = None) -> Instances:
    """`count` seeded trap graphs (`trap_graph(seed + i, ...)`) and the costs of their optima under `cost_model`
    (TASO's roofline by default). ValueError for `count` < 1 or sizes `trap_graph` rejects."""
    count, seed = integer("count", count, 1), integer("seed", seed, 0)
    traps = [trap_graph(seed + i, min_ops, max_ops, max_traps, size, cost_model) for i in range(count)]
    return Instances(tuple(t.graph for t in traps), tuple(t.optimum_cost for t in traps))
