"""How the torch exports in this folder were made (run once by hand, never by the tests).

    python3 -m venv /work/torchvenv
    /work/torchvenv/bin/pip install torch==2.14.1 torchvision==0.29.1 onnx onnxscript
    /work/torchvenv/bin/python tests/data/export_models.py

torch is never a dependency of the project: the tests read the files this script wrote. Every model is
exported with `torch.onnx.export` at opsets 13 and 17, with the legacy TorchScript exporter
(`dynamo=False`) and the dynamo exporter (`dynamo=True`), where each works; a model/exporter/opset that
fails is reported and skipped. Weights are random (seeded). Files are named `<model>-<exporter>-op<N>.onnx`
after the opset the file really has. With torch 2.14.1: the dynamo exporter writes opset 18 when asked for
13 (its down-conversion fails: LayerNormalization has no earlier version) and for the CNNs also when asked
for 17, so those requests give the same file; the legacy exporter cannot export nn.TransformerEncoderLayer
(scaled_dot_product_attention receives `is_causal` as a tensor). 15 files result.

To keep the files small, the CNNs (torchvision resnet18, mobilenet_v2, squeezenet1_1 at 64x64 inputs,
10 classes) are saved "light", as the onnx model zoo's light models are: every float initializer with
more than 1024 elements is replaced by a ConstantOfShape node of its shape (zeros), everything else the
exporter wrote is kept byte for byte. Tests give them seeded random weights again
(`jaxgraph.onnx_models.with_random_weights`). The two transformers are small (hidden 32) and keep
their real weights.
"""

import math
import os
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import helper, numpy_helper
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
OPSETS = (13, 17)
EXPORTERS = {"legacy": False, "dynamo": True}
LIGHT_MIN_ELEMENTS = 1024


class BertLayer(nn.Module):
    """A BERT encoder layer: explicit Q/K/V Linear, scaled softmax attention, output projection,
    residual + LayerNorm, GELU feed-forward, residual + LayerNorm."""

    def __init__(self, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.output = nn.Linear(hidden, hidden)
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.up, self.down = nn.Linear(hidden, intermediate), nn.Linear(intermediate, hidden)
        self.gelu = nn.GELU()

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q, k, v = self.split_heads(self.query(x)), self.split_heads(self.key(x)), self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        context = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(batch, seq, hidden)
        x = self.norm1(x + self.output(context))
        return self.norm2(x + self.down(self.gelu(self.up(x))))


class BertEncoder(nn.Module):
    def __init__(self, hidden: int = 32, heads: int = 4, intermediate: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.layers = nn.ModuleList(BertLayer(hidden, heads, intermediate) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def models() -> dict[str, tuple[nn.Module, tuple[int, ...], bool]]:
    """name -> (module in eval mode, input shape, light)."""
    torch.manual_seed(0)
    return {
        "resnet18": (torchvision.models.resnet18(num_classes=10), (1, 3, 64, 64), True),
        "mobilenet_v2": (torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.25), (1, 3, 64, 64), True),
        "squeezenet1_1": (torchvision.models.squeezenet1_1(num_classes=10), (1, 3, 64, 64), True),
        "transformer_layer": (nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.1, batch_first=True),
                              (1, 8, 32), False),
        "bert": (BertEncoder(), (1, 8, 32), False),
    }


def make_light(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace large float initializers by ConstantOfShape nodes (zeros), as the zoo's light models do."""
    kept, nodes = [], []
    for init in model.graph.initializer:
        value = numpy_helper.to_array(init)
        if value.dtype.kind == "f" and value.size > LIGHT_MIN_ELEMENTS:
            shape = numpy_helper.from_array(np.asarray(value.shape, np.int64), f"{init.name}__shape")
            kept.append(shape)
            nodes.append(helper.make_node("ConstantOfShape", [shape.name], [init.name], name=f"{init.name}__light",
                                          value=helper.make_tensor("value", init.data_type, [1], [0.0])))
        else:
            kept.append(init)
    light = onnx.ModelProto()
    light.CopyFrom(model)
    del light.graph.initializer[:]
    light.graph.initializer.extend(kept)
    del light.graph.input[:]
    light.graph.input.extend(i for i in model.graph.input if i.name not in {n.output[0] for n in nodes})
    old_nodes = list(light.graph.node)
    del light.graph.node[:]
    light.graph.node.extend(nodes + old_nodes)
    onnx.checker.check_model(light)
    return light


def export(name: str, module: nn.Module, shape: tuple[int, ...], light: bool, exporter: str, opset: int) -> str:
    """Export one model; the file name carries the opset the exporter really wrote (the dynamo exporter
    writes opset 18 when it cannot convert down). A legacy export of a transformer has a dynamic batch
    axis, as users write them, so its reshape targets are Shape/Gather/Concat chains."""
    example = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    kwargs = dict(input_names=["x"], output_names=["y"], opset_version=opset, dynamo=EXPORTERS[exporter])
    if EXPORTERS[exporter]:
        kwargs["external_data"] = False
    elif not light:
        kwargs["dynamic_axes"] = {"x": {0: "batch"}, "y": {0: "batch"}}
    scratch = os.path.join(HERE, "export.tmp")
    torch.onnx.export(module, (example,), scratch, **kwargs)  # with grad on: nn.TransformerEncoderLayer's
    # fused inference path (aten::_transformer_encoder_layer_fwd, which no exporter supports) stays off
    model = onnx.load(scratch)
    os.remove(scratch)
    if light:
        model = make_light(model)
    written = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    path = os.path.join(HERE, f"{name}-{exporter}-op{written}.onnx")
    if os.path.exists(path) and written != opset:
        return f"{os.path.basename(path)} (asked for opset {opset}; same file as before)"
    onnx.save(model, path)
    return path


def main() -> None:
    for name, (module, shape, light) in models().items():
        module.eval()
        for exporter in EXPORTERS:
            for opset in OPSETS:
                try:
                    path = export(name, module, shape, light, exporter, opset)
                    size = f"{os.path.getsize(path)} bytes" if os.path.exists(path) else "skipped"
                    print(f"{os.path.basename(path)}: {size}", flush=True)
                except Exception as error:  # report and skip what an exporter cannot do
                    print(f"{name} {exporter} opset {opset}: FAILED {type(error).__name__}: "
                          f"{str(error).splitlines()[0][:200]}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
