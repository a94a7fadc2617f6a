"""Real JAX programs to tune, each with a discrete space of knobs that change its runtime 2x or more.

* `matmul`: an n x n matmul blocked by explicit loops over row tiles `tm` and contraction tiles
  `tk` (`lax.fori_loop` + dynamic slices): small tiles pay loop overhead, large ones use the BLAS.
* `scan`: a linear recurrence h_t = a * h_{t-1} + x_t over L steps, computed in chunks of `chunk`
  steps (a dense decay matrix inside a chunk, `lax.scan` across chunks, `unroll` chunks per
  iteration): chunking trades loop steps for quadratic work per chunk (as in chunked SSM kernels).
* `xla_options`: a GELU-MLP chain compiled with XLA CPU options passed to
  `.lower().compile(compiler_options=...)`: LLVM optimisation level, preferred vector width, fast math.

`Workload.build(config)` lowers and compiles one configuration (the CPU-heavy build stage);
`Workload.features(config)` encodes it (and the workload's size, so similar workloads share a cost
model) for the learned cost model.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsched.common.arguments import integer

KINDS = ("matmul", "scan", "xla_options")
NUM_FEATURES = 4


@dataclasses.dataclass(frozen=True)
class Workload:
    """One program to tune: its `kind` (one of KINDS) and `size` (matrix side or sequence length)."""

    kind: str
    size: int

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown workload kind {self.kind!r}; known kinds are {KINDS}")
        low = {"matmul": 16, "scan": 64, "xla_options": 16}[self.kind]
        size = integer(f"workload {self.kind!r}: size", self.size, low)
        if size & (size - 1):
            raise ValueError(f"workload {self.kind!r}: size must be a power of two >= {low}, got {size}")
        object.__setattr__(self, "size", size)

    @property
    def name(self) -> str:
        """`kind-size`, the key of the workload in the tuning-record database."""
        return f"{self.kind}-{self.size}"

    def space(self) -> list[dict[str, int]]:
        """Every configuration, in a fixed order."""
        if self.kind == "matmul":
            tiles = [t for t in (4, 8, 16, 32, 64, 128, 256) if t <= self.size]
            grid = {"tm": tiles, "tk": tiles}
        elif self.kind == "scan":
            grid = {"chunk": [c for c in (1, 2, 4, 8, 16, 32, 64) if c <= self.size // 4], "unroll": [1, 2, 4, 8]}
        else:
            grid = {"opt_level": [0, 1, 2, 3], "vector_width": [64, 128, 256], "fast_math": [0, 1]}
        return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]

    def features(self, config: dict[str, int]) -> np.ndarray:
        """[NUM_FEATURES] encoding: log2 of power-of-two knobs, the others as they are, log2 of the size."""
        values = [
            float(np.log2(v)) if k in ("tm", "tk", "chunk", "unroll", "vector_width") else float(v)
            for k, v in config.items()
        ]
        return np.asarray(values + [0.0] * (NUM_FEATURES - 1 - len(values)) + [float(np.log2(self.size))])

    def inputs(self) -> tuple[jax.Array, ...]:
        """The program's arguments (fixed, so every configuration computes the same thing)."""
        key = jax.random.key(0)
        if self.kind == "matmul":
            a, b = jax.random.normal(key, (2, self.size, self.size), jnp.float32)
            return a, b
        if self.kind == "scan":
            return jnp.full((64,), 0.9, jnp.float32), jax.random.normal(key, (self.size, 64), jnp.float32)
        x, w = jax.random.normal(key, (2, self.size, self.size), jnp.float32)
        return x, w * (1.0 / float(np.sqrt(self.size)))

    def memory_bytes(self) -> int:
        """Bytes of the program's arguments and result, from their shapes (nothing is allocated): a
        lower bound on what profiling a configuration needs, to refuse at submission what cannot fit.
        Worked out once per workload (tracing takes tens of milliseconds)."""
        return _memory_bytes(self)

    def function(self, config: dict[str, int]):
        """The program for `config`, as a function of `inputs()`."""
        if self.kind == "matmul":
            return _blocked_matmul(self.size, config["tm"], config["tk"])
        if self.kind == "scan":
            return _chunked_recurrence(self.size, config["chunk"], config["unroll"])
        return _mlp_chain

    def compiler_options(self, config: dict[str, int]) -> dict[str, Any]:
        """XLA options for `.compile(compiler_options=...)` (only `xla_options` has any)."""
        if self.kind != "xla_options":
            return {}
        return {
            "xla_backend_optimization_level": config["opt_level"],
            "xla_cpu_prefer_vector_width": config["vector_width"],
            "xla_cpu_enable_fast_math": bool(config["fast_math"]),
        }

    def build(self, config: dict[str, int]) -> jax.stages.Compiled:
        """Lowers and compiles `config` (the build stage's work)."""
        lowered = jax.jit(self.function(config)).lower(*self.inputs())
        return lowered.compile(compiler_options=self.compiler_options(config) or None)


@functools.cache
def _memory_bytes(workload: Workload) -> int:
    args = jax.eval_shape(workload.inputs)
    out = jax.eval_shape(workload.function(workload.space()[0]), *args)
    return sum(int(np.prod(a.shape)) * a.dtype.itemsize for a in jax.tree.leaves((args, out)))


def _blocked_matmul(n: int, tm: int, tk: int):
    def matmul(a, b):
        def row_block(i, out):
            rows = jax.lax.dynamic_slice_in_dim(a, i * tm, tm, 0)

            def k_block(k, acc):
                return acc + jax.lax.dynamic_slice_in_dim(rows, k * tk, tk, 1) @ jax.lax.dynamic_slice_in_dim(
                    b, k * tk, tk, 0
                )

            block = jax.lax.fori_loop(0, n // tk, k_block, jnp.zeros((tm, n), a.dtype))
            return jax.lax.dynamic_update_slice_in_dim(out, block, i * tm, 0)

        return jax.lax.fori_loop(0, n // tm, row_block, jnp.zeros((n, n), a.dtype))

    return matmul


def _chunked_recurrence(length: int, chunk: int, unroll: int):
    def recurrence(a, x):  # a: [D] decay, x: [L, D]; h_t = a * h_{t-1} + x_t, h_{-1} = 0
        t = jnp.arange(chunk)
        lag = (t[:, None] - t[None, :]).astype(x.dtype)  # [c, c]
        decay = jnp.where((lag >= 0)[:, :, None], a[None, None, :] ** jnp.maximum(lag, 0)[:, :, None], 0.0)  # [c, c, D]
        carry_in = a[None, :] ** (t[:, None] + 1).astype(x.dtype)  # [c, D]

        def step(h, xc):
            out = jnp.einsum("ijd,jd->id", decay, xc) + carry_in * h[None, :]
            return out[-1], out

        _, out = jax.lax.scan(
            step, jnp.zeros(x.shape[1], x.dtype), x.reshape(length // chunk, chunk, -1), unroll=unroll
        )
        return out.reshape(length, -1)

    return recurrence


def _mlp_chain(x, w):
    for _ in range(8):
        x = jax.nn.gelu(x @ w)
    return x
