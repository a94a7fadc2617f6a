"""Rule tables side by side: equal keys for rules equal up to renaming and commutativity, the generated rules
TASO's table lacks, the restriction option and its bad input, and a search's new rewrites named."""

import json

import chex
import numpy as np
import pytest

from jaxgraph import TASO, GraphBuilder, Roofline, greedy
from jaxgraph.pattern_data import DATA_FILE
from jaxgraph.rule_tables import generated_rule_table, generated_table, new_xfers, table_keys, taso_table

CONV = {"kernel": [3, 3], "stride": [1, 1], "padding": "SAME", "activation": "none"}
CONV_RELU = dict(CONV, activation="relu")
# TASO's xfer 82 (conv then relu -> one conv with a relu) with other input names
FUSE = {"xfer": 1000, "src": [{"op": "conv2d", "inputs": [[-2, 0], [-1, 0]], "attrs": CONV},
                              {"op": "relu", "inputs": [[0, 0]], "attrs": {}}],
        "dst": [{"op": "conv2d", "inputs": [[-2, 0], [-1, 0]], "attrs": CONV_RELU}], "mapped": [[[1, 0], [0, 0]]]}
# relu(relu(x)) -> relu(x), worked by hand: relu is idempotent
IDEMPOTENT = {"xfer": 1001, "src": [{"op": "relu", "inputs": [[-1, 0]], "attrs": {}},
                                    {"op": "relu", "inputs": [[0, 0]], "attrs": {}}],
              "dst": [{"op": "relu", "inputs": [[-1, 0]], "attrs": {}}], "mapped": [[[1, 0], [0, 0]]]}


def _distribute(xfer: int, swap: bool) -> dict:
    """a * (b + c) -> a * b + a * c; `swap` writes it (c + b) * a -> b * a + c * a with renamed inputs."""
    a, b, c = ([-3, 0], [-1, 0], [-2, 0]) if swap else ([-1, 0], [-2, 0], [-3, 0])
    src = [{"op": "add", "inputs": [c, b] if swap else [b, c], "attrs": {}},
           {"op": "mul", "inputs": [[0, 0], a] if swap else [a, [0, 0]], "attrs": {}}]
    dst = [{"op": "mul", "inputs": [b, a] if swap else [a, b], "attrs": {}},
           {"op": "mul", "inputs": [c, a] if swap else [a, c], "attrs": {}},
           {"op": "add", "inputs": [[0, 0], [1, 0]], "attrs": {}}]
    return {"xfer": xfer, "src": src, "dst": dst, "mapped": [[[1, 0], [2, 0]]]}


def _write(tmp_path, rules):
    path = tmp_path / "generated.json"
    path.write_text(json.dumps({"source": "test", "rules": rules}))
    return path


def test_keys_are_equal_up_to_renaming_and_commutativity_only():
    keys = table_keys([FUSE, IDEMPOTENT, _distribute(1002, False), _distribute(1003, True)])
    taso = table_keys(json.loads(DATA_FILE.read_text())["rules"])
    assert keys[1000] == taso[82]
    assert keys[1002] == keys[1003]
    assert len({keys[1000], keys[1001], keys[1002]}) == 3
    assert table_keys([dict(FUSE, src=[dict(FUSE["src"][0], attrs=dict(CONV, kernel=[5, 5])), FUSE["src"][1]])]) \
        == {1000: None}  # a 5x5 kernel: outside the generator's worlds


def test_new_xfers_are_the_rules_tasos_table_lacks(tmp_path):
    taso = json.loads(DATA_FILE.read_text())["rules"]
    assert not any([o["op"] for o in r["src"]] == ["relu", "relu"] for r in taso)  # the reference, read by hand
    path = _write(tmp_path, [FUSE, IDEMPOTENT])
    assert new_xfers(path) == {1001}
    chex.assert_equal([p.xfer for p in generated_table(path)[0]], [1000, 1001])
    chex.assert_equal([p.xfer for p in generated_table(path, "new")[0]], [1001])


def test_a_rule_wrong_off_the_square_world_is_dropped_and_named(tmp_path):
    # concat(a, b; axis 1) @ concat(c, d; axis 0) = a @ c + b @ d where a's columns match c's rows (always on
    # square shapes): swapping both concats' parts is right there, wrong where the parts' sizes differ
    src = [{"op": "concat", "inputs": [[-1, 0], [-2, 0]], "attrs": {"axis": 1, "rank": 2}},
           {"op": "concat", "inputs": [[-3, 0], [-4, 0]], "attrs": {"axis": 0, "rank": 2}},
           {"op": "matmul", "inputs": [[0, 0], [1, 0]], "attrs": {"activation": "none"}}]
    dst = [{"op": "concat", "inputs": [[-2, 0], [-1, 0]], "attrs": {"axis": 1, "rank": 2}},
           {"op": "concat", "inputs": [[-4, 0], [-3, 0]], "attrs": {"axis": 0, "rank": 2}},
           {"op": "matmul", "inputs": [[0, 0], [1, 0]], "attrs": {"activation": "none"}}]
    swap = {"xfer": 1002, "src": src, "dst": dst, "mapped": [[[2, 0], [2, 0]]]}
    patterns, rejected = generated_table(_write(tmp_path, [IDEMPOTENT, swap]))
    chex.assert_equal([p.xfer for p in patterns], [1001])
    chex.assert_equal(rejected, (1002,))


