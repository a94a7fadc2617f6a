"""The general adversarial search: masked dense instances, PISA's moves on hand-worked chains, the
acceptance rule and cooling schedule, presets and bad input."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsched._moves import MOVES, MoveConfig, perturb, topological_relabel
from jaxsched.adversarial import (
    SEARCH_PRESETS,
    accept_probability,
    best_chains,
    search,
    search_config,
)
from jaxsched.dense import dense_plan, random_instance, related_instance, to_padded, to_problem
from jaxsched.jax_listsched import list_schedule_padded
from jaxsched.listsched import PRESETS, list_schedule, make_plan, schedule


def _edges(instance):
    n = int(instance.num_tasks)
    adj = np.triu(np.asarray(instance.adj)[:n, :n], 1)
    return frozenset(zip(*map(lambda a: a.tolist(), np.nonzero(adj))))


def _moved(instance, moves, keys) -> list:
    """`perturb` of `instance` under each of `keys`, as one jitted, vmapped program (as the search runs it; the
    same draws as one call per key, in a third of the time of eager calls)."""
    batch = jax.jit(jax.vmap(lambda key: perturb(key, instance, moves)))(keys)
    return [jax.tree.map(lambda leaf, i=i: leaf[i], batch) for i in range(len(keys))]


@pytest.mark.parametrize(
    "name", ["CPOP", "MinMin", *(pytest.param(n, marks=pytest.mark.slow) for n in ("PEFT", "FastestNode"))]
)
def test_masked_instances_schedule_as_their_real_part(name):
    """A 5-task, 3-processor instance padded to 8 x 5 schedules as the NumPy reference schedules its
    unpadded `Problem` (float64)."""
    config = PRESETS[name]
    with jax.enable_x64(True):

        @jax.jit
        @jax.vmap
        def run(key, draws):
            instance = random_instance(key, 5, 3, 0.5, jnp.float64, shape=(8, 5))
            plan = dense_plan(instance, config, draws)
            return instance, list_schedule_padded(to_padded(instance), plan, config)

        draws = np.random.default_rng(0).integers(0, 2**31 - 1, (6, 8)).astype(np.int32)
        instances, out = run(jax.random.split(jax.random.key(3), 6), draws)
        for b in range(6):
            problem = to_problem(jax.tree.map(lambda x, b=b: x[b], instances))
            chex.assert_shape(problem.comp, (5, 3))
            reference = list_schedule(problem, config, make_plan(problem, config)._replace(draws=draws[b, :5]))
            np.testing.assert_array_equal(np.asarray(out.proc[b, :5]), reference.proc)
            np.testing.assert_allclose(np.asarray(out.finish[b, :5]), reference.finish, rtol=1e-12)


def test_related_instance_is_cost_over_speed_and_data_over_strength():
    """Hand-worked: two tasks (cost 2 and 4), edge data 3, speeds 1 and 2, link strength 0.5."""
    instance = related_instance([2.0, 4.0], [1.0, 2.0], [0], [1], [3.0], [[1.0, 0.5], [0.5, 1.0]], max_tasks=4)
    problem = to_problem(instance)
    np.testing.assert_allclose(problem.comp, [[2.0, 1.0], [4.0, 2.0]])
    np.testing.assert_allclose(problem.data, [3.0])
    # HEFT: task 0 on p1 (finish 1), task 1 on p1 (finish 3) rather than p0 (1 + 3 / 0.5 + 4 = 11)
    assert schedule(problem, "HEFT").makespan == pytest.approx(3.0)
    with pytest.raises(ValueError, match="topological"):
        related_instance([1.0, 1.0], [1.0], [1], [0], [1.0])


def test_add_edge_on_a_chain_has_one_choice():
    """On the chain 0 -> 1 -> 2 the only dependency PISA can add is 0 -> 2."""
    chain = related_instance([0.5, 0.5, 0.5], [1.0, 1.0], [0, 1], [1, 2], [0.5, 0.5])
    moves = MoveConfig(("add_edge",), 0.1, (0.1, 1.0), (0.1, 1.0))
    for moved in _moved(chain, moves, jax.random.split(jax.random.key(0), 8)):
        assert _edges(moved) == {(0, 1), (1, 2), (0, 2)}


def test_add_edge_after_a_removal_renumbers_topologically():
    """With only 1 -> 2 left, the additions are 0 -> 1, 0 -> 2, 1 -> 0 and 2 -> 0 (2 -> 1 would close a
    cycle); renumbered lowest ready index first, they read as the edge sets below (worked by hand)."""
    instance = related_instance([0.1, 0.2, 0.3], [1.0], [1], [2], [0.5])
    moves = MoveConfig(("add_edge",), 0.1, (0.1, 1.0), (0.1, 1.0))
    expected = {
        frozenset({(0, 1), (1, 2)}),  # 0 -> 1
        frozenset({(0, 2), (1, 2)}),  # 0 -> 2
        frozenset({(0, 1), (0, 2)}),  # 1 -> 0: order 1, 0, 2
    }  # 2 -> 0: order 1, 2, 0, edges 0 -> 1 -> 2, as 0 -> 1
    seen = {_edges(moved) for moved in _moved(instance, moves, jax.random.split(jax.random.key(1), 40))}
    assert seen == expected
    relabelled = topological_relabel(instance._replace(adj=instance.adj.at[2, 0].set(True)))
    np.testing.assert_allclose(np.asarray(relabelled.weight), [0.2, 0.3, 0.1])  # order 1, 2, 0


def test_nudges_stay_within_step_and_range():
    """A +/- 0.1 nudge of a weight of 0.95 lands in [0.85, 1.0] (clipped at 1); redraws fall in range."""
    instance = related_instance([0.95, 0.95], [0.5], [0], [1], [0.95])
    nudge = MoveConfig(("task_weight",), 0.1, (0.1, 1.0), (0.1, 1.0))
    weights = np.stack([moved.weight for moved in _moved(instance, nudge, jax.random.split(jax.random.key(2), 50))])
    changed = weights[weights != np.float32(0.95)]
    assert changed.size > 40 and changed.min() >= 0.85 - 1e-6 and changed.max() <= 1.0
    assert np.any(weights == 1.0) or changed.max() > 0.99  # the clip is reached or nearly


def test_acceptance_rules_by_hand():
    """PISA: better always; otherwise exp(-(new / old) / T). Metropolis: exp((new - old) / T)."""
    np.testing.assert_allclose(accept_probability(2.0, 1.0, 10.0, "pisa"), 1.0)
    np.testing.assert_allclose(accept_probability(1.0, 2.0, 10.0, "pisa"), np.exp(-0.05), rtol=1e-6)
    np.testing.assert_allclose(accept_probability(1.0, 1.0, 0.1, "pisa"), np.exp(-10.0), rtol=1e-5)
    np.testing.assert_allclose(accept_probability(1.0, 1.5, 0.5, "metropolis"), np.exp(-1.0), rtol=1e-6)


def test_pisa_preset_keeps_links_fixed_for_etf_pairs():
    """SAGA's script: pairs with ETF start on unit speeds and never move a link; the other pairs use all six
    of PISA's moves."""
    config = search_config("pisa", names=("HEFT", "ETF", "MET"), chains_per_pair=1)
    masks, unit = config.move_masks, config.unit_speed_pairs
    pairs = [tuple(config.names[i] for i in pair) for pair in config.pairs]
    for pair, mask, is_unit in zip(pairs, masks, unit):
        assert is_unit == ("ETF" in pair)
        assert mask.sum() == (5 if "ETF" in pair else 6)
        assert not mask[MOVES.index("toggle_edge")]


