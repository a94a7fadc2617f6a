"""Ops of the pattern format beyond TASO's table: transpose, sigmoid and tanh.

Transpose is read by the loader (its float64 check catches a wrong rule and a perm that is no permutation),
matched by the host matcher only where the node's perm is the pattern's, equal to the brute-force matcher,
rewritten correctly, stated in the e-graph, refused by name by the jitted matcher's lowering, and generated:
(AB)^T = B^T A^T is found, A^T B^T never. Sigmoid and tanh are uninterpreted element-wise functions in the
generator: identities of every element-wise function are found, none that needs more (idempotence, positivity,
one function for the other)."""

from __future__ import annotations

import json

import chex
import numpy as np
import pytest

from jaxgraph import Roofline, execute_reference, random_inputs
from jaxgraph.generate import Config, generate
from jaxgraph.generate.write import describe
from jaxgraph.graph import GraphBuilder
from jaxgraph.jax_patterns import lower
from jaxgraph.pattern_data import load_patterns
from jaxgraph.patterns import CompiledPattern
from jaxgraph.saturation import extract_greedy, pattern_rule, saturate, to_graph

from .brute_force import assert_equals_brute_force
from .conftest import assert_same_outputs

A, B = [-1, 0], [-2, 0]


def _t(x, perm=(1, 0)):
    return {"op": "transpose", "inputs": [x], "attrs": {"perm": list(perm)}}


def _mm(a, b):
    return {"op": "matmul", "inputs": [a, b], "attrs": {"activation": "none"}}


RULES = [
    # transpose(matmul(a, b)) -> matmul(transpose(b), transpose(a))
    {"xfer": 3000, "src": [_mm(A, B), _t([0, 0])], "dst": [_t(B), _t(A), _mm([0, 0], [1, 0])],
     "mapped": [[[1, 0], [2, 0]]]},
    # relu(transpose(a)) -> transpose(relu(a))
    {"xfer": 3001, "src": [_t(A), {"op": "relu", "inputs": [[0, 0]], "attrs": {}}],
     "dst": [{"op": "relu", "inputs": [A], "attrs": {}}, _t([0, 0])], "mapped": [[[1, 0], [1, 0]]]},
]


def _write(tmp_path, rules):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": rules}))
    return path


def _computes_the_same(found, graph):
    inputs = random_inputs(graph, 0)
    assert_same_outputs(execute_reference(found, inputs), execute_reference(graph, inputs), rtol=1e-6)


def _graph(perm=(1, 0), batch=False):
    """transpose(x @ w) of a [3, 4] (or [2, 3, 4] batched) input and [4, 5] weights."""
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4) if batch else (3, 4))
    w = b.weight("w", np.random.default_rng(0).uniform(-1, 1, (4, 5)).astype(np.float32))
    return b.build({"y": b.add("transpose", [b.add("matmul", [x, w])], perm=perm)})


def test_loader_reads_transpose_rules_and_rejects_wrong_ones(tmp_path):
    patterns = load_patterns(_write(tmp_path, RULES), checks=4)
    chex.assert_equal([p.src[-1].attr("perm") if p.xfer == 3000 else p.src[0].attr("perm") for p in patterns],
                      [(1, 0), (1, 0)])
    wrong = json.loads(json.dumps(RULES[0]))  # (AB)^T -> A^T B^T
    wrong["xfer"], wrong["dst"] = 3002, [_t(A), _t(B), _mm([0, 0], [1, 0])]
    with pytest.raises(ValueError, match=r"xfer 3002\)"):
        load_patterns(_write(tmp_path, [wrong]), checks=4)
    bad = json.loads(json.dumps(RULES[1]))
    bad["src"][0]["attrs"]["perm"] = [0, 0]
    with pytest.raises(ValueError, match=r"xfer 3001\).*permutation"):
        load_patterns(_write(tmp_path, [bad]))


