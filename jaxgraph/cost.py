"""TASO's additive cost model, for a backend: a graph costs the sum of the runtimes of the kernels the
backend runs (milliseconds).

Inputs, weights and constant (weight-only) ops are free, and so are the ops the backend runs as views
(`Backend.free_ops`) and the ops it absorbs into another op's kernel (see `jaxgraph.backends`). With the
`taso` backend (the default) nothing fuses and layout ops (reshape, transpose, split) are free: TASO's
own model. A kernel's runtime comes from a `CostModel`:

- `Roofline(backend=...)`: deterministic analytic time (tests, CI, and the fallback everywhere);
- `MeasuredCost`: XLA, the backend of `execute`: each kernel (an op and the elementwise chain XLA fuses
  after it) jitted alone and timed with JAX on the current device;
- `OrtCost`: onnxruntime (CPU, all graph optimizations on): each kernel exported alone and timed by
  onnxruntime's own profiler, after onnxruntime fused it as it does in the full graph.

Measured times are cached in a JSON file named after the backend and the device.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Protocol, Sequence

import jax
import numpy as np

from jaxgraph.backends import CONST, EXTERNAL, ONNXRUNTIME, TASO, XLA, Backend, Kernel, kernel_graph
from jaxgraph.execute import random_inputs, runner
from jaxgraph.graph import Delta, Graph
from jaxsched.common.arguments import number
from jaxsched.common.machine import machine_description
from jaxsched.common.timing import check_timing, median_time


class CostModel(Protocol):
    """Runtime in milliseconds of one kernel of `backend`."""

    backend: Backend

    def kernel_time(self, kernel: Kernel) -> float: ...


def node_cost(model: CostModel, graph: Graph, node_id: int) -> float:
    """What node `node_id` adds to the cost: its kernel's time, or 0 if it is free or absorbed."""
    node, backend = graph.nodes[node_id], model.backend
    if node.constant or node.op == "input" or node.op in backend.free_ops:
        return 0.0
    if backend.fuses and backend.root(graph, node_id) is not None:
        return 0.0
    return model.kernel_time(backend.kernel(graph, node_id))


def flops_and_bytes(kernel: Kernel) -> tuple[float, float]:
    """Arithmetic (FLOPs) and memory traffic (bytes, float32) of one kernel: the root op reads its inputs
    and writes its outputs; each epilogue step adds one operation per output element and reads its
    constant and external inputs."""
    root = kernel.root
    attrs = dict(root.attrs)
    ins = [shape for _, shape in root.inputs]
    out = math.prod(root.shapes[0])
    traffic = 4.0 * (sum(math.prod(s) for s in ins) + sum(math.prod(s) for s in root.shapes))
    if root.op == "conv2d":
        w = ins[1]
        flops = 2.0 * out * w[1] * w[2] * w[3] + (out if len(ins) == 3 else 0)
    elif root.op == "matmul":
        flops = 2.0 * out * ins[0][-1]
    elif root.op == "opaque" and attrs["op_type"] in ("Conv", "ConvTranspose") and len(ins) >= 2:
        # N-D or dilated convolutions carried from ONNX: a multiply-add per output (Conv) or input
        # (ConvTranspose) element and kernel tap; weights are OI... in both, the I of ConvTranspose per group
        w = ins[1]
        flops = 2.0 * (out if attrs["op_type"] == "Conv" else math.prod(ins[0])) * math.prod(w[1:])
    elif root.op in ("maxpool2d", "avgpool2d"):
        flops = float(out * math.prod(attrs["kernel"]))
    elif root.op in ("sigmoid", "tanh", "softmax"):
        flops = 4.0 * out
    elif root.op == "batchnorm":
        flops = 2.0 * out
    else:
        flops = float(out)
    for step in kernel.epilogue:
        flops += math.prod(step.shapes[0])
        traffic += 4.0 * sum(math.prod(shape) for kind, shape in step.inputs if kind in (CONST, EXTERNAL))
    return flops, traffic


@dataclass(frozen=True)
class Roofline:
    """Deterministic analytic runtime of a kernel: max(compute time, memory time) + a fixed per-kernel
    overhead. Defaults are order-of-magnitude figures for a small server CPU (2 AVX-512 cores)."""

    peak_flops: float = 1e11  # FLOP/s
    bandwidth: float = 1e10  # bytes/s
    overhead: float = 2e-6  # s per kernel
    backend: Backend = TASO

    def __post_init__(self) -> None:
        number("peak_flops", self.peak_flops, 0.0, above=True)
        number("bandwidth", self.bandwidth, 0.0, above=True)
        number("overhead", self.overhead, 0.0)

    def kernel_time(self, kernel: Kernel) -> float:
        flops, traffic = flops_and_bytes(kernel)
        return 1e3 * (max(flops / self.peak_flops, traffic / self.bandwidth) + self.overhead)


