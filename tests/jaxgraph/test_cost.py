"""Cost model: hand-worked roofline numbers, additivity, free ops, incremental changes, measured cache."""

import importlib
import json
import math
import tempfile

import numpy as np
import pytest

from jaxgraph import (
    RULES,
    GraphBuilder,
    LocationIndex,
    MeasuredCost,
    Roofline,
    cost,
    cost_change,
    measure_runtime,
    spearman,
)
from jaxgraph.backends import ONNXRUNTIME, TASO, XLA
from jaxgraph.cost import OrtCost, flops_and_bytes, node_cost

from .conftest import FAITHFUL, SMALL, small_model


def conv_graph():
    b = GraphBuilder()
    x = b.input("x", (1, 2, 4, 4))
    w = b.weight("w", np.ones((3, 2, 3, 3), np.float32))
    c = b.add("conv2d", [x, w], pads=(1, 1, 1, 1))
    r = b.add("relu", [b.add("reshape", [c], shape=(3, 16))])
    t = b.add("transpose", [r], perm=(1, 0))
    return b.build({"y": t}), c


def test_roofline_hand_worked():
    graph, c = conv_graph()
    flops, traffic = flops_and_bytes(TASO.kernel(graph, c.node))
    assert flops == 2 * (3 * 4 * 4) * (2 * 3 * 3)  # 2 x outputs x (C/g) x kh x kw = 1728
    assert traffic == 4 * (32 + 54 + 48)
    model = Roofline(peak_flops=1728.0, bandwidth=1e30, overhead=0.5)
    assert model.kernel_time(TASO.kernel(graph, c.node)) == pytest.approx(1e3 * 1.5)


def test_cost_is_additive_and_layout_ops_and_weights_are_free():
    graph, c = conv_graph()
    model = Roofline(peak_flops=1e9, bandwidth=1e9, overhead=1e-6)
    per_op = {n.op: model.kernel_time(TASO.kernel(graph, i))
              for i, n in graph.nodes.items() if n.op in ("conv2d", "relu")}
    assert cost(graph, model) == pytest.approx(per_op["conv2d"] + per_op["relu"])


def test_constant_subgraphs_are_free():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    parts = [b.weight("a", np.ones((8, 2), np.float32)), b.weight("b", np.ones((8, 3), np.float32))]
    w = b.add("concat", parts, axis=1)
    graph = b.build({"y": b.add("matmul", [x, w])})
    assert graph.nodes[w.node].constant
    assert cost(graph) == pytest.approx(Roofline().kernel_time(TASO.kernel(graph, graph.outputs[0].node)))


def test_cost_change_equals_recomputation():
    graph = small_model("inception_v3")
    index = LocationIndex.build(RULES, graph)
    for xfer, location in index.matches()[::7]:
        after, delta = RULES[xfer].rewrite(graph, location)
        assert cost(graph) + cost_change(Roofline(), graph, after, delta) == pytest.approx(cost(after), rel=1e-9)


def test_fusions_lower_the_roofline_cost():
    graph = small_model("resnet18")
    for xfer in (1, 7, 10):  # conv + batchnorm at each stride/padding present in ResNet
        for location in RULES[xfer].find(graph):
            after, delta = RULES[xfer].rewrite(graph, location)
            assert cost_change(Roofline(), graph, after, delta) < 0


def test_measured_cost_times_ops_and_caches_by_device(tmp_path):
    graph, c = conv_graph()
    model = MeasuredCost(cache_dir=tmp_path, warmup=1, repeats=3)
    first = cost(graph, model)
    assert first > 0 and math.isfinite(first)
    (path,) = tmp_path.glob("kernel_costs-xla-*.json")
    assert "cpu" in path.name and len(json.loads(path.read_text())) == 2  # conv2d and relu
    again = MeasuredCost(cache_dir=tmp_path)
    again._dispatch_overhead = None  # must not be needed: every op comes from the cache
    assert cost(graph, again) == first


def test_spearman_known_answers():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    assert spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(math.sqrt(3) / 2)  # tie: average rank
    with pytest.raises(ValueError, match="equally long"):
        spearman([1, 2], [1])


def test_measured_cost_clocks(tmp_path):
    assert MeasuredCost(cache_dir=tmp_path, clock="cpu").path.name.endswith(".cpu.json")
    assert MeasuredCost(cache_dir=tmp_path).path.name.endswith(".wall.json")
    with pytest.raises(ValueError, match="clock must be one of"):
        MeasuredCost(cache_dir=tmp_path, clock="gpu")


@pytest.mark.parametrize("kwargs", [dict(peak_flops=0.0), dict(bandwidth=float("nan")), dict(overhead=-1.0)])
def test_roofline_rejects_bad_parameters(kwargs):
    """Today: peak_flops=0 divided by zero on first use; NaN made every cost NaN."""
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        Roofline(**kwargs)