def test_a_rule_matches_only_its_perm_and_rewrites_correctly(tmp_path):
    rule = CompiledPattern(load_patterns(_write(tmp_path, RULES[:1]))[0]).rule()
    graph = _graph()
    chex.assert_equal(len(rule.find(graph)), 1)
    chex.assert_equal(len(rule.find(_graph((0, 2, 1), batch=True))), 0)  # another perm: not the pattern's
    after = rule.apply(graph, rule.find(graph)[0])
    chex.assert_equal(sorted(n.op for n in after.nodes.values() if n.op in ("transpose", "matmul")),
                      ["matmul", "transpose", "transpose"])
    _computes_the_same(after, graph)


def test_generic_matcher_equals_brute_force_on_transpose_rules(tmp_path):
    assert_equals_brute_force(load_patterns(_write(tmp_path, RULES)))


def test_jitted_lowering_refuses_transpose_rules_by_name(tmp_path):
    with pytest.raises(ValueError, match="xfer 3001: transpose, sigmoid and tanh are not in the jitted matcher's"):
        lower(load_patterns(_write(tmp_path, RULES[1:])))


def test_e_graph_states_a_transpose_rule_and_extracts_an_equal_graph(tmp_path):
    patterns = load_patterns(_write(tmp_path, RULES))
    assert '(Transpose "1,0" ' in pattern_rule(patterns[0])
    graph = _graph()
    egraph = saturate(graph, patterns, Roofline(), hand_rules=False)
    chex.assert_equal(egraph.conflicts, 0)
    assert sum(e.op == "Transpose" for e in egraph.enodes) >= 3  # the input's and the rule's two
    _computes_the_same(to_graph(egraph, extract_greedy(egraph)), graph)


def test_the_e_graph_knows_a_transpose_undoes_its_inverse_and_saturates(tmp_path):
    """relu(x) -> transpose(relu(transpose(x))) applies again to the relu it makes: without the identity
    transpose(transpose(x)) = x (TransposeInverse, which no data rule can state) the e-graph grows to its node
    limit; with it, it saturates, and what it extracts computes the original."""
    raw = {"xfer": 3003, "src": [{"op": "relu", "inputs": [A], "attrs": {}}],
           "dst": [_t(A), {"op": "relu", "inputs": [[0, 0]], "attrs": {}}, _t([1, 0])], "mapped": [[[0, 0], [2, 0]]]}
    pattern = load_patterns(_write(tmp_path, [raw]))[0]
    b = GraphBuilder()
    graph = b.build({"y": b.add("relu", [b.input("x", (3, 4))])})
    grown = saturate(graph, [pattern], Roofline(), max_nodes=100, max_iterations=100, hand_rules=False)
    chex.assert_equal(grown.stop, "node limit")
    egraph = saturate(graph, [pattern], Roofline(), max_nodes=100, max_iterations=100)
    chex.assert_equal((egraph.stop, egraph.conflicts), ("saturated", 0))
    _computes_the_same(to_graph(egraph, extract_greedy(egraph)), graph)


def test_generator_finds_the_transpose_of_a_product_and_never_its_wrong_order(tmp_path):
    out = tmp_path / "rules.json"
    results = generate(Config(ops=("matmul", "transpose"), max_ops=3, inputs=2, ranks=(2,)), out)
    chex.assert_equal(results[0].counts["refuted"], 0)
    rules = json.loads(out.read_text())["rules"]
    chex.assert_equal(len(load_patterns(out)), len(rules))
    lines = {describe(rule) for rule in rules}
    assert "transpose(matmul(x1, x2)) -> matmul(transpose(x2), transpose(x1))" in lines
    assert not any(line.startswith("transpose(matmul(x1, x2)) -> matmul(transpose(x1), transpose(x2))")
                   for line in lines)


