"""Prove candidate equalities: exact polynomial identity testing over GF(2^61 - 1), relu by its axioms.

Every op of the pattern format but relu, sigmoid and tanh is a polynomial map of its inputs' entries (matmul,
conv2d with SAME, VALID or HALF zero padding and with or without a bias, which adds a degree-1 term, add, mul) or
a rearrangement of them (concat, split, transpose). Relu is not, and is treated by the axioms the rules rely on,
which `relu_axioms_hold` proves for the real relu with z3: relu is elementwise (relu of a concat is the concat of
relus, a fused activation is relu after the op) and idempotent, `relu(relu(x)) = relu(x)`. Under these axioms
relu is an uninterpreted idempotent function: each tensor is evaluated exactly in the prime field with random
inputs and with relu a lazily sampled random idempotent function (a value it returned is a fixed point, any
other value maps to a fresh random element). An identity that holds for every idempotent function holds for
relu; the converse is not needed (an identity true only of relu's particular shape, such as relu(x) * relu(-x) =
0, is left unproved and dropped). Sigmoid and tanh are element-wise and obey no axiom here: each is a lazily
sampled random function of its own, so only identities true of every element-wise function are proved
(relu(sigmoid(x)) = sigmoid(x), true of the real sigmoid, is dropped).

Error bound (Schwartz-Zippel). Let the two sides be built from at most `m` ops (degree of any entry in the
inputs and the functions' values at most `d = 2^m`), let `R` be the number of relu, sigmoid and tanh
applications over both sides (entries counted). One evaluation accepts a false identity only if either two
formally different arguments of one function take the same value (at most `R^2 / 2` pairs, each with
probability at most `d / p`), or the nonzero difference of the two sides vanishes at the random point
(probability at most `d / p`): in all at most `(R^2 / 2 + 1) d / p`.
With `p = 2^61 - 1`, `m = 3` and `R <= 10^4` that is below `2 * 10^-10`; the evaluations at the two sizes
`n = 2` and `n = 3` (`SIZES`) are independent, so a wrong candidate survives with probability below
`4 * 10^-20`. Integer coefficients of these polynomials are far below p, so identity over the field is identity
over the integers, hence over the reals. Evaluating at two sizes also checks that the identity is not an
accident of one shape; the pattern loader then checks each written rule again in float64 on sampled shapes.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from jaxgraph.generate.enumerate import SPLIT_PART, OpKind, Terms, concrete
from jaxgraph.pattern_data import conv_pads

PRIME = (1 << 61) - 1
SIZES = (2, 3)


class RandomFunction:
    """A lazily sampled random function of GF(p): each new argument maps to a fresh random element; `idempotent`:
    its values are its fixed points, f(f(x)) = f(x) (relu's axiom)."""

    def __init__(self, rng: np.random.Generator, idempotent: bool = False) -> None:
        self.rng, self.idempotent = rng, idempotent
        self.table: dict[int, int] = {}

    def __call__(self, x: int) -> int:
        if x not in self.table:
            y = int(self.rng.integers(0, PRIME))
            self.table[x] = y
            if self.idempotent:
                self.table.setdefault(y, y)
        return self.table[x]


def _conv(kind: OpKind, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    k, s = kind.attr("kernel")[0], kind.attr("stride")[0]
    pads = conv_pads(kind.attr("padding"), x.shape[2:], (k, k), (s, s))
    padded = np.zeros(x.shape[:2] + (x.shape[2] + pads[0] + pads[2], x.shape[3] + pads[1] + pads[3]), dtype=object)
    padded[:, :, pads[0]:pads[0] + x.shape[2], pads[1]:pads[1] + x.shape[3]] = x  # np.pad would insert int64 zeros
    x = padded
    oh, ow = (x.shape[2] - k) // s + 1, (x.shape[3] - k) // s + 1
    windows = np.stack([x[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]
                        for i in range(k) for j in range(k)], axis=-1)  # [n, c, oh, ow, k * k]
    patches = windows.transpose(0, 2, 3, 1, 4).reshape(x.shape[0] * oh * ow, -1)  # [n * oh * ow, c * k * k]
    out = np.dot(patches, w[:, :, :k, :k].reshape(w.shape[0], -1).T) % PRIME  # one exact dot of Python ints
    return out.reshape(x.shape[0], oh, ow, w.shape[0]).transpose(0, 3, 1, 2)


class Evaluator:
    """Exact values of interned tensors at symbol size `n`: random field inputs, relu an idempotent random
    function, every tensor computed once (memoised)."""

    def __init__(self, terms: Terms, n: int, seed: int) -> None:
        self.terms, self.n = terms, n
        rng = np.random.default_rng(seed)
        self.relu = np.vectorize(RandomFunction(rng, idempotent=True), otypes=[object])
        self.functions = {op: np.vectorize(RandomFunction(rng), otypes=[object]) for op in ("sigmoid", "tanh")}
        self.values: dict[int, np.ndarray] = {
            i: np.vectorize(int, otypes=[object])(rng.integers(0, PRIME, concrete(shape, n), dtype=np.int64))
            for i, shape in enumerate(terms.world.shapes)}

    def value(self, tensor: int) -> np.ndarray:
        """The exact value of a tensor (a split's value is its input; `part` cuts it)."""
        if tensor not in self.values:
            kind, args, size = self.terms.entries[tensor]
            self.values[tensor] = self._apply(kind, [self.value(a) for a in args], size)
        return self.values[tensor]

    def _apply(self, kind_index: int, args: Sequence[np.ndarray], size: int) -> np.ndarray:
        if kind_index == SPLIT_PART:
            raise AssertionError("split parts are applied through their split")
        kind = self.terms.kinds[kind_index]
        a = args[0]
        if kind.op == "add":
            return (a + args[1]) % PRIME
        if kind.op == "mul":
            return (a * args[1]) % PRIME
        if kind.op == "relu":
            return self.relu(a)
        if kind.op in self.functions:
            return self.functions[kind.op](a)
        if kind.op == "concat":
            return np.concatenate(args, axis=kind.attr("axis"))
        if kind.op == "transpose":
            return np.transpose(a, kind.attr("perm"))
        if kind.op == "split":
            return a  # the parts are cut by `part`
        y = np.dot(a, args[1]) % PRIME if kind.op == "matmul" else _conv(kind, a, args[1])
        if kind.arity == 3:  # a conv's bias, per output channel
            y = (y + args[2][:, None, None]) % PRIME
        return self.relu(y) if kind.attr("activation") == "relu" else y

    def part(self, tensor: int) -> np.ndarray:
        """The value of any tensor, split parts included."""
        kind, args, index = self.terms.entries[tensor]
        if kind != SPLIT_PART:
            return self.value(tensor)
        split = self.terms.entries[args[0]]
        whole = self.value(split[1][0])
        axis, cut = self.terms.kinds[split[0]].attr("axis"), split[2] * self.n
        return np.split(whole, [cut], axis=axis)[index]


def digest(value: np.ndarray) -> bytes:
    """A collision-resistant summary of an exact value (shape and entries)."""
    exact = np.ascontiguousarray(value, dtype=np.uint64)  # every entry is below 2^61: exact
    return hashlib.blake2b(repr(value.shape).encode() + exact.tobytes(), digest_size=16).digest()


class Prover:
    """Exact digests of tensors at every size of `SIZES`, for proving candidate equalities."""

    def __init__(self, terms: Terms, seed: int) -> None:
        self.evaluators = [Evaluator(terms, n, seed * 1000 + n) for n in SIZES]
        self.keys: dict[int, tuple[bytes, ...]] = {}

    def key(self, tensor: int) -> tuple[bytes, ...]:
        """A tensor's exact digests; two tensors with equal keys are equal (with the error bound above)."""
        if tensor not in self.keys:
            self.keys[tensor] = tuple(digest(e.part(tensor)) for e in self.evaluators)
        return self.keys[tensor]


def relu_axioms_hold() -> bool:
    """Prove with z3 that the real relu, max(x, 0), is idempotent (the axiom the evaluator uses besides relu
    acting elementwise, which holds by definition). False if z3 finds a counterexample."""
    import z3

    x = z3.Real("x")
    relu = lambda v: z3.If(v > 0, v, 0)  # noqa: E731
    solver = z3.Solver()
    solver.add(relu(relu(x)) != relu(x))
    return solver.check() == z3.unsat