def test_timing_arguments_are_checked_before_work(tmp_path):
    """Today: repeats=0 raised StatisticsError after compiling and warming up."""
    with pytest.raises(ValueError, match="repeats"):
        MeasuredCost(cache_dir=tmp_path, repeats=0)
    with pytest.raises(ValueError, match="warmup"):
        MeasuredCost(cache_dir=tmp_path, warmup=-1)
    with pytest.raises(ValueError, match="repeats"):
        measure_runtime(conv_graph()[0], repeats=0)


def test_damaged_cache_names_the_file(tmp_path):
    """Today: a truncated cache file raised json.JSONDecodeError from inside the constructor."""
    path = MeasuredCost(cache_dir=tmp_path).path
    for damaged in ('{"a": 1.', '[1, 2]', '{"a": "x"}'):
        path.write_text(damaged)
        with pytest.raises(ValueError, match=str(path)):
            MeasuredCost(cache_dir=tmp_path)


def test_spearman_rejects_nan():
    """Today: NaN got a rank (argsort puts it last) and a number came out."""
    with pytest.raises(ValueError, match="finite"):
        spearman([1, 2, float("nan")], [1, 2, 3])


def random_walk(graph, steps, seed):
    """`graph` after `steps` uniformly random rewrites, and every (before, after, delta) on the way."""
    rng, index, trail = np.random.default_rng(seed), LocationIndex.build(RULES, graph), []
    for _ in range(steps):
        matches = index.matches()
        if not matches:
            break
        xfer, location = matches[rng.integers(len(matches))]
        after, delta = RULES[xfer].rewrite(graph, location)
        trail.append((graph, after, delta))
        graph, index = after, index.update(after, delta)
    return graph, trail


@pytest.mark.parametrize("backend", [ONNXRUNTIME, XLA], ids=lambda b: b.name)
@pytest.mark.parametrize("name", sorted(SMALL) + sorted(FAITHFUL))
def test_backend_cost_change_equals_recomputation(name, backend):
    """A rewrite's cost change, computed from the kernels near it, equals recomputing the whole cost: on
    every rewrite of the original graph and along a random walk."""
    model = Roofline(backend=backend)
    graph = small_model(name)
    index = LocationIndex.build(RULES, graph)
    cases = [(graph, *RULES[x].rewrite(graph, loc)) for x, loc in index.matches()]
    cases += random_walk(graph, 40, seed=len(name))[1]
    for before, after, delta in cases:
        assert cost(before, model) + cost_change(model, before, after, delta) == pytest.approx(
            cost(after, model), rel=1e-9, abs=1e-12)


def onnxruntime_kernels(graph):
    """Nodes onnxruntime (all optimizations) leaves in the graph it runs, without views and NCHWc reorders
    (which only convert layouts between kernels)."""
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from jaxgraph import to_onnx

    with tempfile.TemporaryDirectory() as scratch:
        options = ort.SessionOptions()
        options.optimized_model_filepath, options.log_severity_level = f"{scratch}/optimized.onnx", 3
        ort.InferenceSession(to_onnx(graph).SerializeToString(), options, providers=["CPUExecutionProvider"])
        nodes = onnx.load(options.optimized_model_filepath).graph.node
    return sum(n.op_type not in ("Reshape", "ReorderInput", "ReorderOutput") for n in nodes)


@pytest.mark.parametrize("name", ["resnet18", "inception_v3", "bert", "mobilenet_v2", "squeezenet1_1"])
def test_onnxruntime_backend_counts_the_kernels_onnxruntime_runs(name):
    """The independent check of the fusion model: the nodes that cost something under the onnxruntime
    backend are exactly as many as the nodes onnxruntime's own optimizer leaves, before and after random
    rewrites (which create splits, concats and fused activations that change what onnxruntime can fuse)."""
    model = Roofline(backend=ONNXRUNTIME)
    for graph in (small_model(name), random_walk(small_model(name), 20, seed=3)[0]):
        ours = sum(node_cost(model, graph, i) > 0 for i in graph.nodes)
        assert ours == onnxruntime_kernels(graph)


