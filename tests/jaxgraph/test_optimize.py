"""The command line optimizes an exported model and verifies it with onnxruntime; bad input gets one line
and exit status 2, checked before any work."""

import re

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from jaxgraph import (  # noqa: E402
    load_onnx,
    optimize,  # noqa: E402
    save_onnx,
)
from jaxgraph.optimize import main  # noqa: E402
from jaxsched.common.timing import Comparison  # noqa: E402

from .conftest import small_model  # noqa: E402


@pytest.mark.parametrize("method, target", [("taso", "onnxruntime"), ("greedy", "jax")])
def test_cli_optimizes_checks_times_and_keeps_the_faster(tmp_path, capsys, method, target):
    source, target_path = tmp_path / "model.onnx", tmp_path / "optimized.onnx"
    save_onnx(small_model("squeezenet1_1"), source)
    status = main([str(source), "-o", str(target_path), "--method", method, "--budget", "20", "--repeats", "3",
                   "--target", target, "--cost", "taso", "--no-progress"])
    out = capsys.readouterr().out
    assert status == 0
    before, after = map(float, re.search(r"cost ([\d.]+) -> ([\d.]+) ms", out).groups())
    assert after < before
    assert "onnxruntime check: max relative difference" in out and "-> OK" in out
    assert re.search(r"latency: original [\d.]+ ms, optimized [\d.]+ ms, speedup [\d.]+x \(95% interval", out)
    if "wrote the optimized model" in out:  # which one it keeps depends on the measured times
        assert load_onnx(target_path).num_ops < load_onnx(source).num_ops
    else:
        assert "kept the original" in out and target_path.read_bytes() == source.read_bytes()


def test_cli_searches_with_the_full_taso_table(tmp_path, capsys):
    source, target = tmp_path / "model.onnx", tmp_path / "optimized.onnx"
    save_onnx(small_model("squeezenet1_1"), source)
    status = main([str(source), "-o", str(target), "--method", "greedy", "--rules", "taso", "--repeats", "3",
                   "--cost", "taso", "--no-progress"])
    out = capsys.readouterr().out
    assert status == 0 and "; 142 rules" in out and "-> OK" in out


@pytest.mark.parametrize("ratio, keeps_original", [(0.98, True), (1.01, True), (1.2, False)])
def test_cli_never_returns_a_slower_model(tmp_path, capsys, monkeypatch, ratio, keeps_original):
    """Slower, or faster only within noise (interval reaching below 1): the original is written."""
    source, target = tmp_path / "model.onnx", tmp_path / "optimized.onnx"
    save_onnx(small_model("squeezenet1_1"), source)
    spread = 0.02
    monkeypatch.setattr(optimize, "compare", lambda *a, **k: Comparison(1.0, 1.0 / ratio, ratio, ratio - spread,
                                                                        ratio + spread))
    assert main([str(source), "-o", str(target), "--method", "greedy", "--cost", "taso", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert ("kept the original" in out) == keeps_original
    assert (target.read_bytes() == source.read_bytes()) == keeps_original


def test_cli_keeps_the_original_when_the_confirming_run_does_not_agree(tmp_path, capsys, monkeypatch):
    """A first comparison that says faster is only believed when a second, independent one agrees."""
    source, target = tmp_path / "model.onnx", tmp_path / "optimized.onnx"
    save_onnx(small_model("squeezenet1_1"), source)
    verdicts = iter([Comparison(1.0, 0.8, 1.25, 1.2, 1.3), Comparison(1.0, 1.0, 1.0, 0.9, 1.1)])
    monkeypatch.setattr(optimize, "compare", lambda *a, **k: next(verdicts))
    assert main([str(source), "-o", str(target), "--method", "greedy", "--cost", "taso", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "confirming latency" in out and "kept the original" in out
    assert target.read_bytes() == source.read_bytes()


def test_cli_writes_the_original_when_no_rewrite_pays_on_the_target(tmp_path, capsys):
    """onnxruntime fuses conv + ReLU itself: with its cost model no rewrite of SqueezeNet pays."""
    source, target = tmp_path / "model.onnx", tmp_path / "optimized.onnx"
    save_onnx(small_model("squeezenet1_1"), source)
    assert main([str(source), "-o", str(target), "--method", "greedy", "--no-progress"]) == 0
    assert "no rewrite lowers the cost" in capsys.readouterr().out
    assert target.read_bytes() == source.read_bytes()


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "model.onnx"
    save_onnx(small_model("squeezenet1_1"), path)
    return path


def unsupported_op_model(path):
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("case, make_args, message", [
    ("missing file", lambda d, m: [str(d / "nope.onnx"), "-o", str(d / "o.onnx")], "no ONNX model"),
    ("not ONNX", lambda d, m: [str(write(d / "t.onnx", b"hello world")), "-o", str(d / "o.onnx")], "t.onnx"),
    ("empty file", lambda d, m: [str(write(d / "e.onnx", b"")), "-o", str(d / "o.onnx")], "e.onnx"),
    ("unsupported op", lambda d, m: [str(unsupported_op_model(d / "u.onnx")), "-o", str(d / "o.onnx")], "Frobnicate"),
    ("output is input", lambda d, m: [str(m), "-o", str(m)], "input model"),
    ("output dir missing", lambda d, m: [str(m), "-o", str(d / "no" / "o.onnx")], "does not exist"),
    ("repeats 0", lambda d, m: [str(m), "-o", str(d / "o.onnx"), "--repeats", "0"], "--repeats"),
    ("repeats 1", lambda d, m: [str(m), "-o", str(d / "o.onnx"), "--repeats", "1"], "--repeats"),
    ("bad target", lambda d, m: [str(m), "-o", str(d / "o.onnx"), "--target", "tvm"], "--target"),
    ("budget 0", lambda d, m: [str(m), "-o", str(d / "o.onnx"), "--budget", "0"], "--budget"),
    ("alpha nan", lambda d, m: [str(m), "-o", str(d / "o.onnx"), "--alpha", "nan"], "--alpha"),
    ("bad shape", lambda d, m: [str(m), "-o", str(d / "o.onnx"), "--input-shape", "x=1,a"], "--input-shape"),
    ("unknown input", lambda d, m: [str(m), "-o", str(d / "o.onnx"), "--input-shape", "img=1,3,48,48"], "img"),
    ("no output flag", lambda d, m: [str(m)], "-o"),
])
def test_bad_input_prints_one_line_and_exits_2_before_any_work(tmp_path, capsys, model_file, case, make_args,
                                                               message):
    original = model_file.read_bytes()
    status = main(make_args(tmp_path, model_file) + ["--no-progress"])
    captured = capsys.readouterr()
    assert status == 2, case
    assert captured.out == ""  # nothing loaded, searched or timed
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in captured.err, captured.err
    assert not (tmp_path / "o.onnx").exists()
    assert model_file.read_bytes() == original


def write(path, data):
    path.write_bytes(data)
    return path


def test_unsupported_op_model_is_valid_onnx(tmp_path):
    """The model above is well-formed, so the CLI's refusal is about the op, not the file."""
    onnx.checker.check_model(onnx.load(unsupported_op_model(tmp_path / "u.onnx")))
