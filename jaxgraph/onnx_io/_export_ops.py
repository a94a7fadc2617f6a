"""IR op -> ONNX nodes, one writer per IR op: `writer(node, inputs, outputs, label, names, constant, helper)`
returns the ONNX nodes that compute the IR node from the named `inputs` into the named `outputs` (`names`
gives fresh tensor names, `constant` adds an initializer). `EXPORTERS` holds the writers by IR op;
`export_conv` also writes onnxruntime's FusedConv, `export_opaque` an imported node verbatim."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from jaxgraph._opaque import decode_constant
from jaxgraph._opaque import onnx_node as opaque_node
from jaxgraph.onnx_io.spec import CONTRIB, FUSED_ACTIVATIONS, schema

_ACTIVATION_OPS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh"}


def export_opaque(node, inputs, outputs, label, constant, opset: int):
    """The imported ONNX node, verbatim; its constant inputs become initializers."""
    attrs = node.attrs
    if attrs["domain"] == "" and attrs["opset"] != opset:
        old, new = schema(attrs["op_type"], attrs["opset"], ""), schema(attrs["op_type"], opset, "")
        if old is None or new is None or old.since_version != new.since_version:
            raise ValueError(f"opaque {attrs['op_type']} was imported at opset {attrs['opset']} and changed "
                             f"meaning by opset {opset}; export at opset {attrs['opset']}")
    names = [("" if slot is None else inputs[slot] if isinstance(slot, int)
              else constant(f"{label}.const{k}", decode_constant(slot))) for k, slot in enumerate(attrs["slots"])]
    return opaque_node(attrs, names, outputs, label)


def _with_activation(op_type: str):
    def export(node, inputs, outputs, label, names, constant, helper, **attrs):
        activation = node.attrs["activation"]
        if activation == "none":
            return [helper.make_node(op_type, inputs, outputs, name=label, **attrs)]
        raw = names.fresh(f"{label}.pre_{activation}")
        return [helper.make_node(op_type, inputs, [raw], name=label, **attrs),
                helper.make_node(_ACTIVATION_OPS[activation], [raw], outputs, name=f"{label}.{activation}")]
    return export


def export_conv(node, inputs, outputs, label, names, constant, helper, fused: bool = False):
    """A convolution: with `fused`, onnxruntime's one FusedConv node for its activation; otherwise a standard
    Conv, followed by the activation op if it has one."""
    a = node.attrs
    window = dict(strides=list(a["stride"]), pads=list(a["pads"]), group=a["groups"])
    if fused:
        activation = next(k for k, v in FUSED_ACTIVATIONS.items() if v == a["activation"])
        return [helper.make_node("FusedConv", inputs, outputs, name=label, domain=CONTRIB, activation=activation,
                                 **window)]
    return _with_activation("Conv")(node, inputs, outputs, label, names, constant, helper, **window)


def _export_pool(op_type: str):
    def export(node, inputs, outputs, label, names, constant, helper):
        extra = {"count_include_pad": int(node.attrs["count_include_pad"])} if op_type == "AveragePool" else {}
        return [helper.make_node(op_type, inputs, outputs, name=label, kernel_shape=list(node.attrs["kernel"]),
                                 strides=list(node.attrs["stride"]), pads=list(node.attrs["pads"]), **extra)]
    return export


def _simple(op_type: str, **attr_map: str):
    def export(node, inputs, outputs, label, names, constant, helper):
        attrs = {onnx_name: node.attrs[ours] for onnx_name, ours in attr_map.items()}
        attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}
        return [helper.make_node(op_type, inputs, outputs, name=label, **attrs)]
    return export


def _export_split(node, inputs, outputs, label, names, constant, helper):
    sizes = constant(f"{label}.split", np.asarray(node.attrs["sizes"], np.int64))
    return [helper.make_node("Split", inputs + [sizes], outputs, name=label, axis=node.attrs["axis"])]


def _export_reshape(node, inputs, outputs, label, names, constant, helper):
    shape = constant(f"{label}.shape", np.asarray(node.attrs["shape"], np.int64))
    return [helper.make_node("Reshape", inputs + [shape], outputs, name=label)]


def _export_gelu(node, inputs, outputs, label, names, constant, helper):
    """x * 0.5 * (1 + erf(x / sqrt(2))), as torch exports GELU at opset < 20 (onnxruntime fuses it back)."""
    scaled, erf, shifted, product = (names.fresh(f"{label}.{part}") for part in ("div", "erf", "add", "mul"))
    sqrt2 = constant(f"{label}.sqrt2", np.asarray(math.sqrt(2.0), np.float32))
    one = constant(f"{label}.one", np.asarray(1.0, np.float32))
    half = constant(f"{label}.half", np.asarray(0.5, np.float32))
    return [helper.make_node("Div", [inputs[0], sqrt2], [scaled], name=f"{label}.div"),
            helper.make_node("Erf", [scaled], [erf], name=f"{label}.erf"),
            helper.make_node("Add", [erf, one], [shifted], name=f"{label}.add"),
            helper.make_node("Mul", [inputs[0], shifted], [product], name=f"{label}.mul"),
            helper.make_node("Mul", [product, half], outputs, name=label)]


def _export_clip(node, inputs, outputs, label, names, constant, helper):
    low = constant(f"{label}.min", np.asarray(node.attrs["min"], np.float32))
    high = constant(f"{label}.max", np.asarray(node.attrs["max"], np.float32))
    return [helper.make_node("Clip", inputs + [low, high], outputs, name=label)]


EXPORTERS: dict[str, Callable] = {
    "conv2d": export_conv, "matmul": _with_activation("MatMul"),
    "add": _simple("Add"), "mul": _simple("Mul"), "relu": _simple("Relu"), "sigmoid": _simple("Sigmoid"),
    "tanh": _simple("Tanh"), "batchnorm": _simple("BatchNormalization", epsilon="eps"),
    "maxpool2d": _export_pool("MaxPool"), "avgpool2d": _export_pool("AveragePool"),
    "concat": _simple("Concat", axis="axis"), "split": _export_split, "transpose": _simple("Transpose", perm="perm"),
    "reshape": _export_reshape, "softmax": _simple("Softmax", axis="axis"),
    "layernorm": _simple("LayerNormalization", axis="axis", epsilon="eps"), "gelu": _export_gelu,
    "clip": _export_clip,
}
