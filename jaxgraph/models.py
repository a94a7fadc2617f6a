"""Builders for the five graphs that TASO and the thesis evaluate, with seeded random weights.

The convolutional networks follow torchvision's inference graphs (convolution, batch norm and ReLU
as separate ops, as an ONNX export has them), so that TASO's fusion substitutions have work to do.
`width` scales every channel count (1.0 = the published network); tests use small widths and image
sizes for numerical checks and the full sizes for structure only.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from jaxgraph.graph import Graph, GraphBuilder, Ref
from jaxsched.common.arguments import integer, number


class _Layers:
    """A `GraphBuilder` plus seeded initialisers and the layer helpers the builders share."""

    def __init__(self, seed: int) -> None:
        self.g = GraphBuilder()
        self.rng = np.random.default_rng(seed)

    def param(self, name: str, shape: tuple[int, ...], std: float) -> Ref:
        return self.g.weight(name, self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    def conv(self, x: Ref, name: str, out: int, kernel: tuple[int, int], stride: int = 1,
             pads: tuple[int, int] = (0, 0), bias: bool = False) -> Ref:
        cin = self.g.shape(x)[1]
        w = self.param(f"{name}.weight", (out, cin) + kernel, math.sqrt(2.0 / (cin * kernel[0] * kernel[1])))
        inputs = [x, w] + ([self.param(f"{name}.bias", (out,), 0.01)] if bias else [])
        return self.g.add("conv2d", inputs, name, stride=(stride, stride), pads=pads + pads)

    def batchnorm(self, x: Ref, name: str, gain: float = 1.0) -> Ref:
        c = self.g.shape(x)[1]
        scale = self.g.weight(f"{name}.weight", gain * self.rng.uniform(0.8, 1.2, c).astype(np.float32))
        shift = self.param(f"{name}.bias", (c,), 0.05)
        mean = self.param(f"{name}.running_mean", (c,), 0.05)
        var = self.g.weight(f"{name}.running_var", self.rng.uniform(0.8, 1.2, c).astype(np.float32))
        return self.g.add("batchnorm", [x, scale, shift, mean, var], f"{name}", eps=1e-5)

    def relu(self, x: Ref, name: str) -> Ref:
        return self.g.add("relu", [x], name)

    def conv_bn_relu(self, x: Ref, name: str, out: int, kernel: tuple[int, int], stride: int = 1,
                     pads: tuple[int, int] = (0, 0)) -> Ref:
        y = self.batchnorm(self.conv(x, f"{name}.conv", out, kernel, stride, pads), f"{name}.bn")
        return self.relu(y, f"{name}.relu")

    def pool(self, x: Ref, op: str, name: str, kernel: int, stride: int, pad: int = 0) -> Ref:
        return self.g.add(op, [x], name, kernel=(kernel, kernel), stride=(stride, stride), pads=(pad,) * 4)

    def linear(self, x: Ref, name: str, out: int, std: float, bias: bool = True) -> Ref:
        """x @ W (+ b) on the last axis: a torch Linear as exported (MatMul then Add)."""
        y = self.g.add("matmul", [x, self.param(f"{name}.weight", (self.g.shape(x)[-1], out), std)], name)
        return self.g.add("add", [y, self.param(f"{name}.bias", (out,), 0.02)], f"{name}.bias_add") if bias else y

    def layernorm(self, x: Ref, name: str) -> Ref:
        c = self.g.shape(x)[-1]
        scale = self.g.weight(f"{name}.weight", self.rng.uniform(0.8, 1.2, c).astype(np.float32))
        return self.g.add("layernorm", [x, scale, self.param(f"{name}.bias", (c,), 0.05)], name, eps=1e-12)

    def attention(self, x: Ref, name: str, heads: int, project: Callable[[str], Ref]) -> Ref:
        """Per-head scaled dot-product attention of [..., seq, hidden] projections `project(part)` of `x`
        (part: query, key, value); [..., seq, hidden] out."""
        *lead, seq, hidden = self.g.shape(x)
        d, b = hidden // heads, tuple(range(len(lead)))
        swap = (*b, len(lead) + 1, len(lead), len(lead) + 2)  # [..., seq, heads, d] <-> [..., heads, seq, d]
        to_keys = (*b, len(lead) + 1, len(lead) + 2, len(lead))  # [..., seq, heads, d] -> [..., heads, d, seq]

        def split_heads(t: Ref, part: str, perm: tuple[int, ...]) -> Ref:
            t = self.g.add("reshape", [t], f"{name}.{part}.reshape", shape=(*lead, seq, heads, d))
            return self.g.add("transpose", [t], f"{name}.{part}.transpose", perm=perm)

        queries = split_heads(project("query"), "query", swap)
        keys = split_heads(project("key"), "key", to_keys)
        values = split_heads(project("value"), "value", swap)
        scale = self.g.weight(f"{name}.scale", np.full((1,), 1.0 / math.sqrt(d), np.float32))
        scores = self.g.add("mul", [self.g.add("matmul", [queries, keys], f"{name}.scores"), scale],
                            f"{name}.scaled")
        probs = self.g.add("softmax", [scores], f"{name}.softmax", axis=-1)
        context = self.g.add("matmul", [probs, values], f"{name}.context")  # [..., heads, seq, d]
        merged = self.g.add("transpose", [context], f"{name}.merge", perm=swap)
        return self.g.add("reshape", [merged], f"{name}.flatten", shape=(*lead, seq, hidden))

    def classifier_head(self, x: Ref, num_classes: int) -> Ref:
        """Global average pool, flatten, fully connected layer with bias."""
        n, c, h, w = self.g.shape(x)
        x = self.g.add("avgpool2d", [x], "avgpool", kernel=(h, w), stride=(1, 1))
        x = self.g.add("reshape", [x], "flatten", shape=(n, c))
        y = self.g.add("matmul", [x, self.param("fc.weight", (c, num_classes), math.sqrt(1.0 / c))], "fc")
        return self.g.add("add", [y, self.param("fc.bias", (num_classes,), 0.01)], "fc.bias_add")


def _channels(c: int, width: float) -> int:
    return max(1, round(c * width))


def _image_input(layers: _Layers, batch: int, image_size: int, width: float, num_classes: int) -> Ref:
    """The NCHW image input, after checking the arguments every image builder shares."""
    number("width", width, 0.0, above=True)
    integer("num_classes", num_classes, 1)
    return layers.g.input("input", (integer("batch", batch, 1), 3, integer("image_size", image_size, 1),
                                    image_size))


def _resnet(blocks: tuple[int, ...], bottleneck: bool, batch: int, image_size: int, width: float,
            num_classes: int, seed: int) -> Graph:
    net = _Layers(seed)
    x = _image_input(net, batch, image_size, width, num_classes)
    x = net.conv_bn_relu(x, "stem", _channels(64, width), (7, 7), 2, (3, 3))
    x = net.pool(x, "maxpool2d", "stem.maxpool", 3, 2, 1)
    for stage, count in enumerate(blocks):
        planes = _channels(64 * 2 ** stage, width)
        for block in range(count):
            stride = 2 if stage > 0 and block == 0 else 1
            name = f"layer{stage + 1}.{block}"
            if bottleneck:
                out = planes * 4
                y = net.conv_bn_relu(x, f"{name}.1", planes, (1, 1))
                y = net.conv_bn_relu(y, f"{name}.2", planes, (3, 3), stride, (1, 1))
                y = net.batchnorm(net.conv(y, f"{name}.3.conv", out, (1, 1)), f"{name}.3.bn", gain=0.5)
            else:
                out = planes
                y = net.conv_bn_relu(x, f"{name}.1", planes, (3, 3), stride, (1, 1))
                y = net.batchnorm(net.conv(y, f"{name}.2.conv", out, (3, 3), 1, (1, 1)), f"{name}.2.bn", gain=0.5)
            if stride != 1 or net.g.shape(x)[1] != out:
                x = net.batchnorm(net.conv(x, f"{name}.downsample.conv", out, (1, 1), stride), f"{name}.downsample.bn")
            x = net.relu(net.g.add("add", [y, x], f"{name}.add"), f"{name}.relu")
    return net.g.build({"logits": net.classifier_head(x, num_classes)})


def resnet18(batch: int = 1, image_size: int = 224, width: float = 1.0, num_classes: int = 1000,
             seed: int = 0) -> Graph:
    """ResNet-18 (He et al. 2016), torchvision layout: basic blocks [2, 2, 2, 2]."""
    return _resnet((2, 2, 2, 2), False, batch, image_size, width, num_classes, seed)


def resnet50(batch: int = 1, image_size: int = 224, width: float = 1.0, num_classes: int = 1000,
             seed: int = 0) -> Graph:
    """ResNet-50 v1.5 (stride on the 3x3 convolution, as torchvision and TASO's example): bottlenecks [3, 4, 6, 3]."""
    return _resnet((3, 4, 6, 3), True, batch, image_size, width, num_classes, seed)


def squeezenet1_1(batch: int = 1, image_size: int = 224, width: float = 1.0, num_classes: int = 1000,
                  seed: int = 0) -> Graph:
    """SqueezeNet 1.1 (Iandola et al. 2016): fire modules, each a 1x1 squeeze feeding 1x1 and 3x3 expands."""
    net = _Layers(seed)

    def conv_relu(x: Ref, name: str, out: int, kernel: int, stride: int = 1, pad: int = 0) -> Ref:
        return net.relu(net.conv(x, name, out, (kernel, kernel), stride, (pad, pad), bias=True), f"{name}.relu")

    def fire(x: Ref, name: str, squeeze: int, expand: int) -> Ref:
        s = conv_relu(x, f"{name}.squeeze", _channels(squeeze, width), 1)
        e1 = conv_relu(s, f"{name}.expand1x1", _channels(expand, width), 1)
        e3 = conv_relu(s, f"{name}.expand3x3", _channels(expand, width), 3, 1, 1)
        return net.g.add("concat", [e1, e3], f"{name}.concat", axis=1)

    x = conv_relu(_image_input(net, batch, image_size, width, num_classes), "features.0", _channels(64, width), 3,
                  2)
    x = net.pool(x, "maxpool2d", "features.2", 3, 2)
    x = fire(fire(x, "features.3", 16, 64), "features.4", 16, 64)
    x = net.pool(x, "maxpool2d", "features.5", 3, 2)
    x = fire(fire(x, "features.6", 32, 128), "features.7", 32, 128)
    x = net.pool(x, "maxpool2d", "features.8", 3, 2)
    for i, (squeeze, expand) in enumerate([(48, 192), (48, 192), (64, 256), (64, 256)]):
        x = fire(x, f"features.{9 + i}", squeeze, expand)
    x = conv_relu(x, "classifier.1", num_classes, 1)
    n, c, h, w = net.g.shape(x)
    x = net.g.add("avgpool2d", [x], "classifier.3", kernel=(h, w), stride=(1, 1))
    return net.g.build({"logits": net.g.add("reshape", [x], "flatten", shape=(n, c))})


def inception_v3(batch: int = 1, image_size: int = 299, width: float = 1.0, num_classes: int = 1000,
                 seed: int = 0) -> Graph:
    """Inception-v3 (Szegedy et al. 2016), torchvision's inference graph without the auxiliary head."""
    net = _Layers(seed)

    def conv(x: Ref, name: str, out: int, kernel: tuple[int, int], stride: int = 1,
             pads: tuple[int, int] = (0, 0)) -> Ref:
        return net.conv_bn_relu(x, name, _channels(out, width), kernel, stride, pads)

    def avgpool_branch(x: Ref, name: str, out: int) -> Ref:
        pooled = net.g.add("avgpool2d", [x], f"{name}.pool", kernel=(3, 3), stride=(1, 1), pads=(1, 1, 1, 1),
                           count_include_pad=True)
        return conv(pooled, name, out, (1, 1))

    def concat(name: str, *branches: Ref) -> Ref:
        return net.g.add("concat", list(branches), name, axis=1)

    def block_a(x: Ref, name: str, pool_features: int) -> Ref:
        b1 = conv(x, f"{name}.branch1x1", 64, (1, 1))
        b5 = conv(conv(x, f"{name}.branch5x5_1", 48, (1, 1)), f"{name}.branch5x5_2", 64, (5, 5), 1, (2, 2))
        b3 = conv(x, f"{name}.branch3x3dbl_1", 64, (1, 1))
        b3 = conv(b3, f"{name}.branch3x3dbl_2", 96, (3, 3), 1, (1, 1))
        b3 = conv(b3, f"{name}.branch3x3dbl_3", 96, (3, 3), 1, (1, 1))
        return concat(f"{name}.concat", b1, b5, b3, avgpool_branch(x, f"{name}.branch_pool", pool_features))

    def block_b(x: Ref, name: str) -> Ref:
        b3 = conv(x, f"{name}.branch3x3", 384, (3, 3), 2)
        d = conv(x, f"{name}.branch3x3dbl_1", 64, (1, 1))
        d = conv(d, f"{name}.branch3x3dbl_2", 96, (3, 3), 1, (1, 1))
        d = conv(d, f"{name}.branch3x3dbl_3", 96, (3, 3), 2)
        return concat(f"{name}.concat", b3, d, net.pool(x, "maxpool2d", f"{name}.branch_pool", 3, 2))

    def block_c(x: Ref, name: str, c7: int) -> Ref:
        b1 = conv(x, f"{name}.branch1x1", 192, (1, 1))
        b7 = conv(x, f"{name}.branch7x7_1", c7, (1, 1))
        b7 = conv(b7, f"{name}.branch7x7_2", c7, (1, 7), 1, (0, 3))
        b7 = conv(b7, f"{name}.branch7x7_3", 192, (7, 1), 1, (3, 0))
        d = conv(x, f"{name}.branch7x7dbl_1", c7, (1, 1))
        for i, (kernel, pads) in enumerate([((7, 1), (3, 0)), ((1, 7), (0, 3)), ((7, 1), (3, 0))]):
            d = conv(d, f"{name}.branch7x7dbl_{i + 2}", c7, kernel, 1, pads)
        d = conv(d, f"{name}.branch7x7dbl_5", 192, (1, 7), 1, (0, 3))
        return concat(f"{name}.concat", b1, b7, d, avgpool_branch(x, f"{name}.branch_pool", 192))

    def block_d(x: Ref, name: str) -> Ref:
        b3 = conv(conv(x, f"{name}.branch3x3_1", 192, (1, 1)), f"{name}.branch3x3_2", 320, (3, 3), 2)
        b7 = conv(x, f"{name}.branch7x7x3_1", 192, (1, 1))
        b7 = conv(b7, f"{name}.branch7x7x3_2", 192, (1, 7), 1, (0, 3))
        b7 = conv(b7, f"{name}.branch7x7x3_3", 192, (7, 1), 1, (3, 0))
        b7 = conv(b7, f"{name}.branch7x7x3_4", 192, (3, 3), 2)
        return concat(f"{name}.concat", b3, b7, net.pool(x, "maxpool2d", f"{name}.branch_pool", 3, 2))

    def block_e(x: Ref, name: str) -> Ref:
        b1 = conv(x, f"{name}.branch1x1", 320, (1, 1))
        b3 = conv(x, f"{name}.branch3x3_1", 384, (1, 1))
        b3 = concat(f"{name}.branch3x3", conv(b3, f"{name}.branch3x3_2a", 384, (1, 3), 1, (0, 1)),
                    conv(b3, f"{name}.branch3x3_2b", 384, (3, 1), 1, (1, 0)))
        d = conv(x, f"{name}.branch3x3dbl_1", 448, (1, 1))
        d = conv(d, f"{name}.branch3x3dbl_2", 384, (3, 3), 1, (1, 1))
        d = concat(f"{name}.branch3x3dbl", conv(d, f"{name}.branch3x3dbl_3a", 384, (1, 3), 1, (0, 1)),
                   conv(d, f"{name}.branch3x3dbl_3b", 384, (3, 1), 1, (1, 0)))
        return concat(f"{name}.concat", b1, b3, d, avgpool_branch(x, f"{name}.branch_pool", 192))

    x = conv(_image_input(net, batch, image_size, width, num_classes), "Conv2d_1a_3x3", 32, (3, 3), 2)
    x = conv(x, "Conv2d_2a_3x3", 32, (3, 3))
    x = conv(x, "Conv2d_2b_3x3", 64, (3, 3), 1, (1, 1))
    x = net.pool(x, "maxpool2d", "maxpool1", 3, 2)
    x = conv(x, "Conv2d_3b_1x1", 80, (1, 1))
    x = conv(x, "Conv2d_4a_3x3", 192, (3, 3))
    x = net.pool(x, "maxpool2d", "maxpool2", 3, 2)
    x = block_a(x, "Mixed_5b", 32)
    x = block_a(x, "Mixed_5c", 64)
    x = block_a(x, "Mixed_5d", 64)
    x = block_b(x, "Mixed_6a")
    for name, c7 in [("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)]:
        x = block_c(x, name, c7)
    x = block_d(x, "Mixed_7a")
    x = block_e(block_e(x, "Mixed_7b"), "Mixed_7c")
    return net.g.build({"logits": net.classifier_head(x, num_classes)})


def taso_attention_stack(seq_length: int = 64, hidden: int = 1024, heads: int = 16, layers: int = 8,
                         seed: int = 0) -> Graph:
    """The self-attention stack of TASO's `examples/bert.py` (8 layers, 16 heads, 64 x 1024), made correct.

    Not BERT: there are no residuals, layer norms, feed-forward blocks or biases, so one layer's output
    projection meets the next layer's Q/K/V projections and associativity merges them, a gain no real
    BERT offers (`bert` is the real encoder). TASO's version computes each layer's output from the layer
    input, leaving the attention ops dead. Here each layer is: Q, K and V projections of the same input,
    per-head scaled dot-product attention (reshape, transpose, batched matmul, softmax), and an output
    projection that feeds the next layer.
    """
    for name, value in (("seq_length", seq_length), ("hidden", hidden), ("heads", heads), ("layers", layers)):
        integer(name, value, 1)
    if hidden % heads:
        raise ValueError(f"hidden size {hidden} is not divisible by {heads} heads")
    net = _Layers(seed)
    g = net.g
    x = g.input("x", (seq_length, hidden))
    for i in range(layers):
        name = f"layer{i}"
        context = net.attention(x, name, heads, lambda part: net.linear(
            x, f"{name}.{part}", hidden, math.sqrt(1.0 / hidden), bias=False))  # noqa: B023 - called at once
        x = net.linear(context, f"{name}.output", hidden, math.sqrt(1.0 / hidden), bias=False)
    return g.build({"y": x})


def bert(batch: int = 1, seq_length: int = 128, hidden: int = 768, heads: int = 12, layers: int = 12,
         intermediate: int = 3072, seed: int = 0) -> Graph:
    """The BERT encoder (Devlin et al. 2019; default BERT-base) as `torch.onnx.export` of Hugging Face's
    `BertEncoder` lays it out: per layer, Q/K/V linear projections with biases, per-head scaled softmax
    attention, an output projection, residual add and LayerNorm, then a GELU feed-forward block
    (hidden -> intermediate -> hidden, with biases), residual add and LayerNorm (post-norm).

    Input `x` is the embedded sequence [batch, seq_length, hidden] (the embedding lookup takes token ids,
    which float32 graphs do not have); there is no attention mask (no padding). Parameters: 85,054,464
    for BERT-base, the encoder part of its published 110M.
    """
    for name, value in (("batch", batch), ("seq_length", seq_length), ("hidden", hidden), ("heads", heads),
                        ("layers", layers), ("intermediate", intermediate)):
        integer(name, value, 1)
    if hidden % heads:
        raise ValueError(f"hidden size {hidden} is not divisible by {heads} heads")
    net = _Layers(seed)
    x = net.g.input("x", (batch, seq_length, hidden))
    for i in range(layers):
        name = f"encoder.layer.{i}"
        context = net.attention(x, f"{name}.attention.self", heads, lambda part: net.linear(
            x, f"{name}.attention.self.{part}", hidden, 0.02))  # noqa: B023 - called at once
        attended = net.linear(context, f"{name}.attention.output.dense", hidden, 0.02)
        x = net.layernorm(net.g.add("add", [attended, x], f"{name}.attention.output.residual"),
                          f"{name}.attention.output.LayerNorm")
        inner = net.g.add("gelu", [net.linear(x, f"{name}.intermediate.dense", intermediate, 0.02)],
                          f"{name}.intermediate.gelu")
        out = net.linear(inner, f"{name}.output.dense", hidden, 0.02)
        x = net.layernorm(net.g.add("add", [out, x], f"{name}.output.residual"), f"{name}.output.LayerNorm")
    return net.g.build({"y": x})


def _make_divisible(value: float, divisor: int = 8) -> int:
    """torchvision's channel rounding for MobileNet widths: nearest multiple of 8, at most 10% below."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def mobilenet_v2(batch: int = 1, image_size: int = 224, width: float = 1.0, num_classes: int = 1000,
                 seed: int = 0) -> Graph:
    """MobileNetV2 (Sandler et al. 2018), torchvision's inference graph: inverted residual blocks of a 1x1
    expansion, a 3x3 depthwise convolution (groups = channels) and a linear 1x1 projection, each
    convolution followed by batch norm and ReLU6 (`clip(0, 6)`) except the projection; a residual add where
    stride is 1 and channels match. `width` rounds channels to multiples of 8 as torchvision does."""
    net = _Layers(seed)

    def conv_bn(x: Ref, name: str, out: int, kernel: int, stride: int = 1, groups: int = 1,
                relu6: bool = True) -> Ref:
        cin = net.g.shape(x)[1]
        w = net.param(f"{name}.0.weight", (out, cin // groups, kernel, kernel),
                      math.sqrt(2.0 / (cin // groups * kernel * kernel)))
        pad = (kernel - 1) // 2
        y = net.g.add("conv2d", [x, w], f"{name}.0", stride=(stride, stride), pads=(pad,) * 4, groups=groups)
        y = net.batchnorm(y, f"{name}.1", gain=1.0 if relu6 else 0.5)
        return net.g.add("clip", [y], f"{name}.2", min=0.0, max=6.0) if relu6 else y

    x = _image_input(net, batch, image_size, width, num_classes)
    channels = _make_divisible(32 * width)
    x = conv_bn(x, "features.0", channels, 3, 2)
    index = 1
    for expand, out, repeats, first_stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                                               (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        out = _make_divisible(out * width)
        for r in range(repeats):
            stride, name = first_stride if r == 0 else 1, f"features.{index}.conv"
            hidden = channels * expand
            y = x if expand == 1 else conv_bn(x, f"{name}.expand", hidden, 1)
            y = conv_bn(y, f"{name}.depthwise", hidden, 3, stride, groups=hidden)
            y = conv_bn(y, f"{name}.project", out, 1, relu6=False)
            x = net.g.add("add", [x, y], f"features.{index}.add") if stride == 1 and channels == out else y
            channels, index = out, index + 1
    x = conv_bn(x, f"features.{index}", _make_divisible(1280 * max(1.0, width)), 1)
    return net.g.build({"logits": net.classifier_head(x, num_classes)})


MODELS = {"resnet18": resnet18, "resnet50": resnet50, "squeezenet1_1": squeezenet1_1,
          "inception_v3": inception_v3, "taso_attention_stack": taso_attention_stack, "bert": bert,
          "mobilenet_v2": mobilenet_v2}

# Full structure (every layer), reduced widths and image sizes: builder arguments for fast numerical checks and
# parity runs.
SMALL_SIZES = {
    "resnet18": dict(image_size=32, width=0.125),
    "resnet50": dict(image_size=32, width=0.125),
    "squeezenet1_1": dict(image_size=48, width=0.25),
    "inception_v3": dict(image_size=75, width=0.0625),
    "taso_attention_stack": dict(seq_length=8, hidden=32, heads=4, layers=3),
}
