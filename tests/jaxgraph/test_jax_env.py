"""JaxEnv, the jitted environment, against Env, its reference twin: on random action sequences both agree step
for step on the graph (canonical forms), the xfer mask, the location sets, the node features, the reward and
the cost; one compilation serves every step and every instance of the same sizes."""

from collections import Counter

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgraph import Env, GraphBuilder, Roofline, cost
from jaxgraph.backends import XLA
from jaxgraph.jax_env import (JAX_RULE_FAMILIES, JAX_RULES, JaxEnv, _first_true, _lowest_free, canonical_form, node_costs,
                              node_signatures)
from jaxgraph.rl.toy import toy_graph
from jaxgraph.rules import RULES, make_rule

from .conftest import SMALL, small_model


def mixed_graph(seed: int = 0):
    """Every supported family applies somewhere: conv * constant (with and without conv bias, scalar and
    per-channel, either operand order), conv + per-channel constant (with and without bias), stride 2 SAME
    and VALID convs, conv -> batchnorm -> relu, group convs (4 groups, and 2 with bias and relu), a concat of
    relus and a chain of three matmuls."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, rng.uniform(0.5, 1.5, shape).astype(np.float32))

    x = b.input("x", (1, 4, 8, 8))
    left = b.add("relu", [b.add("conv2d", [x, w("wl", (2, 4, 1, 1))])])
    right = b.add("relu", [b.add("conv2d", [x, w("wr", (2, 4, 3, 3))], pads=(1, 1, 1, 1))])
    y = b.add("concat", [left, right], axis=1)
    y = b.add("conv2d", [y, w("w1", (4, 4, 3, 3)), w("b1", (4,))], pads=(1, 1, 1, 1))
    y = b.add("mul", [y, w("s1", (1, 4, 1, 1))])
    y = b.add("conv2d", [y, w("w2", (4, 4, 1, 1))])
    y = b.add("mul", [w("s2", (1,)), y])
    y = b.add("conv2d", [y, w("w3", (8, 4, 3, 3))], stride=(2, 2), pads=(1, 1, 1, 1))
    y = b.add("add", [y, w("c3", (1, 8, 1, 1))])
    y = b.add("relu", [y])
    y = b.add("conv2d", [y, w("wg1", (8, 2, 3, 3))], groups=4, pads=(1, 1, 1, 1))
    y = b.add("conv2d", [y, w("wg2", (8, 4, 3, 3)), w("bg2", (8,))], groups=2, pads=(1, 1, 1, 1), activation="relu")
    y = b.add("conv2d", [y, w("w4", (8, 8, 1, 1)), w("b4", (8,))])
    y = b.add("add", [w("c4", (8, 1, 1)), y])
    y = b.add("conv2d", [y, w("w5", (8, 8, 3, 3))], stride=(2, 2))
    y = b.add("batchnorm", [y, w("g5", (8,)), w("h5", (8,)), w("m5", (8,)), w("v5", (8,))])
    y = b.add("relu", [y])
    y = b.add("reshape", [y], shape=(1, 8))
    for k, shape in enumerate([(8, 16), (16, 16), (16, 4)]):
        y = b.add("matmul", [y, w(f"a{k}", shape)])
    return b.build({"y": y})


def merge_graph(seed: int = 0):
    """The merge and split families fire: three convs on one input (equal 3x3 kernels, and a 1x1 to enlarge,
    with biases), two relu convs (3x3 and 1x1), two 1x1 convs added (MergeConvsIntoAdd), three bias-free
    matmuls and two linears with biases on one input, whose outputs are concatenated (so merging all three
    and splicing the nested splits lets SplitConcat remove the split)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, rng.uniform(0.5, 1.5, shape).astype(np.float32))

    x = b.input("x", (1, 4, 8, 8))
    plain = [b.add("conv2d", [x, w(f"w{k}", (4, 4, size, size)), w(f"b{k}", (4,))], pads=(size // 2,) * 4)
             for k, size in enumerate((3, 1, 3))]
    relus = [b.add("conv2d", [x, w(f"r{k}", (4, 4, size, size))], pads=(size // 2,) * 4, activation="relu")
             for k, size in enumerate((3, 1))]
    z = b.add("add", [b.add("conv2d", [b.add("concat", plain, axis=1), w("p1", (4, 12, 1, 1))]),
                      b.add("conv2d", [b.add("concat", relus, axis=1), w("p2", (4, 8, 1, 1))])])
    t = b.add("reshape", [z], shape=(4, 64))
    heads = [b.add("matmul", [t, w(f"m{k}", (64, 8))]) for k in range(3)]
    linears = [b.add("add", [b.add("matmul", [t, w(f"l{k}", (64, 12))]), w(f"c{k}", (12,))]) for k in range(2)]
    y = b.add("add", [b.add("concat", heads, axis=1), b.add("concat", linears, axis=1)])
    return b.build({"y": y})


CAPACITY = 64
ROOT_OPS = {family.root for family in JAX_RULE_FAMILIES.values()}


@pytest.fixture(scope="module")
def jitted():
    """One JaxEnv (capacity 64) for every test graph, its reset and step jitted once and checked not to retrace."""
    env = JaxEnv(mixed_graph(), max_locations=32, node_capacity=CAPACITY, edge_capacity=2 * CAPACITY, max_siblings=5,
                 root_capacity=dict.fromkeys(ROOT_OPS, CAPACITY))  # every test graph fits
    reset = jax.jit(chex.assert_max_traces(env.reset, n=1))
    step = jax.jit(chex.assert_max_traces(env.step, n=1))
    return env, reset, step


SIBLING_PAIRS = ("MergeMatmuls", "MergeLinears", "MergeConvs")


def location_key(rule, members, derived):
    """A location as the two envs are compared on it: its members' signatures in order, except a sibling pair
    of two rewrite-made roots (`derived`), which is unordered: Env orders those by content hash, JaxEnv by slot."""
    if rule.family in SIBLING_PAIRS and derived[0] and derived[1]:
        return tuple(sorted((members[0::2], members[1::2])))
    return members


def env_locations(env, reference, xfer, signature):
    """Env's locations of `xfer` as (key, tuple of node signatures)."""
    found = []
    for k in np.flatnonzero(reference.location_mask[xfer]):
        location = env.location(xfer, k)
        members = tuple(signature[i] for i in location)
        found.append((location_key(env.rules[xfer], members, [i not in env.initial_graph.nodes for i in location]),
                      members))
    return found


def jax_location(jenv, state, obs, xfer, location_id, signature):
    """JaxEnv's location `location_id` of `xfer` as (key, tuple of node signatures)."""
    row = [int(s) for s in np.asarray(obs.location_nodes[xfer, location_id]) if s < jenv.node_capacity]
    members = tuple(signature[s] for s in row)
    return location_key(jenv.rules[xfer], members, [int(state.graph.origin[s]) < 0 for s in row]), members


def check_same(jenv, state, obs, instance, env, reference):
    """The jitted state describes the same graph, masks, locations, features and cost as the Env (whose last
    observation is `reference`)."""
    graph = jenv.decode(state.graph, instance)
    assert canonical_form(graph) == canonical_form(env.graph)
    ours, theirs = node_signatures(graph), node_signatures(env.graph)
    np.testing.assert_array_equal(np.asarray(obs.xfer_mask), reference.xfer_mask)
    np.testing.assert_array_equal(np.asarray(obs.location_mask).sum(1), reference.location_mask.sum(1))
    for xfer in np.flatnonzero(reference.xfer_mask[:-1]):
        mine = {jax_location(jenv, state, obs, xfer, k, ours)[0] for k in np.flatnonzero(obs.location_mask[xfer])}
        assert mine == {key for key, _ in env_locations(env, reference, xfer, theirs)}, jenv.rules[xfer].name
    by_signature = {ours[slot]: slot for slot in graph.nodes}
    for node_id, slot in env.node_slots.items():
        np.testing.assert_allclose(np.asarray(obs.graph.nodes[by_signature[theirs[node_id]]]),
                                   reference.graph.nodes[slot], rtol=1e-5, atol=1e-6)
    assert float(state.cost) == pytest.approx(env.cost, rel=1e-5)
    assert float(obs.graph.globals[0, 0]) == pytest.approx(cost(graph), rel=1e-5)
    assert int(np.asarray(obs.edge_mask).sum()) == sum(len(n.inputs) for n in env.graph.nodes.values())
    return ours, theirs


def replay(jenv, reset, step, instance, sequences, seed, stop=0.1):
    """Random action sequences from the jitted env's masks (the NO-OP with probability `stop`), replayed on Env;
    returns the steps taken."""
    env = Env(instance, max_locations=jenv.max_locations, rules=jenv.rules, node_capacity=jenv.node_capacity,
              edge_capacity=jenv.edge_capacity)
    params = jenv.params(instance)
    rng = np.random.default_rng(seed)
    key = jax.random.key(seed)
    taken = 0
    for _ in range(sequences):
        state, obs = reset(key, params)
        reference = env.reset()
        terminated = diverged = False
        while not terminated:
            ours, theirs = check_same(jenv, state, obs, instance, env, reference)
            rewrites = np.flatnonzero(np.asarray(obs.xfer_mask)[:-1])
            xfer = jenv.num_xfers if not len(rewrites) or rng.random() < stop else int(rng.choice(rewrites))
            if xfer == jenv.num_xfers:
                location_id = env_location = 0
            else:
                location_id = int(rng.choice(np.flatnonzero(np.asarray(obs.location_mask[xfer]))))
                wanted, members = jax_location(jenv, state, obs, xfer, location_id, ours)
                keys, env_members = zip(*env_locations(env, reference, xfer, theirs))
                env_location = int(np.flatnonzero(reference.location_mask[xfer])[keys.index(wanted)])
                # a pair of rewrite-made siblings merged in the other order: the graphs then differ in the order
                # of the concatenated weights (same cost); the sequence stops after this step's checks
                diverged = env_members[keys.index(wanted)] != members
            state, obs, reward, terminated, truncated, info = step(key, state, jnp.array([xfer, location_id]), params)
            before = Counter(node.op for node in env.graph.nodes.values())
            reference, env_reward, env_terminated, env_truncated, _ = env.step((xfer, env_location))
            if xfer < jenv.num_xfers:  # the growth JaxEnv's root lists allow for, against Env's own rewrite
                growth = dict(JAX_RULE_FAMILIES[jenv.rules[xfer].family].growth)
                after = Counter(node.op for node in env.graph.nodes.values())
                assert all(after[op] - before[op] <= growth.get(op, 0) for op in ROOT_OPS), jenv.rules[xfer]
            assert float(reward) == pytest.approx(env_reward, rel=1e-4, abs=1e-6 * env.initial_cost)
            taken += 1
            if diverged:  # only the cost is comparable now
                assert float(state.cost) == pytest.approx(env.cost, rel=1e-5)
                break
            assert (bool(terminated), bool(truncated), bool(info["invalid"])) == (env_terminated, env_truncated, False)
        else:
            check_same(jenv, state, obs, instance, env, reference)
    return taken


def test_every_rule_is_supported():
    assert JAX_RULES == RULES


@pytest.mark.parametrize("capacity", [1, 31, 64, 346])
def test_first_locations_and_free_slots_equal_numpy(capacity):
    """The scatter-free location selection and free-slot pick against NumPy's flatnonzero on hundreds of random
    rows: sparse and dense, more true slots than locations, none at all, capacities off the 32-slot block."""
    rng = np.random.default_rng(capacity)
    density = rng.choice([0.0, 0.02, 0.3, 1.0], size=300)
    found = rng.random((300, capacity)) < density[:, None]
    size = 24
    first = np.asarray(jax.jit(_first_true, static_argnums=1)(jnp.asarray(found), size))
    free = np.asarray(jax.jit(jax.vmap(lambda row: _lowest_free(row, 5)))(jnp.asarray(found)))
    for row, ours, slots in zip(found, first, free):
        expected = np.flatnonzero(row)[:size]
        np.testing.assert_array_equal(ours, np.pad(expected, (0, size - len(expected)), constant_values=capacity))
        open_slots = np.flatnonzero(~row)[:5]
        np.testing.assert_array_equal(slots[:len(open_slots)], open_slots)


@pytest.mark.parametrize("name", [*SMALL, "bert", "mobilenet_v2"])
def test_encode_decode_round_trip_and_cost(name):
    graph = small_model(name)
    env = JaxEnv(graph)
    decoded = env.decode(env.encode(graph))
    assert canonical_form(decoded) == canonical_form(graph)
    params = env.params()
    assert float(jax.jit(node_costs)(params.graph, params).sum()) == pytest.approx(cost(graph), rel=1e-5)


def test_jitted_env_equals_env_step_for_step(jitted):
    """Hundreds of random sequences on four instances (the toy with its known optimum, the mixed graph that
    every single-node family matches, the TASO attention stack, the graph every merge and split family matches),
    one compilation for all of them."""
    jenv, reset, step = jitted
    instances = [(toy_graph(3).graph, 100), (mixed_graph(), 100), (small_model("taso_attention_stack"), 40),
                 (merge_graph(), 60)]
    taken = sum(replay(jenv, reset, step, graph, sequences, seed)
                for seed, (graph, sequences) in enumerate(instances))
    assert taken > 600


def test_toy_optimum_is_reached(jitted):
    """Replaying the toy's optimal sequence (fold every batch norm, then fuse every relu) reaches the cost of
    the optimal graph, which is built independently."""
    jenv, reset, step = jitted
    toy = toy_graph(3)
    params = jenv.params(toy.graph)
    state, obs = reset(jax.random.key(0), params)
    for _ in range(toy.optimal_steps):
        xfer = int(np.flatnonzero(np.asarray(obs.xfer_mask)[:-1])[0])
        state, obs, reward, terminated, *_ = step(jax.random.key(0), state, jnp.array([xfer, 0]), params)
        assert float(reward) > 0
    assert bool(terminated)
    assert float(state.cost) == pytest.approx(cost(toy.optimal_graph), rel=1e-5)


def test_invalid_actions_are_penalised_not_applied(jitted):
    jenv, reset, step = jitted
    params = jenv.params()._replace(invalid_penalty=jnp.float32(0.5))
    state, obs = reset(jax.random.key(0), params)
    masked_out = int(np.flatnonzero(~np.asarray(obs.xfer_mask))[0])
    for action in ([masked_out, 0], [0, jenv.max_locations], [-1, 0], [jenv.num_xfers + 3, 0]):
        after, _, reward, terminated, truncated, info = step(jax.random.key(0), state, jnp.array(action), params)
        assert float(reward) == -0.5 and bool(info["invalid"]) and not bool(terminated)
        chex.assert_trees_all_equal(after.graph, state.graph)
        assert float(after.cost) == float(state.cost)
    after, _, reward, terminated, _, info = step(jax.random.key(0), state, jnp.array([jenv.num_xfers, 0]), params)
    assert float(reward) == 0.0 and bool(terminated) and not bool(info["invalid"])


def test_max_steps_truncates(jitted):
    jenv, reset, step = jitted
    params = jenv.params()._replace(max_steps=jnp.int32(1))
    state, obs = reset(jax.random.key(0), params)
    xfer = int(np.flatnonzero(np.asarray(obs.xfer_mask)[:-1])[0])
    _, _, _, terminated, truncated, _ = step(jax.random.key(0), state, jnp.array([xfer, 0]), params)
    assert bool(truncated) and not bool(terminated)


def test_vmapped_steps_equal_single_steps(jitted):
    """A batch of environments over different instances steps as each would alone."""
    jenv, reset, step = jitted
    graphs = [toy_graph(2).graph, mixed_graph(1), toy_graph(4, channels=4).graph, mixed_graph(2)]
    params = jax.tree.map(lambda *leaves: jnp.stack(leaves), *[jenv.params(g) for g in graphs])
    keys = jax.random.split(jax.random.key(0), len(graphs))
    states, obs = jax.jit(jax.vmap(jenv.reset))(keys, params)
    actions = jnp.stack([jnp.array([int(np.flatnonzero(np.asarray(m)[:-1])[-1]), 0]) for m in obs.xfer_mask])
    batched = jax.jit(jax.vmap(jenv.step))(keys, states, actions, params)
    for i in range(len(graphs)):
        one = jax.tree.map(lambda leaf, i=i: leaf[i], params)
        single = step(keys[i], reset(keys[i], one)[0], actions[i], one)
        chex.assert_trees_all_close(jax.tree.map(lambda leaf, i=i: leaf[i], batched[:5]), single[:5], rtol=1e-6)


def test_bad_construction_raises():
    graph = toy_graph(2).graph
    unknown = make_rule("NoSuchFamily", "relu", 1, (), (0, 0), lambda graph, root: (), lambda patch, location: None)
    with pytest.raises(ValueError, match="no JAX implementation"):
        JaxEnv(graph, rules=[unknown])
    with pytest.raises(ValueError, match="max_siblings=2"):
        JaxEnv(small_model("bert"), max_siblings=2).encode(small_model("bert"))
    with pytest.raises(ValueError, match="Roofline"):
        JaxEnv(graph, cost_model=Roofline(backend=XLA))
    with pytest.raises(ValueError, match="does not fit"):
        JaxEnv(graph, node_capacity=10).encode(graph)
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
    state, obs = jenv.reset(jax.random.key(0), jenv.params())
    assert bool(obs.location_mask[merge].any())
    assert bool(obs.xfer_mask[merge]) == offered
    assert Env(graph, rules=rules).reset().xfer_mask[merge]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["squeezenet1_1", "resnet18", "inception_v3", "bert"])
def test_jitted_env_equals_env_on_builders(name):
    graph = small_model(name)
    jenv = JaxEnv(graph, max_locations=64)
    assert replay(jenv, jax.jit(jenv.reset), jax.jit(jenv.step), graph, 30, 0) >= 30


@pytest.mark.slow
def test_jitted_env_equals_env_on_merge_graphs():
    """More sequences on the merge graph (three seeds of its weights: same structure)."""
    jitted_env = JaxEnv(merge_graph(), max_locations=32)
    reset, step = jax.jit(jitted_env.reset), jax.jit(jitted_env.step)
    assert sum(replay(jitted_env, reset, step, merge_graph(seed), 200, seed) for seed in range(3)) > 600


@pytest.mark.slow
def test_ppo_trains_end_to_end_in_one_jitted_program():
    """PureJaxRL style: two seeds of PPO on the toy in one jax.jit(jax.vmap(train)); every rollout reward is
    a cost decrease, so no epoch can return more than the toy's optimum saves (normalised)."""
    from jaxgraph.jax_ppo import make_train
    from jaxgraph.rl.configs import tiny_agent

    toy = toy_graph(2)
    config = tiny_agent()
    config = type(config)(**{**config.__dict__, "epochs": 3, "num_envs": 4, "rollout_steps": 4})
    env = JaxEnv(toy.graph, max_locations=config.max_locations)
    result = jax.jit(jax.vmap(make_train(config, env)))(jax.random.split(jax.random.key(0), 2))
    chex.assert_shape(result.mean_return, (2, 3))
    assert all(np.isfinite(np.asarray(v)).all() for v in jax.tree.leaves(result))
    best = 1.0 - cost(toy.optimal_graph) / cost(toy.graph)
    assert (np.asarray(result.mean_return) <= best + 1e-5).all() and (np.asarray(result.episodes) > 0).all()
