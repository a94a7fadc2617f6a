"""Trap graphs: seeded graphs whose optimum under TASO's cost is known by construction and is reached only
through a rewrite that makes the graph dearer first, so greedy descent stops short of it.

The trap motif is an Inception-style pair of branches that share their input and are concatenated:

    concat(relu(conv_1x1(x)), relu(conv_kxk(x)))

Greedy fuses each ReLU into its conv (each fusion saves a kernel) and stops: merging the two convs
(`MergeConvs(enlarge=True)`, the 1x1 kernel zero-padded to k x k) costs more than the two convs it
replaces. But the merge leaves `concat(split(y))`, which `SplitConcat` removes, and the concat's
memory traffic is a larger saving than the merge's loss. The optimum is one k x k conv with the ReLU
fused over both branches' channels (TASO's enlarge-then-merge, Jia et al. 2019, section 6). Channel
counts are drawn until the merge is dearer and the optimum cheaper than greedy's graph under the cost
model, checked on the motif's own forms (never by running a search).

Motifs are chained through filler: inert ops no rule touches (sigmoid, tanh, a 3x3 max-pool, a 1x1
conv with a sigmoid that sets the next motif's channels) and conv + ReLU pairs that greedy fuses
correctly. `TrapGraph.optimum` is the optimal graph built directly, which computes the same function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jaxgraph.cost import DEFAULT_COST_MODEL, CostModel, cost
from jaxgraph.graph import Graph, GraphBuilder
from jaxsched.common.arguments import integer

MOTIF_OPS = 5  # two convs, two relus, one concat
_INERT = ("sigmoid", "tanh", "maxpool2d")
_CHANNELS = (4, 8, 16, 32, 64)


@dataclass(frozen=True)
class TrapGraph:
    """A generated graph, its optimum (built directly) and the optimum's cost under the generator's model."""

    graph: Graph
    optimum: Graph
    optimum_cost: float
    traps: int  # motifs whose optimum needs a dearer step

    @property
    def num_ops(self) -> int:
        return self.graph.num_ops


class _Twin:
    """Builds the trap graph and its optimum side by side from the same weights."""

    def __init__(self, rng: np.random.Generator, channels: int, size: int) -> None:
        self.rng = rng
        self.graphs = (GraphBuilder(), GraphBuilder())  # (as generated, optimal)
        self.x = tuple(b.input("x", (1, channels, size, size)) for b in self.graphs)
        self.count = 0

    def _name(self, what: str) -> str:
        self.count += 1
        return f"{what}{self.count}"

    def weight(self, shape: tuple[int, ...]) -> np.ndarray:
        fan_in = shape[1] * shape[2] * shape[3]
        return (self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    @property
    def channels(self) -> int:
        return self.graphs[0].shape(self.x[0])[1]

    def inert(self, op: str) -> None:
        attrs = {"kernel": (3, 3), "pads": (1, 1, 1, 1)} if op == "maxpool2d" else {}
        self.x = tuple(b.add(op, [x], **attrs) for b, x in zip(self.graphs, self.x))

    def adapter(self, out: int) -> None:
        """A 1x1 conv with a fused sigmoid: no rule applies, and it sets the channel count."""
        name = self._name("adapt")
        w = self.weight((out, self.channels, 1, 1))
        self.x = tuple(b.add("conv2d", [x, b.weight(name, w)], activation="sigmoid")
                       for b, x in zip(self.graphs, self.x))

    def conv_relu(self, out: int) -> None:
        """conv then relu: the optimum fuses them, and so does greedy."""
        name = self._name("conv")
        w = self.weight((out, self.channels, 3, 3))
        (b, o), (x, xo) = self.graphs, self.x
        y = b.add("relu", [b.add("conv2d", [x, b.weight(name, w)], pads=(1, 1, 1, 1))])
        self.x = (y, o.add("conv2d", [xo, o.weight(name, w)], pads=(1, 1, 1, 1), activation="relu"))

    def motif(self, c1: int, c2: int, k: int) -> None:
        """concat(relu(conv_1x1(x)), relu(conv_kxk(x))); optimum: one kxk conv over both weights + relu."""
        name = self._name("trap")
        w1, w2 = self.weight((c1, self.channels, 1, 1)), self.weight((c2, self.channels, k, k))
        p = (k - 1) // 2
        (b, o), (x, xo) = self.graphs, self.x
        a = b.add("relu", [b.add("conv2d", [x, b.weight(f"{name}.a", w1)])])
        c = b.add("relu", [b.add("conv2d", [x, b.weight(f"{name}.b", w2)], pads=(p,) * 4)])
        merged = np.concatenate([np.pad(w1, ((0, 0), (0, 0), (p, p), (p, p))), w2])
        self.x = (b.add("concat", [a, c], axis=1),
                  o.add("conv2d", [xo, o.weight(name, merged)], pads=(p,) * 4, activation="relu"))

    def build(self) -> tuple[Graph, Graph]:
        return tuple(b.build({"y": x}) for b, x in zip(self.graphs, self.x))


def _motif_forms(channels: int, size: int, c1: int, c2: int, k: int) -> dict[str, Graph]:
    """The motif alone on an input of `channels`: separate convs, merged convs, with and without relu."""
    forms = {}
    p = (k - 1) // 2
    for activation in ("none", "relu"):
        for merged in (False, True):
            b = GraphBuilder()
            x = b.input("x", (1, channels, size, size))
            w1, w2 = b.weight("a", np.zeros((c1, channels, 1, 1))), b.weight("b", np.zeros((c2, channels, k, k)))
            if merged:
                w = b.weight("m", np.zeros((c1 + c2, channels, k, k)))
                y = b.add_outputs("split", [b.add("conv2d", [x, w], pads=(p,) * 4, activation=activation)],
                                  axis=1, sizes=(c1, c2))
            else:
                y = (b.add("conv2d", [x, w1], activation=activation),
                     b.add("conv2d", [x, w2], pads=(p,) * 4, activation=activation))
            forms[activation, merged] = b.build({"y": b.add("concat", list(y), axis=1)})
    return forms


def is_trap(channels: int, size: int, c1: int, c2: int, k: int, cost_model: CostModel | None = None) -> bool:
    """Whether the motif traps greedy under `cost_model`: merging the two convs is dearer than keeping them
    (with or without the fused relu, so no descent ever merges), and the merged conv without the concat is
    cheaper than greedy's end point (two fused convs and the concat)."""
    model = cost_model or DEFAULT_COST_MODEL
    forms = {key: cost(g, model) for key, g in _motif_forms(channels, size, c1, c2, k).items()}
    b = GraphBuilder()
    x = b.input("x", (1, channels, size, size))
    w = b.weight("m", np.zeros((c1 + c2, channels, k, k)))
    optimum = cost(b.build({"y": b.add("conv2d", [x, w], pads=((k - 1) // 2,) * 4, activation="relu")}), model)
    dearer = all(forms[a, True] > forms[a, False] for a in ("none", "relu"))
    return dearer and optimum < forms["relu", False]


def trap_graph(seed: int, min_ops: int = 10, max_ops: int = 60, max_traps: int = 4, size: int = 16,
               cost_model: CostModel | None = None) -> TrapGraph:
    """A seeded trap graph of `min_ops`..`max_ops` ops (drawn) holding 1..`max_traps` trap motifs (drawn),
    the rest filler; the motifs' channel counts are drawn until each is a trap under `cost_model` (TASO's
    additive roofline cost by default). The exhaustive search's state count grows about tenfold per
    motif and twofold per conv + relu filler pair, so `max_traps` bounds what it can verify.
    """
    seed, size = integer("seed", seed, 0), integer("size", size, 4)
    min_ops, max_ops = integer("min_ops", min_ops, 1), integer("max_ops", max_ops, 1)
    max_traps = integer("max_traps", max_traps, 1)
    if min_ops > max_ops or min_ops < MOTIF_OPS + 1:
        raise ValueError(f"need {MOTIF_OPS + 1} <= min_ops <= max_ops (a trap motif and its channel adapter "
                         f"are {MOTIF_OPS + 1} ops), got min_ops={min_ops}, max_ops={max_ops}")
    model = cost_model or DEFAULT_COST_MODEL
    rng = np.random.default_rng(seed)
    target = int(rng.integers(min_ops, max_ops + 1))
    traps = int(rng.integers(1, min(max_traps, target // (MOTIF_OPS + 1)) + 1))
    pairs = int(rng.integers(0, min(2, (target - traps * (MOTIF_OPS + 1)) // 2) + 1))
    inert = target - traps * (MOTIF_OPS + 1) - 2 * pairs
    # segments in a random order; each motif comes after its channel adapter
    segments = ["trap"] * traps + ["pair"] * pairs + ["inert"] * inert
    rng.shuffle(segments)
    twin = _Twin(rng, int(rng.choice(_CHANNELS[:3])), size)
    for segment in segments:
        if segment == "trap":
            for _ in range(1000):
                c_in, c1, c2 = (int(c) for c in rng.choice(_CHANNELS, 3))
                k = int(rng.choice((3, 5)))
                if is_trap(c_in, size, c1, c2, k, model):
                    break
            else:
                raise ValueError(f"no trap motif exists at spatial size {size} under this cost model")
            twin.adapter(c_in)
            twin.motif(c1, c2, k)
        elif segment == "pair":
            twin.conv_relu(int(rng.choice(_CHANNELS[:3])))
        else:
            twin.inert(_INERT[int(rng.integers(len(_INERT)))])
    graph, optimum = twin.build()
    return TrapGraph(graph, optimum, cost(optimum, model), traps)
