"""Importing what real exporters produce, checked against onnxruntime: the onnx model zoo's light models,
torch exports (tests/data, made by tests/data/export_models.py), every op the importer maps or carries
opaquely on a tiny hand-made model, constant folding, opaque round trips, strict mode, and the cost of
a saved-and-reloaded graph against the cost the search claimed."""

import glob
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from jaxgraph import (  # noqa: E402
    MODELS,
    ONNXRUNTIME,
    TASO,
    XLA,
    GraphBuilder,
    Roofline,
    cost,
    execute,
    execute_reference,
    greedy,
    load_onnx,
    to_onnx,
)
from jaxgraph.onnx_models import ZOO_MODELS, with_random_weights, zoo_path  # noqa: E402

from .conftest import assert_same_outputs, small_model  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
TORCH_EXPORTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(DATA, "*.onnx")))
FAST_ZOO = ("densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet")  # not
# alexnet, vgg19, zfnet512: their large dense layers take 15-50 s to weight and run
BACKENDS = (TASO, ONNXRUNTIME, XLA)
RNG = np.random.default_rng(0)


def run_onnxruntime(model, inputs, optimize: bool = True):
    options = ort.SessionOptions()
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))


def model_inputs(model, shapes=None):
    """Seeded standard-normal float32 inputs for a model's graph inputs (symbolic dims from `shapes`)."""
    rng = np.random.default_rng(1)
    initializers = {i.name for i in model.graph.initializer}
    inputs = {}
    for value in model.graph.input:
        if value.name not in initializers:
            dims = (shapes or {}).get(value.name) or [d.dim_value for d in value.type.tensor_type.shape.dim]
            inputs[value.name] = rng.standard_normal(dims).astype(np.float32)
    return inputs


def check_real_model(model, shapes=None):
    """Load, optimize, save: onnxruntime gives the original outputs, and the saved file costs what the search
    claimed on every backend. Returns the loaded graph."""
    graph = load_onnx(model, shapes)
    optimized = greedy(graph).graph
    saved = to_onnx(optimized)
    x = model_inputs(model, shapes)
    assert_same_outputs(run_onnxruntime(saved, x), run_onnxruntime(model, x, optimize=False))
    reloaded = load_onnx(saved)
    for backend in BACKENDS:
        model_cost = Roofline(backend=backend)
        assert cost(reloaded, model_cost) == pytest.approx(cost(optimized, model_cost), rel=1e-9), backend.name
    return graph


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in FAST_ZOO else pytest.mark.slow)
                                  for n in ZOO_MODELS])
def test_zoo_model_loads_optimizes_saves_and_matches_onnxruntime(name):
    model = with_random_weights(onnx.load(zoo_path(name)), seed=0)
    graph = check_real_model(model)
    assert graph.num_ops > 20


@pytest.mark.parametrize("name", TORCH_EXPORTS)
def test_torch_export_loads_optimizes_saves_and_matches_onnxruntime(name):
    model = onnx.load(os.path.join(DATA, name))
    light = any(n.op_type == "ConstantOfShape" for n in model.graph.node)
    model = with_random_weights(model, seed=0) if light else model
    shapes = {"x": [1, 8, 32]} if name.startswith(("bert", "transformer")) else None
    graph = check_real_model(model, shapes)
    ops = graph.op_counts
    if name.startswith("bert"):  # LayerNorm and GELU arrive as the IR's ops, decomposed or not
        assert ops.get("layernorm") == 4 and ops.get("gelu") == 2 and "opaque" not in ops, ops
    if name.startswith("transformer"):
        assert ops.get("layernorm") == 2 and "opaque" not in ops, ops
    if name.startswith(("resnet18", "squeezenet", "mobilenet")):
        assert "opaque" not in ops, ops


def test_torch_exports_are_shipped_and_small():
    models = {name.split("-")[0] for name in TORCH_EXPORTS}
    assert models == {"bert", "mobilenet_v2", "resnet18", "squeezenet1_1", "transformer_layer"}
    assert sum(os.path.getsize(os.path.join(DATA, n)) for n in TORCH_EXPORTS) < 10 * 2 ** 20