def test_bad_restriction_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="restrict"):
        generated_table(_write(tmp_path, [FUSE]), "lowering")
    with pytest.raises(FileNotFoundError):
        generated_table(tmp_path / "absent.json")


def test_a_search_names_the_new_rewrites_it_applies(tmp_path):
    table = generated_rule_table(_write(tmp_path, [FUSE, IDEMPOTENT]))
    b = GraphBuilder()
    x = b.input("x", (1, 2, 4, 4))
    w = b.weight("w", np.ones((2, 2, 3, 3), np.float32))
    conv = b.add("conv2d", [x, w], stride=(1, 1), pads=(1, 1, 1, 1))
    graph = b.build({"y": b.add("relu", [b.add("relu", [x])]), "z": b.add("relu", [conv])})
    result = greedy(graph, table.rules, Roofline(backend=TASO))
    chex.assert_equal(result.graph.op_counts, {"conv2d": 1, "relu": 1})
    assert len(result.history) == 2  # relu(relu(x)) -> relu(x); a fused conv and relu (old: hand rule or xfer 82)
    new = table.new_rewrites(result.history)
    assert len(new) == 1 and "1001" in new[0]


def test_matching_rules_and_the_restricted_table(tmp_path):
    table = generated_rule_table(_write(tmp_path, [FUSE, IDEMPOTENT]))
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    once = b.build({"y": b.add("relu", [x])})
    twice = b.build({"y": b.add("relu", [b.add("relu", [x])])})
    assert table.matching([once]) == frozenset()
    assert table.matching([once, twice]) == {1001}  # relu over relu; no conv for xfer 1000's source
    restricted = table.restricted(frozenset({1001}))
    chex.assert_equal([p.xfer for p in restricted.patterns], [1001])
    assert len(restricted.rules) == len(table.rules) - 1 and restricted.new == {1001}


def test_reachable_rules_need_every_source_kind_in_the_graph_or_made_by_fusion(tmp_path):
    """A rule is reachable when every source op's kind is in the graph (or is a conv kind's fused or biased form,
    which hand rules make): the relu rule in a graph of one relu (where it does not match yet), the conv rules
    only with a SAME-padded conv, the rule over the fused conv too, and none of them with a VALID conv."""
    unfuse = dict(FUSE, xfer=1002, src=FUSE["dst"] + [{"op": "relu", "inputs": [[0, 0]], "attrs": {}}],
                  mapped=[[[1, 0], [0, 0]]])  # relu(conv_relu(x, w)) -> conv_relu(x, w)
    table = generated_rule_table(_write(tmp_path, [FUSE, IDEMPOTENT, unfuse]))
    b = GraphBuilder()
    x = b.input("x", (1, 2, 4, 4))
    once = b.build({"y": b.add("relu", [x])})
    chex.assert_equal(table.reachable([once]), frozenset({1001}))
    conv = b.add("conv2d", [x, b.weight("w", np.ones((2, 2, 3, 3), np.float32))], pads=(1, 1, 1, 1))
    relu = b.add("relu", [x])
    chex.assert_equal(table.reachable([b.build({"y": conv, "z": relu})]), frozenset({1000, 1001, 1002}))
    valid = b.add("conv2d", [x, b.weight("v", np.ones((2, 2, 3, 3), np.float32))])  # VALID: not FUSE's kind
    chex.assert_equal(table.reachable([b.build({"y": valid, "z": relu})]), frozenset({1001}))


def test_concats_the_hand_merges_make_are_reachable(tmp_path):
    """concat0(concat0(a, b), c) -> concat0(a, concat0(b, c)) on rank 4 (associativity, worked by hand): a graph
    with a conv but no concat can still hold such concats, since MergeConvs concatenates two convs' weights along
    axis 0, so the rule is reachable there; in a graph of one relu it is not."""
    def concat(inputs):
        return {"op": "concat", "inputs": inputs, "attrs": {"axis": 0, "rank": 4}}

    rule = {"xfer": 1003, "src": [concat([[-1, 0], [-2, 0]]), concat([[0, 0], [-3, 0]])],
            "dst": [concat([[-2, 0], [-3, 0]]), concat([[-1, 0], [0, 0]])], "mapped": [[[1, 0], [1, 0]]]}
    table = generated_rule_table(_write(tmp_path, [rule]))
    b = GraphBuilder()
    x = b.input("x", (1, 2, 4, 4))
    chex.assert_equal(table.reachable([b.build({"y": b.add("relu", [x])})]), frozenset())
    conv = b.add("conv2d", [x, b.weight("w", np.ones((2, 2, 3, 3), np.float32))], pads=(1, 1, 1, 1))
    chex.assert_equal(table.reachable([b.build({"y": conv})]), frozenset({1003}))


def test_reachable_refuses_what_is_not_a_graph():
    with pytest.raises(ValueError, match="expected a jaxgraph Graph, got str"):
        taso_table().reachable(["resnet18"])
