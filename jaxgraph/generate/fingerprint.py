"""Fingerprint every enumerated tensor in one jitted interpreter, vmapped over padded graphs.

Each tensor's term is lowered to a fixed-length program (op code, argument slots and split sizes per step) over
a buffer of slots padded to the largest shape of its bucket (buckets: the power-of-two extent of the symbolic
axes, so a few compilations serve every graph). The interpreter computes in the ring of integers modulo 2^32
(uint32 arithmetic wraps), so two terms equal as polynomials get equal fingerprints exactly; relu is a fixed
pseudo-random idempotent map (`f(f(v)) = f(v)`, the axiom relu obeys), so terms equal by relu's elementwise
idempotence collide too. A fingerprint is the symbolic output shape and two random linear forms of the output
(two seeds): equal fingerprints make a candidate, which `verify` then proves or refutes.
"""

from __future__ import annotations

import math
from functools import lru_cache, partial
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxgraph.generate.enumerate import INPUT, SPLIT_PART, OpKind, Terms, concrete

SIZE = 2  # the symbol n at which tensors are fingerprinted
_TAG, _LOW = np.uint32(0xA5), np.uint32(0xFF)
Fingerprint = tuple


def _mix(x: jax.Array) -> jax.Array:
    """A 32-bit avalanche mix (murmur3's finaliser)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def relu_map(v: jax.Array, seed: jax.Array) -> jax.Array:
    """The idempotent stand-in for relu: values tagged in their low byte are fixed points; others map to a
    pseudo-random tagged value."""
    return jnp.where((v & _LOW) == _TAG, v, (_mix(v ^ seed) & ~_LOW) | _TAG)


def _position_hash(shape: tuple[int, ...], salt: jax.Array) -> jax.Array:
    """A pseudo-random uint32 per logical position, independent of the buffer it is padded into."""
    index = jnp.zeros(shape, jnp.uint32)
    for axis, prime in zip(range(len(shape)), (0x9E3779B1, 0x7FEB352D, 0x846CA68B, 0x27D4EB2F)):
        index = index + lax.broadcasted_iota(jnp.uint32, shape, axis) * jnp.uint32(prime)
    return _mix(_mix(index + salt))


def _mask(value: jax.Array, size: jax.Array) -> jax.Array:
    keep = jnp.ones(value.shape, bool)
    for axis in range(value.ndim):
        keep &= lax.broadcasted_iota(jnp.int32, value.shape, axis) < size[axis]
    return jnp.where(keep, value, jnp.uint32(0))


def _conv(kind: OpKind, x, w, size_x, seed):
    k, s = kind.attr("kernel")[0], kind.attr("stride")[0]
    image = x.shape[2]
    if kind.attr("padding") == "SAME":
        pads = [jnp.maximum(((size_x[d] + s - 1) // s - 1) * s + k - size_x[d], 0) // 2 for d in (2, 3)]
    else:
        pads = [jnp.int32(0), jnp.int32(0)]
    padded = jnp.pad(x, ((0, 0), (0, 0), (k, k), (k, k)))
    window = lax.dynamic_slice(padded, (0, 0, k - pads[0], k - pads[1]), x.shape[:2] + (image + k - 1,) * 2)
    y = lax.conv_general_dilated(window, w[:, :, :k, :k], (s, s), "VALID",
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    y = jnp.pad(y, ((0, 0), (0, 0), (0, image - y.shape[2]), (0, image - y.shape[3])))
    return relu_map(y, seed) if kind.attr("activation") == "relu" else y


def _branch(kind: OpKind) -> Callable:
    op = kind.op
    if op == "matmul":
        return lambda a, b, sa, size, part, seed: (
            relu_map(a @ b, seed) if kind.attr("activation") == "relu" else a @ b)
    if op == "conv2d":
        return lambda a, b, sa, size, part, seed: _conv(kind, a, b, sa, seed)
    if op == "add":
        return lambda a, b, sa, size, part, seed: a + b
    if op == "mul":
        return lambda a, b, sa, size, part, seed: a * b
    if op == "relu":
        return lambda a, b, sa, size, part, seed: relu_map(a, seed)
    axis = kind.attr("axis")
    if op == "concat":
        return lambda a, b, sa, size, part, seed: a + jnp.roll(b, sa[axis], axis=axis)
    return lambda a, b, sa, size, part, seed: jnp.where(part == 0, a, jnp.roll(a, -size, axis=axis))


@lru_cache(maxsize=None)
def _interpreter(kinds: tuple[OpKind, ...], inputs: int, buffer: tuple[int, ...], steps: int):
    branches = [_branch(k) for k in kinds]

    def run(code, arg_a, arg_b, size, part, sizes, seed):
        slots = [_mask(_mix(_position_hash(buffer, seed[0] + jnp.uint32(i * 0x3C6EF372))), sizes[i])
                 for i in range(inputs)]
        for step in range(steps):
            a = jnp.stack(slots)[arg_a[step]]
            b = jnp.stack(slots)[arg_b[step]]
            sa = sizes[arg_a[step]]
            outs = jnp.stack([f(a, b, sa, size[step], part[step], seed[1]) for f in branches])
            value = jnp.where(code[step] < 0, a, outs[jnp.clip(code[step], 0, len(kinds) - 1)])
            slots.append(_mask(value, sizes[inputs + step]))
        result = slots[-1]
        return jnp.stack([jnp.sum(result * _position_hash(buffer, seed[2])),
                          jnp.sum(result * _position_hash(buffer, seed[3]))])

    return jax.jit(jax.vmap(partial(run), in_axes=(0, 0, 0, 0, 0, 0, None)))


def lower(terms: Terms, tensor: int, steps: int, n: int = SIZE):
    """The program computing `tensor`: per step its op code, argument slots, split size and part (steps padded
    at the front with copies, code -1, of the tensor itself if it is an input, else of input 0), and the concrete
    size of every slot at symbol `n`."""
    inputs = terms.world.inputs
    kind, _, index = terms.entries[tensor]
    part = index if kind == SPLIT_PART else 0
    ops = sorted(terms.ops_of(tensor))
    pad = steps - len(ops)
    slot = {i: i for i in range(inputs)}
    copied = tensor if kind == INPUT else 0
    rows = [(-1, copied, copied, 0, 0)] * pad
    sizes = [concrete(terms.shapes[i], n) for i in range(inputs)] + [concrete(terms.shapes[copied], n)] * pad
    for k, op in enumerate(ops):
        op_kind, op_args, split = terms.entries[op]
        a, b = slot[op_args[0]], slot[op_args[-1]]
        rows.append((op_kind, a, b, split * n, part))
        slot[op] = inputs + pad + k
        sizes.append(concrete(terms.shapes[tensor] if k == len(ops) - 1 else terms.shapes[op], n))
    return np.array(rows, np.int32), np.array(sizes, np.int32)


def _bucket(sizes: np.ndarray, rank: int) -> tuple[int, ...]:
    extent = 1 << max(1, math.ceil(math.log2(max(int(sizes[:, :2].max()), 1))))
    return (extent, extent) + tuple(int(d) for d in sizes[0, 2:]) if rank == 4 else (extent, extent)


def fingerprint(terms: Terms, tensors: Sequence[int], steps: int, seed: int = 0, chunk: int = 2048,
                progress: Callable[[int], None] | None = None) -> dict[int, Fingerprint]:
    """Fingerprint of every tensor in `tensors`: (symbolic shape, two uint32 random linear forms of its value),
    computed by one jitted, vmapped interpreter per bucket of padded programs."""
    rng = np.random.default_rng(seed)
    seeds = jnp.asarray(rng.integers(0, 2**32, 4, dtype=np.uint64).astype(np.uint32))
    buckets: dict[tuple[int, ...], list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for tensor in tensors:
        rows, sizes = lower(terms, tensor, steps)
        buckets.setdefault(_bucket(sizes, terms.world.rank), []).append((tensor, rows, sizes))
    result: dict[int, Fingerprint] = {}
    for buffer, programs in sorted(buckets.items()):
        run = _interpreter(terms.kinds, terms.world.inputs, buffer, steps)
        width = min(chunk, 1 << math.ceil(math.log2(len(programs))))
        for start in range(0, len(programs), width):
            batch = programs[start:start + width]
            batch = batch + [batch[-1]] * (width - len(batch))
            rows = np.stack([r for _, r, _ in batch])
            sizes = np.stack([s for _, _, s in batch])
            values = np.asarray(run(*(jnp.asarray(rows[:, :, c]) for c in range(5)), jnp.asarray(sizes), seeds))
            for (tensor, _, _), value in zip(batch, values):
                result[tensor] = (terms.shapes[tensor], int(value[0]), int(value[1]))
            if progress is not None:
                progress(min(width, len(programs) - start))
    return result
