"""Pattern-format features beyond TASO's table: convs with a bias input, and HALF padding (`kernel // 2` each side).

Each feature is read by the loader (its float64 check catches a wrong rule), checked by the host matcher (a rule
never matches a node it cannot check: a biased pattern never matches a conv without a bias and the other way
round, HALF never matches SAME pads where they differ), agrees with the brute-force matcher, rewrites correctly
when applied, is stated in the e-graph, and is refused by name by the jitted matcher's lowering.
"""

from __future__ import annotations

import json

import chex
import numpy as np
import pytest

from jaxgraph import Roofline, execute_reference, random_inputs
from jaxgraph.graph import GraphBuilder
from jaxgraph.jax_patterns import lower
from jaxgraph.pattern_data import check_numerics, load_patterns, parse_pattern
from jaxgraph.patterns import CompiledPattern
from jaxgraph.saturation import extract_greedy, pattern_rule, saturate, to_graph

from .brute_force import assert_equals_brute_force


def _conv(x, w, b=None, padding="SAME", stride=1, activation="none", kernel=3):
    attrs = {"kernel": [kernel, kernel], "stride": [stride, stride], "padding": padding, "activation": activation}
    return {"op": "conv2d", "inputs": [x, w] + ([b] if b is not None else []), "attrs": attrs}


X, W, V, B, C = [-1, 0], [-2, 0], [-3, 0], [-4, 0], [-5, 0]
RULES = [
    # relu(conv(x, w, b)) -> conv_relu(x, w, b), stride 2 HALF
    {"xfer": 2000, "src": [_conv(X, W, B, "HALF", 2), {"op": "relu", "inputs": [[0, 0]], "attrs": {}}],
     "dst": [_conv(X, W, B, "HALF", 2, "relu")], "mapped": [[[1, 0], [0, 0]]]},
    # conv(x, w, b) + conv(x, v, c) -> conv(x, w + v, b + c)
    {"xfer": 2001, "src": [_conv(X, W, B), _conv(X, V, C), {"op": "add", "inputs": [[0, 0], [1, 0]], "attrs": {}}],
     "dst": [{"op": "add", "inputs": [W, V], "attrs": {}}, {"op": "add", "inputs": [B, C], "attrs": {}},
             _conv(X, [0, 0], [1, 0])], "mapped": [[[2, 0], [2, 0]]]},
    # conv(x, w, b), conv(x, v, c) (1x1) -> split(conv(x, concat(w, v), concat(b, c)))
    {"xfer": 2002, "src": [_conv(X, W, B, "VALID", kernel=1), _conv(X, V, C, "VALID", kernel=1)],
     "dst": [{"op": "concat", "inputs": [W, V], "attrs": {"axis": 0, "rank": 4}},
             {"op": "concat", "inputs": [B, C], "attrs": {"axis": 0, "rank": 1}},
             _conv(X, [0, 0], [1, 0], "VALID", kernel=1),
             {"op": "split", "inputs": [[2, 0]], "attrs": {"axis": 1, "parts": 2}}],
     "mapped": [[[0, 0], [3, 0]], [[1, 0], [3, 1]]]},
]


def _write(tmp_path, rules):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": rules}))
    return path


def test_loader_reads_biased_and_half_padded_rules_and_rejects_a_wrong_one(tmp_path):
    patterns = load_patterns(_write(tmp_path, RULES), checks=4)
    chex.assert_equal([len(p.src[0].inputs) for p in patterns], [3, 3, 3])
    wrong = json.loads(json.dumps(RULES[0]))
    wrong["dst"] = [{"op": "relu", "inputs": [B], "attrs": {}}, _conv(X, W, [0, 0], "HALF", 2)]
    wrong["mapped"] = [[[1, 0], [1, 0]]]
    with pytest.raises(ValueError, match=r"xfer 2000\).*differ"):  # relu(conv(x, w, b)) -> conv(x, w, relu(b))
        load_patterns(_write(tmp_path, [wrong]))
    same = json.loads(json.dumps(RULES[0]))
    same["dst"][0]["attrs"]["padding"] = "SAME"  # equal to HALF on odd sizes, not on even ones
    with pytest.raises(ValueError, match=r"xfer 2000\).*differ"):
        load_patterns(_write(tmp_path, [same]), checks=8)
    four = json.loads(json.dumps(RULES[1]))
    four["src"][0]["inputs"].append(C)
    with pytest.raises(ValueError, match=r"xfer 2001\).*4 inputs"):
        load_patterns(_write(tmp_path, [four]))


def test_half_padding_is_written_as_the_padding_it_always_equals():
    for kernel, stride, want in ((3, 1, "SAME"), (1, 1, "VALID"), (1, 2, "VALID"), (3, 2, "HALF"), (7, 2, "HALF")):
        raw = {"xfer": 1, "src": [_conv(X, W, None, "HALF", stride, kernel=kernel),
                                  {"op": "relu", "inputs": [[0, 0]], "attrs": {}}],
               "dst": [_conv(X, W, None, "HALF", stride, "relu", kernel)], "mapped": [[[1, 0], [0, 0]]]}
        chex.assert_equal(parse_pattern(raw).src[0].attr("padding"), want)


