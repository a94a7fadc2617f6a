"""Every graph up to `max_ops` operators over a set of op kinds and a world of symbolic input tensors.

A *world* is TASO's generator setup: a few input tensors of one rank whose batch/channel dimensions are a
symbol `n` (a dimension is `coef * n + const`; image and kernel axes are constants), so a graph's shapes are
symbolic and can be instantiated at several sizes. An *op kind* is one IR op with its pattern constraints fixed
(`conv2d` 3x3 stride 1 SAME relu is one kind). Every tensor is interned once as a term (an op kind over argument
terms), so a graph is a set of op terms: graphs that differ only in the order their ops were added are one
graph, and a graph never computes the same term twice (TASO drops such graphs too). Arguments of add and mul
are ordered, so the enumeration is modulo their commutativity.

A split is one op with two outputs (`(SPLIT_PART, (split,), j)` terms) that only a graph's outputs may be: the
pattern format allows split in targets only, sized like the source tensors it replaces.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from jaxgraph.pattern_data import PATTERN_OPS, UNARY_OPS, canonical_padding, conv_pads

Dim = tuple[int, int]  # coef * n + const
SymShape = tuple[Dim, ...]
GENERATE_OPS = tuple(PATTERN_OPS)  # what the pattern format can say
TASO_OPS = ("matmul", "conv2d", "add", "mul", "relu", "concat", "split", "transpose")  # TASO's generator's, expressible
INPUT, SPLIT_PART = -1, -2


@dataclass(frozen=True)
class OpKind:
    """One op with its constraints fixed: the unit the enumerator adds to a graph."""

    name: str
    op: str
    arity: int
    attrs: tuple[tuple[str, Any], ...] = ()
    commutative: bool = False

    def attr(self, key: str, default: Any = None) -> Any:
        """One constraint of the kind."""
        return dict(self.attrs).get(key, default)


@dataclass(frozen=True)
class World:
    """The input tensors of one enumeration: `inputs` tensors of rank `rank` (2: `(n, n)`; 4: `(n, n, image,
    image)`, TASO's square setup in which activations and weights have the same shape), then (rank 4 only)
    `weights` conv weights `(n, n, kernel, kernel)` and `biases` conv biases `(n,)`. A world with biases has
    biased convs (three inputs) at every stride of `strides` and padding SAME, VALID and HALF, each reading an
    activation of the world's image size (so weights never double as activations, and a rule proved here is
    proved at one image size; the loader checks it again at sizes 3 and 4)."""

    rank: int
    inputs: int
    image: int = 3
    weights: int = 0
    kernel: int = 3
    biases: int = 0
    strides: tuple[int, ...] = (1,)

    def __post_init__(self) -> None:
        if self.rank not in (2, 4):
            raise ValueError(f"a world has rank 2 or 4, got {self.rank}")
        if self.inputs < 1:
            raise ValueError(f"a world needs at least one input tensor, got {self.inputs}")
        if (self.weights or self.biases) and self.rank != 4:
            raise ValueError("conv weights and biases belong to a rank-4 world")

    @property
    def shape(self) -> SymShape:
        """The symbolic shape of the first `inputs` inputs."""
        return ((1, 0), (1, 0)) + ((0, self.image), (0, self.image)) * (self.rank == 4)

    @property
    def shapes(self) -> tuple[SymShape, ...]:
        """The symbolic shape of every input, in input order."""
        weight = ((1, 0), (1, 0), (0, self.kernel), (0, self.kernel))
        return (self.shape,) * self.inputs + (weight,) * self.weights + (((1, 0),),) * self.biases

    @property
    def count(self) -> int:
        """How many input tensors the world has."""
        return self.inputs + self.weights + self.biases

    def kinds(self, ops: Sequence[str]) -> tuple[OpKind, ...]:
        """The op kinds of `ops` in this world (`op_kinds`; with biases: biased convs of the world's kernel at its
        strides, and concat of biases)."""
        kernel = self.kernel if self.weights else 3
        return op_kinds(ops, self.rank, (kernel,), self.strides, biased=self.biases > 0)


# Worlds beyond TASO's two (`--worlds`): biased convs, 3x3 (stride 1 and 2) or 1x1, on 4x4 images (where SAME and
# HALF differ at stride 2), one activation, two weights and two biases.
EXTRA_WORLDS = {
    "bias3": World(4, 1, image=4, weights=2, kernel=3, biases=2, strides=(1, 2)),
    "bias1": World(4, 1, image=4, weights=2, kernel=1, biases=2, strides=(1, 2)),
}


def concrete(shape: SymShape, n: int) -> tuple[int, ...]:
    """A symbolic shape at size `n`."""
    return tuple(c * n + k for c, k in shape)


def op_kinds(ops: Sequence[str], rank: int, kernels: Sequence[int] = (3,), strides: Sequence[int] = (1,),
             biased: bool = False) -> tuple[OpKind, ...]:
    """The op kinds of `ops` in a world of `rank`: matmul and conv2d with activation none or relu, conv2d per
    kernel, stride and padding (SAME, VALID; `biased`: also HALF where it differs from both, and every conv with
    a bias input), concat and split per symbolic axis (`biased`: also concat of rank-1 biases), transpose of a
    matrix (rank 2; the rank-4 world's two symbolic axes are a conv's channels, which no IR transpose swaps alone),
    relu, sigmoid and tanh. ValueError naming an op the pattern format (and so the IR's rule machinery) cannot
    express."""
    unknown = [op for op in ops if op not in GENERATE_OPS]
    if unknown:
        raise ValueError(f"cannot generate rules over {unknown}: the pattern format expresses {list(GENERATE_OPS)}")
    kinds: list[OpKind] = []
    for op in dict.fromkeys(ops):
        if op == "matmul" and rank == 2:
            kinds += [OpKind(f"matmul_{a}", "matmul", 2, (("activation", a),)) for a in ("none", "relu")]
        elif op == "conv2d" and rank == 4:
            paddings = ("SAME", "VALID", "HALF") if biased else ("SAME", "VALID")
            kinds += [OpKind(f"conv{k}s{s}_{p.lower()}_{a}{'_b' * biased}", "conv2d", 2 + biased, (
                ("activation", a), ("kernel", (k, k)), ("padding", p), ("stride", (s, s))))
                for k in kernels for s in strides for p in paddings for a in ("none", "relu")
                if canonical_padding(p, (k, k), (s, s)) == p and not (p == "SAME" and k == 1)]
        elif op in ("add", "mul"):
            kinds.append(OpKind(op, op, 2, (), True))
        elif op in UNARY_OPS:
            kinds.append(OpKind(op, op, 1))
        elif op == "concat":
            kinds += [OpKind(f"concat{a}", "concat", 2, (("axis", a), ("rank", rank))) for a in (0, 1)]
            kinds += [OpKind("vconcat", "concat", 2, (("axis", 0), ("rank", 1)))] * biased
        elif op == "split":
            kinds += [OpKind(f"split{a}", "split", 1, (("axis", a), ("parts", 2))) for a in (0, 1)]
        elif op == "transpose" and rank == 2:
            kinds.append(OpKind("transpose", "transpose", 1, (("perm", (1, 0)),)))
    return tuple(kinds)


def _window(size: int, kernel: int, stride: int, padding: str) -> int | None:
    pads = conv_pads(padding, (size, size), (kernel, kernel), (stride, stride))[::2]
    out = (size + sum(pads) - kernel) // stride + 1
    return out if out >= 1 else None


def split_parts(kind: OpKind, shape: SymShape, split_size: int) -> tuple[SymShape, SymShape]:
    """The two output shapes of a split of `shape` whose part 0 has coefficient `split_size` on the kind's axis."""
    axis = kind.attr("axis")
    return tuple(shape[:axis] + ((size, 0),) + shape[axis + 1:]
                 for size in (split_size, shape[axis][0] - split_size))  # type: ignore[return-value]


def infer(kind: OpKind, shapes: Sequence[SymShape], split_size: int = 0) -> SymShape | None:
    """The symbolic output shape of `kind` on `shapes`, or None if ill typed (add and mul need equal shapes, as
    TASO's element-wise ops and the pattern format do). A split's shape is its input's; `split_parts` gives its
    outputs' shapes for `split_size`, the coefficient of part 0."""
    a = shapes[0]
    if kind.op in ("add", "mul"):
        return a if a == shapes[1] else None
    if kind.op in UNARY_OPS:
        return a
    if kind.op == "transpose":
        return tuple(a[p] for p in kind.attr("perm")) if len(a) == len(kind.attr("perm")) else None
    if kind.op == "matmul":
        b = shapes[1]
        return (a[0], b[1]) if a[1] == b[0] else None
    if kind.op == "concat":
        b, axis = shapes[1], kind.attr("axis")
        if len(a) != kind.attr("rank") or len(a) != len(b) or any(
                x != y for i, (x, y) in enumerate(zip(a, b)) if i != axis):
            return None
        return a[:axis] + ((a[axis][0] + b[axis][0], a[axis][1] + b[axis][1]),) + a[axis + 1:]
    if kind.op == "split":
        axis = kind.attr("axis")
        return a if axis < len(a) and a[axis][1] == 0 and 0 < split_size < a[axis][0] else None
    if kind.op == "conv2d":
        w = shapes[1]
        k, s = kind.attr("kernel")[0], kind.attr("stride")[0]
        if len(a) != 4 or len(w) != 4 or w[1] != a[1] or w[2] != (0, k) or w[3] != (0, k) or a[2][0] or a[3][0]:
            return None
        if kind.arity == 3 and shapes[2] != (w[0],):
            return None
        h, wd = (_window(a[i][1], k, s, kind.attr("padding")) for i in (2, 3))
        return None if h is None or wd is None else (a[0], w[0], (0, h), (0, wd))
    raise ValueError(f"no shape rule for {kind.op!r}")


@dataclass
class Terms:
    """Interned tensors: `(kind index or INPUT or SPLIT_PART, argument ids, split size)` and a symbolic shape per
    id; ids 0..inputs-1 are the world's inputs."""

    world: World
    kinds: tuple[OpKind, ...]
    entries: list[tuple[int, tuple[int, ...], int]] = field(default_factory=list)
    shapes: list[SymShape] = field(default_factory=list)
    index: dict[tuple[int, tuple[int, ...], int], int] = field(default_factory=dict)
    _reads: dict[int, frozenset[int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for i, shape in enumerate(self.world.shapes):
            self.intern((INPUT, (i,), 0), shape)

    def intern(self, entry: tuple[int, tuple[int, ...], int], shape: SymShape) -> int:
        """The id of a term, adding it if new."""
        if entry not in self.index:
            self.index[entry] = len(self.entries)
            self.entries.append(entry)
            self.shapes.append(shape)
        return self.index[entry]

    def ops_of(self, tensor: int) -> frozenset[int]:
        """The op terms a tensor's value depends on (itself included)."""
        kind, args, _ = self.entries[tensor]
        if kind == INPUT:
            return frozenset()
        if kind == SPLIT_PART:
            return self.ops_of(args[0])
        return frozenset({tensor}).union(*(self.ops_of(a) for a in args))

    def parts(self, split: int) -> tuple[int, int]:
        """The two output tensors of a split op term."""
        return tuple(self.index[(SPLIT_PART, (split,), j)] for j in (0, 1))  # type: ignore[return-value]

    def is_split(self, term: int) -> bool:
        """Whether an op term is a split (whose outputs are its two part tensors)."""
        kind = self.entries[term][0]
        return kind >= 0 and self.kinds[kind].op == "split"

    def inputs_of(self, tensor: int) -> frozenset[int]:
        """The world inputs a tensor reads."""
        if tensor not in self._reads:
            kind, args, _ = self.entries[tensor]
            self._reads[tensor] = (frozenset({tensor}) if kind == INPUT
                                   else frozenset().union(*(self.inputs_of(a) for a in args)))
        return self._reads[tensor]


def outputs(graph: frozenset[int], terms: Terms) -> tuple[int, ...]:
    """The tensors of a graph that no op of it reads: its outputs, sorted."""
    read = {a for t in graph for a in terms.entries[t][1]}
    tensors = [p for t in graph for p in (terms.parts(t) if terms.is_split(t) else (t,))]
    return tuple(sorted(t for t in tensors if t not in read))


def connected(graph: frozenset[int], terms: Terms) -> bool:
    """Whether the ops and the inputs they read form one connected piece (the matcher needs it of a source)."""
    parent = {t: t for t in graph}
    parent.update({a: a for t in graph for a in terms.entries[t][1]})

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for t in graph:
        for a in terms.entries[t][1]:
            parent[find(a)] = find(t)
    return len({find(t) for t in graph}) == 1


def _extensions(graph: frozenset[int], terms: Terms) -> Iterator[int]:
    available = list(range(terms.world.count)) + sorted(
        t for t in graph if terms.kinds[terms.entries[t][0]].op != "split")
    for k, kind in enumerate(terms.kinds):
        if kind.arity == 1:
            arg_lists: Any = ((t,) for t in available)
        elif kind.arity == 3:  # a biased conv: an activation of the world's image size, a weight, a bias
            image = (0, terms.world.image)
            arg_lists = itertools.product(
                [t for t in available if len(terms.shapes[t]) == 4 and terms.shapes[t][2:] == (image, image)],
                [t for t in available if len(terms.shapes[t]) == 4 and terms.shapes[t][2:] != (image, image)],
                [t for t in available if len(terms.shapes[t]) == 1])
        elif kind.commutative:
            arg_lists = itertools.combinations_with_replacement(available, 2)
        else:
            arg_lists = itertools.product(available, repeat=2)
        for args in arg_lists:
            shapes = [terms.shapes[a] for a in args]
            if kind.op == "split" and kind.attr("axis") >= len(shapes[0]):
                continue
            sizes = range(1, shapes[0][kind.attr("axis")][0]) if kind.op == "split" else (0,)
            for size in sizes:
                shape = infer(kind, shapes, size)
                if shape is not None:
                    term = terms.intern((k, tuple(args), size), shape)
                    if kind.op == "split":
                        for j, part in enumerate(split_parts(kind, shape, size)):
                            terms.intern((SPLIT_PART, (term,), j), part)
                    yield term


def enumerate_graphs(terms: Terms, max_ops: int, progress=None) -> list[list[frozenset[int]]]:
    """Every well-typed graph of 1..max_ops ops, by size (`result[m - 1]`: the graphs of m ops). ValueError if
    `max_ops` < 1 or no graph types in the world."""
    if max_ops < 1:
        raise ValueError(f"max_ops must be at least 1, got {max_ops}")
    levels: list[list[frozenset[int]]] = []
    frontier: list[frozenset[int]] = [frozenset()]
    for _ in range(max_ops):
        seen: set[frozenset[int]] = set()
        for graph in frontier:
            for term in _extensions(graph, terms):
                if term not in graph:
                    seen.add(graph | {term})
            if progress is not None:
                progress(1)
        frontier = list(seen)  # sets of ints iterate in insertion-determined order: runs repeat
        levels.append(frontier)
    if not levels[0]:
        raise ValueError(f"no op of {[k.name for k in terms.kinds]} types on the world's inputs "
                         f"(rank {terms.world.rank}, shapes {terms.world.shapes})")
    return levels
