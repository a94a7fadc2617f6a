"""Rules true only at special shapes: checked at generic points of the shapes on which the rule applies.

The prover works in a world whose tensors all have sides `n`, so it proves a rule at square shapes only. A rule
applies wherever its source matches, its target shape-infers and each replacement has the shape of what it
replaces; those are linear equalities between the free sides of the rule's inputs (their first two axes; image
axes are fixed). A rule whose identity needs more than these equalities, such as `[a | b] @ [c ; d] = [b | a] @
[d ; c]`, which holds when the blocks line up (`a`'s columns are `c`'s rows) and not when only the totals agree,
is true in the world and wrong elsewhere. `generic_shapes` solves the equalities exactly (rational elimination)
and draws random points of their solution space; `shape_error` runs both sides there in the loader's float64
evaluator. A point off every special hyperplane (a random one, with probability near 1) exposes such a rule.
"""

from __future__ import annotations

from fractions import Fraction
from math import lcm
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from jaxgraph.generate.enumerate import World
from jaxgraph.pattern_data import UNARY_OPS, Pattern, PatternOp, Tensor, check_numerics, conv_pads, parse_pattern


def _side(ops: Sequence[PatternOp], inputs: dict[int, list[np.ndarray]], equal: Callable, fixed: Callable,
          replaced: dict[Tensor, list[np.ndarray]] | None = None) -> dict[Tensor, list[np.ndarray]]:
    """Every tensor's symbolic shape on one side, its typing recorded through `equal`; `replaced` (target only):
    the shape of each target tensor's source tensor, which a split's parts take."""
    shapes: dict[Tensor, list[np.ndarray]] = {Tensor(e): v for e, v in inputs.items()}
    for k, op in enumerate(ops):
        args = [shapes[t] for t in op.inputs]
        a = args[0]
        if op.op in ("add", "mul"):
            for x, y in zip(a, args[1]):
                equal(x, y)
            out = [a]
        elif op.op in UNARY_OPS:
            out = [a]
        elif op.op == "transpose":
            out = [[a[p] for p in op.attr("perm")]]
        elif op.op == "matmul":
            equal(a[-1], args[1][-2])
            out = [a[:-1] + args[1][-1:]]
        elif op.op == "conv2d":
            w, (kh, kw), (sh, sw) = args[1], op.attr("kernel"), op.attr("stride")
            equal(a[1], w[1])
            equal(w[2], fixed(kh))
            equal(w[3], fixed(kw))
            size = (int(a[2][-1]), int(a[3][-1]))
            pads = conv_pads(op.attr("padding"), size, (kh, kw), (sh, sw))
            if len(args) == 3:
                equal(args[2][0], w[0])
            out = [[a[0], w[0], fixed((size[0] + pads[0] + pads[2] - kh) // sh + 1),
                    fixed((size[1] + pads[1] + pads[3] - kw) // sw + 1)]]
        elif op.op == "concat":
            axis = op.attr("axis")
            for b in args[1:]:
                for d, (x, y) in enumerate(zip(a, b)):
                    if d != axis:
                        equal(x, y)
            out = [[sum(b[d] for b in args) if d == axis else x for d, x in enumerate(a)]]
        else:  # a target split: its parts have the shapes of the source tensors they replace
            out = [replaced[Tensor(k, j)] for j in range(op.outputs)]
            axis = op.attr("axis")
            equal(a[axis], sum(part[axis] for part in out))
            for part in out:
                for d, (x, y) in enumerate(zip(a, part)):
                    if d != axis:
                        equal(x, y)
        for j, shape in enumerate(out):
            shapes[Tensor(k, j)] = shape
    return shapes


def _constraints(pattern: Pattern, world: World) -> tuple[int, list[np.ndarray], dict[int, list]] | None:
    """The free sides' count, the equalities between them (rows of coefficients) and each input's symbolic
    shape (a side is a vector of coefficients and a constant: external `-(i + 1)` has world input `i`'s shape,
    each of its symbolic sides free); None if two fixed sides disagree."""
    externals = sorted({t.op for side in (pattern.src, pattern.dst) for o in side for t in o.inputs if t.external},
                       reverse=True)
    world_shapes = [world.shapes[-1 - e] for e in externals]
    count = sum(c != 0 for shape in world_shapes for c, _ in shape)
    rows: list[np.ndarray] = []
    broken = []

    def fixed(value: int, index: int = -1) -> np.ndarray:
        v = np.zeros(count + 1, np.int64)
        v[index] = value
        return v

    def equal(a: np.ndarray, b: np.ndarray) -> None:
        d = a - b
        if d[:-1].any():
            rows.append(d[:-1])
        elif d[-1]:
            broken.append(d)

    inputs, free = {}, iter(range(count))
    for e, shape in zip(externals, world_shapes):
        inputs[e] = [fixed(1, next(free)) if c else fixed(k) for c, k in shape]
    source = _side(pattern.src, inputs, equal, fixed)
    replaced = {d: source[s] for s, d in pattern.mapped}
    target = _side(pattern.dst, inputs, equal, fixed, replaced)
    for s, d in pattern.mapped:
        for x, y in zip(source[s], target[d]):
            equal(x, y)
    return None if broken else (count, rows, inputs)


def _null_space(rows: list[np.ndarray], count: int) -> list[np.ndarray]:
    """An integer basis of the solutions of `rows . s = 0` (exact rational elimination)."""
    matrix = [[Fraction(int(v)) for v in row] for row in rows]
    pivots: list[int] = []
    r = 0
    for c in range(count):
        p = next((i for i in range(r, len(matrix)) if matrix[i][c] != 0), None)
        if p is None:
            continue
        matrix[r], matrix[p] = matrix[p], matrix[r]
        matrix[r] = [v / matrix[r][c] for v in matrix[r]]
        for i in range(len(matrix)):
            if i != r and matrix[i][c] != 0:
                matrix[i] = [x - matrix[i][c] * y for x, y in zip(matrix[i], matrix[r])]
        pivots.append(c)
        r += 1
    basis = []
    for c in (c for c in range(count) if c not in pivots):
        v = [Fraction(0)] * count
        v[c] = Fraction(1)
        for i, p in enumerate(pivots):
            v[p] = -matrix[i][c]
        scale = lcm(*(x.denominator for x in v))
        basis.append(np.array([int(x * scale) for x in v], np.int64))
    return basis


def generic_shapes(pattern: Pattern, world: World, rng: np.random.Generator, base: int = 6,
                   tries: int = 200) -> dict[int, tuple[int, ...]] | None:
    """Input shapes at a random point of the shapes on which the rule applies (every free side at least 1; all
    sides `base` is a point, as the rule typed in the square world). None if no such point is found."""
    found = _constraints(pattern, world)
    if found is None:
        return None
    count, rows, inputs = found
    basis = _null_space(rows, count)
    for _ in range(tries):
        sides = np.full(count, base, np.int64) + sum((int(rng.integers(-3, 4)) * v for v in basis),
                                                     np.zeros(count, np.int64))
        if sides.min() >= 1:
            point = np.append(sides, 1)
            return {e: tuple(int(x @ point) for x in shape) for e, shape in inputs.items()}
    return None


def shape_error(raw: Mapping[str, Any], world: World, seed: int = 0, points: int = 2) -> str | None:
    """Why a pattern-file entry fails at a generic point of the shapes on which it applies (both sides run in the
    loader's float64 evaluator at `points` random points), or None (also for a malformed entry: the loader's
    own check names those)."""
    try:
        pattern = parse_pattern(raw)
    except ValueError:
        return None
    rng = np.random.default_rng(seed)
    for _ in range(points):
        shapes = generic_shapes(pattern, world, rng)
        if shapes is None:
            return "no shapes on which the rule applies"
        try:
            check_numerics(pattern, rng, shapes)
        except ValueError as error:
            return f"wrong at generic shapes: {error}"
    return None

