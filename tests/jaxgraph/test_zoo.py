"""Zoo models with seeded random weights: every ConstantOfShape weight becomes a random initializer of its
shape, onnxruntime still runs the model, and the seed decides the values."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import numpy_helper  # noqa: E402

from jaxgraph import ZOO_MODELS, zoo_model, zoo_path  # noqa: E402


def test_weights_become_seeded_random_initializers():
    original = onnx.load(zoo_path("squeezenet"))
    shapes = {init.name: tuple(numpy_helper.to_array(init)) for init in original.graph.initializer}
    made = {n.output[0]: shapes[n.input[0]] for n in original.graph.node if n.op_type == "ConstantOfShape"}
    model = zoo_model("squeezenet", seed=1)
    weights = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    assert not any(n.op_type == "ConstantOfShape" for n in model.graph.node)
    assert {name: w.shape for name, w in weights.items() if name in made} == made
    assert all(np.unique(weights[name]).size > 1 for name in made)  # not one value everywhere
    assert [i.name for i in model.graph.input] == ["data_0"]
    again, other = zoo_model("squeezenet", seed=1), zoo_model("squeezenet", seed=2)
    assert again.SerializeToString() == model.SerializeToString()
    last = other.graph.initializer[-1]
    assert not np.array_equal(numpy_helper.to_array(last), weights[last.name])
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    probabilities = session.run(None, {"data_0": x})[0]
    np.testing.assert_allclose(probabilities.sum(), 1.0, rtol=1e-5)  # the model ends in a softmax


def test_unknown_model_is_named():
    with pytest.raises(ValueError, match="resnet9.*squeezenet"):
        zoo_path("resnet9")
    assert len(ZOO_MODELS) == 9
