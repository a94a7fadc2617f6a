"""TASO's generated rules as data: the loader rejects bad rule files, every data rule preserves outputs on
instances it matches (NumPy float64 reference executor, several shapes), the generic matcher finds exactly the
locations an independent brute-force matcher (networkx VF2, `brute_force.py`) finds, the location index stays
exact under the full table, and Env and the searches take it."""

import json

import numpy as np
import pytest

from jaxgraph import (
    RULES,
    Env,
    GraphBuilder,
    JaxEnv,
    LocationIndex,
    data_rules,
    execute_reference,
    greedy,
    load_patterns,
    random_inputs,
    random_taso_graph,
    taso_rules,
    taso_search,
)
from jaxgraph.pattern_data import DATA_FILE, excluded_xfers, sample_shapes
from jaxgraph.patterns import CompiledPattern, hand_covered

from .brute_force import mismatches, source_attrs

PATTERNS = load_patterns()
COMPILED = {p.xfer: CompiledPattern(p) for p in PATTERNS}


def _entries():
    return json.loads(DATA_FILE.read_text())["rules"]


def _write(tmp_path, rules):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": rules}))
    return path


# ---------------------------------------------------------------- the rule file


def test_the_table_covers_at_least_120_xfers_with_80_percent_as_data():
    rules = taso_rules()
    assert rules[:len(RULES)] == RULES  # the default table is the full table's prefix
    covered = {x for r in rules for x in r.taso_ids}
    data = {r.taso_ids[0] for r in rules[len(RULES):]}
    excluded = excluded_xfers()
    assert covered | set(excluded) == set(range(151)) and not covered & set(excluded)
    assert len(covered) >= 120 and len(data) >= 0.8 * len(covered)
    assert not data & hand_covered()
    names = [r.name for r in rules]
    assert len(set(names)) == len(names)


def test_loader_rejects_a_malformed_entry_an_unknown_op_and_disagreeing_sides(tmp_path):
    entries = _entries()
    rule = next(e for e in entries if e["xfer"] == 42)  # (a + b) + c -> (a + c) + b
    missing = {k: v for k, v in rule.items() if k != "mapped"}
    with pytest.raises(ValueError, match=r"xfer 42\).*mapped"):
        load_patterns(_write(tmp_path, [missing]))
    unknown = json.loads(json.dumps(rule))
    unknown["dst"][0]["op"] = "softmax"
    with pytest.raises(ValueError, match=r"xfer 42\).*unknown op 'softmax'"):
        load_patterns(_write(tmp_path, [unknown]))
    wrong = json.loads(json.dumps(rule))
    wrong["dst"][1]["op"] = "mul"  # (a + c) * b
    with pytest.raises(ValueError, match=r"xfer 42\).*differ"):
        load_patterns(_write(tmp_path, [wrong]))
    dangling = json.loads(json.dumps(rule))
    dangling["dst"][1]["inputs"][1] = [5, 0]
    with pytest.raises(ValueError, match=r"xfer 42\).*not an output of an earlier op"):
        load_patterns(_write(tmp_path, [dangling]))
    with pytest.raises(ValueError, match=r"xfer 42\).*second rule"):
        load_patterns(_write(tmp_path, [rule, rule]))
    with pytest.raises(FileNotFoundError):
        load_patterns(tmp_path / "absent.json")


# ---------------------------------------------------------------- every rule preserves outputs


def _instance(pattern, shapes, rng, leaves):
    """The source on fresh inputs (`leaves` "input") or weights; its mapped tensors are the outputs."""
    b = GraphBuilder()
    refs = {}
    for e, shape in shapes.items():
        name = f"x{-e}"
        refs[(e, 0)] = (b.input(name, shape) if leaves == "input"
                        else b.weight(name, rng.uniform(-1, 1, shape).astype(np.float32)))
    nodes = []
    for k, pop in enumerate(pattern.src):
        inputs = [refs[tuple(t)] for t in pop.inputs]
        refs[(k, 0)] = b.add(pop.op, inputs, **source_attrs(pop, [b.shape(r) for r in inputs]))
        nodes.append(refs[(k, 0)].node)
    if leaves != "input":  # a graph needs inputs: one added to each output
        outputs = {f"y{i}": b.add("add", [refs[tuple(s)], b.input(f"i{i}", b.shape(refs[tuple(s)]))])
                   for i, (s, _) in enumerate(pattern.mapped)}
    else:
        outputs = {f"y{i}": refs[tuple(s)] for i, (s, _) in enumerate(pattern.mapped)}
    return b.build(outputs), nodes


