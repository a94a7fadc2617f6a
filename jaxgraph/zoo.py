"""The ONNX model-zoo models that ship inside the `onnx` wheel (`onnx/backend/test/data/light/`), with
seeded random weights.

The light versions make every weight with `ConstantOfShape` (one value everywhere), which no timing or
numerical comparison can use: identical weights hide wrong channel orders and make outputs trivial.
`zoo_model` gives each weight seeded random values of its shape, as real initializers, so onnxruntime and
`load_onnx` both see them as constants. Needs the `onnx` extra.
"""

from __future__ import annotations

import os

import numpy as np

ZOO_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
              "squeezenet", "vgg19", "zfnet512")

# inputs of a normalization that must stay positive (scale and variance) and those that are offsets
_POSITIVE = {("BatchNormalization", 1), ("BatchNormalization", 4), ("InstanceNormalization", 1)}


def zoo_path(name: str) -> str:
    """Path of the light zoo model `name` (one of `ZOO_MODELS`) inside the installed `onnx` package."""
    import onnx

    if name not in ZOO_MODELS:
        raise ValueError(f"unknown zoo model {name!r}; choose from {', '.join(ZOO_MODELS)}")
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no zoo model at {path} (this onnx wheel does not ship the light models)")
    return path


def _random_weight(rng: np.random.Generator, shape: tuple[int, ...], use: tuple[str, int] | None) -> np.ndarray:
    """He-style weights for tensors of rank >= 2 (fan-in from the trailing dimensions), positive values
    for normalization scales and variances, small offsets otherwise."""
    if use in _POSITIVE:
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    if len(shape) >= 2:
        fan_in = max(int(np.prod(shape[1:])), 1)
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    return (0.1 * rng.standard_normal(shape)).astype(np.float32)


def with_random_weights(model, seed: int = 0):
    """A copy of ONNX `model` whose float weights (initializers and `ConstantOfShape` outputs fed by a
    constant shape) hold seeded random values; weights leave the graph inputs (IR version >= 4)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph, rng = model.graph, np.random.default_rng(seed)
    uses = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            uses.setdefault(name, (node.op_type, index))
    constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    made = [n for n in graph.node if n.op_type == "ConstantOfShape" and n.input[0] in constants]
    shapes = {n.output[0]: tuple(int(d) for d in constants[n.input[0]]) for n in made}
    weights = {name: value.shape for name, value in constants.items() if value.dtype == np.float32} | shapes
    made_outputs = set(shapes)
    others = [n for n in graph.node if n.output[0] not in made_outputs or n.op_type != "ConstantOfShape"]
    shape_only = {n.input[0] for n in made} - {name for node in others for name in node.input}
    kept = [init for init in graph.initializer if init.name not in weights and init.name not in shape_only]
    fresh = [numpy_helper.from_array(_random_weight(rng, shape, uses.get(name)), name)
             for name, shape in sorted(weights.items())]
    inputs = [i for i in graph.input if i.name not in constants and i.name not in shapes]
    del graph.initializer[:], graph.node[:], graph.input[:]
    graph.initializer.extend(kept + fresh)
    graph.node.extend(others)
    graph.input.extend(inputs)
    model.ir_version = max(model.ir_version, 4)
    return model


def zoo_model(name: str, seed: int = 0):
    """The light zoo model `name` as an ONNX `ModelProto` with seeded random weights (`with_random_weights`)."""
    import onnx

    return with_random_weights(onnx.load(zoo_path(name)), seed)
