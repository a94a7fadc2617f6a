"""TASO's additive cost model: a graph costs the sum of its ops' runtimes (milliseconds).

Inputs, weights, constant (weight-only) ops and layout ops (reshape, transpose, split) are free.
An op's runtime comes from a `CostModel`: the deterministic `Roofline` (default; used in tests and
CI) or `MeasuredCost`, which times each distinct op with JAX on the current device (warm-up, median
of repeats) and caches the result in a JSON file named after the device.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

import jax
import numpy as np

from jaxgraph.arguments import integer, number
from jaxgraph.execute import random_inputs, runner
from jaxgraph.graph import Delta, Graph, Node
from jaxgraph.ops import OPS, Shape

OpKey = tuple[str, tuple[tuple[str, Any], ...], tuple[Shape, ...], tuple[Shape, ...]]


class CostModel(Protocol):
    """Runtime in milliseconds of one op, given (op, attributes, input shapes, output shapes)."""

    def op_time(self, key: OpKey) -> float: ...


def op_key(graph: Graph, node: Node) -> OpKey:
    return node.op, tuple(node.attrs.items()), tuple(graph.shape(r) for r in node.inputs), node.shapes


def is_free(node: Node) -> bool:
    return node.constant or node.op == "input" or OPS[node.op].layout_only


def node_cost(model: CostModel, graph: Graph, node_id: int) -> float:
    node = graph.nodes[node_id]
    return 0.0 if is_free(node) else model.op_time(op_key(graph, node))


def flops_and_bytes(key: OpKey) -> tuple[float, float]:
    """Arithmetic (FLOPs) and memory traffic (bytes, float32 in and out) of one op."""
    op, attrs_items, ins, outs = key
    attrs = dict(attrs_items)
    out = math.prod(outs[0])
    traffic = 4.0 * (sum(math.prod(s) for s in ins) + sum(math.prod(s) for s in outs))
    if op == "conv2d":
        w = ins[1]
        flops = 2.0 * out * w[1] * w[2] * w[3] + (out if len(ins) == 3 else 0)
    elif op == "matmul":
        flops = 2.0 * out * ins[0][-1]
    elif op in ("maxpool2d", "avgpool2d"):
        flops = float(out * math.prod(attrs["kernel"]))
    elif op in ("sigmoid", "tanh", "softmax"):
        flops = 4.0 * out
    elif op == "batchnorm":
        flops = 2.0 * out
    else:
        flops = float(out)
    return flops, traffic


@dataclass(frozen=True)
class Roofline:
    """Deterministic analytic runtime: max(compute time, memory time) + a fixed per-op overhead.

    Defaults are order-of-magnitude figures for a small server CPU (2 AVX-512 cores).
    """

    peak_flops: float = 1e11  # FLOP/s
    bandwidth: float = 1e10  # bytes/s
    overhead: float = 2e-6  # s per op

    def __post_init__(self) -> None:
        number("peak_flops", self.peak_flops, 0.0, above=True)
        number("bandwidth", self.bandwidth, 0.0, above=True)
        number("overhead", self.overhead, 0.0)

    def op_time(self, key: OpKey) -> float:
        flops, traffic = flops_and_bytes(key)
        return 1e3 * (max(flops / self.peak_flops, traffic / self.bandwidth) + self.overhead)


DEFAULT_COST_MODEL: CostModel = Roofline()


def _device_tag() -> str:
    device = jax.devices()[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{device.platform}-{device.device_kind}")


CLOCKS: Mapping[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def _check_timing(warmup: int, repeats: int, clock: str) -> None:
    integer("warmup", warmup, 0)
    integer("repeats", repeats, 1)
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")


def _median_seconds(fn: Callable[[], Any], warmup: int, repeats: int, clock: str = "wall") -> float:
    _check_timing(warmup, repeats, clock)
    now = CLOCKS[clock]
    for _ in range(warmup):
        jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        start = now()
        jax.block_until_ready(fn())
        times.append(now() - start)
    return statistics.median(times)


def _read_cache(path: Path) -> dict[str, float]:
    """A JSON object of op keys -> milliseconds; ValueError naming the file if it is anything else."""
    try:
        times = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError):
        times = None
    if not isinstance(times, dict) or not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0
                                              for v in times.values()):
        raise ValueError(f"op-time cache {path} is damaged (not a JSON object of positive times); delete it")
    return times


class MeasuredCost:
    """Per-op runtime measured with JAX on the current device and cached to a JSON file.

    Each distinct op (type, attributes, shapes) is jitted alone on random inputs, warmed up, and timed
    `repeats` times; its cost is the median minus the median time of an empty jitted call (the dispatch
    overhead, which a whole jitted graph pays once, not per op). `clock="wall"` times elapsed time;
    `clock="cpu"` times the process's CPU time, which on a CPU device shared with other work is far less
    noisy (it does not count time the process waits to be scheduled; it does add up all threads). The
    cache file is `<cache_dir>/op_costs-<platform>-<device kind>.<clock>.json`, `cache_dir` defaulting to
    `$JAXGRAPH_CACHE_DIR` or `~/.cache/jaxgraph`.
    """

    def __init__(self, cache_dir: str | os.PathLike | None = None, warmup: int = 3, repeats: int = 15,
                 clock: str = "wall") -> None:
        _check_timing(warmup, repeats, clock)
        root = cache_dir or os.environ.get("JAXGRAPH_CACHE_DIR") or Path.home() / ".cache" / "jaxgraph"
        self.path = Path(root) / f"op_costs-{_device_tag()}.{clock}.json"
        self.warmup, self.repeats, self.clock = warmup, repeats, clock
        self._times: dict[str, float] = _read_cache(self.path) if self.path.exists() else {}
        self._overhead: float | None = None

    def _dispatch_overhead(self) -> float:
        if self._overhead is None:
            empty = jax.jit(lambda x: x)
            x = jax.numpy.zeros((1,), np.float32)
            self._overhead = _median_seconds(lambda: empty(x), self.warmup, max(self.repeats, 50), self.clock)
        return self._overhead

    def op_time(self, key: OpKey) -> float:
        name = repr(key)
        if name not in self._times:
            op, attrs_items, ins, _ = key
            attrs = dict(attrs_items)
            rng = np.random.default_rng(0)
            args = [jax.numpy.asarray(rng.standard_normal(s, dtype=np.float32)) for s in ins]
            if op == "batchnorm":  # keep the variance positive
                args[4] = jax.numpy.abs(args[4]) + 1
            fn = jax.jit(lambda *xs: OPS[op].impl(attrs, *xs))
            seconds = _median_seconds(lambda: fn(*args), self.warmup, self.repeats, self.clock)
            self._times[name] = 1e3 * max(seconds - self._dispatch_overhead(), 1e-7)
            self._save()
        return self._times[name]

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=self.path.parent, delete=False, suffix=".tmp") as f:
            json.dump(self._times, f)
        os.replace(f.name, self.path)


def cost(graph: Graph, model: CostModel | None = None) -> float:
    """Additive cost of `graph` in milliseconds (TASO's `total_cost`)."""
    model = model or DEFAULT_COST_MODEL
    return sum(node_cost(model, graph, i) for i in graph.nodes)


def cost_change(model: CostModel, before: Graph, after: Graph, delta: Delta) -> float:
    """cost(after) - cost(before), from the added and removed nodes only (rewired nodes keep their
    shapes and constness, hence their cost)."""
    gone = sum(node_cost(model, before, i) for i in delta.removed)
    came = sum(node_cost(model, after, i) for i in delta.added)
    return came - gone


def measure_runtime(graph: Graph, inputs: Mapping[str, np.ndarray] | None = None, warmup: int = 3,
                    repeats: int = 20, clock: str = "wall") -> float:
    """Median end-to-end runtime (ms) of the jitted graph on the current device (`clock` as in `MeasuredCost`)."""
    _check_timing(warmup, repeats, clock)
    run = runner(graph, inputs if inputs is not None else random_inputs(graph))
    return 1e3 * _median_seconds(run, warmup, repeats, clock)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"need two equally long sequences of at least 2 values, got {len(xs)} and {len(ys)}")
    if not (np.isfinite(np.asarray(xs, np.float64)).all() and np.isfinite(np.asarray(ys, np.float64)).all()):
        raise ValueError("spearman needs finite values (NaN has no rank)")

    def ranks(values: Sequence[float]) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        order = np.argsort(values, kind="stable")
        result = np.empty(len(values))
        i = 0
        while i < len(values):
            j = i
            while j + 1 < len(values) and values[order[j + 1]] == values[order[i]]:
                j += 1
            result[order[i:j + 1]] = (i + j) / 2
            i = j + 1
        return result

    rx, ry = ranks(xs), ranks(ys)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])