def constant_after(root: str, x_shape, op: str, shape, conv_bias: bool = False):
    """x -> conv2d (8 output channels, 3x3) or matmul (16 outputs) -> `op` with a constant of `shape` (either
    operand order does not matter to onnxruntime; the constant goes second)."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, rng.uniform(0.5, 1.5, shape).astype(np.float32))

    x = b.input("x", x_shape)
    if root == "conv2d":
        y = b.add("conv2d", [x, w("w", (8, x_shape[1], 3, 3)), *([w("b", (8,))] if conv_bias else [])],
                  pads=(1, 1, 1, 1))
    else:
        y = b.add("matmul", [x, w("w", (x_shape[-1], 16))])
    return b.build({"y": b.add(op, [y, w("c", shape)])})


CONSTANT_CASES = [
    *[("conv2d", (1, 4, 6, 6), op, shape) for op in ("add", "mul")
      for shape in [(), (1,), (1, 1, 1), (1, 1, 1, 1), (8, 1, 1), (1, 8, 1, 1)]],
    *[("matmul", x_shape, op, shape) for x_shape in [(4, 8), (2, 4, 8)] for op in ("add", "mul")
      for shape in [(), (1,), (16,), (1, 1), (1, 16)]],
]


@pytest.mark.parametrize("root, x_shape, op, shape", CONSTANT_CASES,
                         ids=[f"{root}{len(x)}d-{op}-{list(shape)}" for root, x, op, shape in CONSTANT_CASES])
def test_onnxruntime_fuses_constants_of_these_shapes_as_onnxruntime_does(root, x_shape, op, shape):
    """A constant Add or Mul after a convolution or MatMul costs nothing exactly when onnxruntime's optimizer
    removes it (ConvAddFusion and ConvMulFusion take [1, C, 1, 1] and [C, 1, 1], and a scalar factor; Gemm takes
    a vector bias, FusedMatMul any one-element factor). Today: a scalar bias after a 2-D MatMul raised IndexError
    from `_ort_fits`, and a scalar or [1] bias after a convolution counted as folded."""
    model = Roofline(backend=ONNXRUNTIME)
    for conv_bias in ([False, True] if root == "conv2d" else [False]):
        graph = constant_after(root, x_shape, op, shape, conv_bias)
        ours = sum(node_cost(model, graph, i) > 0 for i in graph.nodes)
        assert ours == onnxruntime_kernels(graph), (conv_bias, [graph.nodes[i].op for i in graph.order])


def test_rewrites_onnxruntime_does_itself_save_nothing_and_blocking_ones_cost():
    """Conv + batch norm and conv + ReLU fusions: TASO's cost drops, onnxruntime's does not move. Merging
    two convolutions whose batch norm and ReLU onnxruntime would fuse puts a split in between: cheaper for
    TASO's model, dearer for onnxruntime's."""
    taso, ort_model = Roofline(), Roofline(backend=ONNXRUNTIME)
    graph = small_model("resnet18")
    fusions = [(r, loc) for r in RULES if r.family in ("FuseConvBatchNorm", "FuseConvRelu") for loc in r.find(graph)]
    assert len(fusions) >= 20
    for rule, location in fusions:
        after, delta = rule.rewrite(graph, location)
        assert cost_change(taso, graph, after, delta) < 0
        assert cost_change(ort_model, graph, after, delta) == pytest.approx(0.0, abs=1e-12)
    graph = small_model("inception_v3")
    merges = [(r, loc) for r in RULES if r.family == "MergeConvs" for loc in r.find(graph)]
    assert merges
    for rule, location in merges:
        after, delta = rule.rewrite(graph, location)
        assert cost_change(ort_model, graph, after, delta) > 0


def test_xla_fuses_elementwise_chains():
    """batchnorm -> relu after a conv: XLA runs the conv, then one loop for the chain (the relu is free)."""
    b = GraphBuilder()
    x = b.input("x", (1, 2, 4, 4))
    c = b.add("conv2d", [x, b.weight("w", np.ones((3, 2, 3, 3), np.float32))], pads=(1, 1, 1, 1))
    bn = b.add("batchnorm", [c] + [b.weight(f"p{i}", np.ones(3, np.float32)) for i in range(4)])
    graph = b.build({"y": b.add("relu", [bn])})
    model = Roofline(backend=XLA)
    costs = {graph.nodes[i].op: node_cost(model, graph, i) for i in graph.nodes}
    assert costs["relu"] == 0 and costs["batchnorm"] > 0 and costs["conv2d"] > 0
    assert [s.op for s in XLA.kernel(graph, bn.node).epilogue] == ["relu"]


def test_onnxruntime_measured_cost_profiles_kernels_and_caches(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    graph = conv_graph()[0]
    model = OrtCost(cache_dir=tmp_path, warmup=1, repeats=3)
    first = cost(graph, model)
    assert first > 0 and math.isfinite(first)
    (path,) = tmp_path.glob("kernel_costs-onnxruntime-*.json")
    assert len(json.loads(path.read_text())) == 3  # conv, relu (after a reshape: not fused), transpose (a copy)
    module = importlib.import_module("jaxgraph.cost")  # `jaxgraph.cost` the attribute is the function
    monkeypatch.setattr(module, "ort_kernel_ms", lambda *a, **k: pytest.fail("measured again"))
    assert cost(graph, OrtCost(cache_dir=tmp_path)) == first


def test_nchwc_block_probed_from_onnxruntime_matches_the_cpu():
    """onnxruntime blocks channels by 16 with AVX-512 and by 8 with AVX2 (MLAS); the probe must find that,
    since the residual fusion rule depends on it (the kernel counts above differ between the two CPUs)."""
    pytest.importorskip("onnxruntime")
    from jaxgraph.backends import nchwc_block

    with open("/proc/cpuinfo") as cpuinfo:
        flags = cpuinfo.read()
    if " avx2" not in flags:
        pytest.skip("onnxruntime's NCHWc layout needs an x86 CPU with AVX2")
    assert nchwc_block() == (16 if " avx512f" in flags else 8)
