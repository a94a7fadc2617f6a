"""JaxEnv against Env on graphs nobody tuned them for: the seeded random graphs of `jaxgraph.random_graphs`, and
one hand-built graph per mismatch found on them (each a named regression test). Every step compares the two
environments' graphs, masks, location order, slots, features, edge rows, costs and rewards
(`jaxgraph.parity`); the regressions also run the rewritten graphs, which must compute what the original does."""

import glob
import os
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgraph import OP_TYPES, Env, GraphBuilder, execute, load_onnx, random_inputs
from jaxgraph.backends import ONNXRUNTIME, TASO, XLA
from jaxgraph.jax_rules import JAX_RULE_FAMILIES
from jaxgraph.onnx_io import batch_one
from jaxgraph.parity import compare_states, fitting_env, replay_parity
from jaxgraph.random_graphs import random_graph
from jaxgraph.rules import RULES

from .conftest import assert_same_outputs, jit

FAST_SEEDS = (9, 16, 21)  # blocks=4: splits feeding convs, scales, shifts, matmuls, pools; they fit the fixture


def test_random_graphs_are_seeded_and_valid():
    """The same seed gives the same graph, another seed another one, and every graph has one output."""
    a, b, c = random_graph(3), random_graph(3), random_graph(4)
    assert a.structure_hash == b.structure_hash != c.structure_hash
    assert a.output_names == ("y",) and len(a.outputs) == 1


def test_random_graphs_hold_every_op_and_the_awkward_shapes():
    """Across 40 seeds: every op of the IR but `opaque`; convs and matmuls reading output 1 or 2 of a split as data,
    as weight and as bias; grouped and strided convs; weights read by two ops; tensors with several consumers."""
    graphs = [random_graph(seed) for seed in range(40)]
    ops = {node.op for g in graphs for node in g.nodes.values()}
    assert ops == set(OP_TYPES) - {"opaque"}
    later_outputs = {(g.nodes[u].op, k) for g in graphs for u, node in g.nodes.items()
                     for k, ref in enumerate(node.inputs) if ref.index > 0}
    assert {("conv2d", 0), ("conv2d", 1), ("conv2d", 2), ("matmul", 0), ("matmul", 1), ("relu", 0), ("mul", 0),
            ("concat", 1), ("split", 0)} <= later_outputs
    convs = [node for g in graphs for node in g.nodes.values() if node.op == "conv2d"]
    assert any(n.attrs["groups"] > 1 for n in convs) and any(n.attrs["stride"] == (2, 2) for n in convs)
    assert any(len(g.uses(w)) > 1 for g in graphs for w in g.by_op["weight"])
    assert any(len(g.uses(i)) > 2 for g in graphs for i, n in g.nodes.items() if not n.constant)


@pytest.mark.parametrize("kwargs, message", [
    (dict(blocks=0), "blocks"), (dict(channels=2), "channels"), (dict(channels=6.0), "channels"),
    (dict(channels=10 + 1), "even"), (dict(image_size=3), "image_size"), (dict(features=1), "features")])
def test_random_graph_refuses_impossible_sizes(kwargs, message):
    with pytest.raises(ValueError, match=message):
        random_graph(0, **kwargs)
    with pytest.raises(ValueError, match="seed"):
        random_graph(-1)


def test_jitted_env_equals_env_on_random_graphs(jitted):
    """The fast slice of `benchmarks/jax_env_parity.py` (three generated graphs, about a hundred random steps, zero
    mismatches) in the compiled environment of test_jax_env: nothing compiles again. The slow test runs the target."""
    jenv, reset, step = jitted
    reports = [replay_parity(jenv, reset, step, random_graph(seed, blocks=4), 10, seed) for seed in FAST_SEEDS]
    assert [m for r in reports for m in r.mismatches] == []
    assert sum(r.steps for r in reports) >= 80


def test_root_lists_allow_for_every_rewrite_of_env():
    """JaxEnv's root lists leave room for `growth` more nodes of an op per rewrite (`JAX_RULE_FAMILIES`): no rewrite
    Env takes on random sequences over generated graphs adds more."""
    rng = np.random.default_rng(0)
    roots = {family.root for family in JAX_RULE_FAMILIES.values()}
    for seed in range(6):
        env = Env(random_graph(seed), max_locations=32)
        obs = env.reset().observation
        for _ in range(25):
            rewrites = np.flatnonzero(obs.xfer_mask[:-1])
            if not len(rewrites):
                break
            xfer = int(rng.choice(rewrites))
            before = Counter(node.op for node in env.graph.nodes.values())
            obs = env.step((xfer, int(rng.choice(np.flatnonzero(obs.location_mask[xfer]))))).observation
            after = Counter(node.op for node in env.graph.nodes.values())
            growth = dict(JAX_RULE_FAMILIES[env.rules[xfer].family].growth)
            assert all(after[op] - before[op] <= growth.get(op, 0) for op in roots), env.rules[xfer].name


