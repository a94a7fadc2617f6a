"""Real ONNX models nobody here wrote, for tests and benchmarks (needs the `onnx` extra).

The onnx wheel ships "light" versions of nine model-zoo CNNs (`onnx/backend/test/data/light`): the real
graphs, with every weight made by a ConstantOfShape of zeros. `with_random_weights` gives such a model
seeded random weights (He-scaled for kernels, in [0.5, 1.5] for vectors, so batch-norm variances stay
positive), which makes output comparisons and timings meaningful.
"""

from __future__ import annotations

import math
import os

import numpy as np

ZOO_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
              "squeezenet", "vgg19", "zfnet512")


def zoo_path(name: str) -> str:
    """Path of the light zoo model `name` inside the installed onnx wheel; FileNotFoundError if absent."""
    import onnx

    if name not in ZOO_MODELS:
        raise ValueError(f"unknown zoo model {name!r}; expected one of {ZOO_MODELS}")
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is missing (the onnx wheel ships it from onnx 1.13 on)")
    return path


def with_random_weights(model, seed: int = 0):
    """A copy of `model` whose ConstantOfShape weights (float outputs of constant shapes) are seeded random
    initializers (the shape constants they leave unused are dropped); nothing else changes."""
    import onnx
    from onnx import numpy_helper

    rng = np.random.default_rng(seed)
    constants = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    for node in model.graph.node:
        constants.update((node.output[0], numpy_helper.to_array(a.t)) for a in node.attribute
                         if node.op_type == "Constant" and a.name == "value")
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    kept = []
    for node in copy.graph.node:
        shape = constants.get(node.input[0]) if node.op_type == "ConstantOfShape" and node.input else None
        value_type = next((a.t.data_type for a in node.attribute if a.name == "value"), onnx.TensorProto.FLOAT)
        if shape is None or value_type != onnx.TensorProto.FLOAT:
            kept.append(node)
            continue
        dims = tuple(int(d) for d in shape)
        if len(dims) >= 2:
            value = rng.standard_normal(dims) * math.sqrt(2.0 / max(math.prod(dims[1:]), 1))
        else:
            value = rng.uniform(0.5, 1.5, dims)
        copy.graph.initializer.append(numpy_helper.from_array(value.astype(np.float32), node.output[0]))
    del copy.graph.node[:]
    copy.graph.node.extend(kept)
    used = {name for node in kept for name in node.input} | {o.name for o in copy.graph.output}
    dropped = {init.name for init in copy.graph.initializer if init.name not in used}  # shapes only
    live = [init for init in copy.graph.initializer if init.name not in dropped]  # ConstantOfShape read
    inputs = [value for value in copy.graph.input if value.name not in dropped]
    del copy.graph.initializer[:], copy.graph.input[:]
    copy.graph.initializer.extend(live)
    copy.graph.input.extend(inputs)
    return copy
