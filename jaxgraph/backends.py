"""What a runtime fuses by itself, so that a cost model for that runtime counts the kernels it really runs.

A node is *absorbed* when the backend runs it inside another node's kernel: onnxruntime (CPU, all graph
optimizations on) folds a batch norm, a constant scale or a constant bias into the convolution before it,
adds a residual input and applies the activation in the convolution's epilogue (FusedConv), turns
MatMul + constant Add into one Gemm and a MatMul followed by a scalar Mul into FusedMatMul, and fuses a
residual Add into the LayerNorm after it (SkipLayerNormalization); XLA fuses chains of elementwise ops
into one loop. An absorbed node costs nothing; its *root* (the node whose kernel runs it) carries the
whole kernel, described by a `Kernel` signature. So a rewrite the backend would have done anyway saves
nothing, and a rewrite that puts a split between a convolution and its ReLU un-absorbs the ReLU and costs
what it blocks.

A rewrite changes the cost of the kernels that contain a node it touched, and of the kernels next to
those (whose absorption may depend on them); `cost.affected` collects them, which keeps cost changes local.
"""

from __future__ import annotations

import functools
import itertools
import math
import tempfile
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import numpy as np

from jaxgraph.graph import Graph, Node, Ref
from jaxgraph.ops import Shape

CONST, CHAIN, EXTERNAL = "const", "chain", "input"  # where an epilogue step's inputs come from


class Step(NamedTuple):
    """One op of a kernel: op, attributes, and per input its source (CONST weight, the CHAIN value so far,
    or an EXTERNAL activation) and shape."""

    op: str
    attrs: tuple[tuple[str, Any], ...]
    inputs: tuple[tuple[str, Shape], ...]
    shapes: tuple[Shape, ...]  # of every output


class Kernel(NamedTuple):
    """What one backend kernel computes: the root op (its inputs' sources are CONST or EXTERNAL) and the
    epilogue steps applied to its output, in order. Equal kernels cost the same."""

    root: Step
    epilogue: tuple[Step, ...] = ()


def _step(graph: Graph, node: Node, chain: Ref | None = None, **attrs: Any) -> Step:
    sources = tuple((CHAIN if r == chain else CONST if graph.nodes[r.node].constant else EXTERNAL, graph.shape(r))
                    for r in node.inputs)
    return Step(node.op, tuple({**node.attrs, **attrs}.items()), sources, node.shapes)


def _producer(graph: Graph, ref: Ref) -> Node | None:
    """The node producing `ref` if that node's only consumer is one input and it is not a graph output."""
    if ref.index != 0 or len(graph.uses(ref.node)) != 1 or ref.node in graph.output_nodes:
        return None
    return graph.nodes[ref.node]


@dataclass(frozen=True, eq=False)
class Backend:
    """A runtime's own fusions. `absorb(graph, node_id, absorbed) -> (root id, stage) | None` says which
    kernel runs a node (`absorbed` answers the same for other nodes, memoized); `canonical(graph, root,
    members)` describes a kernel; `free_ops` are ops that move no data on this backend (views)."""

    name: str
    free_ops: frozenset[str]
    fuses: bool
    absorb: Callable[[Graph, int, Callable[[int], tuple[int, int] | None]], tuple[int, int] | None] = field(
        repr=False)
    canonical: Callable[[Graph, int, tuple[int, ...]], Kernel] = field(repr=False)
    _memo: weakref.WeakKeyDictionary = field(default_factory=weakref.WeakKeyDictionary, repr=False)

    def root(self, graph: Graph, node_id: int) -> int | None:
        """The node whose kernel runs `node_id`, or None if it runs its own."""
        found = self._absorbed(graph, node_id)
        return found[0] if found else None

    def _absorbed(self, graph: Graph, node_id: int) -> tuple[int, int] | None:
        memo = self._memo.setdefault(graph, {})
        if node_id not in memo:
            memo[node_id] = self.absorb(graph, node_id, lambda other: self._absorbed(graph, other))
        return memo[node_id]

    def absorb_depth(self, graph: Graph) -> int:
        """How many simultaneous passes of `absorb` over every node (each pass reading the previous pass's
        answers, the first reading "nothing absorbed") make every answer final: the longest chain of absorb
        dependencies in `graph`. What a vectorised twin (`jaxgraph.jax_cost.node_costs`) must run. It is not
        bounded by a kernel's length: an XLA chain restarts after `XLA_MAX_CHAIN` ops, so where a kernel
        starts depends on the whole run of elementwise ops before it, and onnxruntime's residual fusion
        depends on the layout of the other input, which follows residual chains through a whole ResNet stage."""
        answers: dict[int, tuple[int, int]] = {}
        for passes in itertools.count():  # settles within len(graph) passes: the graph is acyclic
            following = {}
            for node_id in graph.nodes:
                found = self.absorb(graph, node_id, answers.get)
                if found is not None:
                    following[node_id] = found
            if following == answers:
                return passes
            answers = following

    def members(self, graph: Graph, root: int) -> tuple[int, ...]:
        """The nodes absorbed into `root`'s kernel (they lie next to it: its consumer chain, or the Add a
        LayerNorm absorbs)."""
        found: list[int] = []
        frontier = [root]
        while frontier:
            current = frontier.pop()
            neighbours = [u.node for u in graph.uses(current)] + [r.node for r in graph.nodes[current].inputs]
            for other in neighbours:
                if other != root and other not in found and self.root(graph, other) == root:
                    found.append(other)
                    frontier.append(other)
        return tuple(found)

    def group(self, graph: Graph, node_id: int) -> tuple[int, ...]:
        """Every node of the kernel that runs `node_id`: its root first, then the absorbed nodes."""
        root = self.root(graph, node_id) if self.fuses else None
        root = node_id if root is None else root
        return (root, *self.members(graph, root)) if self.fuses else (root,)

    def kernel(self, graph: Graph, node_id: int) -> Kernel:
        """The kernel a non-absorbed node runs: itself plus every node absorbed into it, canonicalized so
        that graphs the backend turns into the same kernel give equal signatures."""
        return self.canonical(graph, node_id, self.members(graph, node_id) if self.fuses else ())


