"""Builders: full-size structure against published counts, shapes, and argument checks."""

import math

import numpy as np
import pytest

from jaxgraph import MODELS, bert, resnet18, squeezenet1_1

# Trainable parameters (torchvision counts batch-norm weight and bias, not running statistics):
# torchvision's resnet18, resnet50, squeezenet1_1 and inception_v3 without its auxiliary classifier.
PUBLISHED = {
    "resnet18": (11_689_512, {"conv2d": 20, "batchnorm": 20, "matmul": 1}),
    "resnet50": (25_557_032, {"conv2d": 53, "batchnorm": 53, "matmul": 1}),
    "squeezenet1_1": (1_235_496, {"conv2d": 26, "concat": 8}),
    "inception_v3": (23_834_568, {"conv2d": 94, "batchnorm": 94, "concat": 15}),
    "bert": (8 * 4 * 1024 * 1024 + 8, {"matmul": 8 * 6, "softmax": 8}),
}


@pytest.fixture(scope="module")
def full_size():
    return {name: build() for name, build in MODELS.items()}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_full_size_structure_matches_published_networks(full_size, name):
    graph = full_size[name]
    params, ops = PUBLISHED[name]
    trainable = sum(math.prod(n.shape) for n in graph.nodes.values()
                    if n.op == "weight" and not n.name.endswith(("running_mean", "running_var")))
    assert trainable == params
    assert {op: graph.op_counts[op] for op in ops} == ops
    expected = {"y": (64, 1024)} if name == "bert" else {"logits": (1, 1000)}
    assert graph.output_shapes == expected


def test_bert_attention_is_live():
    """TASO's example left the attention ops dead; here every layer's output depends on its softmax."""
    graph = bert(layers=2, hidden=64, heads=4, seq_length=8)
    softmax = set(graph.by_op["softmax"])
    out = graph.outputs[0].node
    ancestors, stack = set(), [out]
    while stack:
        node = stack.pop()
        if node not in ancestors:
            ancestors.add(node)
            stack.extend(r.node for r in graph.nodes[node].inputs)
    assert softmax <= ancestors and len(softmax) == 2
    x = graph.inputs[0]
    assert sum(graph.nodes[u.node].op == "matmul" for u in graph.uses(x)) == 3  # Q, K, V share the input


def test_builders_are_seeded_and_scale():
    a, b = resnet18(width=0.25, image_size=32), resnet18(width=0.25, image_size=32)
    c = resnet18(width=0.25, image_size=32, seed=1)
    weight = next(i for i, n in a.nodes.items() if n.op == "weight")
    np.testing.assert_array_equal(a.nodes[weight].value, b.nodes[weight].value)
    assert (a.nodes[weight].value != c.nodes[weight].value).any()
    assert a.nodes[weight].shape == (16, 3, 7, 7) and a.input_shapes == {"input": (1, 3, 32, 32)}


def test_bad_arguments():
    with pytest.raises(ValueError, match="not divisible"):
        bert(hidden=100, heads=16)
    with pytest.raises(ValueError, match="heads"):  # today: ZeroDivisionError
        bert(heads=0)
    with pytest.raises(ValueError, match="layers"):  # today: a graph whose output is its input
        bert(layers=0)
    with pytest.raises(ValueError, match="width"):  # today: "cannot convert float NaN to integer"
        resnet18(width=float("nan"))
    with pytest.raises(ValueError, match="width"):  # today: every layer silently one channel wide
        resnet18(width=-1.0)
    with pytest.raises(ValueError, match="batch"):
        resnet18(batch=0)
    with pytest.raises(ValueError, match="does not fit"):
        squeezenet1_1(image_size=16)
