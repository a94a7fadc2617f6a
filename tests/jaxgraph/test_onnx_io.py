"""ONNX round trips checked against onnxruntime, hand-made models with ops our exporter never writes,
and loud failures on what is not supported."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from jaxgraph import GraphBuilder, execute_reference, greedy, load_onnx, random_inputs, save_onnx, to_onnx  # noqa: E402
from jaxgraph.onnx_io import IR_VERSION, OPSET  # noqa: E402

from .conftest import SMALL, assert_same_outputs, small_model  # noqa: E402


def run_onnxruntime(model, inputs):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_round_trip_against_onnxruntime(name):
    graph = small_model(name)
    x = random_inputs(graph)
    expected = execute_reference(graph, x)
    for g in (graph, greedy(graph).graph):  # the optimized graph has fused activations and folded weights
        model = to_onnx(g)
        assert_same_outputs(run_onnxruntime(model, x), expected)
        assert_same_outputs(execute_reference(load_onnx(model), x), expected)


def test_saved_file_versions_names_and_folded_weights(tmp_path):
    graph = greedy(small_model("taso_attention_stack")).graph
    path = tmp_path / "bert.onnx"
    save_onnx(graph, path)
    model = onnx.load(str(path))
    assert model.ir_version == IR_VERSION and model.opset_import[0].version == OPSET
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])  # onnxruntime accepts the IR
    assert [i.name for i in session.get_inputs()] == ["x"] and [o.name for o in session.get_outputs()] == ["y"]
    op_types = {n.op_type for n in model.graph.node}
    assert op_types <= {"MatMul", "Mul", "Softmax", "Reshape", "Transpose", "Split"}  # weight products folded
    loaded = load_onnx(path)
    assert loaded.input_names == ("x",) and loaded.output_names == ("y",)


def test_outputs_that_are_inputs_or_shared_get_identities():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    r = b.add("relu", [x])
    graph = b.build({"same": x, "a": r, "b": r})
    x_val = random_inputs(graph)
    assert_same_outputs(run_onnxruntime(to_onnx(graph), x_val), execute_reference(graph, x_val))


def tensor(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def initializer(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def test_import_of_ops_the_exporter_never_writes():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    fc = rng.standard_normal((10, 4)).astype(np.float32)  # Gemm with transB: [out, in]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("AveragePool", ["c"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
        helper.make_node("Dropout", ["p"], ["d"]),
        helper.make_node("GlobalAveragePool", ["d"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "bias"], ["h"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Unsqueeze", ["h", "axes"], ["u"]),
        helper.make_node("Squeeze", ["u", "axes"], ["s"]),
        helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k", TensorProto.FLOAT, [1], [3.0])),
        helper.make_node("Mul", ["s", "k"], ["m"]),
        helper.make_node("Split", ["m"], ["s1", "s2"], axis=1, num_outputs=2),
        helper.make_node("Sigmoid", ["s1"], ["y1"]),
        helper.make_node("Identity", ["s2"], ["y2"]),
    ]
    graph = helper.make_graph(nodes, "hand", [tensor("x", [1, 3, 7, 7])], [tensor("y1", None), tensor("y2", None)],
                              [initializer("w", w), initializer("fc", fc), initializer("bias", np.ones(10, np.float32)),
                               initializer("axes", np.array([0], np.int64))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = IR_VERSION
    x = {"x": rng.standard_normal((1, 3, 7, 7)).astype(np.float32)}
    ours = load_onnx(model)
    assert ours.output_names == ("y1", "y2")
    assert_same_outputs(execute_reference(ours, x), run_onnxruntime(model, x))


def test_symbolic_dimensions_need_input_shapes_and_errors_name_the_node():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "sym", [tensor("x", ["N", 3])],
                              [tensor("y", ["N", 3])])
    model = helper.make_model(graph)
    with pytest.raises(ValueError, match="symbolic or unknown dimensions"):
        load_onnx(model)
    assert load_onnx(model, {"x": (4, 3)}).output_shapes == {"y": (4, 3)}
    computed = helper.make_graph([helper.make_node("Reshape", ["x", "x"], ["y"], name="dynamic")], "d",
                                 [tensor("x", [2])], [tensor("y", None)])
    with pytest.raises(ValueError, match="'dynamic' \\(Reshape\\): Reshape shape must be a constant"):
        load_onnx(helper.make_model(computed))
    with pytest.raises(FileNotFoundError):
        load_onnx("/no/such/model.onnx")


def _saved_model_bytes(tmp_path):
    path = tmp_path / "model.onnx"
    save_onnx(small_model("squeezenet1_1"), path)
    return path.read_bytes()


@pytest.mark.parametrize("content", [b"", b"this is not an ONNX model\n"], ids=["empty", "text"])
def test_empty_or_foreign_file_is_a_named_error(tmp_path, content):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=str(path)):
        load_onnx(path)


def test_truncated_file_never_loads(tmp_path):
    data = _saved_model_bytes(tmp_path)
    path = tmp_path / "cut.onnx"
    for cut in range(1, 40):  # the trailing fields (opset_import among them) go first
        path.write_bytes(data[:-cut])
        with pytest.raises(ValueError, match=str(path)):
            load_onnx(path)


def test_model_without_default_opset_is_refused():
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [tensor("x", [2])], [tensor("y", [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(ValueError, match="opset"):
        load_onnx(model)


def test_unnamed_gemms_with_bias_export_unique_node_names():
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.normal(size=shape).astype(np.float32), name)
               for name, shape in [("w1", (4, 4)), ("b1", (4,)), ("w2", (4, 4)), ("b2", (4,))]]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Gemm", ["h", "w2", "b2"], ["y"])]
    graph = helper.make_graph(nodes, "g", [tensor("x", [3, 4])], [tensor("y", [3, 4])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    exported = to_onnx(load_onnx(model))
    names = [n.name for n in exported.graph.node]
    assert len(names) == len(set(names)), names
    x = {"x": rng.normal(size=(3, 4)).astype(np.float32)}
    np.testing.assert_allclose(run_onnxruntime(exported, x)["y"], run_onnxruntime(model, x)["y"], rtol=1e-4, atol=1e-5)
