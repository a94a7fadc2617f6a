"""Substitution rules as data: source and target patterns over the IR's ops, read and checked at load time.

A pattern is a list of ops in topological order. Each op reads tensors named as in TASO: `(k, j)` is output `j`
of the pattern's op `k`, and `(k, 0)` with `k < 0` is external input `k` (the same `k` on both sides is the
same tensor). `mapped` pairs each source tensor that the rest of the graph may read with the target tensor that
replaces it. Attribute constraints use the IR's names; two are properties of a node rather than attributes:
a conv2d's `kernel` (its weight's spatial size) and `padding` (`SAME`: the pads of TensorFlow's and TASO's
SAME, i.e. `total = max((ceil(size / stride) - 1) * stride + kernel - size, 0)` split `total // 2` before and
the rest after; `VALID`: no padding; `HALF`: `kernel // 2` on both sides of each axis, the pads of Caffe's and
PyTorch's `padding = kernel // 2`, which differ from SAME at stride 2 on even sizes). `HALF` is written as the
padding it always equals where one does (`SAME` at stride 1 with odd kernels, `VALID` for 1x1 kernels:
`parse_pattern` normalises it), so one conv node never meets two spellings of one constraint. A conv2d in a pattern
has one group; with two inputs it matches only convs without a bias, with three (input, weight, bias: a rank-1
tensor of the output channels) only convs with one. An add or mul
reads two tensors of equal shape (TASO's element-wise ops; with NumPy broadcasting the concat rules 89-108 and
114-142 would be wrong). A concat's `rank`
is the rank of its inputs, its arity the pattern's input count; a split (target patterns only) has `parts`
outputs, sized like the source tensors they replace; a transpose's `perm` is a permutation of its input's axes
(so its length is the input's rank); sigmoid and tanh are element-wise and take no constraint.

`load_patterns` rejects a malformed entry, an op or attribute the patterns do not support, and a rule whose two
sides disagree: both sides run in NumPy float64 on random inputs of a few well-typed shapes found by seeded
sampling (an evaluator independent of the JAX kernels), with a `ValueError` naming the rule and its xfer id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from jaxgraph.ops import OPS, Shape, normalize_attrs

DATA_FILE = Path(__file__).with_name("data") / "taso_rules.json"

# op -> (input count, None for two or more (conv2d: two or three); constraint keys)
PATTERN_OPS: Mapping[str, tuple[int | None, tuple[str, ...]]] = {
    "matmul": (2, ("activation",)),
    "conv2d": (None, ("kernel", "stride", "padding", "activation")),  # 2 inputs, or 3 with a bias
    "add": (2, ()),
    "mul": (2, ()),
    "relu": (1, ()),
    "concat": (None, ("axis", "rank")),
    "split": (1, ("axis", "parts")),
    "transpose": (1, ("perm",)),
    "sigmoid": (1, ()),
    "tanh": (1, ()),
}
UNARY_OPS = ("relu", "sigmoid", "tanh")  # the element-wise ops of one input and no constraint
_ACTIVATIONS = ("none", "relu")
_PADDINGS = ("SAME", "VALID", "HALF")


class Tensor(NamedTuple):
    """Output `index` of pattern op `op`; `op < 0` names an external input."""

    op: int
    index: int = 0

    @property
    def external(self) -> bool:
        """Whether the tensor is an input of the pattern rather than an output of one of its ops."""
        return self.op < 0


@dataclass(frozen=True)
class PatternOp:
    """One op of a pattern: its IR op, its input tensors and its attribute constraints."""

    op: str
    inputs: tuple[Tensor, ...]
    attrs: tuple[tuple[str, Any], ...]

    def attr(self, key: str) -> Any:
        """One attribute constraint."""
        return dict(self.attrs)[key]

    @property
    def outputs(self) -> int:
        """How many tensors the op makes (a split's parts, else one)."""
        return self.attr("parts") if self.op == "split" else 1


@dataclass(frozen=True)
class Pattern:
    """A rule as data: `src` rewritten to `dst`, source tensors replaced as `mapped` says."""

    xfer: int
    src: tuple[PatternOp, ...]
    dst: tuple[PatternOp, ...]
    mapped: tuple[tuple[Tensor, Tensor], ...]

    @property
    def externals(self) -> tuple[int, ...]:
        """External input ids, in order of first use in the source."""
        return tuple(dict.fromkeys(t.op for o in self.src for t in o.inputs if t.external))


def same_pads(size: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int]) -> tuple[int, int, int, int]:
    """TensorFlow's and TASO's SAME pads (top, left, bottom, right) of a window over an `size` (H, W) input."""
    pads = []
    for n, k, s in zip(size, kernel, stride):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads[0][0], pads[1][0], pads[0][1], pads[1][1]


