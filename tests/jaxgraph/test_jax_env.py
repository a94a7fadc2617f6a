"""JaxEnv, the jitted environment, against Env, its reference twin: on random action sequences both agree step
for step on the graph (canonical forms), the xfer mask, the location sets, the node features, the reward and
the cost; one compilation serves every step and every instance of the same sizes."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgraph import Env, GraphBuilder, MeasuredCost, Roofline, cost
from jaxgraph.backends import ONNXRUNTIME, XLA
from jaxgraph.cost import node_cost
from jaxgraph.graph import canonical_form
from jaxgraph.jax_cost import CostParams, node_costs
from jaxgraph.jax_env import JaxEnv
from jaxgraph.jax_graph import first_true, materialized, stack_rows
from jaxgraph.jax_rules import JAX_RULES
from jaxgraph.onnx_io import batch_one, load_onnx
from jaxgraph.parity import replay_parity
from jaxgraph.rl.toy import toy_graph
from jaxgraph.rules import RULES, make_rule

from .conftest import CAPACITY, ROOT_OPS, SMALL, jit, merge_graph, mixed_graph, small_model


def replay(jenv, reset, step, instance, sequences, seed, coverage=None):
    """Random action sequences from the jitted env's masks replayed on Env (`jaxgraph.parity.replay_parity`): no
    mismatch; returns the steps taken. `coverage` (optional): a dict of sets "offered" and "applied" that gains the
    xfers Env offered on the way and the ones the sequences took."""
    report = replay_parity(jenv, reset, step, instance, sequences, seed)
    assert not report.mismatches, report.mismatches[:3]
    if coverage is not None:
        coverage["offered"] |= report.offered
        coverage["applied"] |= report.applied
    return report.steps


def test_every_rule_is_supported():
    assert JAX_RULES == RULES


@pytest.mark.parametrize("capacity", [1, 31, 64, 346])
def test_first_locations_equal_numpy(capacity):
    """The scatter-free location selection against NumPy's flatnonzero on hundreds of random rows: sparse and dense,
    more true slots than locations, none at all, capacities off the 32-slot block."""
    rng = np.random.default_rng(capacity)
    density = rng.choice([0.0, 0.02, 0.3, 1.0], size=300)
    found = rng.random((300, capacity)) < density[:, None]
    size = 24
    first = np.asarray(jit(first_true, static_argnums=1)(jnp.asarray(found), size))
    for row, ours in zip(found, first):
        expected = np.flatnonzero(row)[:size]
        np.testing.assert_array_equal(ours, np.pad(expected, (0, size - len(expected)), constant_values=capacity))


def test_stack_rows_lays_the_picked_rows_in_order_by_slices_alone():
    """Rows picked from three pieces in a shuffled order with fills (None) between them: NumPy's fancy index of the
    pieces stacked with a fill row gives the same array, and the traced program gathers nothing (static slices and
    one concatenation), under vmap too."""
    rng = np.random.default_rng(0)
    pieces = [rng.integers(0, 99, (rows, 3, 2)).astype(np.int32) for rows in (4, 1, 5)]
    picks = [(2, 0), (2, 1), None, None, (0, 3), (0, 0), (0, 1), (1, 0), None, (2, 4), (2, 2), (2, 3), (0, 2)]
    table = np.concatenate([*pieces, np.full((1, 3, 2), -7, np.int32)])
    starts = np.cumsum([0] + [len(p) for p in pieces])
    index = [len(table) - 1 if pick is None else starts[pick[0]] + pick[1] for pick in picks]

    def stack(*arrays):
        return stack_rows(arrays, picks, jnp.full((3, 2), -7, jnp.int32))

    np.testing.assert_array_equal(np.asarray(jit(stack)(*pieces)), table[index])
    batched = [np.stack([p, p + 100]) for p in pieces]
    np.testing.assert_array_equal(np.asarray(jit(jax.vmap(stack))(*batched))[1], table[index] + np.where(
        np.array([pick is None for pick in picks])[:, None, None], 0, 100))
    assert "gather" not in str(jax.make_jaxpr(jax.vmap(stack))(*batched))


def test_materialized_values_are_unchanged_and_computed_before_a_loop_xla_keeps():
    """Values pass through unchanged whatever their first entry (the trip count reads it: 0 and not 0), alone and
    vmapped over a mix of both, and the compiled program keeps the while loop that bounds the fusion (XLA folds a
    loop whose trip count it can prove, which would undo the boundary)."""
    tree = {"ints": np.array([[0, 3], [4, -5]], np.int32), "flags": np.array([True, False]),
            "floats": np.array([1.5, -2.0], np.float32)}
    other = {"ints": tree["ints"] + 7, "flags": ~tree["flags"], "floats": tree["floats"] * 3}
    for values in (tree, other):
        chex.assert_trees_all_equal(jit(materialized)(values), values)
    batched = jax.tree.map(lambda a, b: np.stack([a, b, a]), tree, other)
    chex.assert_trees_all_equal(jit(jax.vmap(materialized))(batched), batched)
    assert " while(" in jax.jit(jax.vmap(materialized)).lower(batched).compile().as_text()


@pytest.mark.parametrize("name", [*SMALL, "bert", "mobilenet_v2"])
def test_encode_decode_round_trip_and_cost(name):
    graph = small_model(name)
    env = JaxEnv(graph)
    decoded = env.decode(env.encode(graph))
    assert canonical_form(decoded) == canonical_form(graph)
    params = CostParams.of(env.model)
    assert float(jit(node_costs)(env.encode(graph), params).sum()) == pytest.approx(cost(graph), rel=1e-5)


def replay_instances(jitted, scale):
    """Random sequences on four instances (the toy with its known optimum, the mixed graph that every single-node
    family matches, the TASO attention stack, the graph every merge and split family matches), `scale` times the
    base counts, with one compilation for all of them; returns the steps taken and the xfer coverage."""
    jenv, reset, step = jitted
    # the attention stack offers no rewrite (each sequence is reset + NO-OP with the same key): one sequence
    instances = [(toy_graph(3).graph, 20 * scale), (mixed_graph(), 20 * scale),
                 (small_model("taso_attention_stack"), 1), (merge_graph(), 15 * scale)]
    coverage = {"offered": set(), "applied": set()}
    taken = sum(replay(jenv, reset, step, graph, sequences, seed, coverage=coverage)
                for seed, (graph, sequences) in enumerate(instances))
    return taken, coverage


def test_node_costs_of_some_rows_equal_host_node_cost():
    """`node_costs(rows=...)` (what a TASO step computes for the slots it wrote) gives, row by row, the host's
    `node_cost` of the node in that slot (slot k holds node k of `graph.order`), repeats and all; fused backends
    refuse rows."""
    graph = small_model("resnet18")
    env = JaxEnv(graph)
    params = CostParams.of(env.model)
    host = np.array([node_cost(env.model, graph, node_id) for node_id in graph.order], np.float32)
    kernels, free = np.flatnonzero(host > 0), np.flatnonzero(host == 0)
    rows = np.array([kernels[3], free[0], kernels[-1], kernels[len(kernels) // 2], kernels[3]])
    ours = np.asarray(jax.jit(node_costs)(env.encode(graph), params, rows=jnp.asarray(rows)))
    chex.assert_trees_all_close(ours, host[rows], rtol=1e-5, atol=1e-9)
    with pytest.raises(ValueError, match="taso"):
        node_costs(env.encode(graph), params, XLA, 4, rows=jnp.asarray(rows))


def test_jitted_env_equals_env_step_for_step(jitted):
    """Over 300 steps in 56 sequences: every xfer that Env offers on the way is taken at least once (21 of the 28;
    the stride-2 group merges and mul folds, two batch-norm folds (stride 1 VALID, stride 2 SAME) and the relu merge
    without enlarging match nowhere in these graphs)."""
    taken, coverage = replay_instances(jitted, 1)
    assert taken > 300
    assert coverage["applied"] == coverage["offered"] and len(coverage["applied"]) == 21


@pytest.mark.slow
def test_jitted_env_equals_env_step_for_step_on_more_sequences(jitted):
    """Three times the sequences of `test_jitted_env_equals_env_step_for_step` (more interleavings of the rules)."""
    taken, coverage = replay_instances(jitted, 3)
    assert taken > 900 and coverage["applied"] == coverage["offered"]


def test_toy_optimum_is_reached(jitted):
    """Replaying the toy's optimal sequence (fold every batch norm, then fuse every relu) reaches the cost of
    the optimal graph, which is built independently."""
    jenv, reset, step = jitted
    toy = toy_graph(3)
    params = jenv.params(toy.graph)
    state, timestep = reset(jax.random.key(0), params)
    for _ in range(toy.optimal_steps):
        xfer = int(np.flatnonzero(np.asarray(timestep.observation.xfer_mask)[:-1])[0])
        state, timestep = step(jax.random.key(0), state, jnp.array([xfer, 0]), params)
        assert float(timestep.reward) > 0
    assert bool(timestep.terminated) and float(timestep.discount) == 0.0
    assert float(state.cost) == pytest.approx(cost(toy.optimal_graph), rel=1e-5)


def test_invalid_actions_are_penalised_not_applied(jitted):
    jenv, reset, step = jitted
    params = jenv.params()._replace(invalid_penalty=jnp.float32(0.5))
    state, timestep = reset(jax.random.key(0), params)
    masked_out = int(np.flatnonzero(~np.asarray(timestep.observation.xfer_mask))[0])
    for action in ([masked_out, 0], [0, jenv.max_locations], [-1, 0], [jenv.num_xfers + 3, 0]):
        after, result = step(jax.random.key(0), state, jnp.array(action), params)
        assert float(result.reward) == -0.5 and bool(result.extras["invalid"]) and bool(result.mid())
        chex.assert_trees_all_equal(after.graph, state.graph)
        assert float(after.cost) == float(state.cost)
    after, result = step(jax.random.key(0), state, jnp.array([jenv.num_xfers, 0]), params)
    assert float(result.reward) == 0.0 and bool(result.terminated) and not bool(result.extras["invalid"])


def test_max_steps_truncates(jitted):
    jenv, reset, step = jitted
    params = jenv.params()._replace(max_steps=jnp.int32(1))
    state, timestep = reset(jax.random.key(0), params)
    xfer = int(np.flatnonzero(np.asarray(timestep.observation.xfer_mask)[:-1])[0])
    _, timestep = step(jax.random.key(0), state, jnp.array([xfer, 0]), params)
    assert bool(timestep.truncated) and not bool(timestep.terminated) and float(timestep.discount) == 1.0


def test_vmapped_steps_equal_single_steps(jitted):
    """A batch of environments over different instances steps as each would alone. The batch starts from the
    single resets stacked (compiling a vmapped reset too took 10-17 s on 2 cores)."""
    jenv, reset, step = jitted
    graphs = [toy_graph(2).graph, mixed_graph(1), toy_graph(4, channels=4).graph, mixed_graph(2)]
    singles = [jenv.params(g) for g in graphs]
    keys = jax.random.split(jax.random.key(0), len(graphs))
    starts = [reset(key, one) for key, one in zip(keys, singles)]
    params, (states, first) = (jax.tree.map(lambda *leaves: jnp.stack(leaves), *parts) for parts in (singles, starts))
    actions = jnp.stack([jnp.array([int(np.flatnonzero(np.asarray(m)[:-1])[-1]), 0])
                         for m in first.observation.xfer_mask])
    batched = jit(jax.vmap(jenv.step))(keys, states, actions, params)
    for i, one in enumerate(singles):
        single = step(keys[i], starts[i][0], actions[i], one)
        chex.assert_trees_all_close(jax.tree.map(lambda leaf, i=i: leaf[i], batched), single, rtol=1e-6)


def test_bad_construction_raises(tmp_path):
    graph = toy_graph(2).graph
    unknown = make_rule("NoSuchFamily", "relu", 1, (), (0, 0), lambda graph, root: (), lambda patch, location: None)
    with pytest.raises(ValueError, match="no JAX implementation"):
        JaxEnv(graph, rules=[unknown])
    with pytest.raises(ValueError, match="max_siblings=2"):
        JaxEnv(small_model("bert"), max_siblings=2).encode(small_model("bert"))
    with pytest.raises(ValueError, match="Roofline"):
        JaxEnv(graph, cost_model=MeasuredCost(cache_dir=tmp_path))
    with pytest.raises(ValueError, match="Roofline"):
        JaxEnv(graph, cost_model=Roofline(backend=dataclasses.replace(XLA, name="custom")))
    with pytest.raises(ValueError, match="need 5 passes.*fusion_passes=4"):
        JaxEnv(small_model("resnet18"), cost_model=Roofline(backend=ONNXRUNTIME), fusion_passes=4).params()
    with pytest.raises(ValueError, match="does not fit"):
        JaxEnv(graph, node_capacity=10).encode(graph)
    with pytest.raises(ValueError, match="edges does not fit edge capacity 3"):
        JaxEnv(graph, edge_capacity=3).encode(graph)
    with pytest.raises(ValueError, match="max_locations"):
        JaxEnv(graph, max_locations=0)
    with pytest.raises(ValueError, match="root none of the rules"):
        JaxEnv(graph, rules=[r for r in RULES if r.family == "FuseConvRelu"], root_capacity={"matmul": 4})
    with pytest.raises(ValueError, match="root_capacity"):
        JaxEnv(graph, root_capacity={"relu": 1}).encode(graph)


def two_heads_graph():
    """x @ A and x @ B (constant A, B) joined by a concat: one MergeMatmuls location, which adds a concat."""
    b = GraphBuilder()
    x = b.input("x", (2, 8))
    heads = [b.add("matmul", [x, b.weight(f"w{k}", np.ones((8, 4), np.float32))]) for k in range(2)]
    return b.build({"y": b.add("concat", heads, axis=1)})


@pytest.mark.parametrize("concats, offered", [(1, False), (2, True)])
def test_root_capacity_is_never_exceeded(concats, offered):
    """A rewrite that would put more concats in the graph than the concat list holds is not offered, as one
    that would exceed the node capacity; Env (no capacities) offers it."""
    graph = two_heads_graph()
    rules = [r for r in RULES if r.family in ("MergeMatmuls", "SplitConcat")]
    merge = [r.family for r in rules].index("MergeMatmuls")
    jenv = JaxEnv(graph, rules=rules, root_capacity={"concat": concats})
    obs = jit(jenv.reset)(jax.random.key(0), jenv.params())[1].observation
    assert bool(obs.location_mask[merge].any())
    assert bool(obs.xfer_mask[merge]) == offered
    assert Env(graph, rules=rules).reset().observation.xfer_mask[merge]


IMPORTED_BERT = "tests/data/bert-legacy-op17.onnx"  # exported by torch; node ids are 64-bit content hashes


def imported_bert():
    return load_onnx(IMPORTED_BERT, batch_one(IMPORTED_BERT))


def test_imported_model_round_trip_and_cost():
    """A real exported model, whose node ids do not fit int32, encodes, decodes and costs as its graph."""
    graph = imported_bert()
    assert max(graph.nodes) > np.iinfo(np.int32).max
    env = JaxEnv(graph)
    decoded = env.decode(env.encode(graph))
    assert canonical_form(decoded) == canonical_form(graph)
    params = env.params()
    assert float(jit(env.node_costs)(env.encode(graph), params).sum()) == pytest.approx(cost(graph), rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["squeezenet1_1", "resnet18", "inception_v3", "bert", "imported_bert"])
def test_jitted_env_equals_env_on_builders(name):
    graph = imported_bert() if name == "imported_bert" else small_model(name)
    jenv = JaxEnv(graph, max_locations=64)
    assert replay(jenv, jit(jenv.reset), jit(jenv.step), graph, 30, 0) >= 30


@pytest.mark.slow
def test_jitted_env_equals_env_on_imported_bert_with_fused_cost():
    """The real exported BERT under the onnxruntime cost, with the sizes the PPO race uses (16 locations, 24 steps)."""
    graph = imported_bert()
    jenv = JaxEnv(graph, max_locations=16, cost_model=Roofline(backend=ONNXRUNTIME), max_steps=24)
    assert replay(jenv, jit(jenv.reset), jit(jenv.step), graph, 40, 0) >= 100


@pytest.mark.slow
def test_jitted_env_equals_env_on_merge_graphs():
    """More sequences on the merge graph (three seeds of its weights: same structure)."""
    jitted_env = JaxEnv(merge_graph(), max_locations=32)
    reset, step = jit(jitted_env.reset), jit(jitted_env.step)
    assert sum(replay(jitted_env, reset, step, merge_graph(seed), 200, seed) for seed in range(3)) > 600


@pytest.mark.slow
def test_ppo_trains_end_to_end_in_one_jitted_program():
    """PureJaxRL style: two seeds of PPO on the toy in one jax.jit(jax.vmap(train)); every rollout reward is
    a cost decrease, so no epoch can return more than the toy's optimum saves (normalised)."""
    from jaxgraph.rl import make_jax_train as make_train
    from jaxgraph.rl.configs import tiny_agent

    toy = toy_graph(2)
    config = tiny_agent()
    config = type(config)(**{**config.__dict__, "epochs": 3, "num_envs": 4, "rollout_steps": 4})
    env = JaxEnv(toy.graph, max_locations=config.max_locations)
    result = jit(jax.vmap(make_train(config, env)))(jax.random.split(jax.random.key(0), 2))
    chex.assert_shape(result.mean_return, (2, 3))
    assert all(np.isfinite(np.asarray(v)).all() for v in jax.tree.leaves(result))
    best = 1.0 - cost(toy.optimal_graph) / cost(toy.graph)
    assert (np.asarray(result.mean_return) <= best + 1e-5).all() and (np.asarray(result.episodes) > 0).all()