def _graph(bias: bool, pads, size=4, stride=2):
    """relu(conv(x, w[, b])) on an NCHW input of spatial `size`, 3x3 weights, given pads."""
    b = GraphBuilder()
    rng = np.random.default_rng(0)
    x = b.input("x", (1, 2, size, size))
    w = b.weight("w", rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32))
    inputs = [x, w] + ([b.weight("b", rng.uniform(-1, 1, (3,)).astype(np.float32))] if bias else [])
    conv = b.add("conv2d", inputs, stride=(stride, stride), pads=pads)
    return b.build({"y": b.add("relu", [conv])})


def test_a_rule_never_matches_a_conv_it_cannot_check(tmp_path):
    biased = CompiledPattern(load_patterns(_write(tmp_path, RULES[:1]))[0]).rule()
    plain = json.loads(json.dumps(RULES[0]))
    plain["src"][0]["inputs"], plain["dst"][0]["inputs"] = [X, W], [X, W]
    unbiased = CompiledPattern(load_patterns(_write(tmp_path, [plain]))[0]).rule()
    half, same = (1, 1, 1, 1), (0, 0, 1, 1)  # on a 4x4 input at stride 2, TensorFlow's SAME pads bottom/right only
    chex.assert_equal(len(biased.find(_graph(True, half))), 1)
    chex.assert_equal(len(biased.find(_graph(False, half))), 0)  # no bias: the three-input pattern does not match
    chex.assert_equal(len(unbiased.find(_graph(True, half))), 0)  # a bias the two-input pattern cannot drop
    chex.assert_equal(len(unbiased.find(_graph(False, half))), 1)
    chex.assert_equal(len(biased.find(_graph(True, same))), 0)  # SAME pads, which differ from HALF here
    chex.assert_equal(len(biased.find(_graph(True, (1, 1, 1, 1), size=5))), 1)
    graph = _graph(True, half)
    after = biased.apply(graph, biased.find(graph)[0])
    inputs = random_inputs(graph, 0)
    np.testing.assert_allclose(execute_reference(after, inputs)["y"], execute_reference(graph, inputs)["y"],
                               rtol=1e-6, atol=1e-6)


def test_generic_matcher_equals_brute_force_on_biased_rules(tmp_path):
    assert_equals_brute_force(load_patterns(_write(tmp_path, RULES)))


def test_jitted_lowering_refuses_biased_and_half_rules_by_name(tmp_path):
    patterns = load_patterns(_write(tmp_path, RULES))
    with pytest.raises(ValueError, match="xfer 2000: an op has more than 2 inputs"):
        lower([patterns[0]])
    plain = json.loads(json.dumps(RULES[0]))
    plain["src"][0]["inputs"], plain["dst"][0]["inputs"] = [X, W], [X, W]
    plain["xfer"] = 2003
    with pytest.raises(ValueError, match="xfer 2003: a conv2d's padding is none of"):
        lower(load_patterns(_write(tmp_path, [plain])))


def test_e_graph_states_a_biased_rule_and_extracts_the_merged_conv(tmp_path):
    pattern = load_patterns(_write(tmp_path, RULES[1:2]))[0]
    assert "(ConvB " in pattern_rule(pattern)
    b = GraphBuilder()
    rng = np.random.default_rng(1)
    x = b.input("x", (1, 2, 5, 5))
    convs = [b.add("conv2d", [x, b.weight(f"w{i}", rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32)),
                              b.weight(f"b{i}", rng.uniform(-1, 1, (3,)).astype(np.float32))], pads=(1, 1, 1, 1))
             for i in range(2)]
    graph = b.build({"y": b.add("add", convs)})
    egraph = saturate(graph, [pattern], Roofline(), hand_rules=False)
    found = to_graph(egraph, extract_greedy(egraph))
    chex.assert_equal(sum(n.op == "conv2d" for n in found.nodes.values()), 1)
    inputs = random_inputs(graph, 0)
    np.testing.assert_allclose(execute_reference(found, inputs)["y"], execute_reference(graph, inputs)["y"],
                               rtol=1e-5, atol=1e-5)


def test_loader_catches_a_rule_true_only_on_3x3_images(tmp_path):
    """In TASO's world weights double as activations and every image is 3x3, so a rule using a conv's output as
    another conv's weight can be proved there and wrong elsewhere:
    conv_valid(conv_same(x4, conv_same(x3, x1)), x1) -> conv_valid(x4, conv_same(x1, conv_same(x1, x3))). It holds
    on 3x3 images everywhere and the loader, drawing image sizes from {3, 4} per tensor, rejects it."""
    x1, x3, x4 = [-1, 0], [-3, 0], [-4, 0]
    raw = {"xfer": 8109, "src": [_conv(x3, x1), _conv(x4, [0, 0]), _conv([1, 0], x1, padding="VALID")],
           "dst": [_conv(x1, x3), _conv(x1, [0, 0]), _conv(x4, [1, 0], padding="VALID")], "mapped": [[[2, 0], [2, 0]]]}
    rng = np.random.default_rng(0)
    check_numerics(parse_pattern(raw), rng, {-1: (2, 2, 3, 3), -3: (2, 2, 3, 3), -4: (3, 2, 3, 3)})
    with pytest.raises(ValueError):
        check_numerics(parse_pattern(raw), rng, {-1: (2, 2, 3, 3), -3: (2, 2, 3, 3), -4: (3, 2, 4, 3)})
    with pytest.raises(ValueError, match=r"xfer 8109\).*differ"):
        load_patterns(_write(tmp_path, [raw]), checks=8)
