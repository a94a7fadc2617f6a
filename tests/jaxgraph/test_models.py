"""Builders: full-size structure against published counts, shapes, and argument checks."""

import math

import numpy as np
import pytest
import scipy.special

from jaxgraph import (
    MODELS,
    bert,
    execute,
    execute_reference,
    mobilenet_v2,
    random_inputs,
    resnet18,
    squeezenet1_1,
    taso_attention_stack,
    to_onnx,
)

from .conftest import assert_same_outputs, small_model

# Trainable parameters (torchvision counts batch-norm weight and bias, not running statistics):
# torchvision's resnet18, resnet50, squeezenet1_1 and inception_v3 without its auxiliary classifier.
PUBLISHED = {
    "resnet18": (11_689_512, {"conv2d": 20, "batchnorm": 20, "matmul": 1}),
    "resnet50": (25_557_032, {"conv2d": 53, "batchnorm": 53, "matmul": 1}),
    "squeezenet1_1": (1_235_496, {"conv2d": 26, "concat": 8}),
    "inception_v3": (23_834_568, {"conv2d": 94, "batchnorm": 94, "concat": 15}),
    "taso_attention_stack": (8 * 4 * 1024 * 1024 + 8, {"matmul": 8 * 6, "softmax": 8}),
    # BERT-base encoder: 109,482,240 (Hugging Face BertModel) minus embeddings (23,837,184) and pooler
    # (590,592), plus one attention scale constant per layer; torchvision's mobilenet_v2.
    "bert": (85_054_464 + 12, {"matmul": 12 * 8, "layernorm": 12 * 2, "gelu": 12, "softmax": 12, "add": 12 * 8}),
    "mobilenet_v2": (3_504_872, {"conv2d": 52, "batchnorm": 52, "clip": 35, "add": 11}),
}
OUTPUTS = {"taso_attention_stack": {"y": (64, 1024)}, "bert": {"y": (1, 128, 768)}}


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
    assert graph.output_shapes == OUTPUTS.get(name, {"logits": (1, 1000)})


def test_taso_attention_stack_is_live():
    """TASO's example left the attention ops dead; here every layer's output depends on its softmax."""
    graph = taso_attention_stack(layers=2, hidden=64, heads=4, seq_length=8)
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


def numpy_bert(graph, x, layers, heads):
    """An independent float64 BERT encoder (post-norm, exact GELU) reading the builder's weights by name."""
    w = {n.name: n.value.astype(np.float64) for n in graph.nodes.values() if n.op == "weight"}

    def linear(t, name):
        return t @ w[f"{name}.weight"] + w[f"{name}.bias"]

    def layernorm(t, name):
        centred = t - t.mean(-1, keepdims=True)
        return centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + 1e-12) * w[f"{name}.weight"] + w[
            f"{name}.bias"]

    batch, seq, hidden = x.shape
    d = hidden // heads
    for i in range(layers):
        p = f"encoder.layer.{i}"
        q, k, v = (linear(x, f"{p}.attention.self.{part}").reshape(batch, seq, heads, d).transpose(0, 2, 1, 3)
                   for part in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
        x = layernorm(linear(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        inner = linear(x, f"{p}.intermediate.dense")
        inner = 0.5 * inner * (1 + scipy.special.erf(inner / np.sqrt(2)))
        x = layernorm(linear(inner, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    return x


def test_bert_computes_a_real_encoder():
    """Residuals, LayerNorm, GELU feed-forward and biases: the graph equals a hand-written encoder."""
    graph = bert(batch=2, seq_length=5, hidden=16, heads=4, layers=2, intermediate=24)
    x = np.random.default_rng(0).standard_normal((2, 5, 16)).astype(np.float32)
    expected = numpy_bert(graph, x.astype(np.float64), layers=2, heads=4)
    np.testing.assert_allclose(execute_reference(graph, {"x": x})["y"], expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(execute(graph, {"x": x})["y"]), expected, rtol=1e-4, atol=1e-4)


def test_mobilenet_v2_blocks():
    """Depthwise 3x3 convolutions (groups = channels) in every block, ReLU6 as clip(0, 6), residual adds only
    where stride is 1 and channels match (10 in the published network), channels rounded to multiples of 8."""
    graph = mobilenet_v2(image_size=64, width=0.5)
    convs = [n for n in graph.nodes.values() if n.op == "conv2d"]
    depthwise = [n for n in convs if n.attrs["groups"] > 1]
    assert len(depthwise) == 17 and all(n.attrs["groups"] == n.shape[1] == graph.shape(n.inputs[0])[1]
                                        for n in depthwise)
    assert all(n.shape[1] % 8 == 0 for n in convs)
    assert all(n.attrs == {"max": 6.0, "min": 0.0} for n in graph.nodes.values() if n.op == "clip")
    assert graph.op_counts["add"] == 10 + 1 and graph.output_shapes == {"logits": (1, 1000)}


@pytest.mark.parametrize("name", ["bert", "mobilenet_v2"])
def test_faithful_builders_export_to_onnxruntime(name):
    """LayerNormalization, GELU (as torch exports it: Div, Erf, Add, Mul, Mul) and Clip run in onnxruntime
    with the reference's outputs."""
    ort = pytest.importorskip("onnxruntime")
    graph = small_model(name)
    x = random_inputs(graph)
    session = ort.InferenceSession(to_onnx(graph).SerializeToString(), providers=["CPUExecutionProvider"])
    actual = dict(zip([o.name for o in session.get_outputs()], session.run(None, x)))
    assert_same_outputs(actual, execute_reference(graph, x))