def test_an_identity_of_two_by_two_matrices_only_is_fingerprinted_equal_and_refuted(tmp_path):
    """x * (x @ x)^T = (x @ x) * x^T (elementwise) holds for every 2 x 2 matrix, the size the generator
    fingerprints at, and not for 3 x 3 ones (checked here in float64): the fingerprints collide, the exact prover,
    which evaluates at n = 2 and n = 3, refutes both directions, and no written rule states it."""
    rng = np.random.default_rng(0)
    for n, holds in ((2, True), (3, False)):
        x = rng.uniform(-1, 1, (n, n))
        chex.assert_equal(np.allclose(x * (x @ x).T, (x @ x) * x.T), holds)
    out = tmp_path / "rules.json"
    results = generate(Config(ops=("matmul", "mul", "transpose"), max_ops=3, inputs=1, ranks=(2,)), out)
    assert results[0].counts["refuted"] >= 2
    lines = {describe(rule) for rule in json.loads(out.read_text())["rules"]}
    wrong = "mul(x1, transpose(matmul(x1, x1))) -> mul(matmul(x1, x1), transpose(x1))"
    assert wrong not in lines and not any(line.startswith(wrong) for line in lines)


SIGMOID = [
    # sigmoid(concat(a, b)) -> concat(sigmoid(a), sigmoid(b))
    {"xfer": 3100, "src": [{"op": "concat", "inputs": [A, B], "attrs": {"axis": 1, "rank": 2}},
                           {"op": "sigmoid", "inputs": [[0, 0]], "attrs": {}}],
     "dst": [{"op": "sigmoid", "inputs": [A], "attrs": {}}, {"op": "sigmoid", "inputs": [B], "attrs": {}},
             {"op": "concat", "inputs": [[0, 0], [1, 0]], "attrs": {"axis": 1, "rank": 2}}],
     "mapped": [[[1, 0], [2, 0]]]},
]


def test_sigmoid_rules_load_apply_and_state_in_the_e_graph_and_a_wrong_one_is_caught(tmp_path):
    pattern = load_patterns(_write(tmp_path, SIGMOID), checks=4)[0]
    assert "(Sigmoid " in pattern_rule(pattern)
    wrong = json.loads(json.dumps(SIGMOID[0]))  # sigmoid(a + b) -> sigmoid(a) + sigmoid(b)
    wrong["xfer"], wrong["src"][0] = 3101, {"op": "add", "inputs": [A, B], "attrs": {}}
    wrong["dst"][2] = {"op": "add", "inputs": [[0, 0], [1, 0]], "attrs": {}}
    with pytest.raises(ValueError, match=r"xfer 3101\).*differ"):
        load_patterns(_write(tmp_path, [wrong]))
    with pytest.raises(ValueError, match="xfer 3100: transpose, sigmoid and tanh"):
        lower([pattern])
    b = GraphBuilder()
    x, y = b.input("x", (3, 2)), b.input("y", (3, 4))
    graph = b.build({"z": b.add("sigmoid", [b.add("concat", [x, y], axis=1)])})
    rule = CompiledPattern(pattern).rule()
    after = rule.apply(graph, rule.find(graph)[0])
    egraph = saturate(graph, [pattern], Roofline(), hand_rules=False)
    chex.assert_equal(egraph.conflicts, 0)
    for found in (after, to_graph(egraph, extract_greedy(egraph))):
        _computes_the_same(found, graph)


def test_generator_proves_what_holds_of_every_elementwise_function_and_nothing_more(tmp_path):
    out = tmp_path / "rules.json"
    generate(Config(ops=("sigmoid", "tanh", "relu", "concat"), max_ops=3, inputs=2, ranks=(2,)), out)
    lines = {describe(rule) for rule in json.loads(out.read_text())["rules"]}
    chex.assert_equal(len(load_patterns(out)), len(lines))
    for op in ("sigmoid", "tanh"):  # f(concat(a, b)) -> concat(f(a), f(b)), under either naming of the inputs
        assert any(f"{op}(concat0({a}, {b})) -> concat0({op}({a}), {op}({b}))" in lines
                   for a, b in (("x1", "x2"), ("x2", "x1"))), op
    for wrong in ("sigmoid(sigmoid(x1)) -> sigmoid(x1)",  # idempotence: relu's axiom, not sigmoid's
                  "relu(sigmoid(x1)) -> sigmoid(x1)",  # true of the real sigmoid, needs its positivity
                  "tanh(x1) -> sigmoid(x1)", "sigmoid(x1) -> tanh(x1)"):
        assert not any(line.startswith(wrong) for line in lines), wrong
