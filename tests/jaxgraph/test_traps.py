"""Trap graphs: the constructed optimum is the exhaustive optimum, computes the same function, and greedy
stops strictly above it."""

import pytest

from jaxgraph import execute_reference, exhaustive_search, greedy, random_inputs, trap_graph

from .conftest import assert_same_outputs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_constructed_optimum_is_the_exhaustive_one_and_greedy_misses_it(seed):
    trap = trap_graph(seed, min_ops=10, max_ops=22, max_traps=2)
    assert 10 <= trap.num_ops <= 22 and 1 <= trap.traps <= 2
    exhaustive = exhaustive_search(trap.graph)
    assert exhaustive.cost == pytest.approx(trap.optimum_cost, rel=1e-9)
    assert greedy(trap.graph).cost > trap.optimum_cost * (1 + 1e-6)
    x = random_inputs(trap.graph)
    assert_same_outputs(execute_reference(trap.optimum, x), execute_reference(trap.graph, x))


def test_seeded_and_sized():
    sizes = {trap_graph(seed).num_ops for seed in range(8)}
    assert len(sizes) > 1 and all(10 <= n <= 60 for n in sizes)
    assert trap_graph(5).graph.structure_hash == trap_graph(5).graph.structure_hash
    assert trap_graph(5).graph.structure_hash != trap_graph(6).graph.structure_hash


@pytest.mark.parametrize("kwargs", [dict(min_ops=3), dict(min_ops=30, max_ops=20), dict(seed=-1)])
def test_impossible_sizes_are_refused(kwargs):
    with pytest.raises(ValueError):
        trap_graph(**{"seed": 0, **kwargs})