def conv_pads(padding: str, size: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int]
              ) -> tuple[int, int, int, int]:
    """The pads (top, left, bottom, right) of a pattern padding constraint (SAME, VALID or HALF) on an input of
    spatial `size`."""
    if padding == "SAME":
        return same_pads(size, kernel, stride)
    if padding == "HALF":
        return kernel[0] // 2, kernel[1] // 2, kernel[0] // 2, kernel[1] // 2
    return 0, 0, 0, 0


def canonical_padding(padding: str, kernel: tuple[int, int], stride: tuple[int, int]) -> str:
    """`HALF` as the padding it equals at every input size where there is one (SAME at stride 1 with odd
    kernels, VALID for 1x1 kernels), else `padding` unchanged."""
    if padding != "HALF":
        return padding
    if tuple(kernel) == (1, 1):
        return "VALID"
    if tuple(stride) == (1, 1) and all(k % 2 for k in kernel):
        return "SAME"
    return padding


def ir_attrs(op: PatternOp, shapes: Sequence[Shape], split_sizes: tuple[int, ...] = ()) -> dict[str, Any]:
    """The IR attributes of a target op reading tensors of `shapes` (a split's sizes are given)."""
    if op.op == "matmul":
        return {"activation": op.attr("activation")}
    if op.op == "conv2d":
        stride = tuple(op.attr("stride"))
        pads = (conv_pads(op.attr("padding"), shapes[0][2:], tuple(shapes[1][2:]), stride)
                if len(shapes[0]) == 4 and len(shapes[1]) == 4 else (0, 0, 0, 0))
        return {"stride": stride, "pads": pads, "activation": op.attr("activation"), "groups": 1}
    if op.op == "concat":
        return {"axis": op.attr("axis")}
    if op.op == "split":
        return {"axis": op.attr("axis"), "sizes": tuple(split_sizes)}
    if op.op == "transpose":
        return {"perm": tuple(op.attr("perm"))}
    return {}


def infer(op: str, attrs: Mapping[str, Any], shapes: Sequence[Shape]) -> tuple[Shape, ...]:
    """The IR's shape inference for `op`, with the patterns' equal-shape rule for add and mul; ValueError if the
    shapes do not fit."""
    if op in ("add", "mul") and shapes[0] != shapes[1]:
        raise ValueError(f"{op} of unequal shapes {shapes[0]} and {shapes[1]}")
    try:
        return OPS[op].infer(normalize_attrs(op, attrs), list(shapes))
    except IndexError as error:
        raise ValueError(str(error)) from None


def conv_matches(op: PatternOp, attrs: Mapping[str, Any], shapes: Sequence[Shape]) -> bool:
    """Whether a conv2d (IR attributes `attrs`, input shapes `shapes`) meets the pattern op's constraints (a bias
    exactly when the pattern op has three inputs)."""
    kernel, stride = tuple(shapes[1][2:]), tuple(attrs["stride"])
    if (len(shapes) != len(op.inputs) or attrs["groups"] != 1 or attrs["activation"] != op.attr("activation")
            or kernel != tuple(op.attr("kernel"))
            or stride != tuple(op.attr("stride"))):
        return False
    return tuple(attrs["pads"]) == conv_pads(op.attr("padding"), shapes[0][2:], kernel, stride)


# ---------------------------------------------------------------- parsing and validation


def _fail(entry: Any, position: int, message: str) -> ValueError:
    xfer = entry.get("xfer") if isinstance(entry, dict) else None
    return ValueError(f"rule {position} (TASO xfer {xfer}) in the pattern file: {message}")


