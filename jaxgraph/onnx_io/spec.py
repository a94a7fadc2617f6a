"""What the ONNX files read and written here are: the opset and IR version written, the runtimes a file may
target, the operator domains understood, and the lazily imported `onnx` package with its schema lookup."""

from __future__ import annotations

OPSET = 17
IR_VERSION = 8  # onnx 1.23 defaults to IR 14, which onnxruntime 1.31 rejects; 8 is read by onnxruntime >= 1.10
TARGETS = ("onnxruntime", "onnx")  # the runtime a saved file is for: onnxruntime may use its contrib ops
DEFAULT_DOMAINS = ("", "ai.onnx")
CONTRIB = "com.microsoft"  # onnxruntime's contrib domain (FusedConv)
FUSED_ACTIVATIONS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}  # FusedConv's name -> the IR's


def onnx_module():
    """The `onnx` package, imported on first use so that the IR works without the extra; ImportError naming
    the extra to install if it is missing."""
    try:
        import onnx
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("ONNX support needs the extra: pip install 'jax-research-systems[onnx]'") from error
    return onnx


def schema(op_type: str, version: int, domain: str):
    """The ONNX schema of `op_type` as of opset `version` in `domain`; None if ONNX defines none."""
    onnx = onnx_module()
    try:
        return onnx.defs.get_schema(op_type, version, domain)
    except onnx.defs.SchemaError:
        return None


def op_label(node) -> str:
    """The node's op as errors name it: `Conv` in the default domain, `com.microsoft.FusedConv` elsewhere."""
    return node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
