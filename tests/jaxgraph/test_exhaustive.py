"""Exhaustive optimum: a hand-worked graph, the state budget, and agreement with search where search is exact."""

import numpy as np
import pytest

from jaxgraph import GraphBuilder, cost, exhaustive_search, greedy

from .test_search import conv_bn_relu_chain


def conv_relu():
    b = GraphBuilder()
    x = b.input("x", (1, 4, 8, 8))
    w = b.weight("w", np.ones((4, 4, 3, 3), np.float32))
    return b.build({"y": b.add("relu", [b.add("conv2d", [x, w], pads=(1, 1, 1, 1))])})


def test_hand_worked_conv_relu():
    """Two graphs are reachable (as built, and the relu fused). The fused conv, by hand under the default
    roofline (1e11 FLOP/s, 1e10 B/s, 2 us per kernel): 2 * 256 outputs * 36 taps = 18,432 FLOPs (0.18 us),
    4 B * (256 + 144 + 256) = 2,624 B (0.26 us): 2.2624 us."""
    result = exhaustive_search(conv_relu())
    assert result.explored == 2 and len(result.history) == 1
    assert result.graph.op_counts == {"conv2d": 1}
    assert result.cost == pytest.approx(2.2624e-3, rel=1e-9)


def test_agrees_with_greedy_where_every_step_is_a_saving():
    graph = conv_bn_relu_chain(2)
    result = exhaustive_search(graph)
    assert result.cost == pytest.approx(greedy(graph).cost, rel=1e-9) == pytest.approx(cost(result.graph))
    assert result.graph.op_counts == {"conv2d": 2}


def test_state_budget_refuses_to_guess():
    with pytest.raises(ValueError, match="max_states=3"):
        exhaustive_search(conv_bn_relu_chain(2), max_states=3)
    with pytest.raises(ValueError, match="max_states"):
        exhaustive_search(conv_relu(), max_states=0)