def _tensor(raw: Any) -> Tensor:
    if (not isinstance(raw, list) or len(raw) != 2 or not all(isinstance(v, int) for v in raw)
            or raw[1] < 0 or (raw[0] < 0 and raw[1] != 0)):
        raise ValueError(f"tensor {raw!r} is not [op, output] (op < 0: external input, output 0)")
    return Tensor(*raw)


def _check_attrs(op: str, attrs: Mapping[str, Any]) -> None:
    keys = PATTERN_OPS[op][1]
    if sorted(attrs) != sorted(keys):
        raise ValueError(f"{op} takes constraints {list(keys)}, got {sorted(attrs)}")
    pairs = [attrs[k] for k in ("kernel", "stride") if k in attrs]
    if any(not isinstance(p, list) or len(p) != 2 or not all(isinstance(v, int) and v >= 1 for v in p)
           for p in pairs):
        raise ValueError(f"{op} kernel and stride must be two positive integers, got {attrs}")
    if "activation" in attrs and attrs["activation"] not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {attrs['activation']!r}; patterns know {list(_ACTIVATIONS)}")
    if "padding" in attrs and attrs["padding"] not in _PADDINGS:
        raise ValueError(f"unknown padding {attrs['padding']!r}; patterns know {list(_PADDINGS)}")
    if op == "concat" and not (isinstance(attrs["rank"], int) and isinstance(attrs["axis"], int)
                               and 0 <= attrs["axis"] < attrs["rank"]):
        raise ValueError(f"concat needs 0 <= axis < rank, got {attrs}")
    if op == "split" and not (isinstance(attrs["axis"], int) and isinstance(attrs["parts"], int)
                              and attrs["axis"] >= 0 and attrs["parts"] >= 2):
        raise ValueError(f"split needs axis >= 0 and parts >= 2, got {attrs}")
    if op == "transpose" and not (isinstance(attrs["perm"], list) and len(attrs["perm"]) >= 2
                                  and all(isinstance(v, int) for v in attrs["perm"])
                                  and sorted(attrs["perm"]) == list(range(len(attrs["perm"])))):
        raise ValueError(f"transpose needs perm, a permutation of 0..rank-1 (rank >= 2), got {attrs}")


def _ops(raw: Any, side: str, externals: set[int] | None) -> tuple[PatternOp, ...]:
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{side} must be a non-empty list of ops")
    ops: list[PatternOp] = []
    for k, item in enumerate(raw):
        if not isinstance(item, dict) or sorted(item) != ["attrs", "inputs", "op"]:
            raise ValueError(f"{side} op {k} must have exactly the keys op, inputs, attrs")
        op = item["op"]
        if op not in PATTERN_OPS:
            raise ValueError(f"{side} op {k}: unknown op {op!r}; patterns know {sorted(PATTERN_OPS)}")
        if op == "split" and side == "src":
            raise ValueError("split is a target op only (its sizes come from the tensors it replaces)")
        if not isinstance(item["attrs"], dict) or not isinstance(item["inputs"], list):
            raise ValueError(f"{side} op {k}: attrs must be an object and inputs a list")
        _check_attrs(op, item["attrs"])
        inputs = tuple(_tensor(t) for t in item["inputs"])
        arity = PATTERN_OPS[op][0]
        if ((arity is None and len(inputs) < 2) or (arity is not None and len(inputs) != arity)
                or (op == "conv2d" and len(inputs) > 3)):
            raise ValueError(f"{side} op {k} ({op}) has {len(inputs)} inputs")
        for t in inputs:
            if not t.external and not (t.op < k and t.index < ops[t.op].outputs):
                raise ValueError(f"{side} op {k} reads {list(t)}, not an output of an earlier op")
            if t.external and externals is not None and t.op not in externals:
                raise ValueError(f"{side} op {k} reads external {t.op}, which the source does not read")
        attrs = {a: tuple(v) if isinstance(v, list) else v for a, v in item["attrs"].items()}
        if op == "conv2d":
            attrs["padding"] = canonical_padding(attrs["padding"], attrs["kernel"], attrs["stride"])
        ops.append(PatternOp(op, inputs, tuple(sorted(attrs.items()))))
    return tuple(ops)