# ---------------------------------------------------------------- TASO: no fusion


def _no_absorb(graph, node_id, absorbed):
    return None


def _plain(graph, node_id, members):
    return Kernel(_step(graph, graph.nodes[node_id]))


TASO = Backend("taso", frozenset({"reshape", "transpose", "split"}), False, _no_absorb, _plain)


# ---------------------------------------------------------------- onnxruntime (CPU, ORT_ENABLE_ALL)

ORT_ACTIVATIONS = ("relu", "clip", "sigmoid", "tanh")
ORT_CONV_STAGES = {"batchnorm": 0, "scale": 1, "bias": 2, "residual": 3, "activation": 4}
ORT_MATMUL_STAGES = {"scale": 1, "bias": 2}


@functools.cache
def nchwc_block() -> int:
    """onnxruntime's NCHWc channel block on this CPU (16 with AVX-512, 8 with AVX2): the smallest channel
    count whose pool onnxruntime keeps in the blocked layout after a convolution (convolutions of any width
    go blocked, pools only over whole blocks). Probed once with onnxruntime when it is installed; otherwise
    read off the CPU flags."""
    try:
        import onnx
        import onnxruntime as ort
    except ImportError:
        return _block_from_cpu_flags()
    from onnx import TensorProto, helper, numpy_helper

    for channels in (4, 8, 16, 32):
        weight = numpy_helper.from_array(np.ones((channels, channels, 3, 3), np.float32), "w")
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
                 helper.make_node("MaxPool", ["y"], ["z"], kernel_shape=[2, 2], strides=[2, 2])]
        io = [helper.make_tensor_value_info(name, TensorProto.FLOAT, (1, channels, size, size))
              for name, size in (("x", 8), ("z", 4))]
        model = helper.make_model(helper.make_graph(nodes, "probe", io[:1], io[1:], [weight]),
                                  opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        with tempfile.TemporaryDirectory() as scratch:
            options = ort.SessionOptions()
            options.optimized_model_filepath, options.log_severity_level = f"{scratch}/probe.onnx", 3
            ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
            optimized = onnx.load(options.optimized_model_filepath).graph.node
        if any(n.domain == "com.microsoft.nchwc" and n.op_type == "MaxPool" for n in optimized):
            return channels
    return _block_from_cpu_flags()


def _block_from_cpu_flags() -> int:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return 16 if " avx512f" in cpuinfo.read() else 8
    except OSError:
        return 8


def _folds_into_conv(shape: Shape, channels: int, kind: str) -> bool:
    """Does onnxruntime fold a constant of `shape` into a convolution of `channels` outputs (ConvMulFusion,
    ConvAddFusion)? Only a [1, C, 1, 1] or [C, 1, 1] constant, or a scalar factor: a [1], [1, 1, 1, 1] or
    scalar bias stays a separate Add (checked against onnxruntime 1.32 in tests/jaxgraph/test_cost.py)."""
    if not shape:
        return kind == "scale"
    return tuple(shape) in ((1, channels, 1, 1), (channels, 1, 1))


def _ort_link(graph: Graph, node: Node) -> list[tuple[Ref, str]]:
    """(chain input, stage kind) pairs through which `node` could join the kernel of a producer."""
    if node.op == "batchnorm" and all(graph.nodes[r.node].constant for r in node.inputs[1:]):
        return [(node.inputs[0], "batchnorm")]
    if node.op in ORT_ACTIVATIONS:
        return [(node.inputs[0], "activation")]
    if node.op in ("mul", "add") and len(node.inputs) == 2:
        constant = [graph.nodes[r.node].constant for r in node.inputs]
        if constant[0] != constant[1]:
            return [(node.inputs[constant.index(False)], "scale" if node.op == "mul" else "bias")]
        if node.op == "add" and not any(constant) and graph.shape(node.inputs[0]) == graph.shape(node.inputs[1]):
            return [(node.inputs[0], "residual"), (node.inputs[1], "residual")]
    return []


def _ort_fits(graph: Graph, node: Node, root: Node, kind: str) -> bool:
    """Can a `kind` step of `node` join a kernel rooted at `root` (shape conditions of ORT's fusions)?"""
    other = [r for r in node.inputs if graph.nodes[r.node].constant]
    if root.op == "conv2d":
        if kind in ("scale", "bias"):
            return _folds_into_conv(graph.shape(other[0]), root.shape[1], kind) and node.shape == root.shape
        return True
    if kind == "scale":  # FusedMatMul's alpha
        return math.prod(graph.shape(other[0])) == 1 and node.shape == root.shape
    weight = graph.nodes[root.inputs[1].node]  # Gemm: MatMul with a 2-D constant weight, then a vector bias:
    bias = graph.shape(other[0])  # [N], or [1, N] after a 2-D MatMul (never a scalar; onnxruntime keeps the Add)
    return (weight.constant and len(weight.shapes[root.inputs[1].index]) == 2 and node.shape == root.shape
            and (len(bias) == 1 or len(bias) == len(root.shape) == 2) and math.prod(bias) == bias[-1] == root.shape[-1])


def _ort_nchwc(graph: Graph, ref: Ref, absorbed) -> bool:
    """Does onnxruntime produce `ref` in its blocked NCHWc layout (a convolution kernel, or a pool over
    whole channel blocks)? Only then can a convolution add it as a residual (the Sum input of NCHWc Conv)."""
    node = graph.nodes[ref.node]
    if node.op in ("maxpool2d", "avgpool2d"):
        return node.shape[1] % nchwc_block() == 0
    found = ref.node if node.op == "conv2d" else (absorbed(ref.node) or (None,))[0]
    return found is not None and graph.nodes[found].op == "conv2d"


def _ort_absorb(graph, node_id, absorbed):
    node = graph.nodes[node_id]
    for ref, kind in _ort_link(graph, node):
        producer = _producer(graph, ref)
        if producer is None or producer.constant:
            continue
        if kind == "residual" and not _ort_nchwc(graph, node.inputs[1 - node.inputs.index(ref)], absorbed):
            continue
        if producer.op in ("conv2d", "matmul") and producer.attrs["activation"] == "none":
            root_id, stage = ref.node, -1
        else:
            found = absorbed(ref.node)
            if found is None:
                continue
            root_id, stage = found
        root = graph.nodes[root_id]
        stages = ORT_CONV_STAGES if root.op == "conv2d" else ORT_MATMUL_STAGES
        if kind in stages and stages[kind] > stage and _ort_fits(graph, node, root, kind):
            return root_id, stages[kind]
    if node.op == "add" and len(graph.uses(node_id)) == 1 and node_id not in graph.output_nodes:
        (use,) = graph.uses(node_id)  # SkipLayerNormalization: residual Add + LayerNorm on the last axis
        consumer = graph.nodes[use.node]
        if (consumer.op == "layernorm" and use.input_index == 0 and consumer.attrs["axis"] % len(node.shape)
                == len(node.shape) - 1 and not any(graph.nodes[r.node].constant for r in node.inputs)
                and graph.shape(node.inputs[0]) == graph.shape(node.inputs[1])):
            return use.node, 0
    return None


def _ort_canonical(graph, node_id, members):
    """Conv: core conv then [bias] [residual] [activation] (BN, scales and constant adds fold into weights
    and bias). MatMul: core then [bias] (Gemm; scalar scales become FusedMatMul's alpha). LayerNorm: [skip]."""
    node = graph.nodes[node_id]
    ops = {graph.nodes[m].op for m in members}
    if node.op == "conv2d":
        x, w, *bias = node.inputs
        core = Step("conv2d", tuple({**node.attrs, "activation": "none"}.items()),
                    ((EXTERNAL, graph.shape(x)), (CONST if graph.nodes[w.node].constant else EXTERNAL,
                                                  graph.shape(w))), node.shapes)
        epilogue = []
        folded_bias = bias or [m for m in members if graph.nodes[m].op == "batchnorm"] or [
            m for m in members if graph.nodes[m].op == "add" and _ort_link(graph, graph.nodes[m])[0][1] == "bias"]
        if folded_bias:
            epilogue.append(Step("bias", (), ((CONST, (node.shape[1],)),), node.shapes))
        if any(_ort_link(graph, graph.nodes[m])[0][1] == "residual" for m in members if graph.nodes[m].op == "add"):
            epilogue.append(Step("residual", (), ((EXTERNAL, node.shape),), node.shapes))
        activation = [graph.nodes[m] for m in members if graph.nodes[m].op in ORT_ACTIVATIONS]
        if activation:
            epilogue.append(Step(activation[0].op, tuple(activation[0].attrs.items()), (), node.shapes))
        elif node.attrs["activation"] != "none":
            epilogue.append(Step(node.attrs["activation"], (), (), node.shapes))
        return Kernel(core, tuple(epilogue))
    if node.op == "matmul":
        epilogue = [Step("bias", (), ((CONST, (node.shape[-1],)),), node.shapes)] if "add" in ops else []
        if node.attrs["activation"] != "none":
            epilogue.append(Step(node.attrs["activation"], (), (), node.shapes))
        return Kernel(_step(graph, node, activation="none"), tuple(epilogue))
    if node.op == "layernorm" and "add" in ops:
        return Kernel(_step(graph, node), (Step("skip", (), ((EXTERNAL, node.shape),), node.shapes),))
    return Kernel(_step(graph, node))


ONNXRUNTIME = Backend("onnxruntime", frozenset({"reshape"}), True, _ort_absorb, _ort_canonical)


# ---------------------------------------------------------------- XLA: elementwise chains fuse

XLA_ELEMENTWISE = frozenset({"add", "mul", "relu", "sigmoid", "tanh", "clip", "gelu", "batchnorm"})
XLA_MAX_CHAIN = 4


def _xla_absorb(graph, node_id, absorbed):
    node = graph.nodes[node_id]
    if node.op not in XLA_ELEMENTWISE:
        return None
    for ref in node.inputs:
        producer = _producer(graph, ref)
        if producer is None or producer.constant or producer.op not in XLA_ELEMENTWISE:
            continue
        found = absorbed(ref.node)
        root_id, depth = found if found else (ref.node, 0)
        if depth < XLA_MAX_CHAIN:
            return root_id, depth + 1
    return None


def _xla_canonical(graph, node_id, members):
    """The root op, then the chain of elementwise ops fused after it, in order (each has a sole consumer)."""
    steps, current = [], node_id
    for _ in members:
        (following,) = {u.node for u in graph.uses(current) if u.node in members}
        steps.append(_step(graph, graph.nodes[following], Ref(current)))
        current = following
    return Kernel(_step(graph, graph.nodes[node_id]), tuple(steps))


XLA = Backend("xla", frozenset({"reshape", "transpose", "split"}), True, _xla_absorb, _xla_canonical)

BACKENDS = {b.name: b for b in (TASO, ONNXRUNTIME, XLA)}


def kernel_graph(kernel: Kernel, seed: int = 0) -> Graph:
    """A graph computing just `kernel` (constants as seeded weights in [0.5, 1.5], so batch-norm variances
    are positive), for timing it alone on its backend. Canonical onnxruntime steps become the ops the
    runtime fuses back: `bias` a conv bias or an Add, `residual` an Add, `skip` an Add before the LayerNorm."""
    import numpy as np

    from jaxgraph.graph import GraphBuilder

    b, rng = GraphBuilder(), np.random.default_rng(seed)
    counter = iter(range(1 << 30))

    def source(kind: str, shape: Shape, chain: Ref | None = None) -> Ref:
        if kind == CHAIN:
            return chain
        if kind == CONST:
            return b.weight(f"w{next(counter)}", rng.uniform(0.5, 1.5, shape).astype(np.float32))
        return b.input(f"x{next(counter)}", shape)

    root, steps = kernel.root, list(kernel.epilogue)
    inputs = [source(kind, shape) for kind, shape in root.inputs]
    if steps and steps[0].op == "skip":
        inputs[0] = b.add("add", [inputs[0], source(EXTERNAL, root.shapes[0])])
        steps.pop(0)
    if steps and steps[0].op == "bias" and root.op == "conv2d":
        inputs.append(source(CONST, steps.pop(0).inputs[0][1]))
    outputs = b.add_outputs(root.op, inputs, **dict(root.attrs))
    value = outputs[0]
    for step in steps:
        if step.op in ("bias", "residual"):
            value = b.add("add", [value, source(step.inputs[0][0], step.inputs[0][1])])
        else:
            value = b.add(step.op, [source(kind, shape, value) for kind, shape in step.inputs] or [value],
                          **dict(step.attrs))
    return b.build({f"y{k}": r for k, r in enumerate([value, *outputs[1:]])})
