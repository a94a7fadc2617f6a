"""TASO's data rules in the jitted environment (`jaxgraph.jax_patterns`): cloned rules add data, not program; the
reader table against the graph's own use lists; the pruning of rules against the ops host rewrites actually make; the
bounds refused with named errors. JaxEnv with the table against Env step for step: `test_jax_table_parity.py`."""

from collections import Counter

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgraph import Env, GraphBuilder, jax_match
from jaxgraph.jax_env import JaxEnv
from jaxgraph.jax_match import cloned_rules
from jaxgraph.jax_patterns import lower, reader_table
from jaxgraph.jax_rules import JAX_RULE_FAMILIES, JAX_RULES
from jaxgraph.pattern_data import load_patterns, parse_pattern
from jaxgraph.patterns import DATA_FAMILY, hand_covered, taso_rules
from jaxgraph.random_graphs import random_graph, random_taso_graph

from .brute_force import planted_graphs
from .conftest import jit

DATA_PATTERNS = tuple(p for p in load_patterns() if p.xfer not in hand_covered())


def _planted(count: int, first_seed: int = 0) -> list:
    return planted_graphs(DATA_PATTERNS, count, first_seed)


def _random_walk(env: Env, seed: int, steps: int, stop: float = 0.0):
    """Up to `steps` uniformly random rewrites of `env` from its reset (ending early with probability `stop` per step);
    yields each xfer after applying it."""
    rng = np.random.default_rng(seed)
    obs = env.reset().observation
    for _ in range(steps):
        xfers = np.flatnonzero(obs.xfer_mask[:-1])
        if not len(xfers) or rng.random() < stop:
            return
        xfer = int(rng.choice(xfers))
        obs = env.step((xfer, int(rng.choice(np.flatnonzero(obs.location_mask[xfer]))))).observation
        yield xfer


def _step_size(env: JaxEnv) -> int:
    """Instructions of the lowered (StableHLO) program of `env.step`."""
    params, key = env.params(), jax.random.key(0)
    state, _ = jax.eval_shape(env.reset, key, params)
    text = jax.jit(env.step).lower(key, state, jnp.zeros(2, jnp.int32), params).as_text()
    return sum(" = " in line for line in text.splitlines())


CLONE_BOUND = 2  # instructions a clone of an existing rule may add to the step's program: the slice laying its rows


@pytest.mark.parametrize("matcher, clones", [("by-ops", 100), ("padded", 100),
                                             pytest.param("by-plan", 100, marks=pytest.mark.slow),
                                             pytest.param("per-rule", 6, marks=pytest.mark.slow)])
def test_cloned_rules_add_data_not_program(matcher, clones, monkeypatch):
    """Six data rules of six plan shapes, then with `clones` clones under new xfer ids: a grouped matcher's step keeps
    its program (each clone adds at most `CLONE_BOUND` instructions, the slice of its rows) and traces the matcher as
    often (once per group, `chex.assert_max_traces`) and the shape checker once per program whatever the groups; the
    per-rule matcher, the one that fails this, traces one more matcher per clone."""
    graph = random_taso_graph(0)
    data = [r for r in taso_rules() if r.family == DATA_FAMILY]
    groups = JaxEnv(graph, rules=data, matcher="by-ops").data_rules.groups
    base = [data[int(rows[0])] for _, _, rows in groups[:6]]
    traced, checker, sizes, traces = jax_match.structural_passes, jax_match.shape_checked, [], []

    def counting(function, calls: list):
        return lambda *args, **kwargs: calls.append(1) or function(*args, **kwargs)

    for rules in (base, cloned_rules(base, clones)):
        env = JaxEnv(graph, rules=rules, matcher=matcher, max_locations=8)
        assert sum(len(rows) for _, _, rows in env.data_rules.groups) == len(rules)  # none pruned
        calls, checks = [], []  # the clones may trace the matcher no more often than the six rules did
        chex.clear_trace_counter()  # counts are kept per code object, across the parametrized cases
        bounded = traces and matcher != "per-rule"
        matcher_fn = counting(traced, calls)
        matcher_fn = chex.assert_max_traces(matcher_fn, n=traces[0]) if bounded else matcher_fn
        monkeypatch.setattr(jax_match, "structural_passes", matcher_fn)
        monkeypatch.setattr(jax_match, "shape_checked", counting(checker, checks))
        sizes.append(_step_size(env))
        traces.append(len(calls))
        assert len(checks) == 1
    if matcher == "per-rule":
        assert sizes[1] > sizes[0] + 10 * CLONE_BOUND * clones and traces[1] == 2 * traces[0]
    else:
        assert sizes[1] <= sizes[0] + CLONE_BOUND * clones and traces[1] == traces[0] > 0