# ---------------------------------------------------------------- one op at a time

def f32(*shape, low=None):
    values = RNG.standard_normal(shape) if low is None else RNG.uniform(low, low + 1.0, shape)
    return values.astype(np.float32)


# (op type, activation inputs, constant inputs (None: absent), attributes, opset)
OP_CASES = [
    ("LRN", [f32(1, 5, 4, 4)], [], dict(size=3, alpha=1e-3, beta=0.7, bias=2.0), 17),
    ("Sum", [f32(2, 3), f32(3), f32(2, 1)], [], {}, 17),
    ("Clip", [f32(3, 4)], [np.float32(-0.5), np.float32(0.3)], {}, 17),
    ("Clip", [f32(3, 4)], [None, np.float32(0.3)], {}, 17),
    ("Clip", [f32(3, 4), f32(1), f32(1)], [], {}, 17),
    ("Clip", [f32(3, 4)], [], dict(min=-0.2, max=0.4), 9),
    ("ReduceMean", [f32(2, 3, 4)], [], dict(axes=[1, -1], keepdims=0), 17),
    ("ReduceMean", [f32(2, 3, 4)], [np.array([-1], np.int64)], {}, 18),
    ("ReduceMax", [f32(2, 3, 4)], [], dict(axes=[0]), 13),
    ("ReduceSum", [f32(2, 3, 4)], [np.array([0, 2], np.int64)], {}, 17),
    ("ReduceSum", [f32(2, 3, 4)], [], dict(keepdims=0), 17),
    ("Gather", [f32(5, 3)], [np.array([[0, -1], [2, 2]], np.int64)], dict(axis=0), 17),
    ("Gather", [f32(2, 5, 3)], [np.array([4, 0], np.int64)], dict(axis=1), 17),
    ("Gather", [f32(2, 5, 3)], [np.array(-2, np.int64)], dict(axis=1), 17),
    ("Gather", [f32(2, 5, 3)], [np.array([3], np.int64)], dict(axis=-2), 17),
    ("LayerNormalization", [f32(2, 3, 4)], [f32(4), f32(4)], dict(epsilon=1e-3), 17),
    ("LayerNormalization", [f32(2, 3, 4)], [f32(3, 4)], dict(axis=1), 17),
    ("Erf", [f32(3, 4)], [], {}, 17),
    ("Div", [f32(3, 4), f32(3, 4, low=0.5)], [], {}, 17),
    ("Div", [f32(3, 4)], [f32(4, low=0.5)], {}, 17),
    ("Sub", [f32(3, 4), f32(4)], [], {}, 17),
    ("Sub", [f32(3, 4)], [f32(4)], {}, 17),
    ("Pow", [f32(3, 4, low=0.5)], [np.float32(2.5)], {}, 17),
    ("Sqrt", [f32(3, 4, low=0.1)], [], {}, 17),
    ("Cast", [f32(3, 4)], [], dict(to=TensorProto.FLOAT), 17),
    ("Mod", [f32(3, 4), f32(4, low=0.5)], [], dict(fmod=1), 17),
    ("Slice", [f32(5, 6)], [np.array([1, -1], np.int64), np.array([4, -7], np.int64),
                            np.array([0, 1], np.int64), np.array([2, -2], np.int64)], {}, 17),
    ("PRelu", [f32(2, 3, 4)], [f32(3, 1)], {}, 17),
    ("LeakyRelu", [f32(3, 4)], [], dict(alpha=0.2), 17),
    ("Pad", [f32(1, 2, 3, 4)], [np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64), np.float32(0.5)], {}, 17),
    ("Pad", [f32(1, 2, 3, 4)], [np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)], dict(mode="reflect"), 17),
    ("Pad", [f32(1, 2, 3, 4)], [], dict(pads=[0, 0, 1, 1, 0, 0, 1, 1], mode="edge"), 9),
    ("ConvTranspose", [f32(1, 4, 3, 3)], [f32(4, 3, 3, 3), f32(6)],
     dict(strides=[2, 2], pads=[1, 0, 1, 1], output_padding=[1, 0], group=2), 17),
    ("ConvTranspose", [f32(1, 2, 5)], [f32(2, 3, 3)], dict(strides=[3], dilations=[2]), 17),
    ("Gemm", [f32(4, 3)], [f32(5, 4), f32(5)], dict(transA=1, transB=1, alpha=0.5, beta=2.0), 17),
    ("Gemm", [f32(3, 4), f32(4, 5), f32(3, 5)], [], dict(beta=0.5), 17),
    ("Flatten", [f32(2, 3, 4)], [], dict(axis=2), 17),
    ("Identity", [f32(3, 4)], [], {}, 17),
    ("Squeeze", [f32(2, 1, 3, 1)], [np.array([1], np.int64)], {}, 17),
    ("Unsqueeze", [f32(2, 3)], [np.array([0, -1], np.int64)], {}, 17),
    ("Expand", [f32(3, 1)], [np.array([2, 3, 4], np.int64)], {}, 17),
    ("Where", [f32(3, 4), f32(4)], [], {}, 17),  # the condition is prepended below
    ("Exp", [f32(3, 4)], [], {}, 17),
    ("Neg", [f32(3, 4)], [], {}, 17),
    ("Abs", [f32(3, 4)], [], {}, 17),
    ("Min", [f32(3, 4), f32(4), f32(3, 1)], [], {}, 17),
    ("Max", [f32(3, 4), f32(4)], [], {}, 17),
    ("Tile", [f32(2, 3)], [np.array([2, 1], np.int64)], {}, 17),
    ("InstanceNormalization", [f32(2, 3, 4, 5)], [f32(3), f32(3)], dict(epsilon=1e-3), 17),
    ("Conv", [f32(1, 4, 9)], [f32(6, 2, 3), f32(6)], dict(group=2, strides=[2], pads=[1, 2]), 17),
    ("Conv", [f32(1, 2, 5, 6, 5)], [f32(3, 2, 3, 2, 3)], dict(pads=[1, 0, 1, 1, 1, 0]), 17),
    ("Conv", [f32(1, 2, 9, 9)], [f32(3, 2, 3, 3)], dict(dilations=[2, 3], pads=[2, 1, 2, 3]), 17),
    ("MaxPool", [f32(1, 2, 9)], [], dict(kernel_shape=[3], strides=[2]), 17),
    ("MaxPool", [f32(1, 2, 5, 6, 5)], [], dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2]), 17),
    ("MaxPool", [f32(1, 2, 9, 9)], [], dict(kernel_shape=[3, 3], dilations=[2, 2]), 17),
    ("MaxPool", [f32(1, 2, 8, 8)], [], dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), 17),
    ("AveragePool", [f32(1, 2, 8, 7)], [], dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), 17),
    ("AveragePool", [f32(1, 2, 8, 7)], [], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                                ceil_mode=1, count_include_pad=1), 17),
    ("AveragePool", [f32(1, 2, 9)], [], dict(kernel_shape=[3], pads=[1, 1], count_include_pad=1), 17),
    ("Gelu", [f32(3, 4)], [], {}, 20),
    ("Gelu", [f32(3, 4)], [], dict(approximate="tanh"), 20),
    ("Softmax", [f32(2, 3, 4)], [], dict(axis=1), 9),
    ("Softmax", [f32(2, 3, 4)], [], {}, 9),
    ("Dropout", [f32(3, 4)], [], {}, 17),
]