# ---------------------------------------------------------------- the regressions, one hand-built graph each


def weight(b, name, shape, seed=0):
    return b.weight(name, np.random.default_rng(seed).uniform(0.5, 1.5, shape).astype(np.float32))


def split_outputs_graph():
    """Convs and matmuls that read output 1 of a split, as data and as weight: relu(conv(split(x)[1])),
    conv(split(x)[1], split(W)[1]) * c, (split(s)[1] @ A) @ B, and part 0 read as well."""
    b = GraphBuilder()
    x, s = b.input("x", (1, 8, 6, 6)), b.input("s", (4, 8))
    low, high = b.add_outputs("split", [x], axis=1, sizes=(4, 4))
    relu = b.add("relu", [b.add("conv2d", [high, weight(b, "w1", (4, 4, 3, 3))], pads=(1, 1, 1, 1))])
    w2 = b.add_outputs("split", [weight(b, "w2", (8, 4, 1, 1), 1)], axis=0, sizes=(4, 4))[1]
    scaled = b.add("mul", [b.add("conv2d", [high, w2]), weight(b, "c", (1, 4, 1, 1), 2)])
    images = b.add("concat", [relu, scaled, b.add("relu", [low])], axis=1)
    t = b.add_outputs("split", [s], axis=1, sizes=(4, 4))[1]
    chain = b.add("matmul", [b.add("matmul", [t, weight(b, "a", (4, 6), 3)]), weight(b, "b", (6, 8), 4)])
    flat = [b.add("reshape", [images], shape=(1, 12 * 36)), b.add("reshape", [chain], shape=(1, 32))]
    return b.build({"y": b.add("concat", flat, axis=1)})


def sibling_matmuls_graph():
    """Three matmuls of different widths (4, 6, 8) on one input, and a linear pair with biases (12 and 4 wide)."""
    b = GraphBuilder()
    s = b.input("s", (4, 8))
    heads = [b.add("matmul", [s, weight(b, f"m{k}", (8, width), k)]) for k, width in enumerate((4, 6, 8))]
    linears = [b.add("add", [b.add("matmul", [s, weight(b, f"l{k}", (8, width), k)]), weight(b, f"c{k}", (width,))])
               for k, width in enumerate((12, 4))]
    return b.build({"y": b.add("concat", [b.add("concat", heads, axis=1), b.add("concat", linears, axis=1)], axis=1)})


def strided_group_graph():
    """A 4-group stride-2 conv and a dense stride-2 conv of one input: two MergeGroupConvs make the first dense, then
    MergeConvs merges the two."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 8))
    grouped = b.add("conv2d", [x, weight(b, "wg", (8, 2, 3, 3))], groups=4, stride=(2, 2), pads=(1, 1, 1, 1))
    dense = b.add("conv2d", [x, weight(b, "wd", (8, 8, 3, 3), 1)], stride=(2, 2), pads=(1, 1, 1, 1))
    return b.build({"y": b.add("concat", [grouped, dense], axis=1)})


def shared_weight_graph():
    """relu(conv(x, w)) twice, the same weight on the same input: fusing both makes the same node twice, which Env's
    patch shares (common-subexpression elimination) and JaxEnv must share too."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 6, 6))
    w = weight(b, "w", (4, 4, 3, 3))
    relus = [b.add("relu", [b.add("conv2d", [x, w], pads=(1, 1, 1, 1))]) for _ in range(2)]
    return b.build({"y": b.add("concat", relus, axis=1)})


def constant_siblings_graph():
    """Matmuls of one constant input w whose weights are computed from each other (m2 = w @ (m0 @ v), m0 = w @ w):
    their merge would read its own output. Beside them two matmuls of an input s, which merge."""
    b = GraphBuilder()
    s, w = b.input("s", (4, 3)), weight(b, "w", (3, 3))
    m0 = b.add("matmul", [w, w])
    m2 = b.add("matmul", [w, b.add("matmul", [m0, weight(b, "v", (3, 3), 1)])])
    heads = [b.add("matmul", [s, weight(b, f"u{k}", (3, 3), 2 + k)]) for k in range(2)]
    return b.build({"y": b.add("concat", [*heads, m0, m2], axis=0)})


def walk(jitted, graph, families, cost_model=None):
    """Apply, in both environments, the first location of the first xfer of each family in turn (every location id
    and the same id in both), comparing the states after each step and running JaxEnv's graph against the original's
    outputs. Returns the rules applied and the Env."""
    jenv, reset, step = jitted
    env = Env(graph, max_locations=jenv.max_locations, rules=jenv.rules, node_capacity=jenv.node_capacity,
              edge_capacity=jenv.edge_capacity, cost_model=jenv.model)
    params = jenv.params(graph)
    state, timestep = reset(jax.random.key(0), params)
    obs = timestep.observation
    env.reset()
    inputs = random_inputs(graph)
    expected = execute(graph, inputs, jit=False)
    applied = []
    for family in families:
        xfer = next(x for x, r in enumerate(jenv.rules) if r.family == family and bool(obs.xfer_mask[x]))
        state, timestep = step(jax.random.key(0), state, jnp.array([xfer, 0]), params)
        expected_step = env.step((xfer, 0))
        obs = timestep.observation
        assert compare_states(jenv, state, obs, graph, env, expected_step.observation) == []
        assert float(timestep.reward) == pytest.approx(expected_step.reward, rel=1e-4, abs=1e-9)
        assert_same_outputs(execute(jenv.decode(state.graph, graph), inputs, jit=False), expected)
        applied.append(jenv.rules[xfer].name)
    return applied, env