def test_pisa_preset_takes_sagas_steps():
    """T = 10 * 0.99^k while above 0.1: k = 0 .. 458 (ln 100 / -ln 0.99 = 458.2), 459 steps."""
    config = search_config("pisa")
    assert len(config.temperatures) == 459
    assert config.num_tasks == (3, 5) and config.chains_per_pair == 10
    assert search_config("pisa-2024").value_range == (1e-9, 1.0)
    assert set(SEARCH_PRESETS) >= {"pisa", "pisa-2024", "uniform"}


@pytest.mark.slow
def test_pisa_search_from_a_given_start_replays_in_numpy():
    """A short PISA search from a given chain: every best instance keeps its size and its ratio is the
    NumPy reference's."""
    config = search_config("pisa", names=("HEFT", "FastestNode"), chains_per_pair=2, steps=30, num_tasks=4, num_procs=3)
    start = related_instance([0.5] * 4, [0.3, 0.6, 0.9], [0, 1, 2], [1, 2, 3], [0.5] * 3, np.full((3, 3), 0.5))
    chains = search(jax.random.key(0), config, start=start)
    table, index = best_chains(chains, config)
    for (a, b), c in np.ndenumerate(index):
        if a == b:
            continue
        problem = to_problem(jax.tree.map(lambda x, c=c: x[c], chains.best))
        chex.assert_shape(problem.comp, (4, 3))
        ratio = schedule(problem, config.names[a]).makespan / schedule(problem, config.names[b]).makespan
        np.testing.assert_allclose(ratio, table[a, b], rtol=1e-4)


def test_bad_search_input_is_one_named_error():
    with pytest.raises(ValueError, match="unknown search preset"):
        search_config("pisa-2025")
    with pytest.raises(ValueError, match="value_range"):
        search_config("pisa", value_range=(-1.0, 1.0))
    with pytest.raises(ValueError, match="value_range"):
        search_config("pisa", value_range=(0.0, 0.0))
    with pytest.raises(ValueError, match="memory_limit"):
        search_config("pisa", chains_per_pair=10**7)
    with pytest.raises(ValueError, match="start"):
        search_config("uniform", start="star")