def one_op_model(op_type, activations, constants, attrs, opset):
    names = [f"x{k}" for k in range(len(activations))]
    initializers = [numpy_helper.from_array(np.asarray(c), f"c{k}") for k, c in enumerate(constants) if c is not None]
    inputs = names + [f"c{k}" if c is not None else "" for k, c in enumerate(constants)]
    if op_type == "Where":
        initializers.append(numpy_helper.from_array(RNG.uniform(size=(3, 4)) > 0.5, "cond"))
        inputs = ["cond"] + inputs
    node = helper.make_node(op_type, inputs, ["y"], **attrs)
    graph = helper.make_graph([node], op_type, [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
                                                for n, a in zip(names, activations)],
                              [helper.make_empty_tensor_value_info("y")], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, dict(zip(names, activations))


@pytest.mark.parametrize("case", OP_CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(OP_CASES)])
def test_op_matches_onnxruntime(case):
    model, x = one_op_model(*case)
    expected = run_onnxruntime(model, x)
    graph = load_onnx(model)
    assert_same_outputs(execute(graph, x), expected)
    if not (case[0] == "ConvTranspose" and case[3].get("group", 1) > 1):  # onnx.reference lacks grouped ones
        assert_same_outputs(execute_reference(graph, x), expected)
    assert_same_outputs(run_onnxruntime(to_onnx(graph), x), expected)


