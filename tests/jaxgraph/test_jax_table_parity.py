"""JaxEnv with TASO's data rules against Env, step for step (`jaxgraph.parity.replay_parity`), on graphs of planted
TASO patterns and random op soups: in the default selection the rules that match the planted graphs (and a few that
do not), in the slow one the whole table under every matcher."""

import chex
import jax
import numpy as np
import pytest

from jaxgraph import jax_match
from jaxgraph.backends import TASO
from jaxgraph.parity import fitting_env, replay_parity
from jaxgraph.patterns import DATA_FAMILY, taso_rules
from jaxgraph.random_graphs import random_taso_graph

from .brute_force import planted_graphs
from .conftest import jit
from .test_jax_patterns import DATA_PATTERNS


def _planted(count: int, first_seed: int = 0) -> list:
    return planted_graphs(DATA_PATTERNS, count, first_seed)


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
    chex.clear_trace_counter()  # a freed env's bound methods may hash as this one's
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


def test_jitted_matching_of_the_initial_graphs_equals_envs(table):
    """`JaxEnv.locations`, the jitted matching every step runs, on each initial graph: the xfer mask, location mask and
    slots (in order) that `params()` takes from Env's matcher, data rules among them."""
    env, graphs, _, _ = table
    locate = jit(env.locations)
    data = np.array([rule.family == DATA_FAMILY for rule in env.rules] + [False])
    offered = 0
    for graph in graphs:
        params = env.params(graph)
        mine = locate(jax.tree.map(lambda leaf: leaf[0], params.instances))
        for got, want in zip(mine, (params.xfer_mask[0], params.location_mask[0], params.location_nodes[0])):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        offered += int(np.asarray(params.xfer_mask[0])[data].sum())
    assert offered >= len(graphs)


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


@pytest.mark.parametrize("root_chunk, shape_block, max_locations",
                         [(1, 3, 4), pytest.param(2, 1, 1, marks=pytest.mark.slow)])
def test_matching_in_short_rounds_equals_env_step_for_step(root_chunk, shape_block, max_locations, monkeypatch):
    """The data rules matched `root_chunk` roots per round and shape-checked `shape_block` passes per round (for
    `jax_match.ROOT_CHUNK` and `SHAPE_BLOCK`): with one root per round, a rule's passes at several roots are merged
    across rounds; with blocks of 3 or 1 of every rule's passes laid end to end, blocks straddle rules; with L = 1
    location, fewer than some rules have, the rounds stop at the L-th structural pass. Every state equal to Env's,
    step for step."""
    monkeypatch.setattr(jax_match, "ROOT_CHUNK", root_chunk)
    monkeypatch.setattr(jax_match, "SHAPE_BLOCK", shape_block)
    graphs = _planted(3, 10)
    rules = [r for r in _matched_rules(graphs, unmatched=2) if r.family == DATA_FAMILY]
    assert max(max(len(r.find(g)) for r in rules) for g in graphs) > 1
    env = fitting_env(graphs, TASO, max_locations=max_locations, rules=rules, matcher="padded")
    reset, step = jit(env.reset), jit(env.step)
    reports = [replay_parity(env, reset, step, g, 3, seed) for seed, g in enumerate(graphs)]
    assert [m for r in reports for m in r.mismatches] == []
    assert sum(r.steps for r in reports) >= 40
