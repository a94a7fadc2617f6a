"""The jitted twin of `jaxgraph.patterns`: TASO's data rules as arrays, and what matching and building them needs
in JAX, so one matcher (`jaxgraph.jax_match`) and one builder serve the whole table.

`lower` turns each pattern, once, into integer arrays (`LoweredPatterns`) laid out in the order of its matching plan
(`CompiledPattern.steps`: the root, then one op per step): source ops with their constraints and the tensor each
input reads, target ops, mapped pairs and hazards. Per state, `reader_table` lists the first S = `max_readers`
distinct readers of every tensor (`JaxEnv.encode` refuses a graph with more; a rewrite can raise the count later)
and `slot_facts` what a pattern's source op is checked against; `target_facts` is the IR's shape inference for the
patterns' target ops. `build_pattern` writes the rewrite of any data rule, its arrays gathered by the traced xfer,
as an `Edit`; `target_facts` then selects among op kinds. A rule's field may be a NumPy value (known at trace time:
the code traced is that value's alone, `pick`, `unless`) or traced (the code selects).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph.jax_edits import Edit, EditBuilder
from jaxgraph.jax_graph import (
    OP_ID,
    PADDINGS,
    PADS_FIELD,
    PAIR_FIELDS,
    SCALAR_FIELDS,
    GraphState,
    attr_code,
    attr_row,
    op_in,
    tensors,
)
from jaxgraph.pattern_data import Pattern, Tensor
from jaxgraph.patterns import CompiledPattern

MAX_SOURCE = 3  # source ops of the largest pattern: the table is checked against these at lowering
MAX_TARGET = 3
MAX_EXTERNALS = 4
MAX_MAPPED = 2
MAX_HAZARDS = 2
ARITY = 2  # inputs of any pattern op
PARTS = 2  # outputs of a target split


class LoweredPatterns(NamedTuple):
    """Patterns as arrays [P, ...], source ops in plan order (position 0 the root). A read code is q >= 0 for output
    0 of plan op q, -1 - e for external e; a target read code d * PARTS + j for output j of target op d. -1 pads."""

    size: np.ndarray  # [P] source ops
    op: np.ndarray  # [P, M] op id
    arity: np.ndarray  # [P, M]
    activation: np.ndarray  # [P, M] matmul and conv2d; -1 no constraint
    kernel: np.ndarray  # [P, M, 2] conv2d
    stride: np.ndarray  # [P, M, 2] conv2d
    padding: np.ndarray  # [P, M] conv2d: 0 SAME, 1 VALID
    axis: np.ndarray  # [P, M] concat
    rank: np.ndarray  # [P, M] concat: the rank of its inputs
    reads: np.ndarray  # [P, M, ARITY] read code of each input
    ext_reader: np.ndarray  # [P, E] the first input (q * ARITY + position) reading external e, in plan order
    interior: np.ndarray  # [P, M] bool: the op's output is not mapped (only matched ops may read it)
    uses: np.ndarray  # [P, M] how many pattern inputs read the op's output
    hazard: np.ndarray  # [P, H, 2] (plan op, external): the op's target may reach the external outside the match
    location: np.ndarray  # [P, M] the location position of plan op q (the root first, then pattern order)
    steps: np.ndarray  # [P, M - 1, 2] per step: the anchor (plan op or first-reader input) and the input position
    target_size: np.ndarray  # [P]
    target_op: np.ndarray  # [P, D]
    target_arity: np.ndarray  # [P, D]
    target_reads: np.ndarray  # [P, D, ARITY] target read codes
    target_activation: np.ndarray  # [P, D]
    target_stride: np.ndarray  # [P, D, 2]
    target_padding: np.ndarray  # [P, D]
    target_axis: np.ndarray  # [P, D] concat and split
    split_source: np.ndarray  # [P, D, PARTS] plan op whose output each output of a split replaces
    mapped: np.ndarray  # [P, MAX_MAPPED, 2] (plan op, target code), -1 pads


def _code(t: Tensor, plan_of: dict[int, int], externals: tuple[int, ...]) -> int:
    return -1 - externals.index(t.op) if t.external else plan_of[t.op]


def _lower_one(compiled: CompiledPattern) -> dict[str, np.ndarray]:
    pattern = compiled.pattern
    src, dst = pattern.src, pattern.dst
    fail = f"TASO xfer {pattern.xfer}: "
    if len(src) > MAX_SOURCE or len(dst) > MAX_TARGET or len(pattern.externals) > MAX_EXTERNALS or (
            len(pattern.mapped) > MAX_MAPPED or len(compiled.hazards) > MAX_HAZARDS):
        raise ValueError(fail + "the pattern is larger than the jitted matcher's bounds")
    if any(len(o.inputs) > ARITY for o in src + dst) or any(o.outputs > PARTS for o in dst):
        raise ValueError(fail + f"an op has more than {ARITY} inputs or {PARTS} outputs")
    if any(o.op == "conv2d" and o.attr("padding") not in PADDINGS for o in src + dst):
        raise ValueError(fail + f"a conv2d's padding is none of {list(PADDINGS)}")
    if any(o.op in ("transpose", "sigmoid", "tanh") for o in src + dst):
        raise ValueError(fail + "transpose, sigmoid and tanh are not in the jitted matcher's arrays (the host Env "
                         "takes them)")
    plan = (compiled.root,) + tuple(step[1] for step in compiled.steps)
    plan_of = {k: q for q, k in enumerate(plan)}
    externals = pattern.externals
    m, d = MAX_SOURCE, MAX_TARGET
    a = {name: np.full(shape, -1, np.int32) for name, shape in (
        ("op", m), ("arity", m), ("activation", m), ("kernel", (m, 2)), ("stride", (m, 2)), ("padding", m),
        ("axis", m), ("rank", m), ("reads", (m, ARITY)), ("ext_reader", MAX_EXTERNALS), ("uses", m),
        ("hazard", (MAX_HAZARDS, 2)), ("location", m), ("steps", (m - 1, 2)), ("target_op", d),
        ("target_arity", d), ("target_reads", (d, ARITY)), ("target_activation", d), ("target_stride", (d, 2)),
        ("target_padding", d), ("target_axis", d), ("split_source", (d, PARTS)), ("mapped", (MAX_MAPPED, 2)))}
    a["interior"] = np.zeros(m, bool)
    mapped_ops = {s.op for s, _ in pattern.mapped}
    for q, k in enumerate(plan):
        op = src[k]
        a["op"][q], a["arity"][q] = OP_ID[op.op], len(op.inputs)
        attrs = dict(op.attrs)
        if "activation" in attrs:
            a["activation"][q] = attr_code("activation", attrs["activation"])
        if op.op == "conv2d":
            a["kernel"][q], a["stride"][q], a["padding"][q] = attrs["kernel"], attrs["stride"], attr_code(
                "padding", attrs["padding"])
        if op.op == "concat":
            a["axis"][q], a["rank"][q] = attrs["axis"], attrs["rank"]
        for p, t in enumerate(op.inputs):
            if not t.external and t.index != 0:
                raise ValueError(fail + f"a source op reads output {t.index} of a source op")
            a["reads"][q, p] = _code(t, plan_of, externals)
            if t.external and a["ext_reader"][externals.index(t.op)] < 0:
                a["ext_reader"][externals.index(t.op)] = q * ARITY + p
        a["interior"][q] = k not in mapped_ops
        a["uses"][q] = sum(t == Tensor(k) for o in src for t in o.inputs)
        a["location"][q] = compiled.order.index(k)
    for h, (k, e) in enumerate(compiled.hazards):
        a["hazard"][h] = plan_of[k], externals.index(e)
    for s, (kind, _k, anchor, p, _j) in enumerate(compiled.steps):
        a["steps"][s] = (a["ext_reader"][externals.index(anchor)] if kind == "external" else plan_of[anchor]), p
    for t, op in enumerate(dst):
        a["target_op"][t], a["target_arity"][t] = OP_ID[op.op], len(op.inputs)
        attrs = dict(op.attrs)
        a["target_reads"][t, :len(op.inputs)] = [-1 - externals.index(i.op) if i.external else i.op * PARTS + i.index
                                                 for i in op.inputs]
        if "activation" in attrs:
            a["target_activation"][t] = attr_code("activation", attrs["activation"])
        if op.op == "conv2d":
            a["target_stride"][t], a["target_padding"][t] = attrs["stride"], attr_code("padding", attrs["padding"])
        if op.op in ("concat", "split"):
            a["target_axis"][t] = attrs["axis"]
    for i, (s, t) in enumerate(pattern.mapped):
        a["mapped"][i] = plan_of[s.op], t.op * PARTS + t.index
        if dst[t.op].op == "split":
            a["split_source"][t.op, t.index] = plan_of[s.op]
    return a | {"size": np.int32(len(src)), "target_size": np.int32(len(dst))}


def lower(patterns: Sequence[Pattern]) -> LoweredPatterns:
    """The arrays of `patterns` (ValueError naming the xfer if one exceeds the matcher's bounds)."""
    return stack_lowered([CompiledPattern(p) for p in patterns])


def stack_lowered(compiled: Sequence[CompiledPattern]) -> LoweredPatterns:
    """`lower` of patterns already compiled."""
    rows = [_lower_one(c) for c in compiled]
    return LoweredPatterns(**{name: np.stack([row[name] for row in rows]) for name in LoweredPatterns._fields})


def ops_reachable(ops: set[str], makes: Sequence[tuple[frozenset[str], frozenset[str]]]) -> frozenset[str]:
    """The ops a graph holding `ops` can come to hold: the closure under rewrites given as (ops a rewrite needs, ops
    it makes). A data rule needing an op outside it can never fire on the graph."""
    reached = set(ops)
    while True:
        grown = reached.union(*(made for needs, made in makes if needs <= reached))
        if grown == reached:
            return frozenset(reached)
        reached = grown


# ---------------------------------------------------------------- per state: readers and slot facts


def reader_table(g: GraphState, width: int) -> jax.Array:
    """[C * O + 1, S] for every tensor (slot * O + output index), the first S = `width` distinct slots reading it, in
    increasing order, padded with C; the last row (no tensor) is all C. S rounds of a segment minimum over the input
    positions, each taking the least slot not yet listed (under vmap on CPU 1.7x faster than one sort of them)."""
    capacity, positions = g.inputs.shape
    outputs = g.shapes.shape[1]
    live = g.live_inputs
    code = g.inputs * outputs + g.input_index
    order = jnp.arange(positions)
    earlier = (order[None, :] < order[:, None])[None]  # [1, K, K]: position k' before position k
    again = ((code[:, :, None] == code[:, None, :]) & live[:, None, :] & earlier).any(-1)
    none = capacity * outputs
    code = jnp.where(live & ~again, code, none).ravel()
    slot = jnp.broadcast_to(jnp.arange(capacity, dtype=jnp.int32)[:, None], (capacity, positions)).ravel()
    value, columns = jnp.where(code < none, slot, capacity), []
    for _ in range(width):
        least = jnp.minimum(jax.ops.segment_min(value, code, none + 1), capacity)  # an empty segment: int max
        columns.append(least)
        value = jnp.where(least[code] == slot, capacity, value)
    return jnp.stack(columns, -1)


class SlotFacts(NamedTuple):
    """Per slot [C + 1] (the last row: a free slot), what a pattern's source op is checked against."""

    op: jax.Array
    num_inputs: jax.Array
    activation: jax.Array
    groups: jax.Array
    stride: jax.Array  # [C + 1, 2]
    kernel: jax.Array  # [C + 1, 2] the spatial size of input 1 (a conv's weight)
    same: jax.Array  # TensorFlow's SAME pads for its own kernel and stride
    unpadded: jax.Array
    in_rank: jax.Array  # [C + 1, ARITY]
    equal_inputs: jax.Array  # inputs 0 and 1 have one shape
    concat_axis: jax.Array  # its axis, normalised by the rank of input 0
    code: jax.Array  # [C + 1, ARITY] tensor each input reads (C * O past num_inputs)
    reads: jax.Array  # readers of output 0
    output: jax.Array  # output 0 is a graph output
    constant: jax.Array
    leaf: jax.Array  # input or weight


def _same_pads(size: jax.Array, kernel: jax.Array, stride: jax.Array) -> tuple[jax.Array, jax.Array]:
    """TensorFlow's SAME pads (before, after) per spatial dim, arrays [..., 2]."""
    stride = jnp.maximum(stride, 1)
    total = jnp.maximum((-(-size // stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _input_codes(g: GraphState) -> jax.Array:
    """[C, ARITY] the tensor (slot * O + output index) each of a slot's first inputs reads; C * O past its inputs."""
    capacity, outputs = g.op.shape[0], g.shapes.shape[1]
    used = jnp.arange(ARITY)[None, :] < g.num_inputs[:, None]
    return jnp.where(used, g.inputs[:, :ARITY] * outputs + g.input_index[:, :ARITY], capacity * outputs)


def slot_facts(g: GraphState, reads: jax.Array) -> SlotFacts:
    """The `SlotFacts` of every slot; `reads` is `tensor_reads(g)`."""
    capacity, outputs = g.op.shape[0], g.shapes.shape[1]
    code = _input_codes(g)
    flat_shapes, flat_ranks = (jnp.concatenate([a.reshape(capacity * outputs, *a.shape[2:]),
                                                jnp.ones((1, *a.shape[2:]), a.dtype)]) for a in (g.shapes, g.rank))
    in_shape, in_rank = flat_shapes[code], flat_ranks[code]  # [C, ARITY, R], [C, ARITY]
    stride = g.attrs[:, PAIR_FIELDS["stride"]:PAIR_FIELDS["stride"] + 2]
    kernel = in_shape[:, 1, 2:4]
    pads = g.attrs[:, PADS_FIELD:PADS_FIELD + 4]
    before, after = _same_pads(in_shape[:, 0, 2:4], kernel, stride)
    same = (pads == jnp.concatenate([before, after], axis=1)).all(axis=1)
    equal = (in_rank[:, 0] == in_rank[:, 1]) & (in_shape[:, 0] == in_shape[:, 1]).all(axis=1)
    is_output = jnp.zeros(capacity + 1, bool).at[jnp.where(g.outputs[:, 1] == 0, g.outputs[:, 0], capacity)].set(
        True)[:capacity]
    leaf = op_in(g, ("input", "weight"))
    facts = (g.op, g.num_inputs, g.attrs[:, 0], g.attrs[:, SCALAR_FIELDS["groups"]], stride, kernel, same,
             ~pads.any(axis=1), in_rank, equal, g.attrs[:, SCALAR_FIELDS["axis"]] % jnp.maximum(in_rank[:, 0], 1),
             code, reads[:-1].reshape(capacity, outputs)[:, 0], is_output, g.constant, leaf)
    pad = (-1, 0, -1, 0, 0, 0, False, False, 0, False, -1, capacity * outputs, 0, False, False, False)
    return SlotFacts(*(jnp.concatenate([f, jnp.full((1, *f.shape[1:]), p, f.dtype)]) for f, p in zip(facts, pad)))



# ---------------------------------------------------------------- the target


class TargetFacts(NamedTuple):
    """The target ops of a binding: their output shapes, ranks and constness, whether all are well typed, and
    their IR attribute rows."""

    shapes: jax.Array  # [..., D, PARTS, R]
    ranks: jax.Array  # [..., D, PARTS]
    constant: jax.Array  # [..., D]
    valid: jax.Array  # [...]
    attrs: jax.Array  # [..., D, A]


def _lead(a: jax.Array, ndim: int) -> jax.Array:
    """`a` with leading axes of size 1 up to `ndim` axes: explicit broadcasting against a batch of bindings."""
    return a.reshape((1,) * (ndim - a.ndim) + a.shape)


def concrete(x) -> bool:
    """Whether `x` is known at trace time (a rule's arrays as NumPy values) rather than traced."""
    return isinstance(x, (bool, int, np.bool_, np.integer))


def unless(skip, check: Callable[[], jax.Array]):
    """`skip | check()`, computing nothing when `skip` is known at trace time to be true: a rule's arrays given as
    NumPy values specialise the code to that rule."""
    if concrete(skip):
        return True if skip else check()
    return skip | check()


def pick(options: list[jax.Array], index) -> jax.Array:
    """options[index] (options[0] when out of range): an index known at trace time picks, a traced one selects."""
    if concrete(index):
        return options[int(index)] if 0 <= index < len(options) else options[0]
    out = options[0]
    for i, option in enumerate(options[1:], 1):
        out = jnp.where(index == i, option, out)
    return out


def _dim(shape: jax.Array, i: jax.Array) -> jax.Array:
    """shape[..., i] for right-padded shapes [..., R] and indices [...] (0 where out of range)."""
    return jnp.where(_lead(jnp.arange(shape.shape[-1]), shape.ndim) == i[..., None], shape, 0).sum(-1)


def _with_dim(shape: jax.Array, i: jax.Array, value: jax.Array) -> jax.Array:
    return jnp.where(_lead(jnp.arange(shape.shape[-1]), shape.ndim) == i[..., None], value[..., None], shape)


def _infer(row: LoweredPatterns, d: int, x, rx, y, ry, sources) -> tuple[jax.Array, ...]:
    """Target op `d` on inputs of shapes `x`, `y` [..., R] and ranks `rx`, `ry` [...]: whether it is well typed, its
    output shapes [..., PARTS, R] and ranks [..., PARTS], its pads [..., 4] (a conv) and its sizes [..., PARTS] (a
    split, sized like the source tensors its outputs replace: `sources` = (shapes [..., M, R], ranks [..., M])).
    A target op known at trace time computes its own inference only; a traced one computes all and selects."""
    op, dims = row.target_op[d], _lead(jnp.arange(x.shape[-1]), x.ndim)
    zeros = jnp.zeros(rx.shape + (4,), jnp.int32)
    axis = jnp.broadcast_to(row.target_axis[d], rx.shape)

    def single(ok, out, pads=zeros):
        return (ok, jnp.stack([out] + [jnp.ones_like(out)] * (PARTS - 1), -2),
                jnp.stack([rx] + [jnp.zeros_like(rx)] * (PARTS - 1), -1), pads,
                jnp.zeros(rx.shape + (PARTS,), jnp.int32))

    def matmul():
        ok = ((rx >= 2) & (ry >= 2) & (_dim(x, rx - 1) == _dim(y, ry - 2))
              & ((ry == 2) | ((rx == ry) & ((x == y) | (dims >= rx[..., None] - 2)).all(-1))))
        return single(ok, _with_dim(x, rx - 1, _dim(y, ry - 1)))

    def conv():
        stride = _lead(row.target_stride[d], x.ndim)
        before, after = _same_pads(x[..., 2:4], y[..., 2:4], stride)
        pads = jnp.where(row.target_padding[d] == PADDINGS.index("SAME"), jnp.concatenate([before, after], -1), 0)
        spatial = (x[..., 2:4] + pads[..., :2] + pads[..., 2:] - y[..., 2:4]) // jnp.maximum(stride, 1) + 1
        ok = (rx == 4) & (ry == 4) & (y[..., 1] == x[..., 1]) & (spatial >= 1).all(-1)
        return single(ok, x.at[..., 1].set(y[..., 0]).at[..., 2:4].set(spatial), pads)

    def concat():
        ok = (axis < rx) & (rx == ry) & ((x == y) | (dims == axis[..., None])).all(-1)
        return single(ok, _with_dim(x, axis, _dim(x, axis) + _dim(y, axis)))

    def split():
        shapes, ranks = sources
        sizes = jnp.stack([jnp.where(axis < pick([ranks[..., q] for q in range(MAX_SOURCE)], row.split_source[d, j]),
                                     _dim(pick([shapes[..., q, :] for q in range(MAX_SOURCE)],
                                                row.split_source[d, j]), axis), 0) for j in range(PARTS)], -1)
        ok = (axis < rx) & (sizes >= 1).all(-1) & (sizes.sum(-1) == _dim(x, axis))
        out = jnp.stack([_with_dim(x, axis, sizes[..., j]) for j in range(PARTS)], -2)
        return ok, out, jnp.stack([rx] * PARTS, -1), zeros, sizes

    def equal():
        return single((rx == ry) & (x == y).all(-1), x)

    kinds = {OP_ID["matmul"]: matmul, OP_ID["conv2d"]: conv, OP_ID["concat"]: concat, OP_ID["split"]: split,
             OP_ID["add"]: equal, OP_ID["mul"]: equal}
    same = lambda: single(jnp.ones(rx.shape, bool), x)  # noqa: E731  relu, or no op
    if concrete(op):
        return kinds.get(int(op), same)()
    result = same()
    for kind, infer in kinds.items():
        result = tuple(jnp.where(jnp.reshape(op == kind, (1,) * a.ndim), a, b) for a, b in zip(infer(), result))
    return result


def _attr_row(row: LoweredPatterns, d: int, pads: jax.Array, sizes: jax.Array, width: int) -> jax.Array:
    """The IR attribute vector (`jaxgraph.jax_graph` layout) of target op `d`, as `Env` makes the node."""
    op = row.target_op[d]
    conv, split = op == OP_ID["conv2d"], op == OP_ID["split"]
    return attr_row(jnp.zeros(pads.shape[:-1] + (width,), jnp.int32),
                    activation=jnp.where((op == OP_ID["matmul"]) | conv, row.target_activation[d], 0),
                    stride=jnp.where(conv, _lead(row.target_stride[d], pads.ndim), 0), pads=jnp.where(conv, pads, 0),
                    groups=jnp.where(conv, 1, 0),
                    axis=jnp.where((op == OP_ID["concat"]) | split, row.target_axis[d], 0),
                    sizes=jnp.where(split, sizes, 0), tuple_length=jnp.where(split, PARTS, 0))


def target_facts(g: GraphState, row: LoweredPatterns, externals: jax.Array, sources: jax.Array) -> TargetFacts:
    """Shape inference of one pattern's target (`row`: one rule's arrays) for bindings whose external tensors are
    `externals` [..., E] (tensor codes, C * O for none) and whose plan ops sit in slots `sources` [..., M]."""
    capacity, outputs, rank_size = g.op.shape[0], g.shapes.shape[1], g.shapes.shape[2]
    flat_shapes = jnp.concatenate([g.shapes.reshape(-1, rank_size), jnp.ones((1, rank_size), jnp.int32)])
    flat_ranks = jnp.concatenate([g.rank.reshape(-1), jnp.zeros(1, jnp.int32)])
    code = jnp.minimum(externals, capacity * outputs)
    ext_shape, ext_rank = flat_shapes[code], flat_ranks[code]
    ext_const = jnp.concatenate([g.constant, jnp.zeros(1, bool)])[code // outputs]
    source = jnp.minimum(sources, capacity - 1)
    src = (tensors(g.shapes, source, 0), tensors(g.rank, source, 0))
    # tensors a target input can read: externals E-1..0 (read codes -E..-1), then each target output
    known = [(ext_shape[..., e, :], ext_rank[..., e], ext_const[..., e]) for e in reversed(range(MAX_EXTERNALS))]
    facts, valid = [], jnp.ones(code.shape[:-1], bool)
    for d in range(MAX_TARGET):
        (x, rx, cx), (y, ry, cy) = (tuple(pick([t[i] for t in known], row.target_reads[d, p] + MAX_EXTERNALS)
                                          for i in range(3)) for p in range(ARITY))
        ok, shapes, ranks, pads, sizes = _infer(row, d, x, rx, y, ry, src)
        constant = cx & unless(row.target_arity[d] < 2, lambda: cy)  # noqa: B023
        valid = valid & unless(d >= row.target_size, lambda: ok)  # noqa: B023
        known += [(shapes[..., j, :], ranks[..., j], constant) for j in range(PARTS)]
        facts.append((shapes, ranks, constant, _attr_row(row, d, pads, sizes, g.attrs.shape[1])))
    shapes, ranks, constant, attrs = (jnp.stack([f[i] for f in facts], axis) for i, axis in
                                      enumerate((-3, -2, -1, -2)))
    return TargetFacts(shapes, ranks, constant, valid, attrs)


# ---------------------------------------------------------------- building

def build_pattern(g: GraphState, location: jax.Array, row: LoweredPatterns) -> Edit:
    """The rewrite of the data rule `row` (one rule's arrays, traced) at `location` (slots in location order)."""
    capacity, outputs = g.op.shape[0], g.shapes.shape[1]
    slots = jnp.stack([jnp.where(q < row.size, pick([location[t] for t in range(MAX_SOURCE)], row.location[q]),
                                 capacity) for q in range(MAX_SOURCE)])
    flat = jnp.concatenate([_input_codes(g), jnp.full((1, ARITY), capacity * outputs)])[slots].reshape(-1)
    externals = jnp.stack([jnp.where(row.ext_reader[e] >= 0, flat[jnp.maximum(row.ext_reader[e], 0)],
                                     capacity * outputs) for e in range(MAX_EXTERNALS)])
    target = target_facts(g, row, externals, slots)
    patch = EditBuilder(g, list(slots))
    for d in range(MAX_TARGET):
        inputs, indices = [], []
        for p in range(ARITY):
            read = row.target_reads[d, p]
            external = externals[jnp.clip(-1 - read, 0, MAX_EXTERNALS - 1)]
            inputs.append(jnp.where(read < 0, external // outputs, -1 - read // PARTS))
            indices.append(jnp.where(read < 0, external % outputs, read % PARTS))
        split = row.target_op[d] == OP_ID["split"]
        patch.add_outputs(row.target_op[d], inputs, target.attrs[d], target.shapes[d], target.ranks[d],
                          jnp.where(split, PARTS, 1), count=row.target_arity[d], present=d < row.target_size,
                          indices=indices)
    for i in range(MAX_MAPPED):
        q, t = row.mapped[i, 0], row.mapped[i, 1]
        patch.replace(pick(list(slots), q), -1 - t // PARTS, 0, t % PARTS, when=q >= 0)
    return patch.edit()