@pytest.mark.parametrize("matcher", ["by-ops", "padded"])
def test_a_cloned_rule_offers_its_originals_locations(matcher):
    """Data rules that match a planted graph, then a clone of each under a new xfer id (matched once, its rows picked
    from the original's): every clone's location mask and slots equal its original's, which are not empty."""
    graph = planted_graphs(DATA_PATTERNS, 2)[1]
    found = {}  # four rules with a location, each set of locations its own (Env's matcher)
    for rule in taso_rules():
        locations = rule.find(graph) if rule.family == DATA_FAMILY else None
        if locations and len(found) < 4:
            found.setdefault(repr(sorted(map(repr, locations))), rule)
    base = list(found.values())
    env = JaxEnv(graph, rules=cloned_rules(base, len(base)), matcher=matcher)
    params = env.params()
    mask, nodes = np.asarray(params.location_mask[0]), np.asarray(params.location_nodes[0])
    assert len(base) == 4 and mask[:4].any(axis=1).all()
    assert len({(m.tobytes(), n.tobytes()) for m, n in zip(mask[:4], nodes[:4])}) == 4  # a wrong pick would show
    np.testing.assert_array_equal(mask[4:], mask[:4])
    np.testing.assert_array_equal(nodes[4:], nodes[:4])


def test_unknown_matcher_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown matcher 'fastest'"):
        JaxEnv(random_taso_graph(0), matcher="fastest")


def test_reader_table_lists_each_tensors_distinct_readers_in_slot_order():
    """Against the graph's own use lists: for every tensor, the distinct slots reading it, increasing, cut at S."""
    graph = random_graph(5)
    env = JaxEnv(graph, rules=taso_rules())
    g = env.encode(graph)
    width = 3
    table = np.asarray(jit(reader_table, static_argnums=1)(g, width))
    slot = {node_id: k for k, node_id in enumerate(graph.order)}
    capacity, outputs = env.node_capacity, env.max_outputs
    expected = np.full_like(table, capacity)
    for node_id, node in graph.nodes.items():
        for j in range(len(node.shapes)):
            readers = sorted({slot[u.node] for u in graph.uses(node_id) if graph.nodes[u.node].inputs[u.input_index]
                              == (node_id, j)})
            expected[slot[node_id] * outputs + j, :min(width, len(readers))] = readers[:width]
    np.testing.assert_array_equal(table, expected)
    assert (Counter((table < capacity).sum(axis=1).tolist())[width]) > 0  # some tensor has more readers than S


def test_rules_are_pruned_only_where_their_ops_never_appear():
    """The ops Env's random rewrites with the full table make on random graphs stay inside the environment's
    reachable set, and a pruned rule needs an op outside it; a graph with other ops is refused by name."""
    rules = taso_rules()
    for seed in (1, 2):
        graph = random_graph(seed, blocks=3)
        env = JaxEnv(graph, rules=rules)
        table = env.data_rules
        matched = {i for _, _, rows in table.groups for i in rows}
        for i, pattern in enumerate(table.patterns):
            assert (i in matched) == ({o.op for o in pattern.src} <= table.reachable)
        host = Env(graph, rules=rules, max_locations=16)
        for _ in _random_walk(host, seed, 40):
            assert {node.op for node in host.graph.nodes.values()} <= table.reachable
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    env = JaxEnv(b.build({"y": b.add("matmul", [x, b.weight("w", np.ones((3, 3), np.float32))])}), rules=rules)
    assert "mul" not in env.data_rules.reachable  # no rule makes a mul from matmuls, adds, concats and splits
    c = GraphBuilder()
    y = c.input("x", (2, 3))
    with pytest.raises(ValueError, match="pruned"):
        env.encode(c.build({"y": c.add("mul", [y, y])}))