def parse_pattern(entry: Any) -> Pattern:
    """One rule of the pattern file; ValueError naming what is malformed."""
    if not isinstance(entry, dict) or not {"xfer", "src", "dst", "mapped"} <= set(entry):
        raise ValueError("an entry needs the keys xfer, src, dst, mapped")
    if not isinstance(entry["xfer"], int) or entry["xfer"] < 0:
        raise ValueError(f"xfer must be a non-negative integer, got {entry['xfer']!r}")
    src = _ops(entry["src"], "src", None)
    dst = _ops(entry["dst"], "dst", {t.op for o in src for t in o.inputs if t.external})
    if not isinstance(entry["mapped"], list) or not entry["mapped"]:
        raise ValueError("mapped must list at least one [source tensor, target tensor] pair")
    mapped = []
    for pair in entry["mapped"]:
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"mapped entry {pair!r} is not a [source tensor, target tensor] pair")
        s, d = _tensor(pair[0]), _tensor(pair[1])
        if s.external or s.op >= len(src) or s.index >= src[s.op].outputs:
            raise ValueError(f"mapped source tensor {list(s)} is not an output of a source op")
        if d.external or d.op >= len(dst) or d.index >= dst[d.op].outputs:
            raise ValueError(f"mapped target tensor {list(d)} is not an output of a target op")
        mapped.append((s, d))
    if len({s for s, _ in mapped}) != len(mapped):
        raise ValueError("a source tensor is mapped twice")
    read = {t for o in dst for t in o.inputs} | {d for _, d in mapped}
    unread = [[k, j] for k, o in enumerate(dst) for j in range(o.outputs) if Tensor(k, j) not in read]
    if unread:
        raise ValueError(f"target tensors {unread} are neither read nor mapped")
    for k, o in enumerate(dst):
        if o.op == "split" and any(Tensor(k, j) not in {d for _, d in mapped} for j in range(o.outputs)):
            raise ValueError(f"target split {k} has an output that replaces no source tensor")
    return Pattern(entry["xfer"], src, dst, tuple(mapped))


# ---------------------------------------------------------------- numerical check (NumPy, float64)


