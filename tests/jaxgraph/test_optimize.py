"""The command line optimizes an exported model and verifies it with onnxruntime."""

import re

import pytest

pytest.importorskip("onnxruntime")

from jaxgraph import load_onnx, save_onnx  # noqa: E402
from jaxgraph.optimize import main  # noqa: E402

from .conftest import small_model  # noqa: E402


@pytest.mark.parametrize("method", ["taso", "greedy"])
def test_cli_optimizes_checks_and_times(tmp_path, capsys, method):
    source, target = tmp_path / "model.onnx", tmp_path / "optimized.onnx"
    save_onnx(small_model("squeezenet1_1"), source)
    status = main([str(source), "-o", str(target), "--method", method, "--budget", "20", "--repeats", "3",
                   "--no-progress"])
    out = capsys.readouterr().out
    assert status == 0
    before, after = map(float, re.search(r"cost ([\d.]+) -> ([\d.]+) ms", out).groups())
    assert after < before
    assert "onnxruntime check: max relative difference" in out and "-> OK" in out
    assert re.search(r"latency: original [\d.]+ ms, optimized [\d.]+ ms", out)
    assert load_onnx(target).num_ops <= load_onnx(source).num_ops  # exported activations are separate ops again


def test_cli_rejects_malformed_input_shapes(tmp_path):
    with pytest.raises(SystemExit):
        main([str(tmp_path / "m.onnx"), "-o", str(tmp_path / "o.onnx"), "--input-shape", "x=1,a"])
