"""Cost model: hand-worked roofline numbers, additivity, free ops, incremental changes, measured cache."""

import json
import math

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
from jaxgraph.cost import flops_and_bytes, op_key

from .conftest import small_model


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
    flops, traffic = flops_and_bytes(op_key(graph, graph.nodes[c.node]))
    assert flops == 2 * (3 * 4 * 4) * (2 * 3 * 3)  # 2 x outputs x (C/g) x kh x kw = 1728
    assert traffic == 4 * (32 + 54 + 48)
    model = Roofline(peak_flops=1728.0, bandwidth=1e30, overhead=0.5)
    assert model.op_time(op_key(graph, graph.nodes[c.node])) == pytest.approx(1e3 * 1.5)


def test_cost_is_additive_and_layout_ops_and_weights_are_free():
    graph, c = conv_graph()
    model = Roofline(peak_flops=1e9, bandwidth=1e9, overhead=1e-6)
    per_op = {n.op: model.op_time(op_key(graph, n)) for n in graph.nodes.values() if n.op in ("conv2d", "relu")}
    assert cost(graph, model) == pytest.approx(per_op["conv2d"] + per_op["relu"])


def test_constant_subgraphs_are_free():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    parts = [b.weight("a", np.ones((8, 2), np.float32)), b.weight("b", np.ones((8, 3), np.float32))]
    w = b.add("concat", parts, axis=1)
    graph = b.build({"y": b.add("matmul", [x, w])})
    assert graph.nodes[w.node].constant
    assert cost(graph) == pytest.approx(Roofline().op_time(op_key(graph, graph.nodes[graph.outputs[0].node])))


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
    (path,) = tmp_path.glob("op_costs-*.json")
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