def test_shape_chain_folds_into_one_reshape():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as torch writes a reshape target; also Size,
    ConstantOfShape and a Cast on constants."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Size", ["x"], ["size"]),
        helper.make_node("Div", ["size", "batch"], ["rest"]),
        helper.make_node("Unsqueeze", ["rest", "axes"], ["rest1"]),
        helper.make_node("Concat", ["batch1", "rest1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("ConstantOfShape", ["rest1"], ["ones"], value=helper.make_tensor("v", TensorProto.INT64,
                                                                                          [1], [1])),
        helper.make_node("Cast", ["ones"], ["scale"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["flat", "scale"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
                              [helper.make_empty_tensor_value_info("y")],
                              [numpy_helper.from_array(np.array(0, np.int64), "zero"),
                               numpy_helper.from_array(np.array([0], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    loaded = load_onnx(model, {"x": (2, 3, 4)})
    assert loaded.op_counts == {"mul": 1, "reshape": 1}
    assert loaded.output_shapes == {"y": (2, 12)}
    x = {"x": f32(2, 3, 4)}
    assert_same_outputs(execute(loaded, x), run_onnxruntime(model, x))


def test_opaque_node_round_trips_verbatim_and_execute_names_what_it_cannot_run():
    lrn = helper.make_node("LRN", ["x"], ["a"], name="norm", size=5, alpha=2e-4, beta=0.6, bias=1.5)
    hardmax = helper.make_node("Hardmax", ["a"], ["y"], name="pick", axis=1)
    graph = helper.make_graph([lrn, hardmax], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    loaded = load_onnx(model)
    assert loaded.op_counts == {"opaque": 2}
    saved = to_onnx(loaded)
    by_type = {n.op_type: n for n in saved.graph.node}
    for original in (lrn, hardmax):
        assert list(by_type[original.op_type].attribute) == list(original.attribute)
    x = {"x": f32(1, 6, 2, 2)}
    expected = run_onnxruntime(model, x)
    assert_same_outputs(run_onnxruntime(saved, x), expected)
    assert_same_outputs(execute_reference(loaded, x), expected)  # onnx.reference runs any standard op
    with pytest.raises(ValueError, match="Hardmax"):
        execute(loaded, x)


def test_strict_mode_rejects_what_the_ir_lacks():
    model, _ = one_op_model("LRN", [f32(1, 5, 4, 4)], [], dict(size=3), 17)
    assert load_onnx(model).op_counts == {"opaque": 1}
    with pytest.raises(ValueError, match="strict mode: LRN"):
        load_onnx(model, strict=True)
    native, _ = one_op_model("Sub", [f32(3, 4)], [f32(4)], {}, 17)
    assert load_onnx(native, strict=True).op_counts == {"add": 1}


def test_unsupported_op_is_named_with_its_domain():
    node = helper.make_node("Attention", ["x", "w", "b"], ["y"], domain="com.microsoft", name="attn", num_heads=2)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
                              [helper.make_empty_tensor_value_info("y")],
                              [numpy_helper.from_array(f32(8, 24), "w"), numpy_helper.from_array(f32(24), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(ValueError, match="unsupported ONNX op com.microsoft.Attention"):
        load_onnx(model)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_saved_graph_costs_what_the_search_claimed(name):
    """A fused conv activation is written as onnxruntime's FusedConv and read back as one node; with
    target="onnx" the file holds standard ops only and still computes the same."""
    optimized = greedy(small_model(name)).graph
    saved = to_onnx(optimized)
    reloaded = load_onnx(saved)
    for backend in BACKENDS:
        model_cost = Roofline(backend=backend)
        assert cost(reloaded, model_cost) == pytest.approx(cost(optimized, model_cost), rel=1e-9), backend.name
    x = {name: f32(*shape) for name, shape in optimized.input_shapes.items()}
    expected = execute_reference(optimized, x)
    assert_same_outputs(run_onnxruntime(saved, x), expected)
    standard = to_onnx(optimized, target="onnx")
    assert {n.domain for n in standard.graph.node} <= {""}
    assert_same_outputs(run_onnxruntime(standard, x), expected)


@pytest.mark.parametrize("activation", ["relu", "sigmoid", "tanh"])
def test_fused_conv_activations_run_in_onnxruntime(activation):
    b = GraphBuilder()
    x = b.input("x", (1, 3, 6, 6))
    y = b.add("conv2d", [x, b.weight("w", f32(4, 3, 3, 3)), b.weight("b", f32(4))], pads=(1, 1, 1, 1),
              activation=activation)
    graph = b.build({"y": y})
    saved = to_onnx(graph)
    assert [(n.domain, n.op_type) for n in saved.graph.node] == [("com.microsoft", "FusedConv")]
    assert load_onnx(saved).op_counts == {"conv2d": 1}
    inputs = {"x": f32(1, 3, 6, 6)}
    assert_same_outputs(run_onnxruntime(saved, inputs), execute_reference(graph, inputs))


def gelu_nodes(x, y):
    """GELU as torch writes it below opset 20; the Erf output is called "e"."""
    return [helper.make_node("Div", [x, "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", [x, "a"], ["m"]),
            helper.make_node("Mul", ["m", "half"], [y])]


@pytest.mark.parametrize("erf_is_output", [False, True])
def test_decomposed_gelu_becomes_one_op_unless_a_part_is_used_elsewhere(erf_is_output):
    constants = [numpy_helper.from_array(np.asarray(v, np.float32), n)
                 for n, v in (("sqrt2", np.sqrt(2.0)), ("one", 1.0), ("half", 0.5))]
    outputs = [helper.make_empty_tensor_value_info("y")] + ([helper.make_empty_tensor_value_info("e")]
                                                            if erf_is_output else [])
    graph = helper.make_graph(gelu_nodes("x", "y"), "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                           [3, 4])],
                              outputs, constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    loaded = load_onnx(model)
    assert ("gelu" in loaded.op_counts) != erf_is_output, loaded.op_counts
    x = {"x": f32(3, 4)}
    assert_same_outputs(execute(loaded, x), run_onnxruntime(model, x))


def test_opaque_convolutions_cost_their_multiply_adds():
    """Hand-worked: a dilated 3x3 conv, 2 -> 3 channels, 9x9 -> 5x5 output: 2 * 75 * 18 FLOPs; the
    transposed one reads 2x3x3 inputs with 3x3 taps into 4 outputs each: 2 * 18 * 36 FLOPs."""
    compute_only = Roofline(peak_flops=1e9, bandwidth=1e30, overhead=0.0)
    conv, _ = one_op_model("Conv", [f32(1, 2, 9, 9)], [f32(3, 2, 3, 3)], dict(dilations=[2, 2]), 17)
    assert cost(load_onnx(conv), compute_only) == pytest.approx(1e3 * 2 * 75 * 18 / 1e9)
    transposed, _ = one_op_model("ConvTranspose", [f32(1, 2, 3, 3)], [f32(2, 4, 3, 3)], dict(strides=[2, 2]), 17)
    assert cost(load_onnx(transposed), compute_only) == pytest.approx(1e3 * 2 * 18 * 36 / 1e9)