@pytest.mark.parametrize("xfer", sorted(COMPILED))
def test_every_data_rule_preserves_outputs_on_several_shapes(xfer):
    compiled = COMPILED[xfer]
    rule = compiled.rule()
    rng = np.random.default_rng(xfer)
    checked = 0
    for dims, sizes, leaves in (((2, 3), (3,), "input"), ((2, 3), (3,), "weight"), ((1, 2, 3, 4), (3, 4, 5), "input"),
                                ((1, 2, 3, 4), (3, 4, 5), "input")):
        shapes = sample_shapes(compiled.pattern, rng, dims, sizes, tries=300)
        if shapes is None:
            continue
        graph, nodes = _instance(compiled.pattern, shapes, rng, leaves)
        location = tuple(nodes[k] for k in compiled.order)
        assert location in rule.find(graph), (shapes, leaves)
        inputs = random_inputs(graph, xfer)
        want = execute_reference(graph, inputs)
        after = rule.apply(graph, location)
        after.validate()
        got = execute_reference(after, inputs)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-9, atol=1e-9 * np.abs(want[name]).max())
        checked += 1
    assert checked >= 2


def test_a_rewrite_that_would_close_a_cycle_is_not_a_location():
    """TASO 95: x @ A, x @ B -> split(x @ concat(A, B)). With B computed from x @ A, the merged matmul would
    read its own output."""
    rule = COMPILED[95].rule()
    b = GraphBuilder()
    x = b.input("x", (4, 4))
    y = b.add("matmul", [x, b.weight("A", np.eye(4, dtype=np.float32))])
    z = b.add("matmul", [x, b.add("relu", [y])])
    assert rule.find(b.build({"y": y, "z": z})) == []
    b2 = GraphBuilder()  # the same with B a weight: one location each way round
    x = b2.input("x", (4, 4))
    y = b2.add("matmul", [x, b2.weight("A", np.eye(4, dtype=np.float32))])
    z = b2.add("matmul", [x, b2.weight("B", np.eye(4, dtype=np.float32))])
    assert len(rule.find(b2.build({"y": y, "z": z}))) == 2


# ---------------------------------------------------------------- the matcher against brute force


def test_generic_matcher_equals_brute_force_on_random_graphs():
    differ, found = mismatches(COMPILED.values(), range(25))  # 50 graphs
    assert differ == 0
    assert found >= 200


@pytest.mark.slow
def test_generic_matcher_equals_brute_force_on_1000_graphs():
    differ, found = mismatches(COMPILED.values(), range(500))
    print(f"brute force: {differ} mismatches over 1,000 graphs, {found} locations")
    assert differ == 0


# ---------------------------------------------------------------- the full table in the index, Env and searches


def test_incremental_index_with_the_full_table_matches_a_full_scan():
    rules = taso_rules()
    for seed in range(6):
        rng = np.random.default_rng(seed)
        graph = random_taso_graph(seed, blocks=8)
        index = LocationIndex.build(rules, graph)
        for _ in range(12):
            if not len(index):
                break
            matches = index.matches()
            xfer, location = matches[rng.integers(len(matches))]
            graph, delta = rules[xfer].rewrite(graph, location)
            index = index.update(graph, delta)
            assert index.by_rule == LocationIndex.build(rules, graph).by_rule


def test_env_searches_and_jax_env_take_the_full_table():
    rules = taso_rules()
    graph = random_taso_graph(3, blocks=8)
    env = Env(graph, rules=rules, max_locations=50)
    obs = env.reset().observation
    assert env.num_xfers == len(rules)
    xfers = np.flatnonzero(np.asarray(obs.xfer_mask)[:len(rules)])
    assert len(xfers)
    env.step((int(xfers[-1]), 0))
    env.graph.validate()
    inputs = random_inputs(graph)
    want = execute_reference(graph, inputs)
    for result in (greedy(graph, rules), taso_search(graph, 1.05, 20, rules)):
        got = execute_reference(result.graph, inputs)
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-6 * np.abs(want["y"]).max())
    assert JaxEnv(graph, rules=rules).num_xfers == len(rules)  # its jitted twin: tests/jaxgraph/test_jax_patterns.py
    assert len(data_rules()) == len(PATTERNS)


def test_random_taso_graphs_are_seeded_valid_and_hold_the_pattern_ops():
    from jaxgraph import canonical_form

    graphs = [random_taso_graph(seed) for seed in range(8)]
    assert canonical_form(random_taso_graph(5)) == canonical_form(graphs[5])
    ops = set()
    for graph in graphs:
        graph.validate()
        ops |= set(graph.op_counts)
    assert {"matmul", "conv2d", "add", "mul", "relu", "concat"} <= ops
    with pytest.raises(ValueError, match="channels must be even"):
        random_taso_graph(0, channels=5)
