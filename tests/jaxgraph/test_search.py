"""Search: never increases cost, reaches the known optimum of a toy graph, preserves outputs."""

import numpy as np
import pytest

from jaxgraph import RULES, GraphBuilder, Roofline, cost, execute_reference, greedy, random_inputs, taso_search

from .conftest import FAITHFUL, SMALL, assert_same_outputs, small_model


def conv_bn_relu_chain(layers=3):
    """conv -> batchnorm -> relu, repeated: the optimum fuses each triple into one conv."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (1, 4, 6, 6))
    for i in range(layers):
        w = b.weight(f"w{i}", rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * 0.3)
        c = b.add("conv2d", [x, w], pads=(1, 1, 1, 1))
        params = [b.weight(f"bn{i}.{k}", rng.uniform(0.5, 1.5, 4).astype(np.float32)) for k in range(4)]
        x = b.add("relu", [b.add("batchnorm", [c] + params)])
    return b.build({"y": x})


@pytest.mark.parametrize("search", [greedy, lambda g: taso_search(g, budget=50, progress=False)])
def test_toy_graph_reaches_the_known_optimum(search):
    graph = conv_bn_relu_chain()
    result = search(graph)
    assert result.graph.op_counts == {"conv2d": 3}
    assert all(n.attrs["activation"] == "relu" for n in result.graph.nodes.values() if n.op == "conv2d")
    assert result.cost == pytest.approx(cost(result.graph)) and result.cost < result.initial_cost
    x = random_inputs(graph)
    assert_same_outputs(execute_reference(result.graph, x), execute_reference(graph, x))


def test_history_replays_to_the_result():
    graph = small_model("squeezenet1_1")
    result = taso_search(graph, budget=30, progress=False)
    replayed = graph
    for xfer, location in result.history:
        replayed = RULES[xfer].apply(replayed, location)
    assert replayed.structure_hash == result.graph.structure_hash


@pytest.mark.parametrize("name", sorted(SMALL) + sorted(FAITHFUL))
def test_search_never_increases_cost_and_preserves_outputs(name):
    graph = small_model(name)
    x = random_inputs(graph)
    expected = execute_reference(graph, x)
    model = Roofline()
    for result in (greedy(graph, cost_model=model), taso_search(graph, budget=15, cost_model=model, progress=False)):
        assert result.cost <= result.initial_cost == pytest.approx(cost(graph, model))
        assert len(result.graph) < 2 * len(graph)
        assert_same_outputs(execute_reference(result.graph, x), expected)


def test_taso_search_visits_in_budget_and_rejects_bad_arguments():
    graph = small_model("taso_attention_stack")
    visited = []
    result = taso_search(graph, budget=5, progress=False, on_visit=lambda g, c: visited.append(c))
    assert result.explored == len(visited) == 5 and visited[0] == pytest.approx(result.initial_cost)
    with pytest.raises(ValueError, match="alpha"):
        taso_search(graph, alpha=0.9)
    with pytest.raises(ValueError, match="budget"):
        taso_search(graph, budget=0)


def test_real_bert_offers_no_associativity_gain():
    """In a real encoder the output projection meets a bias add, a residual and a LayerNorm, never the next
    layer's projections: greedy merges the Q/K/V projections with their biases per layer (which saves
    TASO's model two bias adds per merge) and nothing associates."""
    result = greedy(small_model("bert"))  # 2 layers
    names = [RULES[x].name for x, _ in result.history]
    assert names == ["MergeLinears()"] * 2 * 2  # Q+K, then (QK)+V, in each layer
    assert result.graph.op_counts["matmul"] == 2 * (1 + 1 + 2 + 2)  # QKV, output, attention x2, FFN x2


def test_taso_attention_stack_merges_qkv_projections():
    """TASO's stack gain: Q/K/V projections of one input merge into one matmul, and each layer's output
    projection folds into the next layer's merged projection ((x @ Wo) @ Wqkv = x @ (Wo @ Wqkv))."""
    result = greedy(small_model("taso_attention_stack"))  # 3 layers
    counts = result.graph.op_counts
    assert counts["matmul"] == 3 * 2 + 3 + 1  # scores and context per layer, 3 merged QKV, the last output projection
    assert counts["split"] == 3 * 2
    assert [RULES[x].name for x, _ in result.history].count("AssociateMatmul()") == 2


@pytest.mark.parametrize("kwargs, name", [
    (dict(alpha=float("nan")), "alpha"), (dict(alpha=0.9), "alpha"), (dict(budget=0), "budget"),
    (dict(budget=2.5), "budget"), (dict(max_size_factor=float("nan")), "max_size_factor"),
    (dict(max_size_factor=0), "max_size_factor"),
])
def test_taso_search_rejects_bad_arguments(kwargs, name):
    """Today's bug: alpha=nan passed the `alpha < 1` check and ran."""
    with pytest.raises(ValueError, match=name):
        taso_search(small_model("taso_attention_stack"), **kwargs)


def test_greedy_rejects_bad_arguments():
    with pytest.raises(ValueError, match="max_steps"):
        greedy(small_model("taso_attention_stack"), max_steps=-1)
    with pytest.raises(ValueError, match="rule"):
        greedy(small_model("taso_attention_stack"), rules=())


def test_library_searches_are_quiet_by_default(capsys):
    """Library calls print nothing unless asked (today taso_search drew a tqdm bar by default)."""
    graph = small_model("taso_attention_stack")
    greedy(graph)
    taso_search(graph, budget=3)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    taso_search(graph, budget=3, progress=True)
    assert "taso search" in capsys.readouterr().err


def test_alpha_one_still_expands_strictly_cheaper_graphs():
    """With alpha = 1 TASO keeps every strictly cheaper child, so the search follows at least greedy's descent:
    on the conv-batchnorm-relu chain (six improving rewrites) it expands past the start and reaches the fused
    optimum that greedy reaches."""
    graph = conv_bn_relu_chain()
    result = taso_search(graph, alpha=1.0, budget=200, progress=False)
    assert result.explored > 1
    assert result.graph.op_counts == {"conv2d": 3}
    assert result.cost <= greedy(graph).cost + 1e-12