def test_rewrites_keep_the_split_output_they_read(jitted):
    """JaxEnv's single-node rewrites used to rewire a conv (or matmul) that read output 1 of a split to output 0:
    a different function. Fusing the relu, folding the scale and associating the matmuls keep output 1."""
    walk(jitted, split_outputs_graph(), ["FuseConvRelu", "FuseConvMul", "AssociateMatmul"])


def test_sibling_matmuls_of_different_widths_in_the_same_location_order(jitted):
    """Env ordered locations by node ids (content hashes for rewrite-made nodes), JaxEnv by slot, so on sibling
    matmuls of different widths one location id meant two merges and the rewards differed. Both now order by slot,
    and a sibling pair comes in both orders; every merge agrees."""
    walk(jitted, sibling_matmuls_graph(), ["MergeLinears", "MergeMatmuls", "MergeMatmuls"])


def test_constant_siblings_whose_weights_depend_on_each_other_are_not_merged(jitted):
    """A sibling merge of m0 and m2 closed a cycle (both environments; the decoded graph could not be read). Where the
    shared input is constant the weights must now be leaves: only the two matmuls of s merge, alike in both."""
    graph = constant_siblings_graph()
    rule = next(r for r in RULES if r.family == "MergeMatmuls")
    heads = {node_id for node_id, node in graph.nodes.items() if node.op == "matmul" and node.inputs[0].node in
             graph.inputs}
    assert {frozenset(location) for location in rule.find(graph)} == {frozenset(heads)}
    walk(jitted, graph, ["MergeMatmuls"])


def test_strided_group_merges_then_merge_convs(jitted):
    """Two stride-2 MergeGroupConvs and a MergeConvs: the merged graph is the same in both environments."""
    applied, _ = walk(jitted, strided_group_graph(), ["MergeGroupConvs", "MergeGroupConvs", "MergeConvs"])
    assert applied[0] == applied[1] == "MergeGroupConvs(stride=2, activation='none')"


def test_identical_rewrite_made_nodes_are_shared(jitted):
    """The second relu fusion makes the node the first one made: one conv in both environments, not two."""
    _, env = walk(jitted, shared_weight_graph(), ["FuseConvRelu", "FuseConvRelu"])
    assert env.graph.op_counts == {"concat": 1, "conv2d": 1}


@pytest.mark.slow
@pytest.mark.parametrize("backend", [TASO, XLA, ONNXRUNTIME], ids=lambda backend: backend.name)
def test_regression_graphs_under_every_backend(backend):
    """Every random sequence on the four regression graphs, under each backend's fused cost."""
    graphs = [split_outputs_graph(), sibling_matmuls_graph(), strided_group_graph(), shared_weight_graph()]
    jenv = fitting_env(graphs, backend)
    reset, step = jit(jenv.reset), jit(jenv.step)
    reports = [replay_parity(jenv, reset, step, g, 30, seed) for seed, g in enumerate(graphs)]
    assert [m for r in reports for m in r.mismatches] == []


@pytest.mark.slow
@pytest.mark.parametrize("backend", [TASO, XLA, ONNXRUNTIME], ids=lambda backend: backend.name)
def test_parity_target_on_generated_graphs(backend):
    """The target, a third per backend: 60 generated graphs in one environment, over 3,400 random steps, every rule
    family fired, zero mismatches (`benchmarks/jax_env_parity.py` prints the same counts)."""
    graphs = [random_graph(seed) for seed in range(60)]
    jenv = fitting_env(graphs, backend)
    reset, step = jit(jenv.reset), jit(jenv.step)
    reports = [replay_parity(jenv, reset, step, g, 12, seed) for seed, g in enumerate(graphs)]
    assert [m for r in reports for m in r.mismatches] == []
    assert sum(r.steps for r in reports) > 3400
    assert {jenv.rules[x].family for r in reports for x in r.applied} == set(JAX_RULE_FAMILIES)


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(glob.glob("tests/data/*.onnx")), ids=os.path.basename)
def test_parity_on_onnx_files(path):
    """Every exported model of tests/data at its own sizes under TASO's cost."""
    graph = load_onnx(path, batch_one(path))
    jenv = fitting_env([graph], TASO)
    report = replay_parity(jenv, jit(jenv.reset), jit(jenv.step), graph, 6, 0)
    assert report.mismatches == () and report.steps >= 6