def _conv(x: np.ndarray, w: np.ndarray, stride, pads, groups: int) -> np.ndarray:
    pt, pl, pb, pr = pads
    x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    (sh, sw), (kh, kw) = stride, w.shape[2:]
    oh, ow = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
    xs = x.reshape(x.shape[0], groups, -1, *x.shape[2:])  # [n, g, c/g, h, w]
    ws = w.reshape(groups, -1, *w.shape[1:])  # [g, o/g, c/g, kh, kw]
    out = np.zeros((x.shape[0], groups, ws.shape[1], oh, ow))
    for i in range(kh):
        for j in range(kw):
            window = xs[..., i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
            out += np.einsum("ngchw,goc->ngohw", window, ws[..., i, j])
    return out.reshape(x.shape[0], w.shape[0], oh, ow)


def _evaluate(op: str, attrs: Mapping[str, Any], values: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    if op == "conv2d" and len(values) == 3:
        y = _conv(values[0], values[1], attrs["stride"], attrs["pads"], attrs["groups"]) + values[2][:, None, None]
        return (np.maximum(y, 0.0) if attrs["activation"] == "relu" else y,)
    if op == "split":
        bounds = np.cumsum(attrs["sizes"])[:-1]
        return tuple(np.split(values[0], bounds, axis=attrs["axis"]))
    if op == "concat":
        return (np.concatenate(values, axis=attrs["axis"]),)
    if op in ("add", "mul"):
        return (values[0] + values[1] if op == "add" else values[0] * values[1],)
    if op == "transpose":
        return (np.transpose(values[0], attrs["perm"]),)
    if op in ("sigmoid", "tanh"):
        return (1.0 / (1.0 + np.exp(-values[0])) if op == "sigmoid" else np.tanh(values[0]),)
    y = values[0] if op == "relu" else (values[0] @ values[1] if op == "matmul"
                                        else _conv(values[0], values[1], attrs["stride"], attrs["pads"],
                                                              attrs["groups"]))
    return (np.maximum(y, 0.0) if op == "relu" or attrs.get("activation") == "relu" else y,)


def run_side(ops: Sequence[PatternOp], inputs: Mapping[int, np.ndarray],
             split_sizes: Mapping[int, tuple[int, ...]] | None = None) -> dict[Tensor, np.ndarray]:
    """Every tensor of one side (the source if `split_sizes` is None, else the target), evaluated in NumPy;
    ValueError where the IR's shape inference fails or a source conv2d or concat misses its constraints."""
    values: dict[Tensor, np.ndarray] = {Tensor(k): v for k, v in inputs.items()}
    for k, op in enumerate(ops):
        args = [values[t] for t in op.inputs]
        shapes = [a.shape for a in args]
        attrs = ir_attrs(op, shapes, (split_sizes or {}).get(k, ()))
        if split_sizes is None and op.op == "conv2d" and (
                len(shapes[0]) != 4 or len(shapes[1]) != 4 or not conv_matches(op, attrs, shapes)
                or (len(shapes) == 3 and len(shapes[2]) != 1)):
            raise ValueError(f"conv2d {k} does not meet its constraints on shapes {shapes}")
        if split_sizes is None and op.op == "concat" and len(shapes[0]) != op.attr("rank"):
            raise ValueError(f"concat {k} reads rank {len(shapes[0])}, not {op.attr('rank')}")
        infer(op.op, attrs, shapes)
        for j, value in enumerate(_evaluate(op.op, attrs, args)):
            values[Tensor(k, j)] = value
    return values


def split_sizes(pattern: Pattern, shape_of) -> dict[int, tuple[int, ...]]:
    """Sizes of each target split: the sizes, along its axis, of the source tensors its outputs replace."""
    sizes = {}
    for k, op in enumerate(pattern.dst):
        if op.op == "split":
            by_output = {d.index: shape_of(s) for s, d in pattern.mapped if d.op == k}
            sizes[k] = tuple(by_output[j][op.attr("axis")] if op.attr("axis") < len(by_output[j]) else 0
                             for j in range(op.outputs))
    return sizes


def _rank(pattern: Pattern) -> int:
    ranks = [o.attr("rank") for o in pattern.src + pattern.dst if o.op == "concat" and o.attr("rank") != 1]
    ranks += [len(o.attr("perm")) for o in pattern.src + pattern.dst if o.op == "transpose"]
    return ranks[0] if ranks else (4 if any(o.op == "conv2d" for o in pattern.src) else 2)


def _tied(pattern: Pattern, seeds: set[tuple], through) -> set[int]:
    """External inputs tied to the `seeds` (("ext", e) or (side, op) keys) by ops for which `through(op)` holds
    (ops whose inputs and output share the property sampled: rank 1, or a conv weight's spatial size)."""
    tied = set(seeds)
    while True:
        before = len(tied)
        for side, ops in (("src", pattern.src), ("dst", pattern.dst)):
            for k, o in enumerate(ops):
                linked = {_key(side, t) for t in o.inputs} | {(side, k)}
                if through(o) and tied & linked:
                    tied |= linked
        if len(tied) == before:
            return {e for kind, e in tied if kind == "ext"}


def _key(side: str, t: Tensor) -> tuple:
    """The key of the tensor `t` read on `side`: ("ext", e) for an external input, else (side, op)."""
    return ("ext", t.op) if t.external else (side, t.op)


def _roles(pattern: Pattern) -> tuple[set[int], dict[int, tuple[int, int]]]:
    """The rank-1 externals (conv biases and what element-wise ops and rank-1 concats tie to them) and the
    spatial size of externals tied to a conv's weight (through element-wise ops and concats)."""
    sides = (("src", pattern.src), ("dst", pattern.dst))
    biases = {_key(side, o.inputs[2]) for side, ops in sides for o in ops if o.op == "conv2d" and len(o.inputs) == 3}
    biases |= {_key(side, t) for side, ops in sides for o in ops if o.op == "concat" and o.attr("rank") == 1
               for t in o.inputs}
    vectors = _tied(pattern, biases, lambda o: o.op in ("add", "mul", *UNARY_OPS) or (
        o.op == "concat" and o.attr("rank") == 1))
    kernels: dict[int, tuple[int, int]] = {}
    for side, ops in sides:
        for o in ops:
            if o.op == "conv2d":
                for e in _tied(pattern, {_key(side, o.inputs[1])}, lambda o: o.op in ("add", "mul", "relu", "concat")):
                    kernels.setdefault(e, tuple(o.attr("kernel")))
    return vectors, kernels


def sample_shapes(pattern: Pattern, rng: np.random.Generator, dims: Sequence[int] = (2, 3),
                  sizes: Sequence[int] = (3, 4), tries: int = 4000) -> dict[int, Shape] | None:
    """Shapes of the external inputs on which both sides are well typed, found by sampling: every dimension from
    `dims`, but the image sizes of rank-4 tensors from `sizes` (on alternate tries one draw for all of them or
    one per tensor, so a rule true only when images agree is caught where they need not) and those of conv
    weights (and what element-wise ops and concats tie to them) from the pattern's kernel; conv biases (and what
    they are combined with) are rank 1. None if `tries` samples find none."""
    rank = _rank(pattern)
    vectors, kernels = _roles(pattern)
    for attempt in range(tries):
        shared = tuple(int(rng.choice(sizes)) for _ in range(2))
        images = {e: shared if attempt % 2 else tuple(int(rng.choice(sizes)) for _ in range(2))
                  for e in pattern.externals}
        shapes = {e: (int(rng.choice(dims)),) if e in vectors else tuple(int(rng.choice(dims)) for _ in range(rank - 2))
                  + (kernels.get(e) or images[e] if rank == 4 else tuple(int(rng.choice(dims)) for _ in range(2)))
                  for e in pattern.externals}
        try:
            zeros = {e: np.zeros(s) for e, s in shapes.items()}
            source_shapes = {t: v.shape for t, v in run_side(pattern.src, zeros).items()}
            run_side(pattern.dst, zeros, split_sizes(pattern, source_shapes.__getitem__))
        except ValueError:
            continue
        return shapes
    return None


def check_numerics(pattern: Pattern, rng: np.random.Generator, shapes: Mapping[int, Shape]) -> None:
    """Run both sides on random inputs of `shapes`; ValueError if a target op does not type or a mapped tensor
    differs (relative 1e-9 in float64)."""
    inputs = {e: rng.uniform(-1.0, 1.0, s) for e, s in shapes.items()}
    source = run_side(pattern.src, inputs)
    target = run_side(pattern.dst, inputs, split_sizes(pattern, lambda t: source[t].shape))
    for s, d in pattern.mapped:
        if source[s].shape != target[d].shape or not np.allclose(source[s], target[d], rtol=1e-9, atol=1e-9):
            raise ValueError(f"source tensor {list(s)} and target tensor {list(d)} differ on input shapes "
                             f"{dict(shapes)}")


def load_patterns(path: Path | str = DATA_FILE, checks: int = 2) -> tuple[Pattern, ...]:
    """Every rule of the pattern file, each parsed and run on `checks` sampled shapes; ValueError naming the
    rule and its xfer id for a malformed entry, an unsupported op or sides that disagree. FileNotFoundError if
    the file is missing."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"pattern file {path} does not exist")
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"pattern file {path} is not JSON: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("rules"), list):
        raise ValueError(f"pattern file {path} needs a list under 'rules'")
    patterns, seen = [], set()
    for position, entry in enumerate(document["rules"]):
        try:
            pattern = parse_pattern(entry)
            if pattern.xfer in seen:
                raise ValueError("a second rule with this xfer id")
            rng = np.random.default_rng(pattern.xfer)
            for _ in range(checks):
                shapes = sample_shapes(pattern, rng)
                if shapes is None:
                    raise ValueError("no sampled input shapes make both sides well typed")
                check_numerics(pattern, rng, shapes)
        except ValueError as error:
            raise _fail(entry, position, str(error)) from None
        seen.add(pattern.xfer)
        patterns.append(pattern)
    return tuple(patterns)


def excluded_xfers(path: Path | str = DATA_FILE) -> dict[int, str]:
    """TASO xfer id -> why the pattern file leaves it out."""
    document = json.loads(Path(path).read_text())
    return {int(e["xfer"]): str(e["reason"]) for e in document.get("excluded", ())}