DEFAULT_COST_MODEL: CostModel = Roofline()


def _device_tag() -> str:
    device = jax.devices()[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{device.platform}-{device.device_kind}")


def _read_cache(path: Path) -> dict[str, float]:
    """A JSON object of kernel keys -> milliseconds; ValueError naming the file if it is anything else."""
    try:
        times = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError):
        times = None
    if not isinstance(times, dict) or not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0
                                              for v in times.values()):
        raise ValueError(f"kernel-time cache {path} is damaged (not a JSON object of positive times); delete it")
    return times


@dataclass
class _CachedTimes:
    """Kernel times measured once and kept in `<cache_dir>/<stem>.json` (written atomically)."""

    path: Path
    times: dict[str, float] = field(default_factory=dict)

    @classmethod
    def open(cls, cache_dir: str | os.PathLike | None, stem: str) -> _CachedTimes:
        root = cache_dir or os.environ.get("JAXGRAPH_CACHE_DIR") or Path.home() / ".cache" / "jaxgraph"
        path = Path(root) / f"{stem}.json"
        return cls(path, _read_cache(path) if path.exists() else {})

    def get(self, kernel: Kernel, measure) -> float:
        name = repr(kernel)
        if name not in self.times:
            self.times[name] = measure()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.path.parent, delete=False, suffix=".tmp") as f:
                json.dump(self.times, f)
            os.replace(f.name, self.path)
        return self.times[name]


class MeasuredCost:
    """XLA kernel runtimes (the backend of `execute`), measured with JAX on the current device and cached.

    Each distinct kernel (an op and the elementwise chain XLA fuses after it) is jitted alone on random
    inputs, warmed up, and timed `repeats` times; its cost is the median minus the median time of an
    empty jitted call (the dispatch overhead, which a whole jitted graph pays once, not per kernel).
    `clock="wall"` times elapsed time; `clock="cpu"` times the process's CPU time, which on a CPU device
    shared with other work is far less noisy (it does not count time the process waits to be scheduled; it
    does add up all threads). The cache file is `<cache_dir>/kernel_costs-xla-<platform>-<device kind>.<clock>.json`,
    `cache_dir` defaulting to `$JAXGRAPH_CACHE_DIR` or `~/.cache/jaxgraph`.
    """

    backend = XLA

    def __init__(self, cache_dir: str | os.PathLike | None = None, warmup: int = 3, repeats: int = 15,
                 clock: str = "wall") -> None:
        check_timing(repeats, warmup, clock)
        self.warmup, self.repeats, self.clock = warmup, repeats, clock
        self._cache = _CachedTimes.open(cache_dir, f"kernel_costs-xla-{_device_tag()}.{clock}")
        self.path = self._cache.path
        self._overhead: float | None = None

    def _dispatch_overhead(self) -> float:
        if self._overhead is None:
            empty = jax.jit(lambda x: x)
            x = jax.numpy.zeros((1,), np.float32)
            self._overhead = median_time(lambda: empty(x), max(self.repeats, 50), self.warmup, self.clock)
        return self._overhead

    def kernel_time(self, kernel: Kernel) -> float:
        def measure() -> float:
            graph = kernel_graph(kernel)
            seconds = median_time(runner(graph, random_inputs(graph)), self.repeats, self.warmup, self.clock)
            return 1e3 * max(seconds - self._dispatch_overhead(), 1e-7)

        return self._cache.get(kernel, measure)


