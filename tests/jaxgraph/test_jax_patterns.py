"""TASO's data rules in the jitted environment (`jaxgraph.jax_patterns`): JaxEnv with the full table against Env, step
for step, on graphs of planted TASO patterns and random op soups; the reader table against the graph's own use lists;
the pruning of rules against the ops host rewrites actually make; the bounds refused with named errors."""

from collections import Counter

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgraph import Env, GraphBuilder, jax_match
from jaxgraph.backends import TASO
from jaxgraph.jax_env import JaxEnv
from jaxgraph.jax_match import cloned_rules
from jaxgraph.jax_patterns import lower, reader_table
from jaxgraph.jax_rules import JAX_RULE_FAMILIES, JAX_RULES
from jaxgraph.parity import fitting_env, replay_parity
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


def _matched_rules(graphs: list, unmatched: int = 6) -> list:
    """The hand rules and the data rules with a location in some graph of `graphs` (Env's matcher finds it), then the
    first `unmatched` data rules that match none although every op they need occurs in the graphs (so the jitted
    matcher keeps them and must find nothing)."""
    rules = taso_rules()
    ops = {node.op for g in graphs for node in g.nodes.values()}
    data = [i for i, r in enumerate(rules) if r.family == DATA_FAMILY]
    matched = {i for i in data if any(rules[i].find(g) for g in graphs)}
    idle = [i for i in data if i not in matched and {o.op for o in rules[i].pattern.src} <= ops][:unmatched]
    assert len(idle) == unmatched
    return [r for i, r in enumerate(rules) if r.family != DATA_FAMILY or i in matched or i in idle]


@pytest.fixture(scope="module", params=["matched", pytest.param("full", marks=pytest.mark.slow)])
def table(request):
    """One JaxEnv over planted graphs and its jitted reset and step, traced once, with the `padded` matcher (the
    smallest program; the CPU default's compilation is most of a minute, the slow tests run it). `matched`: the hand
    rules and the data rules that match the graphs plus six that do not (`_matched_rules`), a third less to compile;
    `full`: TASO_RULES whole (the slow selection)."""
    graphs = _planted(8)
    rules = taso_rules() if request.param == "full" else _matched_rules(graphs)
    env = fitting_env(graphs, TASO, rules=rules, matcher="padded")
    return env, graphs, jit(chex.assert_max_traces(env.reset, n=1)), jit(chex.assert_max_traces(env.step, n=1))


def test_jitted_env_with_the_table_equals_env_step_for_step(table):
    """Random action sequences over the hand rules and TASO's data rules together: every state equal to Env's
    (graph, masks, locations in order, slots, features, edges, cost, reward), most data rules offered and fired.
    The slow test and `benchmarks/jax_env_parity.py --taso 40` run the target's thousands of steps."""
    env, graphs, reset, step = table
    reports = [replay_parity(env, reset, step, g, 3, seed) for seed, g in enumerate(graphs)]
    assert [m for r in reports for m in r.mismatches] == []
    data = {x for x, rule in enumerate(env.rules) if rule.family == DATA_FAMILY}
    applied = set().union(*(r.applied for r in reports)) & data
    assert sum(r.steps for r in reports) >= 150 and len(applied) >= 30


@pytest.mark.slow
@pytest.mark.parametrize("matcher", ["by-ops", "by-plan", "per-rule", "by-width"])
def test_every_matcher_equals_env_step_for_step(matcher):
    """The other groupings of the data rules (the fixture's is `padded`) on the same planted graphs."""
    graphs = _planted(8)
    env = fitting_env(graphs, TASO, rules=taso_rules(), matcher=matcher)
    reset, step = jit(env.reset), jit(env.step)
    reports = [replay_parity(env, reset, step, g, 3, seed) for seed, g in enumerate(graphs)]
    assert [m for r in reports for m in r.mismatches] == []
    assert sum(r.steps for r in reports) >= 150


def _step_size(env: JaxEnv) -> int:
    """Instructions of the lowered (StableHLO) program of `env.step`."""
    params, key = env.params(), jax.random.key(0)
    state, _ = jax.eval_shape(env.reset, key, params)
    text = jax.jit(env.step).lower(key, state, jnp.zeros(2, jnp.int32), params).as_text()
    return sum(" = " in line for line in text.splitlines())


SIZE_BOUND = 0.01  # clones of existing rules may grow the step's program by at most 1% (gathers of their rows)


@pytest.mark.parametrize("matcher, clones", [("by-ops", 100), ("padded", 100),
                                             pytest.param("by-plan", 100, marks=pytest.mark.slow),
                                             pytest.param("per-rule", 6, marks=pytest.mark.slow)])
def test_cloned_rules_add_data_not_program(matcher, clones, monkeypatch):
    """Six data rules of six plan shapes, then with `clones` clones under new xfer ids: a grouped matcher's step keeps
    its program size (within `SIZE_BOUND`) and traces the matcher as often (once per group, `chex.assert_max_traces`);
    the per-rule matcher, the one that fails this, traces one more matcher per clone (six: about 35% larger)."""
    graph = random_taso_graph(0)
    data = [r for r in taso_rules() if r.family == DATA_FAMILY]
    groups = JaxEnv(graph, rules=data, matcher="by-ops").data_rules.groups
    base = [data[int(rows[0])] for _, _, rows in groups[:6]]
    traced, sizes, traces = jax_match.match_rule, [], []

    def counting(calls: list):
        return lambda *args, **kwargs: calls.append(1) or traced(*args, **kwargs)

    for rules in (base, cloned_rules(base, clones)):
        env = JaxEnv(graph, rules=rules, matcher=matcher, max_locations=8)
        assert sum(len(rows) for _, _, rows in env.data_rules.groups) == len(rules)  # none pruned
        calls = []  # the clones may trace the matcher no more often than the six rules did
        chex.clear_trace_counter()  # counts are kept per code object, across the parametrized cases
        bounded = traces and matcher != "per-rule"
        matcher_fn = chex.assert_max_traces(counting(calls), n=traces[0]) if bounded else counting(calls)
        monkeypatch.setattr(jax_match, "match_rule", matcher_fn)
        sizes.append(_step_size(env))
        traces.append(len(calls))
    if matcher == "per-rule":
        assert sizes[1] > (1 + 10 * SIZE_BOUND) * sizes[0] and traces[1] == 2 * traces[0]
    else:
        assert sizes[1] <= (1 + SIZE_BOUND) * sizes[0] and traces[1] == traces[0] > 0


def test_unknown_matcher_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown matcher 'fastest'"):
        JaxEnv(random_taso_graph(0), matcher="fastest")


@pytest.mark.slow
def test_full_table_parity_target():
    """0 mismatches over 1,000+ steps on 40 planted graphs and 20 op soups, under one compilation each."""
    rules = taso_rules()
    steps = 0
    for graphs in (_planted(40, 100), [random_taso_graph(seed, blocks=8) for seed in range(20)]):
        env = fitting_env(graphs, TASO, rules=rules)
        reset, step = jit(env.reset), jit(env.step)
        reports = [replay_parity(env, reset, step, g, 4, seed) for seed, g in enumerate(graphs)]
        assert [m for r in reports for m in r.mismatches] == []
        steps += sum(r.steps for r in reports)
    assert steps >= 1000


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
