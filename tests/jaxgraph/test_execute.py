"""JAX executor: agrees with the NumPy reference on whole models, compiles once per graph, checks inputs."""

import numpy as np
import pytest

from jaxgraph import execute, execute_reference, greedy, random_inputs
from jaxgraph.execute import _program

from .conftest import assert_same_outputs, small_model


@pytest.mark.parametrize("name", ["squeezenet1_1", "taso_attention_stack",
                                  pytest.param("resnet18", marks=pytest.mark.slow),
                                  pytest.param("resnet50", marks=pytest.mark.slow),
                                  pytest.param("inception_v3", marks=pytest.mark.slow)])
def test_jitted_model_matches_reference_before_and_after_optimization(name):
    graph = small_model(name)
    x = random_inputs(graph)
    expected = execute_reference(graph, x)
    assert_same_outputs(execute(graph, x), expected)
    optimized = greedy(graph).graph  # weight-only ops (folded batch norms, merged weights) are folded first
    assert_same_outputs(execute(optimized, x), expected)


def test_one_compilation_per_graph():
    graph = small_model("taso_attention_stack")
    for seed in range(3):
        x = random_inputs(graph, seed)
        assert_same_outputs(execute(graph, x), execute_reference(graph, x))
    assert _program(graph).jitted._cache_size() == 1


def test_bad_inputs_are_rejected():
    graph = small_model("taso_attention_stack")
    with pytest.raises(ValueError, match="missing \\['x'\\]"):
        execute(graph, {})
    with pytest.raises(ValueError, match="has shape"):
        execute(graph, {"x": np.zeros((3, 3), np.float32)})
