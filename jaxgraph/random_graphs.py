"""Seeded random computation graphs that every rewrite rule can fire on, for parity tests and as instances.

`random_graph(seed, blocks=6)` strings `blocks` randomly chosen blocks over a pool of live tensors: an image path
(`[1, C, H, W]`: convolutions with and without bias, 1x1 and 3x3 kernels, strides 1 and 2, SAME, VALID and
other paddings, grouped convolutions, batch norms, constant scales and shifts in either operand order, pools,
residual adds, sibling convolutions on one tensor) and a sequence path (`[S, D]` and per-head `[h, S, d]`:
sibling matmuls of different widths, linears with biases, matmul chains, attention with transpose, softmax and
batched matmuls, layernorm, gelu). The shapes a rule's matcher has to get right are there on purpose: producers
with several outputs (`split`, whose outputs other than 0 feed every rule's root and operands: image tensors,
convolution weights and biases, matmul operands), weights shared by two ops, weights computed by the weight-only
ops (`enlarge`, `merge_gconv`, `bn_fold_weight`, `bn_fold_bias`), tensors with several consumers, nested splits
and concats that rejoin a split. Every tensor that nothing reads ends flattened in one concat, the graph's single
output, so graphs of one seed range share a `JaxEnv` layout. Every op of `OP_TYPES` but `opaque` (an ONNX op
carried verbatim, which no rule reads) appears across a few seeds.

`random_taso_graph` adds op soups (matmuls or 3x3 convs, adds, muls, relus and concats on axis 0 or 1 over shared
operands) as half the blocks, for TASO's generated patterns (`jaxgraph.patterns`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from jaxgraph.graph import Graph, GraphBuilder, Ref
from jaxsched.common.arguments import integer

MAX_CONCAT = 4  # the widest concat the generator writes (the single output is a tree of them)


class _Generator:
    """The builder, the random stream and the pools of live image and sequence tensors."""

    def __init__(self, seed: int, channels: int, image_size: int, features: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.b = GraphBuilder()
        self.reads: dict[Ref, int] = {}  # consumers of each non-constant tensor an op made
        self.constants: set[Ref] = set()
        self.images: list[Ref] = []
        self.sequences: list[Ref] = []
        self.weights = 0
        x = self.b.input("x", (1, channels, image_size, image_size))
        s = self.b.input("s", (4, features))
        self.images.append(x)
        self.sequences.append(s)

    # ------------------------------------------------------------ primitives

    def shape(self, ref: Ref) -> tuple[int, ...]:
        return self.b.shape(ref)

    def weight(self, shape: tuple[int, ...], positive: bool = False) -> Ref:
        self.weights += 1
        low = 0.5 if positive else -1.0
        ref = self.b.weight(f"w{self.weights}", self.rng.uniform(low, 1.5, shape).astype(np.float32))
        self.constants.add(ref)
        return ref

    def op(self, op: str, inputs: list[Ref], **attrs) -> Ref:
        return self.outputs(op, inputs, **attrs)[0]

    def outputs(self, op: str, inputs: list[Ref], **attrs) -> tuple[Ref, ...]:
        refs = self.b.add_outputs(op, inputs, **attrs)
        for ref in inputs:
            if ref in self.reads:
                self.reads[ref] += 1
        if all(ref in self.constants for ref in inputs):
            self.constants.update(refs)
        else:
            self.reads.update(dict.fromkeys(refs, 0))
        return refs

    def pick(self, pool: list[Ref]) -> Ref:
        return pool[int(self.rng.integers(len(pool)))]

    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]

    def constant_weight(self, shape: tuple[int, ...], positive: bool = False) -> Ref:
        """A weight of `shape`, sometimes as output 1 of a split of a larger constant, or computed by a weight-only
        op, so rules read constants through several outputs and ops."""
        if self.coin(0.3):
            axis = 0
            extra = self.weight((shape[0] + 1,) + shape[1:], positive)
            return self.outputs("split", [extra], axis=axis, sizes=(1, shape[0]))[1]
        return self.weight(shape, positive)

    def conv_weight(self, out: int, channels: int, kernel: int, groups: int = 1) -> Ref:
        """An OIHW weight, sometimes enlarged from 1x1, merged from a grouped weight or folded from a batch norm."""
        kind = self.rng.random()
        if kind < 0.1 and kernel == 3:
            return self.op("enlarge", [self.weight((out, channels // groups, 1, 1))], kernel=(3, 3))
        if kind < 0.2 and groups == 1 and out % 2 == 0 and channels % 2 == 0:
            return self.op("merge_gconv", [self.weight((out, channels // 2, kernel, kernel))], groups=2, count=2)
        if kind < 0.3:
            w = self.weight((out, channels // groups, kernel, kernel))
            return self.op("bn_fold_weight", [w, self.weight((out,)), self.weight((out,), positive=True)])
        return self.constant_weight((out, channels // groups, kernel, kernel))

    def bias(self, out: int) -> Ref:
        if self.coin(0.2):
            return self.op("bn_fold_bias", [self.weight((out,)) for _ in range(3)] + [self.weight((out,), True)])
        return self.constant_weight((out,))

    def conv(self, x: Ref, out: int, kernel: int, stride: int = 1, padding: str = "SAME", groups: int = 1,
             bias: bool = False, activation: str = "none", weight: Ref | None = None) -> Ref:
        channels, size = self.shape(x)[1], self.shape(x)[2]
        kernel = min(kernel, size) if padding == "VALID" else kernel
        pads = {"SAME": ((kernel - 1) // 2,) * 4, "VALID": (0, 0, 0, 0), "OTHER": (0, 0, 1, 1)}[padding]
        weight = self.conv_weight(out, channels, kernel, groups) if weight is None else weight
        inputs = [x, weight] + ([self.bias(out)] if bias else [])
        return self.op("conv2d", inputs, stride=(stride, stride), pads=pads, groups=groups, activation=activation)

    def image(self) -> Ref:
        return self.pick(self.images)

    def sequence(self) -> Ref:
        return self.pick(self.sequences)

    # ------------------------------------------------------------ image blocks

    def conv_epilogue(self) -> None:
        """conv, then a relu, batch norm (+ relu), constant scale or shift (either order), activation or nothing."""
        x = self.image()
        channels, size = self.shape(x)[1:3]
        stride = 2 if size >= 4 and self.coin(0.3) else 1
        y = self.conv(x, self.choice([channels, max(2, channels // 2)]), self.choice([1, 3]), stride,
                      self.choice(["SAME", "SAME", "VALID", "OTHER"]), bias=self.coin(0.4))
        out = self.shape(y)[1]
        kind = self.choice(["relu", "batchnorm", "mul", "add", "sigmoid", "tanh", "clip", "gelu", "none"])
        if kind == "batchnorm":
            y = self.op("batchnorm", [y, self.bias(out), self.bias(out), self.bias(out),
                                      self.constant_weight((out,), positive=True)])
            y = self.op("relu", [y]) if self.coin() else y
        elif kind in ("mul", "add"):
            shape = self.choice([(1,), (1, out, 1, 1), (out, 1, 1)]) if kind == "mul" else self.choice(
                [(1, out, 1, 1), (out, 1, 1)])
            c = self.constant_weight(shape)
            y = self.op(kind, [y, c] if self.coin() else [c, y])
        elif kind == "clip":
            y = self.op("clip", [y], min=0.0, max=6.0)
        elif kind != "none":
            y = self.op(kind, [y])
        self.images.append(y)

    def group_conv(self) -> None:
        x = self.image()
        channels, size = self.shape(x)[1:3]
        groups = self.choice([g for g in (2, 4) if channels % g == 0] or [1])
        stride = 2 if size >= 4 and self.coin() else 1
        self.images.append(self.conv(x, channels, 3, stride, "SAME", groups, self.coin(),
                                     self.choice(["none", "relu"])))

    def sibling_convs(self) -> None:
        """Two or three convs on one tensor (equal kernels or 1x1 and 3x3, centred), same activation; their
        results are concatenated (through relus or not) or stay apart."""
        x = self.image()
        channels = self.shape(x)[1]
        activation, bias = self.choice(["none", "relu"]), self.coin()
        stride = self.choice([1, 1, 2]) if self.shape(x)[2] >= 4 else 1
        branches = [self.conv(x, self.choice([channels, max(2, channels // 2)]), self.choice([1, 3]), stride,
                              "SAME", bias=bias, activation=activation) for _ in range(self.choice([2, 2, 3]))]
        if self.coin():
            branches = [self.op("relu", [y]) for y in branches] if self.coin() else branches
            self.images.append(self.op("concat", branches, axis=1))
        else:
            self.images.extend(branches)

    def split_parts(self) -> None:
        """A channel split whose parts 1 and 2 feed rule roots and operands: convs with epilogues, a sibling pair,
        a split of a part (SplitOfSplit), concats of relus of parts, the parts rejoined in order (SplitConcat)."""
        x = self.image()
        channels = self.shape(x)[1]
        if channels < 3:
            return
        sizes = (channels // 2, channels - channels // 2) if self.coin() else (
            channels - 2 * (channels // 4), channels // 4, channels // 4)
        parts = self.outputs("split", [x], axis=1, sizes=sizes)
        k = len(parts) - 1
        for use in self.rng.permutation(6)[:3]:
            part = parts[int(self.rng.integers(1, len(parts)))]
            if use == 0:
                self.images.append(self.op("relu", [self.conv(part, self.shape(part)[1], 3)]))
            elif use == 1:
                c = self.constant_weight((1, self.shape(part)[1], 1, 1))
                self.images.append(self.op("mul", [self.conv(part, self.shape(part)[1], 1), c]))
            elif use == 2:
                self.images.extend(self.conv(part, 2, size, bias=True) for size in (1, 3))
            elif use == 3 and self.shape(part)[1] >= 2:
                half = self.shape(part)[1] // 2
                inner = self.outputs("split", [part], axis=1, sizes=(half, self.shape(part)[1] - half))
                self.images.extend(inner)
            elif use == 4:
                self.images.append(self.op("concat", [self.op("relu", [p]) for p in parts[-2:]], axis=1))
            else:
                self.images.append(self.op("concat", list(parts), axis=1))
        self.images.append(parts[k])

    def conv_add(self) -> None:
        """conv(a) + conv(b) of equal shapes (MergeConvsIntoAdd), or a residual add(x, relu(conv(x)))."""
        a = self.image()
        channels, size = self.shape(a)[1:3]
        same = [r for r in self.images if self.shape(r)[2:] == self.shape(a)[2:]]
        if self.coin():
            b = self.pick(same)
            kernel, bias = self.choice([1, 3]), self.coin()
            self.images.append(self.op("add", [self.conv(a, channels, kernel, bias=bias),
                                               self.conv(b, channels, kernel, bias=bias)]))
        else:
            self.images.append(self.op("add", [a, self.op("relu", [self.conv(a, channels, 3)])]))

    def shared_weight(self) -> None:
        """One weight read by two convs on different tensors of equal channels."""
        x = self.image()
        channels = self.shape(x)[1]
        others = [r for r in self.images if self.shape(r)[1] == channels]
        w = self.conv_weight(channels, channels, 3)
        for source in (x, self.pick(others)):
            self.images.append(self.op("relu", [self.conv(source, channels, 3, weight=w)]))

    def pool(self) -> None:
        x = self.image()
        if self.shape(x)[2] < 2:
            return
        op = self.choice(["maxpool2d", "avgpool2d"])
        kernel, stride = self.choice([(2, 2), (3, 1)])
        pad = 1 if kernel == 3 else 0
        attrs = dict(count_include_pad=self.coin()) if op == "avgpool2d" else {}
        self.images.append(self.op(op, [x], kernel=(kernel, kernel), stride=(stride, stride), pads=(pad,) * 4,
                                   **attrs))

    def to_sequence(self) -> None:
        """An image as a sequence: [1, C, H, W] -> [H * W, C] (transpose, reshape)."""
        x = self.image()
        _, channels, h, w = self.shape(x)
        t = self.op("transpose", [x], perm=(0, 2, 3, 1))
        self.sequences.append(self.op("reshape", [t], shape=(h * w, channels)))

    # ------------------------------------------------------------ sequence blocks

    def sibling_matmuls(self) -> None:
        """x @ A, x @ B (, x @ C) of different widths; with bias adds (linears) or not; sometimes x is part 1 of a
        split."""
        x = self.sequence()
        if self.coin(0.3) and self.shape(x)[-1] >= 2:
            d = self.shape(x)[-1]
            x = self.outputs("split", [x], axis=-1, sizes=(d // 2, d - d // 2))[1]
        d = self.shape(x)[-1]
        linear = self.coin()
        activation = "none" if linear else self.choice(["none", "none", "relu"])
        for _ in range(self.choice([2, 2, 3])):
            width = self.choice([4, 6, 8])
            y = self.op("matmul", [x, self.constant_weight((d, width))], activation=activation)
            if linear:
                b = self.constant_weight((width,))
                y = self.op("add", [y, b] if self.coin() else [b, y])
            self.sequences.append(y)

    def matmul_chain(self) -> None:
        x = self.sequence()
        d = self.shape(x)[-1]
        y = self.op("matmul", [x, self.constant_weight((d, 8))])
        self.sequences.append(self.op("matmul", [y, self.constant_weight((8, self.choice([4, 8])))],
                                      activation=self.choice(["none", "relu"])))

    def attention(self) -> None:
        """Two-head attention: projections, reshape and transpose to heads, scaled scores, softmax, batched matmul,
        layernorm and gelu."""
        x = self.sequence()
        s, d = self.shape(x)
        heads, head = 2, 4
        projected = [self.op("matmul", [x, self.constant_weight((d, heads * head))]) for _ in range(3)]
        q, k, v = (self.op("transpose", [self.op("reshape", [p], shape=(s, heads, head))], perm=(1, 0, 2))
                   for p in projected)
        scores = self.op("matmul", [q, self.op("transpose", [k], perm=(0, 2, 1))])
        scores = self.op("softmax", [self.op("mul", [scores, self.weight((1,), positive=True)])], axis=-1)
        context = self.op("matmul", [scores, v])
        y = self.op("reshape", [self.op("transpose", [context], perm=(1, 0, 2))], shape=(s, heads * head))
        y = self.op("layernorm", [y, self.weight((heads * head,), True), self.weight((heads * head,))])
        self.sequences.append(self.op("gelu", [y]) if self.coin() else y)

    def sequence_epilogue(self) -> None:
        x = self.sequence()
        kind = self.choice(["relu", "sigmoid", "tanh", "softmax", "add"])
        if kind == "add":
            others = [r for r in self.sequences if self.shape(r) == self.shape(x)]
            self.sequences.append(self.op("add", [x, self.pick(others)]))
        else:
            self.sequences.append(self.op(kind, [x]))

    # ------------------------------------------------------------ TASO's generated patterns (`random_taso_graph`)

    def soup(self) -> None:
        """A few random ops among matmul (or 3x3 SAME conv2d), add, mul, relu and concat on axis 0 or 1, over one
        sequence (or image), tensors of its shape, square (or 3x3 OIHW) weights and each other's results, the
        latest results preferred: chains, shared operands, sums of products and concats as TASO's generated
        patterns have them. Operands that do not fit are redrawn."""
        image = self.coin()
        x = self.image() if image else self.sequence()
        shape = self.shape(x)
        width = shape[1] if image else shape[-1]
        pool = [x] + [self.pick(self.images if image else self.sequences) for _ in range(2)]
        pool += [self.weight((width, width, 3, 3) if image else (width, width)) for _ in range(2)]
        pool += [self.weight(shape)]
        made: list[Ref] = []
        for _ in range(int(self.rng.integers(4, 10))):
            for _ in range(20):
                op = self.choice(["conv2d" if image else "matmul", "conv2d" if image else "matmul", "add", "mul",
                                  "relu", "concat"])
                inputs = [self.pick(made[-2:] if made and self.coin(0.6) else pool)
                          for _ in range(1 if op == "relu" else 2)]
                attrs = {"axis": self.choice([0, 1])} if op == "concat" else {}
                if op in ("matmul", "conv2d"):
                    attrs["activation"] = self.choice(["none", "none", "relu"])
                if op == "conv2d":
                    attrs["pads"] = (1, 1, 1, 1)
                try:
                    made.append(self.op(op, inputs, **attrs))
                except ValueError:
                    continue
                pool.append(made[-1])
                break
        for ref in made:
            if self.shape(ref) == shape:
                (self.images if image else self.sequences).append(ref)

    # ------------------------------------------------------------ the single output

    def output(self) -> Ref:
        """Every live tensor nothing reads, flattened to [1, n] and joined by concats of at most `MAX_CONCAT`."""
        loose = [r for r, count in self.reads.items() if count == 0]
        flat = [self.op("reshape", [r], shape=(1, int(np.prod(self.shape(r))))) for r in loose]
        if not flat:
            flat = [self.op("reshape", [r], shape=(1, int(np.prod(self.shape(r))))) for r in (self.images[0],)]
        while len(flat) > 1:
            flat = [self.op("concat", flat[i:i + MAX_CONCAT], axis=1) if len(flat[i:i + MAX_CONCAT]) > 1
                    else flat[i] for i in range(0, len(flat), MAX_CONCAT)]
        return flat[0]


_BLOCKS: tuple[Callable[[_Generator], None], ...] = (
    _Generator.conv_epilogue, _Generator.conv_epilogue, _Generator.group_conv, _Generator.sibling_convs,
    _Generator.split_parts, _Generator.split_parts, _Generator.conv_add, _Generator.shared_weight, _Generator.pool,
    _Generator.to_sequence, _Generator.sibling_matmuls, _Generator.sibling_matmuls, _Generator.matmul_chain,
    _Generator.attention, _Generator.sequence_epilogue,
)

_TASO_BLOCKS = _BLOCKS + (_Generator.soup,) * len(_BLOCKS)


def random_graph(seed: int, blocks: int = 6, channels: int = 8, image_size: int = 8, features: int = 8) -> Graph:
    """A random graph of `blocks` blocks (see the module doc) on an image input `x` [1, channels, image_size,
    image_size] and a sequence input `s` [4, features]; one output `y`. The same arguments give the same graph.

    ValueError for sizes no block can use: `blocks` < 1, `channels` < 4 or odd, `image_size` < 4, `features` < 2.
    """
    return _generate(seed, blocks, channels, image_size, features, _BLOCKS)


def random_taso_graph(seed: int, blocks: int = 6, channels: int = 4, image_size: int = 4, features: int = 4) -> Graph:
    """`random_graph` whose blocks are half random op soups (`_Generator.soup`: matmuls or 3x3 convs, adds, muls,
    relus and concats over shared operands), where TASO's generated patterns (`jaxgraph.patterns`) find
    locations. Same arguments and errors."""
    return _generate(seed, blocks, channels, image_size, features, _TASO_BLOCKS)


def _generate(seed, blocks, channels, image_size, features, choices) -> Graph:
    seed = integer("seed", seed, 0)
    blocks = integer("blocks", blocks, 1)
    channels = integer("channels", channels, 4)
    image_size = integer("image_size", image_size, 4)
    features = integer("features", features, 2)
    if channels % 2:
        raise ValueError(f"channels must be even (grouped and split convolutions halve it), got {channels}")
    gen = _Generator(seed, channels, image_size, features)
    for _ in range(blocks):
        gen.choice(choices)(gen)
    return gen.b.build({"y": gen.output()})