def ort_session(model, optimize: bool = True, profile_prefix: str | None = None):
    """An onnxruntime CPU session for an ONNX `ModelProto`, serialized model or path; `optimize` turns all
    of onnxruntime's graph optimizations on (ORT_ENABLE_ALL, its default) or off."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = (onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                        else onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL)
    options.log_severity_level = 3  # no warnings about serialized NCHWc layouts
    if profile_prefix is not None:
        options.enable_profiling, options.profile_file_prefix = True, profile_prefix
    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    return onnxruntime.InferenceSession(model if isinstance(model, bytes) else os.fspath(model), options,
                                        providers=["CPUExecutionProvider"])


def ort_kernel_ms(session_factory, feeds: Mapping[str, np.ndarray], warmup: int, repeats: int) -> float:
    """Median over runs of the summed kernel times onnxruntime's profiler reports for one run (layout
    reorders that only exist because a kernel runs alone are left out)."""
    with tempfile.TemporaryDirectory() as scratch:
        session = session_factory(os.path.join(scratch, "profile"))
        for _ in range(warmup + repeats):
            session.run(None, feeds)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")[warmup:]
    nodes = [(e["ts"], e["dur"]) for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")
             and not e.get("args", {}).get("op_name", "").startswith("Reorder")]
    totals = [sum(d for t, d in nodes if start <= t <= end) for start, end in runs]
    return 1e-3 * max(statistics.median(totals), 1.0)  # profiler microseconds -> ms, at least 1 us


class OrtCost:
    """onnxruntime kernel runtimes (CPU execution provider, ORT_ENABLE_ALL), from onnxruntime's profiler.

    Each distinct kernel (`jaxgraph.backends.ONNXRUNTIME`: a convolution with its folded batch norm, bias,
    residual add and activation; a Gemm; a SkipLayerNormalization; any other op alone) is exported as a
    one-kernel ONNX model, which onnxruntime optimizes as it does the full graph; the cost is the median
    over `repeats` runs of the kernel times its profiler reports. Cached in
    `<cache_dir>/kernel_costs-onnxruntime-<cpu>.json`.
    """

    backend = ONNXRUNTIME

    def __init__(self, cache_dir: str | os.PathLike | None = None, warmup: int = 5, repeats: int = 30) -> None:
        check_timing(repeats, warmup)
        self.warmup, self.repeats = warmup, repeats
        machine = re.sub(r"[^A-Za-z0-9_.-]+", "_", machine_description())
        self._cache = _CachedTimes.open(cache_dir, f"kernel_costs-onnxruntime-{machine}")
        self.path = self._cache.path

    def kernel_time(self, kernel: Kernel) -> float:
        def measure() -> float:
            from jaxgraph.onnx_io import to_onnx

            graph = kernel_graph(kernel)
            model = to_onnx(graph)
            return ort_kernel_ms(lambda prefix: ort_session(model, profile_prefix=prefix), random_inputs(graph),
                                 self.warmup, self.repeats)

        return self._cache.get(kernel, measure)


def cost(graph: Graph, model: CostModel | None = None) -> float:
    """Additive cost of `graph` in milliseconds (TASO's `total_cost`, for the model's backend)."""
    model = model or DEFAULT_COST_MODEL
    return sum(node_cost(model, graph, i) for i in graph.nodes)


def _kernels_near(backend: Backend, graph: Graph, changed) -> set[int]:
    """The kernels (all their nodes) containing a changed node, and the kernels of their consumers."""
    near: set[int] = set()
    for node_id in changed:
        if node_id in graph.nodes and node_id not in near:
            near.update(backend.group(graph, node_id))
    for node_id in list(near):
        for use in graph.uses(node_id):
            if use.node not in near:
                near.update(backend.group(graph, use.node))
    return near


def affected(model: CostModel, before: Graph, after: Graph, delta: Delta) -> set[int]:
    """Node ids whose cost can differ between `before` and `after`: the added and removed nodes, and with a
    fusing backend every node of a kernel that contains or consumes a changed node, in either graph, and
    onwards through consumers whose kernel membership changed (onnxruntime's layout follows residual chains)."""
    if not model.backend.fuses:
        return set(delta.removed | delta.added)
    backend, changed = model.backend, delta.removed | delta.dirty
    region = _kernels_near(backend, before, changed) | _kernels_near(backend, after, changed)
    frontier = list(region)
    while frontier:  # a node whose kernel changed can change what its consumers join (a residual's layout)
        grown: list[int] = []
        for node_id in frontier:
            for graph in (before, after):
                for use in graph.uses(node_id) if node_id in graph.nodes else ():
                    other = use.node
                    if (other not in region and other in before.nodes and other in after.nodes
                            and backend.root(before, other) != backend.root(after, other)):
                        group = (set(backend.group(before, other)) | set(backend.group(after, other))) - region
                        region |= group
                        grown.extend(group)
        frontier = grown
    return region


def cost_change(model: CostModel, before: Graph, after: Graph, delta: Delta,
                region: set[int] | None = None) -> float:
    """cost(after) - cost(before), from the nodes a rewrite can affect only (`region`, by default
    `affected(model, before, after, delta)`)."""
    region = affected(model, before, after, delta) if region is None else region
    gone = sum(node_cost(model, before, i) for i in region if i in before.nodes)
    came = sum(node_cost(model, after, i) for i in region if i in after.nodes)
    return came - gone


def measure_runtime(graph: Graph, inputs: Mapping[str, np.ndarray] | None = None, warmup: int = 3,
                    repeats: int = 20, clock: str = "wall") -> float:
    """Median end-to-end runtime (ms) of the jitted graph on the current device (`clock` as in `MeasuredCost`)."""
    check_timing(repeats, warmup, clock)
    run = runner(graph, inputs if inputs is not None else random_inputs(graph))
    return 1e3 * median_time(run, repeats, warmup, clock)


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
