"""Fingerprint every enumerated tensor once, op by op, in jitted JAX calls vmapped over terms of one op kind.

Tensors are interned terms, so each is computed exactly once, from its arguments' stored values: terms are taken
in order of depth (inputs, then terms over them, ...) and grouped by op kind and concrete argument shapes; each
group is one jitted, vmapped call of that kind's op alone (on device when there is one), its batch padded to a
power of two so a few compilations serve every group. Splits and their parts are slices, taken on the host.
The values are computed in the ring of integers modulo 2^32 (uint32 arithmetic wraps), so two terms equal as
polynomials get equal fingerprints exactly; relu is a fixed pseudo-random idempotent map (`f(f(v)) = f(v)`, the
axiom relu obeys), so terms equal by relu's elementwise idempotence collide too; sigmoid and tanh, of which no
axiom is used, are pseudo-random maps of their own. A fingerprint is the symbolic
shape and two random linear forms of the value (two seeds): equal fingerprints make a candidate, which `verify`
then proves or refutes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import lru_cache
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph.generate.enumerate import INPUT, SPLIT_PART, OpKind, Terms, concrete
from jaxgraph.pattern_data import conv_pads

SIZE = 2  # the symbol n at which tensors are fingerprinted
_TAG, _LOW = np.uint32(0xA5), np.uint32(0xFF)
_PRIMES = (0x9E3779B1, 0x7FEB352D, 0x846CA68B, 0x27D4EB2F)
_SALTS = {"sigmoid": np.uint32(0x68E31DA4), "tanh": np.uint32(0xB5297A4D)}
Fingerprint = tuple


def _mix(x):
    """A 32-bit avalanche mix (murmur3's finaliser), of NumPy or JAX uint32 arrays."""
    x = x ^ (x >> 16)
    x = x * np.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * np.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def relu_map(v: jax.Array, seed: jax.Array) -> jax.Array:
    """The idempotent stand-in for relu: values tagged in their low byte are fixed points; others map to a
    pseudo-random tagged value."""
    return jnp.where((v & _LOW) == _TAG, v, (_mix(v ^ seed) & ~_LOW) | _TAG)


def position_hash(shape: tuple[int, ...], salt: np.uint32) -> np.ndarray:
    """A pseudo-random uint32 per position of `shape`."""
    index = np.zeros(shape, np.uint32)
    for axis, prime in zip(range(len(shape)), _PRIMES):
        index = index + np.indices(shape, np.uint32)[axis] * np.uint32(prime)
    return _mix(_mix(index + salt))


def _conv(kind: OpKind, x: jax.Array, w: jax.Array) -> jax.Array:
    """Zero-padded convolution (NCHW, OIHW) as one contraction of patches: integer-exact on any device."""
    k, s = kind.attr("kernel")[0], kind.attr("stride")[0]
    top, left, bottom, right = conv_pads(kind.attr("padding"), x.shape[2:], (k, k), (s, s))
    x = jnp.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh, ow = (x.shape[2] - k) // s + 1, (x.shape[3] - k) // s + 1
    patches = jnp.stack([x[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]
                         for i in range(k) for j in range(k)], axis=-1)  # [n, c, oh, ow, k * k]
    return jnp.einsum("ncxyk,ock->noxy", patches, w[:, :, :k, :k].reshape(w.shape[0], w.shape[1], k * k))


@lru_cache(maxsize=None)
def _device_op(kind: OpKind) -> Callable:
    """The jitted op of one kind, vmapped over a batch of argument values (the relu seed shared, last)."""
    def one(*args):
        (a, b, *rest), seed = (args[:-1] * 2)[:max(2, kind.arity)], args[-1]  # relu: a and b the same
        if kind.op == "matmul":
            y = a @ b
        elif kind.op == "conv2d":
            y = _conv(kind, a, b) + (rest[0][None, :, None, None] if rest else 0)
        elif kind.op == "add":
            return a + b
        elif kind.op == "mul":
            return a * b
        elif kind.op == "relu":
            return relu_map(a, seed)
        elif kind.op in ("sigmoid", "tanh"):  # uninterpreted: a pseudo-random map of its own, no fixed points
            return _mix(a ^ seed ^ _SALTS[kind.op])
        elif kind.op == "concat":
            return jnp.concatenate([a, b], axis=kind.attr("axis"))
        elif kind.op == "transpose":
            return jnp.transpose(a, kind.attr("perm"))
        else:
            raise ValueError(f"no device op for {kind.op!r}")
        return relu_map(y, seed) if kind.attr("activation") == "relu" else y

    return jax.jit(jax.vmap(one, in_axes=(0,) * kind.arity + (None,)))


def _depths(terms: Terms, tensors: Sequence[int]) -> dict[int, int]:
    """Every term the tensors need (op terms, their arguments, a part's split), with its depth (inputs 0)."""
    depth: dict[int, int] = {}

    def visit(t: int) -> int:
        if t not in depth:
            kind, args, _ = terms.entries[t]
            depth[t] = 0 if kind == INPUT else max(visit(a) for a in args) + (kind != SPLIT_PART)
        return depth[t]

    for t in tensors:
        visit(t)
    return depth


class _Forms:
    """Two random linear forms (mod 2^32) of stacked values, position weights cached per shape."""

    def __init__(self, seeds: np.ndarray) -> None:
        self.seeds = seeds
        self.weights: dict[tuple[int, ...], np.ndarray] = {}

    def __call__(self, stacked: np.ndarray) -> np.ndarray:
        shape = stacked.shape[1:]
        if shape not in self.weights:
            self.weights[shape] = np.stack([position_hash(shape, s).ravel() for s in self.seeds[2:]], axis=1)
        return stacked.reshape(len(stacked), -1) @ self.weights[shape]  # uint32 matmul wraps: mod 2^32


def fingerprint(terms: Terms, tensors: Sequence[int], seed: int = 0, chunk: int = 4096,
                progress: Callable[[int], None] | None = None) -> dict[int, Fingerprint]:
    """Fingerprint of every tensor in `tensors`: (symbolic shape, two uint32 random linear forms of its value at
    symbol size `SIZE`), every needed term computed once, by one jitted vmapped call per group of one op kind."""
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, 2**32, 4, dtype=np.uint64).astype(np.uint32)
    forms = _Forms(seeds)
    depth = _depths(terms, tensors)
    wanted = set(tensors)
    values: dict[int, np.ndarray] = {}
    result: dict[int, Fingerprint] = {}

    def store(group: Sequence[int], stacked: np.ndarray) -> None:
        for t, v in zip(group, stacked):
            values[t] = v
        marked = [k for k, t in enumerate(group) if t in wanted]
        if marked:
            linear = forms(stacked[marked])
            for k, pair in zip(marked, linear):
                result[group[k]] = (terms.shapes[group[k]], int(pair[0]), int(pair[1]))

    inputs = [t for t in depth if depth[t] == 0]
    salts = [np.uint32((int(seeds[0]) + i * 0x3C6EF372) % 2**32) for i in inputs]
    for i, salt in zip(inputs, salts):  # inputs may differ in shape (weights, biases)
        store([i], _mix(position_hash(concrete(terms.shapes[i], SIZE), salt))[None])
    for level in range(1, max(depth.values(), default=0) + 1):
        groups: dict[tuple, list[int]] = defaultdict(list)
        for t in sorted(t for t, d in depth.items() if d == level and terms.entries[t][0] != SPLIT_PART):
            kind, args, size = terms.entries[t]
            groups[(kind, tuple(values[a].shape for a in args), size)].append(t)
        for (kind, _, size), group in sorted(groups.items()):
            spec = terms.kinds[kind]
            for start in range(0, len(group), chunk):
                part = group[start:start + chunk]
                args = [np.stack([values[terms.entries[t][1][j]] for t in part]) for j in range(spec.arity)]
                if spec.op == "split":
                    _split(terms, spec, part, args[0], size, store)
                else:
                    width = 1 << math.ceil(math.log2(len(part)))
                    padded = [np.concatenate([a, np.repeat(a[-1:], width - len(a), 0)]) for a in args]
                    out = _device_op(spec)(*padded, jnp.uint32(seeds[1]))
                    store(part, np.asarray(out)[:len(part)])
                if progress is not None:
                    progress(len(part))
    return result


def _split(terms: Terms, spec: OpKind, group: Sequence[int], whole: np.ndarray, size: int,
           store: Callable[[Sequence[int], np.ndarray], None]) -> None:
    """A group of splits (one kind, input shape and size): each split's value is its input, its parts the two
    slices of it."""
    store(group, whole)
    pieces = np.split(whole, [size * SIZE], axis=spec.attr("axis") + 1)
    for j, piece in enumerate(pieces):
        store([terms.parts(t)[j] for t in group], piece)