def test_an_environment_whose_every_rule_is_pruned_offers_the_no_op_alone():
    """Data rules that all need a matmul, on a graph of adds: every rule pruned, nothing to match. Env finds no
    location either; the jitted environment resets and steps with only the NO-OP offered, and it terminates."""
    rules = [r for r in taso_rules() if r.family == DATA_FAMILY and "matmul" in {o.op for o in r.pattern.src}][:3]
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    graph = b.build({"y": b.add("add", [b.add("add", [x, x]), x])})
    assert not any(rule.find(graph) for rule in rules)
    env = JaxEnv(graph, rules=rules)
    assert all(pick is None for pick in env.data_rules.picks)
    params = env.params()
    state, _ = jit(env.reset)(jax.random.key(0), params)
    np.testing.assert_array_equal(np.asarray(state.xfer_mask), [False] * len(rules) + [True])
    assert not np.asarray(state.location_mask).any() and (np.asarray(state.location_nodes) == env.node_capacity).all()
    _, timestep = jit(env.step)(jax.random.key(1), state, jnp.array([len(rules), 0], jnp.int32), params)
    assert float(timestep.discount) == 0.0  # terminated


def test_hand_families_declare_every_op_their_rewrites_make():
    """`JaxRule.makes` (which the pruning trusts) against the nodes Env's hand rules add on random graphs."""
    seen = set()
    for seed in range(12):
        graph = random_graph(seed, blocks=4)
        env = Env(graph, rules=JAX_RULES, max_locations=16)
        before = set(graph.nodes)  # the walk starts from the graph itself
        for xfer in _random_walk(env, seed, 15):
            family = JAX_RULES[xfer].family
            made = {env.graph.nodes[i].op for i in set(env.graph.nodes) - before}
            assert made <= set(JAX_RULE_FAMILIES[family].makes), (family, made)
            seen.add(family)
            before = set(env.graph.nodes)
    assert len(seen) >= 8


def test_every_offered_rewrite_applies_on_planted_graphs():
    """Env with the full table on graphs whose weights feed several patterns: every offered rewrite commits and
    leaves a valid, acyclic graph. A rewrite used to share (as one computation) a node it was removing, and sibling
    merges took a sibling's output, or a tensor computed from it, as the other's weight."""
    rules = taso_rules()
    for seed, graph in enumerate(_planted(40)):
        for sequence in range(3):
            env = Env(graph, rules=rules, max_locations=32)
            for _ in _random_walk(env, 3 * seed + sequence, 200, stop=0.1):
                env.graph.validate()


def test_bounds_are_refused_with_the_xfer_named():
    big = {"xfer": 999, "src": [{"op": "relu", "inputs": [[-1, 0]], "attrs": {}}] + [
        {"op": "relu", "inputs": [[k, 0]], "attrs": {}} for k in range(3)],
        "dst": [{"op": "relu", "inputs": [[-1, 0]], "attrs": {}}], "mapped": [[[3, 0], [0, 0]]]}
    with pytest.raises(ValueError, match="xfer 999"):
        lower([parse_pattern(big)])
    graph = random_taso_graph(0)
    with pytest.raises(ValueError, match=r"xfer \d+: its locations have 3 nodes, over max_location_size=2"):
        JaxEnv(graph, rules=taso_rules(), max_location_size=2)
    with pytest.raises(ValueError, match="max_readers"):
        JaxEnv(graph, rules=taso_rules(), max_readers=1).encode(graph)