# ---------------------------------------------------------------- the fused backends' cost (XLA, onnxruntime)


def relu_chain(length: int):
    """`length` relus in a row on one input."""
    b = GraphBuilder()
    y = b.input("x", (4, 4))
    for _ in range(length):
        y = b.add("relu", [y])
    return b.build({"y": y})


def constants_graph():
    """Constants onnxruntime fuses and ones it leaves alone after a convolution and a MatMul: conv + scalar bias
    (stays an Add), conv * scalar (folds), conv + [1] and + [1, 1, 1, 1] bias (stay), 2-D MatMul + scalar bias
    (stays) and * scalar (FusedMatMul), 3-D MatMul + [1, 16] bias (stays) and + [16] (Gemm)."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, rng.uniform(0.5, 1.5, shape).astype(np.float32))

    x, v, t = b.input("x", (1, 4, 6, 6)), b.input("v", (4, 8)), b.input("t", (2, 4, 8))
    outputs = []
    for k, (op, shape) in enumerate([("add", ()), ("mul", ()), ("add", (1,)), ("add", (1, 1, 1, 1))]):
        y = b.add("conv2d", [x, w(f"w{k}", (8, 4, 3, 3))], pads=(1, 1, 1, 1))
        outputs.append(b.add(op, [y, w(f"c{k}", shape)]))
    for k, (source, op, shape) in enumerate([(v, "add", ()), (v, "mul", ()), (t, "add", (1, 16)), (t, "add", (16,))]):
        y = b.add("matmul", [source, w(f"m{k}", (8, 16))])
        outputs.append(b.add(op, [w(f"d{k}", shape), y]))
    flat = [b.add("reshape", [y], shape=(1, int(np.prod(b.shape(y))))) for y in outputs]  # one output for JaxEnv
    halves = [b.add("concat", flat[:4], axis=1), b.add("concat", flat[4:], axis=1)]  # at most 4 inputs a node
    return b.build({"y": b.add("concat", halves, axis=1)})


def fused_test_graphs():
    """Every builder (small configurations), the merge, mixed and constants graphs, the toy and six relus in a row,
    by name."""
    graphs = {name: small_model(name) for name in [*SMALL, "bert", "mobilenet_v2"]}
    return {**graphs, "merge": merge_graph(), "mixed": mixed_graph(), "constants": constants_graph(),
            "toy": toy_graph(3).graph, "relu_chain": relu_chain(6)}


@pytest.fixture(scope="module", params=[XLA, ONNXRUNTIME], ids=lambda backend: backend.name)
def fused(request):
    """Per fused backend: one JaxEnv that every test graph fits (the largest builder's sizes, passes for the
    deepest fusions), its `node_costs` jitted once, and the backend."""
    backend = request.param
    passes = max(backend.absorb_depth(graph) for graph in fused_test_graphs().values()) + 2
    largest = small_model("inception_v3")
    env = JaxEnv(largest, max_siblings=5, cost_model=Roofline(backend=backend), fusion_passes=passes,
                 root_capacity=dict.fromkeys(ROOT_OPS, len(largest)))
    return env, jit(env.node_costs), backend


def check_costs(fused, graph, model):
    """The jitted per-slot costs of `graph` (slot k holds node k of `graph.order`) are `node_cost`'s under `model`
    (a Roofline of the fixture's backend), every other slot costs nothing, and the sum is `cost`; returns the sum."""
    env, costs_of, _ = fused
    params = env.params(graph)._replace(cost=CostParams.of(model))
    costs = np.asarray(costs_of(env.encode(graph), params))
    expected = np.array([node_cost(model, graph, node_id) for node_id in graph.order], np.float32)
    chex.assert_trees_all_close(costs[:len(graph)], expected, rtol=1e-5, atol=1e-9)
    assert not costs[len(graph):].any()
    assert float(costs.sum()) == pytest.approx(cost(graph, model), rel=1e-5)
    return float(costs.sum())


@pytest.mark.parametrize("name", list(fused_test_graphs()))
def test_fused_node_costs_equal_host_cost_slot_by_slot(fused, name):
    check_costs(fused, fused_test_graphs()[name], Roofline(backend=fused[2]))


def test_fused_costs_and_rewards_after_random_rewrites(fused):
    """Env (host) takes random rewrites under the fused cost; every graph it visits, encoded, has the host's
    per-node costs and total, and successive totals differ by Env's reward."""
    _, _, backend = fused
    model = Roofline(backend=backend)
    rng = np.random.default_rng(0)
    checked = 0
    for graph in (mixed_graph(), merge_graph(), toy_graph(3).graph, small_model("taso_attention_stack")):
        env = Env(graph, max_locations=32, cost_model=model)
        for _ in range(3):
            obs, total = env.reset().observation, check_costs(fused, graph, model)
            for _ in range(6):
                rewrites = np.flatnonzero(obs.xfer_mask[:-1])
                if not len(rewrites):
                    break
                xfer = int(rng.choice(rewrites))
                timestep = env.step((xfer, int(rng.choice(np.flatnonzero(obs.location_mask[xfer])))))
                obs, reward = timestep.observation, timestep.reward
                after = check_costs(fused, env.graph, model)
                assert total - after == pytest.approx(reward, rel=1e-4, abs=1e-6 * env.initial_cost)
                total, checked = after, checked + 1
    assert checked > 30


# Roofline numbers of the hand-worked graphs: a kernel takes max(FLOPs / 5e8, bytes / 1e9) + 1 us
HAND = dict(peak_flops=5e8, bandwidth=1e9, overhead=1e-6)


def hand_ms(flops: float, traffic: float) -> float:
    return 1e3 * (max(flops / HAND["peak_flops"], traffic / HAND["bandwidth"]) + HAND["overhead"])


def check_by_hand(fused, graph, ops, expected):
    """The jitted costs of the nodes of `ops` (in graph order) are `expected[backend name]`, worked out by hand."""
    per_node = expected[fused[2].name]
    assert check_costs(fused, graph, Roofline(backend=fused[2], **HAND)) == pytest.approx(sum(per_node), rel=1e-5)
    assert [graph.nodes[i].op for i in graph.order if graph.nodes[i].op in ops] == list(ops)
    assert [node_cost(Roofline(backend=fused[2], **HAND), graph, i) for i in graph.order
            if graph.nodes[i].op in ops] == pytest.approx(per_node, rel=1e-9)


def test_conv_batchnorm_relu_by_hand(fused):
    """x [1, 2, 4, 4] -> 1x1 conv to 3 channels -> batch norm -> relu. onnxruntime runs one FusedConv (the batch
    norm folds into weights and a bias step, the relu is its activation); XLA runs the conv, then the batch norm
    and the relu fused in one loop."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    y = b.add("conv2d", [b.input("x", (1, 2, 4, 4)), b.weight("w", rng.random((3, 2, 1, 1), np.float32))])
    y = b.add("batchnorm", [y, *(b.weight(k, rng.random(3, np.float32) + 0.5) for k in "gbmv")])
    graph = b.build({"y": b.add("relu", [y])})
    x, w, out, channels = 2 * 4 * 4, 3 * 2, 3 * 4 * 4, 3  # elements
    conv_flops, conv_bytes = 2 * out * 2, 4 * (x + w + out)  # a multiply-add per output and input channel
    # onnxruntime: conv + bias step (one op per output, reads 3 biases) + relu step (one op per output)
    ort = hand_ms(conv_flops + out + out, conv_bytes + 4 * channels)
    # XLA: the conv alone; the batch norm (2 ops per output, reads x, 4 x 3 parameters, writes) + relu (1 op)
    xla_conv, xla_loop = hand_ms(conv_flops, conv_bytes), hand_ms(2 * out + out, 4 * (out + 4 * channels + out))
    check_by_hand(fused, graph, ("conv2d", "batchnorm", "relu"),
                  {"onnxruntime": [ort, 0.0, 0.0], "xla": [xla_conv, xla_loop, 0.0]})


def test_add_layernorm_by_hand(fused):
    """Two inputs [2, 8] added, then a LayerNorm over the last axis: onnxruntime's SkipLayerNormalization (one
    kernel that also reads the second input), XLA two kernels (a LayerNorm is not elementwise)."""
    b = GraphBuilder()
    s = b.add("add", [b.input("x", (2, 8)), b.input("r", (2, 8))])
    graph = b.build({"y": b.add("layernorm", [s, b.weight("g", np.ones(8, np.float32)),
                                              b.weight("h", np.zeros(8, np.float32))])})
    n = 16
    add, norm = hand_ms(n, 4 * (n + n + n)), hand_ms(n, 4 * (n + 8 + 8 + n))
    skip = hand_ms(n + n, 4 * (n + 8 + 8 + n) + 4 * n)  # + one op per output and the residual read
    check_by_hand(fused, graph, ("add", "layernorm"), {"onnxruntime": [0.0, skip], "xla": [add, norm]})


def test_xla_chain_restarts_after_four_by_hand(fused):
    """Six relus in a row: XLA fuses the first five (a root and XLA_MAX_CHAIN more) and starts a new kernel at the
    sixth; onnxruntime runs each alone (no convolution or MatMul to fuse into)."""
    n = 16
    alone = hand_ms(n, 4 * (n + n))
    check_by_hand(fused, relu_chain(6), ("relu",) * 6,
                  {"xla": [hand_ms(5 * n, 4 * (n + n)), 0, 0, 0, 0, alone], "onnxruntime": [alone] * 6})


@pytest.mark.parametrize("backend, graph, depth", [(XLA, lambda: relu_chain(6), 5),
                                                    (ONNXRUNTIME, lambda: small_model("resnet18"), 5)],
                         ids=["xla-relu-chain", "onnxruntime-resnet18"])
def test_fewer_passes_than_absorb_depth_are_not_enough(backend, graph, depth):
    """The absorb passes are what makes the cost exact: each relu of the chain waits for its producer's answer (5
    passes, worked out by hand), and ResNet-18's residual fusions wait for the layout of the block before. With one
    pass fewer some slot's cost differs (compute-bound roofline, so every fused op counts)."""
    graph = graph()
    assert backend.absorb_depth(graph) == depth
    env = JaxEnv(graph, cost_model=Roofline(backend=backend, bandwidth=1e30))
    params = CostParams.of(env.model)
    exact, short = (np.asarray(jit(node_costs, static_argnums=(2, 3))(env.encode(graph), params, backend, passes))
                    for passes in (depth, depth - 1))
    expected = np.array([node_cost(env.model, graph, i) for i in graph.order], np.float32)
    chex.assert_trees_all_close(exact[:len(graph)], expected, rtol=1e-5, atol=1e-9)
    assert not np.allclose(short[:len(graph)], expected, rtol=1e-5, atol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("backend", [XLA, ONNXRUNTIME], ids=lambda backend: backend.name)
def test_jitted_env_equals_env_with_fused_cost(backend):
    """Random rewrite sequences on the toy, the mixed graph, the attention stack and the merge graph under a fused
    backend: JaxEnv's rewards, costs and node features equal Env's with the same cost model, step for step."""
    instances = [(toy_graph(3).graph, 30), (mixed_graph(), 30), (small_model("taso_attention_stack"), 10),
                 (merge_graph(), 20)]
    passes = max(backend.absorb_depth(graph) for graph, _ in instances) + 2
    jenv = JaxEnv(mixed_graph(), max_locations=32, node_capacity=CAPACITY, edge_capacity=2 * CAPACITY,
                  max_siblings=5, cost_model=Roofline(backend=backend), fusion_passes=passes,
                  root_capacity=dict.fromkeys(ROOT_OPS, CAPACITY))
    reset, step = jit(jenv.reset), jit(jenv.step)
    assert sum(replay(jenv, reset, step, graph, sequences, seed)
               for seed, (graph, sequences) in enumerate(instances)) > 100
