"""Instance generators and a JaxEnv over several graphs (host side: encoding, sizes, draws, bad input)."""

import jax
import numpy as np
import pytest

from jaxgraph import GraphBuilder, JaxEnv, canonical_form, cost, graph_list, random_instances, trap_instances
from jaxgraph.rl import toy_graph


def test_one_environment_holds_every_instance_of_a_pool():
    """Sizes are taken over all the graphs (the largest sets the capacity), every graph is held as itself, and
    the draws reach more than one of them."""
    pool = random_instances(3, seed=5, blocks=3)
    env = JaxEnv(pool.graphs)
    assert env.node_capacity == 2 * max(len(g) for g in pool.graphs)
    params = env.params()
    assert params.instances.op.shape == (3, env.node_capacity)
    for index, graph in enumerate(pool.graphs):
        held = env.decode(jax.tree.map(lambda leaf, index=index: leaf[index], params.instances), index)
        assert canonical_form(held) == canonical_form(graph)
    drawn = {int(env.draw(key, params)) for key in jax.random.split(jax.random.key(0), 12)}
    assert len(drawn) > 1 and drawn <= {0, 1, 2}
    with pytest.raises(ValueError, match="EnvState.instance"):
        env.decode(env.encode(pool.graphs[0]))
    with pytest.raises(ValueError, match="not one of"):
        env.decode(env.encode(pool.graphs[0]), 3)


def test_trap_instances_know_an_optimum_cheaper_than_the_start():
    pool = trap_instances(3, seed=2, min_ops=8, max_ops=14)
    assert len(pool) == 3 and all(o < cost(g) for g, o in zip(pool.graphs, pool.optima))
    fixed = graph_list([toy_graph(2).graph, toy_graph(3).graph])
    assert fixed.optima == (None, None)


def two_output_graph():
    b = GraphBuilder()
    x = b.input("x", (1, 4))
    return b.build({"a": b.add("relu", [x]), "b": b.add("sigmoid", [x])})


def test_bad_instances_raise():
    with pytest.raises(ValueError, match="count"):
        trap_instances(0)
    with pytest.raises(ValueError, match="min_ops"):
        trap_instances(2, min_ops=3)
    with pytest.raises(ValueError, match="channels"):
        random_instances(2, channels=6 + 1)
    with pytest.raises(ValueError, match="Graphs"):
        graph_list(["not a graph"])
    small, large = toy_graph(1).graph, toy_graph(3).graph
    with pytest.raises(ValueError, match="graph 1: .*node capacity"):
        JaxEnv([small, large], node_capacity=len(small)).params()
    with pytest.raises(ValueError, match="output counts"):
        JaxEnv([small, two_output_graph()])
    with pytest.raises(ValueError, match="non-empty"):
        JaxEnv([])
    assert np.asarray(JaxEnv(small).params([small, small]).instances.op).shape[0] == 2
