"""ONNX import and export (needs the `onnx` extra).

`load_onnx` maps a float32 ONNX inference graph onto the IR: constant subgraphs (shape arithmetic on
static shapes included) are folded with `onnx.reference`, decomposed LayerNorm and GELU become the IR's
ops, and an op the IR lacks is carried as an opaque node (`jaxgraph._opaque`) unless `strict=True`. An op
that cannot be carried (no shape inference, no implementation) raises `ValueError` naming it with its
domain. `save_onnx` writes opset 17 with an explicit IR version that onnxruntime reads, keeps the input
and output names, folds weight-only subgraphs into initializers, writes opaque nodes back verbatim, and
writes fused conv activations as onnxruntime's FusedConv (or, for `target="onnx"`, as two standard ops).

Modules: `spec` (opset, IR version, domains), `importer` (`load_onnx`, `batch_one`) over `_import_ops` (one converter
per ONNX op), `exporter` (`to_onnx`, `save_onnx`) over `_export_ops` (one writer per IR op).
"""

from jaxgraph.onnx_io.exporter import save_onnx, to_onnx
from jaxgraph.onnx_io.importer import batch_one, load_onnx
from jaxgraph.onnx_io.spec import IR_VERSION, OPSET, TARGETS

__all__ = ["IR_VERSION", "OPSET", "TARGETS", "batch_one", "load_onnx", "save_onnx", "to_onnx"]
