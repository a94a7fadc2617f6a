"""The graph-rewriting environment as pure JAX: `reset` and `step` jit and vmap, equal to `Env` step for step.

The graph lives in fixed-capacity node arrays (`GraphState`): per slot the op id (-1 for a free slot),
attributes as a fixed integer vector, input slots and output indices, output shapes padded with 1,
constness and the original node (the rank of its id). Weights are not carried: shapes only (`Env` keeps values for
numerical checks). Every rule of `RULES` is a vectorised match over the slots holding its root op (one
candidate location per root slot, or, for the sibling-pair merges, per (root slot, partner slot) of an `[N,
S]` sibling table) and a fixed-size scatter. The cost is the analytic roofline (`jaxgraph.cost.Roofline`) of
the kernels the chosen backend runs, per slot in float32 (`node_costs`): `taso` (every op its own kernel),
`xla` (elementwise chains fused, up to `XLA_MAX_CHAIN` deep) or `onnxruntime` (convolution and MatMul
epilogues, Gemm, SkipLayerNormalization). Which kernel absorbs a node is recursive (a node joins the kernel
its producer joined); it is computed by a static number of vectorised passes over all slots, each from the
previous pass's answers. That number is not the kernel length: an XLA chain restarts after `XLA_MAX_CHAIN`
ops, and onnxruntime's residual fusion depends on the other input's layout, which follows a ResNet stage's
residual chain. `Backend.absorb_depth(graph)` gives the passes a graph needs (ResNet-50: 13 for onnxruntime, 2
for XLA); `JaxEnv` runs that of its graph plus 2 (`fusion_passes`) and `params` refuses a graph that needs
more. A fused cost depends on a node's neighbours, so the reward is the full-cost difference.

Slots and location ids are `Env`'s: new nodes take the lowest free slots in the order the rewrite makes them,
before its orphans free theirs, and an xfer's locations are its candidates in increasing (root slot, partner slot)
order, which Env follows too. A rewrite that makes a node identical to a rewrite-made node shares it, as
`Patch.add` does (`apply_edit`). Differences from `Env`, all deliberate:
- Bounds: a tensor read as first input by more than S = `max_siblings` nodes is refused by `encode` (only
  SplitConcat can raise that count later; partners of the root's op past S are then not listed), and a
  SplitOfSplit whose merged split would have more than O outputs is masked out. Each root op's list holds at
  most `root_capacity[op]` slots; as with the node capacity, a rewrite that could overfill a list is not
  offered.
- Edge rows: a node's inputs live in its slot (`max_inputs` of them). The
  observation has `edge_capacity` edge rows, as `Env`'s: the live inputs first, in order of (receiving slot,
  input position), where Env allocates its rows from a free list (the same edges, in another row order).
- Invalid actions (a masked-out xfer or location, an id out of range) do not raise: the graph stays,
  the reward is `-invalid_penalty` (an `EnvParams` field) and `info["invalid"]` is true.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import jraph
import numpy as np

from jaxgraph.arguments import integer, number
from jaxgraph.backends import (
    BACKENDS,
    ONNXRUNTIME,
    ORT_ACTIVATIONS,
    ORT_CONV_STAGES,
    TASO,
    XLA,
    XLA_ELEMENTWISE,
    XLA_MAX_CHAIN,
    Backend,
    nchwc_block,
)
from jaxgraph.cost import DEFAULT_COST_MODEL, CostModel, Roofline
from jaxgraph.env import NODE_FEATURES, Observation
from jaxgraph.graph import Graph, Node, Ref, make_node
from jaxgraph.ops import ACTIVATIONS, OP_TYPES, OPS
from jaxgraph.rules import RULES, Rule

OP_ID = {op: i for i, op in enumerate(OP_TYPES)}
_PADDINGS = ("SAME", "VALID")

# Attribute vector layout: integer fields, float attributes as ids into the environment's float table, and
# one tuple field (perm, reshape target or split sizes) with its length.
_SCALAR_FIELDS = {"activation": 0, "groups": 7, "axis": 10, "count": 11, "count_include_pad": 12}
_PAIR_FIELDS = {"stride": 1, "kernel": 8}
_PADS_FIELD = 3
_FLOAT_FIELDS = {"eps": 13, "min": 14, "max": 15}
_TUPLE_FIELDS = ("perm", "shape", "sizes")
_TUPLE_LEN = 16
_TUPLE_START = 17


class GraphState(NamedTuple):
    """A graph in fixed-capacity slots. C slots, K inputs, O outputs of rank <= R per node, Q graph outputs."""

    op: jax.Array  # [C] int32 index into OP_TYPES; -1: free slot
    attrs: jax.Array  # [C, A] int32 attribute vector (layout above)
    inputs: jax.Array  # [C, K] int32 producer slot of each input; C past num_inputs
    input_index: jax.Array  # [C, K] int32 output index of each input
    num_inputs: jax.Array  # [C] int32
    shapes: jax.Array  # [C, O, R] int32 output shapes, padded with 1
    rank: jax.Array  # [C, O] int32
    num_outputs: jax.Array  # [C] int32
    constant: jax.Array  # [C] bool
    origin: jax.Array  # [C] int32 rank of the node's id among the instance's ids; rewrite-made: `_MADE`, `_ALTERED`
    outputs: jax.Array  # [Q, 2] int32 graph outputs as (slot, output index)

    @property
    def alive(self) -> jax.Array:
        return self.op >= 0

    @property
    def live_inputs(self) -> jax.Array:
        """[C, K] bool: the input positions in use of live nodes (the graph's edges)."""
        return self.alive[:, None] & (jnp.arange(self.inputs.shape[1])[None, :] < self.num_inputs[:, None])


# `origin` of a rewrite-made node: its id (in Env) is the content hash of the op, attributes and inputs it was made
# with, so a later rewrite that makes the same node shares it (`Patch.add`); `_ALTERED` once that no longer holds
# (its inputs were redirected since, or it was made while an identical node was being removed, which took the id)
_MADE, _ALTERED = -1, -2


class EnvParams(NamedTuple):
    """The instance (the initial graph) and the numbers of the cost model and the episode; all traced, so
    one compilation serves every instance of the same capacity."""

    graph: GraphState
    peak_flops: jax.Array  # FLOP/s (Roofline)
    bandwidth: jax.Array  # bytes/s
    overhead: jax.Array  # s per kernel
    nchwc_block: jax.Array  # int32 onnxruntime's NCHWc channel block (`backends.nchwc_block`) for its residual fusion
    max_steps: jax.Array  # int32; 0: no truncation
    invalid_penalty: jax.Array  # reward of an invalid action is minus this


class EnvState(NamedTuple):
    """Everything a step reads: the graph, per-slot costs, the current locations and the step count."""

    graph: GraphState
    node_cost: jax.Array  # [C] float32 ms
    cost: jax.Array  # float32 ms
    initial_cost: jax.Array  # float32 ms
    steps: jax.Array  # int32
    xfer_mask: jax.Array  # [X + 1] bool
    location_mask: jax.Array  # [X, L] bool
    location_nodes: jax.Array  # [X, L, M] int32, padded with C


class _View(NamedTuple):
    """Per-slot facts derived from a `GraphState` that matches read."""

    alive: jax.Array  # [C]
    sole: jax.Array  # [C] one consumer and not a graph output
    producer: jax.Array  # [C, K] producer slot, clipped into range
    in_shape: jax.Array  # [C, K, R]
    in_rank: jax.Array  # [C, K]
    in_const: jax.Array  # [C, K]
    shape: jax.Array  # [C, R] output 0
    rank: jax.Array  # [C]
    stride: jax.Array  # [C] common stride, -1 if they differ
    padding: jax.Array  # [C] index into ("SAME", "VALID"), -1 for neither
    reads: jax.Array  # [C * O + 1] `_reads`


def _reads(g: GraphState) -> jax.Array:
    """[C * O + 1] int32: how many live inputs read each tensor (slot * O + output index); the last entry counts
    the unused input positions. One scatter-add serves every consumer count a step needs."""
    capacity, width = g.op.shape[0], g.shapes.shape[1]
    tensor = jnp.where(g.live_inputs, g.inputs * width + g.input_index, capacity * width)
    return jax.ops.segment_sum(jnp.ones(tensor.size, jnp.int32), tensor.reshape(-1), capacity * width + 1)


def _consumers(g: GraphState, reads: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per slot: how many live inputs read its outputs [C] int32 (from `_reads`), and whether it holds a graph
    output [C] bool."""
    capacity = g.op.shape[0]
    is_output = jnp.zeros(capacity + 1, bool).at[g.outputs[:, 0]].set(True)
    return reads[:-1].reshape(capacity, -1).sum(axis=1), is_output[:capacity]


def _tensors(per_output: jax.Array, slot: jax.Array, index: jax.Array) -> jax.Array:
    """`per_output[slot, index]` for a per-output array [C, O, ...] and in-range tensor ids (slot, index) [...]:
    one gather of rows of the flattened [C * O, ...] array, several times cheaper under vmap on CPU than the
    two-index gather (which XLA lowers to a batched gather)."""
    capacity, width = per_output.shape[:2]
    flat = per_output.reshape(capacity * width, *per_output.shape[2:])
    return flat.at[slot * width + index].get(mode="promise_in_bounds")


def _at_rows(g: GraphState, rows: jax.Array | None) -> GraphState:
    """The per-slot arrays of `g` at slots `rows` [N] (all slots for None); the graph outputs as they are."""
    return g if rows is None else GraphState(*(array[rows] for array in g[:-1]), g.outputs)


def _view(g: GraphState, rows: jax.Array | None = None, reads: jax.Array | None = None) -> _View:
    """The view of every slot, or of the slots `rows` [N] (in-range) only: row i describes slot rows[i].
    `reads`: `_reads(g)` where the caller has it."""
    capacity = g.op.shape[0]
    sub = _at_rows(g, rows)
    alive = sub.alive
    valid = sub.live_inputs
    reads = _reads(g) if reads is None else reads
    uses, is_output = (a if rows is None else a[rows] for a in _consumers(g, reads))
    producer = jnp.minimum(sub.inputs, capacity - 1)
    # one gather per input position, stacked: XLA drops the positions nothing reads (matches read two; they slice
    # a position before taking rows, `v.in_shape[:, k][rows]`, or the whole stack is built)
    in_shape, in_rank = (jnp.stack([_tensors(per_output, producer[:, k], sub.input_index[:, k])
                                    for k in range(producer.shape[1])], axis=1) for per_output in (g.shapes, g.rank))
    shape = sub.shapes[:, 0]
    stride_h, stride_w = sub.attrs[:, 1], sub.attrs[:, 2]
    pads = sub.attrs[:, _PADS_FIELD:_PADS_FIELD + 4]
    x = in_shape[:, 0]
    same = (shape[:, 2] == -(-x[:, 2] // jnp.maximum(stride_h, 1))) & (
        shape[:, 3] == -(-x[:, 3] // jnp.maximum(stride_w, 1)))
    padding = jnp.where(~pads.any(axis=1), 1, jnp.where(same, 0, -1))
    return _View(alive, alive & (uses == 1) & ~is_output, producer, in_shape, in_rank,
                 g.constant[producer] & valid, shape, sub.rank[:, 0],
                 jnp.where(stride_h == stride_w, stride_h, -1), padding, reads)


def _left4(shape: jax.Array, rank: jax.Array) -> jax.Array:
    """[C, R] right-padded shapes of rank <= 4 -> [C, 4] left-padded with 1 (NumPy broadcasting)."""
    source = jnp.arange(4)[None, :] - (4 - rank[:, None])  # where in `shape` left-padded dim j is
    # a select over the R dims, not a gather: gathers with batch dimensions are slow on CPU under vmap
    picked = jnp.where(source[:, :, None] == jnp.arange(shape.shape[-1])[None, None, :], shape[:, None, :], 0)
    return jnp.where(source >= 0, picked.sum(axis=-1), 1)


# ---------------------------------------------------------------- matches: [C] bool and [C, M] location slots


def _fusable_conv(g: GraphState, v: _View, conv: jax.Array, stride: jax.Array, padding: jax.Array) -> jax.Array:
    """`padding` is an index into ("SAME", "VALID")."""
    return ((g.op[conv] == OP_ID["conv2d"]) & (g.attrs[conv, 0] == 0) & (v.stride[conv] == stride)
            & (v.padding[conv] == padding) & v.sole[conv])


def _match_conv_relu(g, v, r, *, stride, padding):
    conv = v.producer[r, 0]
    return _fusable_conv(g, v, conv, stride, padding), [conv]


def _match_conv_batchnorm(g, v, r, *, stride, padding):
    conv = v.producer[r, 0]
    ok = _fusable_conv(g, v, conv, stride, padding) & (v.rank[r] == 4)
    return ok & v.in_const[r, 1:5].all(axis=1), [conv]


def _per_channel(v: _View, r: jax.Array | slice, side: int, channels: jax.Array, exact: bool) -> jax.Array:
    """Input `1 - side` of slots `r` (`slice(None)`: every slot) is a [1, channels, 1, 1]-broadcastable constant
    (scalar allowed unless `exact`)."""
    rank = v.in_rank[:, 1 - side][r]
    full = _left4(v.in_shape[:, 1 - side][r], rank)
    second = full[:, 1] == channels if exact else (full[:, 1] == 1) | (full[:, 1] == channels)
    return (v.in_const[:, 1 - side][r] & (rank <= 4) & (full[:, 0] == 1) & second
            & (full[:, 2] == 1) & (full[:, 3] == 1))


def _same_shape(v: _View, a: jax.Array, b: jax.Array) -> jax.Array:
    return (v.rank[a] == v.rank[b]) & (v.shape[a] == v.shape[b]).all(axis=-1)


def _match_conv_mul(g, v, r, *, stride, padding):
    found = []
    for side in (0, 1):
        conv = v.producer[r, side]
        found.append(_fusable_conv(g, v, conv, stride, padding) & _same_shape(v, r, conv)
                     & _per_channel(v, r, side, v.shape[r, 1], exact=False))
    conv = jnp.where(found[0], v.producer[r, 0], v.producer[r, 1])
    return found[0] | found[1], [conv]


def _match_associate_matmul(g, v, r):
    inner = v.producer[r, 0]
    ok = ((g.op[inner] == OP_ID["matmul"]) & (g.attrs[inner, 0] == 0) & v.sole[inner]
          & (v.in_rank[:, 1][inner] == 2) & (v.in_rank[:, 1][r] == 2))
    return ok, [inner]


def _match_fold_conv_bias(g, v, r):
    found = []
    for side in (0, 1):
        conv = v.producer[r, side]
        found.append((g.op[conv] == OP_ID["conv2d"]) & (g.attrs[conv, 0] == 0) & v.sole[conv]
                     & _same_shape(v, r, conv) & _per_channel(v, r, side, v.shape[conv, 1], exact=True))
    conv = jnp.where(found[0], v.producer[r, 0], v.producer[r, 1])
    return found[0] | found[1], [conv]


def _match_merge_group_convs(g, v, r, *, stride, activation):
    groups = g.attrs[r, _SCALAR_FIELDS["groups"]]
    return ((groups >= 2) & (groups % 2 == 0) & (v.stride[r] == stride) & (g.attrs[r, 0] == activation)
            & (v.padding[r] == _PADDINGS.index("SAME")) & _const_weights(g, v)[r]), []


def _match_concat_of_relus(g, v, r):
    capacity = g.op.shape[0]
    used = jnp.arange(g.inputs.shape[1])[None, :] < g.num_inputs[r][:, None]
    producer = v.producer[r]
    relus = (g.op[producer] == OP_ID["relu"]) & v.sole[producer]
    ok = (g.num_inputs[r] >= 2) & (relus | ~used).all(axis=1)
    return ok, [jnp.where(used[:, k], g.inputs[r, k], capacity) for k in range(g.inputs.shape[1])]


# ---------------------------------------------------------------- rewrites: fixed-size scatters


MAX_NEW_NODES = 6  # the most nodes one rewrite adds (MergeConvs enlarging both kernels)


class Edit(NamedTuple):
    """A rewrite as data, applied by `apply_edit`: every rule's builder returns one of these (equal shapes
    for every rule), so a step selects one small edit and commits it once. New node j is referred to as
    input code -1 - j; existing nodes by slot. A new node may have several outputs (a split); the rewrite
    redirects up to P = max(2, O) tensors, each to an output of a new node or to an existing tensor."""

    removed: jax.Array  # [1 + K] int32 slots the rewrite removes, padded with C
    op: jax.Array  # [N] int32
    attrs: jax.Array  # [N, A] int32
    inputs: jax.Array  # [N, K] int32 slot or -1 - j
    input_index: jax.Array  # [N, K] int32 output index of each input
    count: jax.Array  # [N] int32 number of inputs
    shapes: jax.Array  # [N, O, R] int32 output shapes, padded with 1
    ranks: jax.Array  # [N, O] int32
    num_outputs: jax.Array  # [N] int32
    constant: jax.Array  # [N] bool
    present: jax.Array  # [N] bool: the node is part of this rewrite
    old: jax.Array  # [P, 2] int32 (slot, output index) of each replaced tensor; -1 for none
    new: jax.Array  # [P, 2] int32 (input code, output index) of the tensor that replaces it


class _Patch:
    """Builds an `Edit` (traced). A node can have a traced number of inputs (`count`: a conv with or
    without bias) and be `present` only under a traced condition (the bias nodes of a rewrite whose conv
    has a bias)."""

    def __init__(self, g: GraphState, removed: Sequence[jax.Array]) -> None:
        self.g, self.removed = g, removed
        self.nodes: list[tuple] = []
        self.replaced: list[tuple[jax.Array, ...]] = []

    def _constant(self, code: jax.Array) -> jax.Array:
        made = jnp.stack([node[7] for node in self.nodes] + [jnp.bool_(False)])
        return jnp.where(code < 0, made[jnp.clip(-1 - code, 0, len(self.nodes))],
                         self.g.constant[jnp.clip(code, 0, self.g.op.shape[0] - 1)])

    def add(self, op: str, inputs: Sequence[jax.Array], attrs: jax.Array, shape: jax.Array, rank: jax.Array,
            count: jax.Array | int | None = None, present: jax.Array | bool = True,
            indices: Sequence[jax.Array] | None = None) -> jax.Array:
        """Queue a single-output node reading its first `count` `inputs` (output `indices`, default 0 each);
        returns its input code."""
        return self.add_outputs(op, inputs, attrs, shape[None], jnp.reshape(rank, (1,)), 1, count, present, indices)

    def add_outputs(self, op: str, inputs: Sequence[jax.Array], attrs: jax.Array, shapes: jax.Array,
                    ranks: jax.Array, num_outputs: jax.Array | int, count: jax.Array | int | None = None,
                    present: jax.Array | bool = True, indices: Sequence[jax.Array] | None = None) -> jax.Array:
        """`add` for a node with `num_outputs` outputs (traced, at most O), of shapes `shapes` [<= O, R] and
        ranks `ranks` [<= O]; returns its input code."""
        g = self.g
        width = g.shapes.shape[1]
        count = len(inputs) if count is None else count
        index_row = jnp.zeros(g.inputs.shape[1], jnp.int32)
        if indices is not None:
            index_row = index_row.at[:len(indices)].set(jnp.stack(indices).astype(jnp.int32))
        used = jnp.arange(len(inputs)) < count
        codes = jnp.stack([jnp.asarray(i, jnp.int32) for i in inputs])
        constant = (jax.vmap(self._constant)(codes) | ~used).all()
        row = jnp.full(g.inputs.shape[1], g.op.shape[0], jnp.int32).at[:len(inputs)].set(
            jnp.where(used, codes, g.op.shape[0]))
        outputs = jnp.arange(width) < num_outputs
        shape_rows = jnp.ones((width, g.shapes.shape[2]), jnp.int32).at[:shapes.shape[0]].set(shapes)
        rank_row = jnp.zeros(width, jnp.int32).at[:ranks.shape[0]].set(ranks)
        self.nodes.append((OP_ID[op], attrs, row, index_row, jnp.asarray(count, jnp.int32),
                           jnp.where(outputs[:, None], shape_rows, 1), jnp.where(outputs, rank_row, 0), constant,
                           jnp.asarray(present), jnp.asarray(num_outputs, jnp.int32)))
        return jnp.int32(-len(self.nodes))

    def replace(self, old: jax.Array, new: jax.Array, old_index: jax.Array | int = 0,
                new_index: jax.Array | int = 0, when: jax.Array | bool = True) -> None:
        """Redirect consumers of output `old_index` of slot `old` (and graph outputs) to output `new_index` of
        `new` (an input code: a new node or an existing slot), if `when`."""
        self.replaced.append((jnp.where(when, old, -1), jnp.where(when, old_index, -1), new, new_index))

    def edit(self) -> Edit:
        g = self.g
        capacity, max_inputs, width = g.op.shape[0], g.inputs.shape[1], g.shapes.shape[1]
        blank = (0, jnp.zeros(g.attrs.shape[1], jnp.int32), jnp.full(max_inputs, capacity, jnp.int32),
                 jnp.zeros(max_inputs, jnp.int32), jnp.int32(0), jnp.ones(g.shapes.shape[1:], jnp.int32),
                 jnp.zeros(width, jnp.int32), jnp.bool_(False), jnp.bool_(False), jnp.int32(0))
        nodes = self.nodes + [blank] * (MAX_NEW_NODES - len(self.nodes))
        fields = [jnp.stack([jnp.asarray(node[k]) for node in nodes]) for k in range(10)]
        removed = jnp.full(1 + max_inputs, capacity, jnp.int32).at[:len(self.removed)].set(
            jnp.stack(self.removed).astype(jnp.int32))
        pairs = jnp.full((max(2, width), 4), -1, jnp.int32).at[:len(self.replaced)].set(
            jnp.stack([jnp.stack([jnp.asarray(x, jnp.int32) for x in r]) for r in self.replaced]))
        return Edit(removed, fields[0].astype(jnp.int32), *fields[1:5], fields[5], fields[6], fields[9], fields[7],
                    fields[8], pairs[:, :2], pairs[:, 2:])


def apply_edit(g: GraphState, edit: Edit) -> tuple[GraphState, jax.Array]:
    """Commit an edit as `Patch.commit` does: free the removed slots; put each present new node, in the order the
    builder made it, in the lowest free slot, unless a rewrite-made node identical to it (op, attributes, input
    tensors) is alive and not removed, which it then is (Env's `Patch.add` shares it: common-subexpression
    elimination); redirect the consumers (that existed before) of the replaced tensors. Orphans are left to
    `_sweep`. Returns the graph and the slot each new node was written to [MAX_NEW_NODES] (C: absent or shared)."""
    capacity, positions = g.op.shape[0], jnp.arange(g.inputs.shape[1])
    keep = g.alive & ~jnp.zeros(capacity, bool).at[edit.removed].set(True, mode="drop")
    before, g = g, _clear(g, ~keep)
    slots, written = [], []
    for j in range(edit.op.shape[0]):  # static: MAX_NEW_NODES
        codes, used = edit.inputs[j], positions < edit.count[j]
        if slots:
            made = jnp.stack(slots)
            codes = jnp.where(codes < 0, made[jnp.clip(-1 - codes, 0, j - 1)], codes)
        index = jnp.where(used, edit.input_index[j], 0)

        def identical(g, codes=codes, index=index, used=used, j=j):
            return (g.alive & (g.origin == _MADE) & (g.op == edit.op[j])
                    & (g.attrs == edit.attrs[j][None, :]).all(axis=1) & (g.num_inputs == edit.count[j])
                    & (((g.inputs == codes[None, :]) & (g.input_index == index[None, :])) | ~used[None, :]).all(axis=1))

        same = identical(g)
        shared = same.any()
        collides = (identical(before) & ~keep).any()
        slots.append(jnp.where(shared, jnp.argmax(same), jnp.argmin(g.alive)).astype(jnp.int32))
        target = jnp.where(edit.present[j] & ~shared, slots[-1], capacity)  # absent or shared: not written
        written.append(target)

        def put(array, value, target=target):
            return array.at[target].set(value, mode="drop")

        g = g._replace(op=put(g.op, edit.op[j]), attrs=put(g.attrs, edit.attrs[j]), inputs=put(g.inputs, codes),
                       input_index=put(g.input_index, index), num_inputs=put(g.num_inputs, edit.count[j]),
                       shapes=put(g.shapes, edit.shapes[j]), rank=put(g.rank, edit.ranks[j]),
                       num_outputs=put(g.num_outputs, edit.num_outputs[j]), constant=put(g.constant, edit.constant[j]),
                       origin=put(g.origin, jnp.where(collides, _ALTERED, _MADE)))
    made = jnp.stack(slots)
    target = jnp.where(edit.new[:, 0] < 0, made[jnp.clip(-1 - edit.new[:, 0], 0, len(slots) - 1)], edit.new[:, 0])
    target_index = edit.new[:, 1]

    def redirect(slot, index, live):
        """Tensors (slot, index) [...] that a replacement names -> the replacing tensor (the first replacement
        naming it). One select per replacement, last to first: no [..., P] intermediate, no gather."""
        new_slot, new_index = slot, index
        for p in reversed(range(edit.old.shape[0])):
            hit = (slot == edit.old[p, 0]) & (index == edit.old[p, 1]) & live
            new_slot, new_index = jnp.where(hit, target[p], new_slot), jnp.where(hit, target_index[p], new_index)
        return new_slot, new_index

    inputs, input_index = redirect(g.inputs, g.input_index, jnp.broadcast_to(keep[:, None], g.inputs.shape))
    out_slot, out_index = redirect(g.outputs[:, 0], g.outputs[:, 1], jnp.ones(g.outputs.shape[0], bool))
    outputs = jnp.stack([out_slot, out_index], axis=1)
    rewired = ((inputs != g.inputs) | (input_index != g.input_index)).any(axis=1)
    origin = jnp.where(rewired & (g.origin == _MADE), _ALTERED, g.origin)
    return g._replace(inputs=inputs, input_index=input_index, outputs=outputs, origin=origin), jnp.stack(written)


def _running_count(found: jax.Array, block: int = 32) -> jax.Array:
    """[V, C] bool -> [V, C] int32 inclusive running count along each row. A block-triangular matmul: on CPU
    about 3x cheaper than `jnp.cumsum` (an associative scan of many small passes); exact below 2**24."""
    rows, capacity = found.shape
    padded = -(-capacity // block) * block
    x = jnp.pad(found, ((0, 0), (0, padded - capacity))).astype(jnp.float32).reshape(rows, padded // block, block)
    within = x @ jnp.triu(jnp.ones((block, block), jnp.float32))
    before = jnp.cumsum(within[:, :, -1], axis=1) - within[:, :, -1]
    return (within + before[:, :, None]).reshape(rows, padded)[:, :capacity].astype(jnp.int32)


def _first_true(found: jax.Array, size: int) -> jax.Array:
    """[V, C] bool -> [V, size] int32: the first `size` true slots of each row in increasing order, padded with
    C (as `jnp.nonzero(size=...)`, which scatters; here a binary search of the running count, no scatter)."""
    wanted = jnp.arange(1, size + 1, dtype=jnp.int32)
    count = _running_count(found)
    return jax.vmap(lambda row: jnp.searchsorted(row, wanted, side="left", method="scan"))(count).astype(jnp.int32)


def _clear(g: GraphState, dead: jax.Array) -> GraphState:
    """Free the slots in `dead` [C]."""
    capacity = g.op.shape[0]
    return g._replace(op=jnp.where(dead, -1, g.op), inputs=jnp.where(dead[:, None], capacity, g.inputs),
                      input_index=jnp.where(dead[:, None], 0, g.input_index),
                      num_inputs=jnp.where(dead, 0, g.num_inputs), constant=g.constant & ~dead,
                      origin=jnp.where(dead, -1, g.origin))


def _sweep(g: GraphState) -> tuple[GraphState, jax.Array]:
    """Remove nodes left without consumers (not inputs or graph outputs), repeatedly: `Patch.commit`'s cascade.
    Returns the graph and its `_reads`."""

    def orphans(g):
        reads = _reads(g)
        uses, is_output = _consumers(g, reads)
        return g.alive & (uses == 0) & ~is_output & (g.op != OP_ID["input"]), reads

    def body(carry):
        g, dead, _ = carry
        g = _clear(g, dead)
        return g, *orphans(g)

    g, _, reads = jax.lax.while_loop(lambda carry: carry[1].any(), body, (g, *orphans(g)))
    return g, reads


def _attrs_like(g: GraphState, slot: jax.Array, **fields: int) -> jax.Array:
    row = g.attrs[slot]
    for name, value in fields.items():
        row = row.at[_SCALAR_FIELDS[name]].set(value)
    return row


def _no_attrs(g: GraphState) -> jax.Array:
    return jnp.zeros(g.attrs.shape[1], jnp.int32)


def _tuple_attrs(g: GraphState, values: Sequence[jax.Array]) -> jax.Array:
    row = _no_attrs(g).at[_TUPLE_LEN].set(len(values))
    return row.at[_TUPLE_START:_TUPLE_START + len(values)].set(jnp.stack(values).astype(jnp.int32))


def _vector(g: GraphState, n: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Shape and rank of a vector of length `n`."""
    return jnp.ones(g.shapes.shape[2], jnp.int32).at[0].set(n), jnp.int32(1)


def _conv_parts(g: GraphState, conv: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Input, weight and bias slots of a conv, and whether it has a bias (`_indices(g, conv)`: which outputs of
    those slots it reads)."""
    x, w, bias = (g.inputs[conv, k] for k in range(3))
    return x, w, bias, g.num_inputs[conv] == 3


def _indices(g: GraphState, node: jax.Array, positions: Sequence[int] = (0, 1, 2)) -> list[jax.Array]:
    """The output index of each input position of `node` that a rewrite passes on: a node may read output 1 of a
    split, and the rewritten node must read the same tensor."""
    return [g.input_index[node, k] for k in positions]


def _other_input(g: GraphState, node: jax.Array, known: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The (slot, output index) of the input of two-input `node` that is not slot `known`."""
    first = g.inputs[node, 0] == known
    return (jnp.where(first, g.inputs[node, 1], g.inputs[node, 0]),
            jnp.where(first, g.input_index[node, 1], g.input_index[node, 0]))


def _build_conv_relu(g, loc):
    relu, conv = loc[0], loc[1]
    x, w, bias, _has_bias = _conv_parts(g, conv)
    patch = _Patch(g, [relu, conv])
    fused = patch.add("conv2d", [x, w, bias], _attrs_like(g, conv, activation=ACTIVATIONS.index("relu")),
                      g.shapes[conv, 0], g.rank[conv, 0], count=g.num_inputs[conv], indices=_indices(g, conv))
    patch.replace(relu, fused)
    return patch.edit()


def _build_conv_batchnorm(g, loc):
    bn, conv = loc[0], loc[1]
    x, w, bias, has_bias = _conv_parts(g, conv)
    scale, shift, mean, var = (g.inputs[bn, k] for k in range(1, 5))
    eps = _no_attrs(g).at[_FLOAT_FIELDS["eps"]].set(g.attrs[bn, _FLOAT_FIELDS["eps"]])
    patch = _Patch(g, [bn, conv])
    w_index = g.input_index[conv, 1]
    weight = patch.add("bn_fold_weight", [w, scale, var], eps, g.shapes[w, w_index], g.rank[w, w_index],
                       indices=[w_index, *_indices(g, bn, (1, 4))])
    folded = patch.add("bn_fold_bias", [scale, shift, mean, var, bias], eps, *_vector(g, g.shapes[conv, 0, 1]),
                       count=jnp.where(has_bias, 5, 4), indices=_indices(g, bn, (1, 2, 3, 4)) + _indices(g, conv, (2,)))
    fused = patch.add("conv2d", [x, weight, folded], g.attrs[conv], g.shapes[conv, 0], g.rank[conv, 0],
                      indices=_indices(g, conv, (0,)) + [jnp.int32(0)] * 2)
    patch.replace(bn, fused)
    return patch.edit()


def _build_conv_mul(g, loc):
    mul, conv = loc[0], loc[1]
    factor, factor_index = _other_input(g, mul, conv)
    count = jnp.prod(g.shapes[factor, factor_index])  # 1 or the number of output channels
    x, w, bias, has_bias = _conv_parts(g, conv)
    x_index, w_index, bias_index = _indices(g, conv)
    one, zero = jnp.int32(1), jnp.int32(0)
    patch = _Patch(g, [mul, conv])
    shaped = patch.add("reshape", [factor], _tuple_attrs(g, [count, one, one, one]),
                       jnp.ones(g.shapes.shape[2], jnp.int32).at[0].set(count), jnp.int32(4), indices=[factor_index])
    weight = patch.add("mul", [w, shaped], _no_attrs(g), g.shapes[w, w_index], g.rank[w, w_index],
                       indices=[w_index, zero])
    flat = patch.add("reshape", [factor], _tuple_attrs(g, [count]), *_vector(g, count), present=has_bias,
                     indices=[factor_index])
    scaled = patch.add("mul", [bias, flat], _no_attrs(g), g.shapes[bias, bias_index], g.rank[bias, bias_index],
                       present=has_bias, indices=[bias_index, zero])
    fused = patch.add("conv2d", [x, weight, scaled], g.attrs[conv], g.shapes[conv, 0], g.rank[conv, 0],
                      count=g.num_inputs[conv], indices=[x_index, zero, zero])
    patch.replace(mul, fused)
    return patch.edit()


def _build_associate_matmul(g, loc):
    outer, inner = loc[0], loc[1]
    a, b = g.inputs[inner, 1], g.inputs[outer, 1]
    a_index, b_index = g.input_index[inner, 1], g.input_index[outer, 1]
    patch = _Patch(g, [outer, inner])
    shape = jnp.ones(g.shapes.shape[2], jnp.int32).at[0].set(g.shapes[a, a_index, 0]).at[1].set(
        g.shapes[b, b_index, 1])
    product = patch.add("matmul", [a, b], _no_attrs(g), shape, jnp.int32(2), indices=[a_index, b_index])
    new = patch.add("matmul", [g.inputs[inner, 0], product], g.attrs[outer], g.shapes[outer, 0], g.rank[outer, 0],
                    indices=[g.input_index[inner, 0], jnp.int32(0)])
    patch.replace(outer, new)
    return patch.edit()


def _build_fold_conv_bias(g, loc):
    add, conv = loc[0], loc[1]
    constant, constant_index = _other_input(g, add, conv)
    channels = g.shapes[conv, 0, 1]
    x, w, bias, has_bias = _conv_parts(g, conv)
    x_index, w_index, bias_index = _indices(g, conv)
    patch = _Patch(g, [add, conv])
    shift = patch.add("reshape", [constant], _tuple_attrs(g, [channels]), *_vector(g, channels),
                      indices=[constant_index])
    summed = patch.add("add", [bias, shift], _no_attrs(g), *_vector(g, channels), present=has_bias,
                       indices=[bias_index, jnp.int32(0)])
    fused = patch.add("conv2d", [x, w, jnp.where(has_bias, summed, shift)], g.attrs[conv], g.shapes[conv, 0],
                      g.rank[conv, 0], indices=[x_index, w_index, jnp.int32(0)])
    patch.replace(add, fused)
    return patch.edit()


def _build_merge_group_convs(g, loc):
    conv = loc[0]
    x, w, bias, _has_bias = _conv_parts(g, conv)
    groups = g.attrs[conv, _SCALAR_FIELDS["groups"]]
    patch = _Patch(g, [conv])
    attrs = _no_attrs(g).at[_SCALAR_FIELDS["groups"]].set(groups).at[_SCALAR_FIELDS["count"]].set(2)
    x_index, w_index, bias_index = _indices(g, conv)
    merged = patch.add("merge_gconv", [w], attrs, g.shapes[w, w_index].at[1].multiply(2), g.rank[w, w_index],
                       indices=[w_index])
    fused = patch.add("conv2d", [x, merged, bias], _attrs_like(g, conv, groups=groups // 2), g.shapes[conv, 0],
                      g.rank[conv, 0], count=g.num_inputs[conv], indices=[x_index, jnp.int32(0), bias_index])
    patch.replace(conv, fused)
    return patch.edit()


def _build_concat_of_relus(g, loc):
    concat = loc[0]
    relus = [g.inputs[concat, k] for k in range(g.inputs.shape[1])]  # C past the concat's inputs
    safe = [jnp.minimum(r, g.op.shape[0] - 1) for r in relus]
    patch = _Patch(g, [concat, *relus])
    joined = patch.add("concat", [g.inputs[r, 0] for r in safe], g.attrs[concat], g.shapes[concat, 0],
                       g.rank[concat, 0], count=g.num_inputs[concat], indices=[g.input_index[r, 0] for r in safe])
    fused = patch.add("relu", [joined], _no_attrs(g), g.shapes[concat, 0], g.rank[concat, 0])
    patch.replace(concat, fused)
    return patch.edit()


# ---------------------------------------------------------------- sibling merges and splits (multi-output rewrites)


def _sibling_table(g: GraphState, roots: jax.Array, width: int) -> jax.Array:
    """[N, S] for every slot of `roots` [N] (one op, increasing, padded with C), the slots among `roots` (in
    increasing order, padded with C) of the nodes reading the same tensor as its input 0, also as input 0, itself
    excluded: the candidate partners of a sibling-pair rule rooted there. S = `width` >= the most input-0 readers
    of one tensor (`JaxEnv.encode` checks the instance)."""
    capacity = g.op.shape[0]
    r = jnp.minimum(roots, capacity - 1)
    reads = (roots < capacity) & (g.num_inputs[r] >= 1)
    tensor = g.inputs[r, 0] * g.shapes.shape[1] + g.input_index[r, 0]
    same = (tensor[:, None] == tensor[None, :]) & reads[:, None] & reads[None, :] & ~jnp.eye(len(roots), dtype=bool)
    index = _first_true(same, width)
    return jnp.concatenate([roots, jnp.full(1, capacity, roots.dtype)])[index]


def _const_weights(g: GraphState, v: _View) -> jax.Array:
    """[C] every input after the first is constant (`rules._constant_inputs(graph, node, 1)`)."""
    absent = jnp.arange(g.inputs.shape[1])[None, :] >= g.num_inputs[:, None]
    return (v.in_const | absent)[:, 1:].all(axis=1)


def _dim(shape: jax.Array, axis: jax.Array, value: jax.Array) -> jax.Array:
    """`shape` [R] with entry `axis` (traced) set to `value`."""
    return jnp.where(jnp.arange(shape.shape[-1]) == axis, value, shape)


def _axis_attrs(g: GraphState, axis: jax.Array | int) -> jax.Array:
    return _no_attrs(g).at[_SCALAR_FIELDS["axis"]].set(axis)


def _split_in_two(patch: _Patch, g: GraphState, source: jax.Array, first: jax.Array, second: jax.Array,
                  axis: jax.Array) -> jax.Array:
    """A split of new node `source` on `axis` into tensors shaped like output 0 of slots `first` and `second`,
    which it replaces; returns its code."""
    sizes = jnp.stack([g.shapes[first, 0, axis], g.shapes[second, 0, axis]])
    attrs = _axis_attrs(g, axis).at[_TUPLE_LEN].set(2).at[_TUPLE_START:_TUPLE_START + 2].set(sizes)
    split = patch.add_outputs("split", [source], attrs, jnp.stack([g.shapes[first, 0], g.shapes[second, 0]]),
                              jnp.stack([g.rank[first, 0], g.rank[second, 0]]), 2)
    patch.replace(first, split, 0, 0)
    patch.replace(second, split, 0, 1)
    return split


def _match_merge_matmuls(g, v, r, table):
    capacity = g.op.shape[0]
    weight = (v.in_rank[:, 1] == 2) & _const_weights(g, v)  # the table holds matmuls only
    partner = jnp.minimum(table, capacity - 1)
    ok = weight[r][:, None] & (table < capacity) & weight[partner] & (g.attrs[partner, 0] == g.attrs[r][:, None, 0])
    return ok, [table]


def _build_merge_matmuls(g, loc):
    a, b = loc[0], loc[1]
    axis = g.rank[a, 0] - 1
    weights = [g.inputs[a, 1], g.inputs[b, 1]]
    wa = g.shapes[weights[0], g.input_index[a, 1]]
    patch = _Patch(g, [a, b])
    joined = patch.add("concat", weights, _axis_attrs(g, 1), wa.at[1].add(g.shapes[weights[1], g.input_index[b, 1], 1]),
                       jnp.int32(2), indices=[g.input_index[a, 1], g.input_index[b, 1]])
    width = g.shapes[a, 0, axis] + g.shapes[b, 0, axis]
    merged = patch.add("matmul", [g.inputs[a, 0], joined], g.attrs[a], _dim(g.shapes[a, 0], axis, width),
                       g.rank[a, 0], indices=[g.input_index[a, 0], jnp.int32(0)])
    _split_in_two(patch, g, merged, a, b, axis)
    return patch.edit()


def _bias_add(g: GraphState, v: _View) -> tuple[jax.Array, jax.Array]:
    """Per slot: whether its sole consumer adds a constant vector over the last axis (a Linear's bias,
    `rules._bias_add`), and that add's slot."""
    capacity, max_inputs = g.op.shape[0], g.inputs.shape[1]
    valid = g.live_inputs
    producer = jnp.where(valid, g.inputs, capacity).reshape(-1)
    # one scatter of the edge's id (consumer slot * K + input position): unique where the producer is sole
    edge = jnp.full(capacity + 1, capacity * max_inputs - 1).at[producer].set(jnp.arange(capacity * max_inputs))
    consumer, position = edge[:capacity] // max_inputs, edge[:capacity] % max_inputs
    other = consumer * max_inputs + jnp.clip(1 - position, 0, 1)  # the add's other input, as an edge id
    bias, bias_index = g.inputs.reshape(-1)[other], g.input_index.reshape(-1)[other]
    safe = jnp.minimum(bias, capacity - 1)
    last = _last_dim(v.shape[consumer], v.rank[consumer])
    ok = (v.sole & (g.op[consumer] == OP_ID["add"]) & (g.num_inputs[consumer] == 2) & g.constant[safe]
          & _same_shape(v, consumer, jnp.arange(capacity))
          & (_tensors(g.rank, safe, bias_index) == 1) & (_tensors(g.shapes[:, :, 0], safe, bias_index) == last))
    return ok, consumer


def _match_merge_linears(g, v, r, table):
    capacity = g.op.shape[0]
    biased, add = _bias_add(g, v)
    linear = biased & (g.attrs[:, 0] == 0) & (v.in_rank[:, 1] == 2) & _const_weights(g, v)  # matmuls only
    partner = jnp.minimum(table, capacity - 1)
    ok = linear[r][:, None] & (table < capacity) & linear[partner]
    return ok, [table, jnp.broadcast_to(add[r][:, None], table.shape), add[partner]]


def _build_merge_linears(g, loc):
    a, b, add_a, add_b = loc[0], loc[1], loc[2], loc[3]
    axis = g.rank[a, 0] - 1
    patch = _Patch(g, [a, b, add_a, add_b])
    wa = g.shapes[g.inputs[a, 1], g.input_index[a, 1]]
    joined = patch.add("concat", [g.inputs[a, 1], g.inputs[b, 1]], _axis_attrs(g, 1),
                       wa.at[1].add(g.shapes[g.inputs[b, 1], g.input_index[b, 1], 1]), jnp.int32(2),
                       indices=[g.input_index[a, 1], g.input_index[b, 1]])
    width = g.shapes[a, 0, axis] + g.shapes[b, 0, axis]
    shape = _dim(g.shapes[a, 0], axis, width)
    merged = patch.add("matmul", [g.inputs[a, 0], joined], g.attrs[a], shape, g.rank[a, 0],
                       indices=[g.input_index[a, 0], jnp.int32(0)])
    biases = [jnp.where(g.inputs[add, 0] == node, 1, 0) for add, node in ((add_a, a), (add_b, b))]
    bias_slots = [g.inputs[add, k] for add, k in zip((add_a, add_b), biases)]
    bias_indices = [g.input_index[add, k] for add, k in zip((add_a, add_b), biases)]
    bias = patch.add("concat", bias_slots, _axis_attrs(g, 0), *_vector(g, width), indices=bias_indices)
    summed = patch.add("add", [merged, bias], _no_attrs(g), shape, g.rank[a, 0])
    _split_in_two(patch, g, summed, add_a, add_b, axis)
    return patch.edit()


def _tensor_facts(g: GraphState, reads: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per slot, for the tensor its input 0 reads: how many inputs read it (`reads` from `_reads`), and whether it
    is a graph output."""
    capacity, width = g.op.shape[0], g.shapes.shape[1]
    first = g.inputs[:, 0] * width + g.input_index[:, 0]
    output = ((g.outputs[None, :, 0] == g.inputs[:, :1]) & (g.outputs[None, :, 1] == g.input_index[:, :1])).any(1)
    return reads[jnp.minimum(first, capacity * width)], output


def _match_split_of_split(g, v, r):
    inner = v.producer[r, 0]
    reads, output = _tensor_facts(g, v.reads)
    rank = jnp.maximum(v.rank[r], 1)
    axis = g.attrs[:, _SCALAR_FIELDS["axis"]]
    ok = ((g.op[inner] == OP_ID["split"]) & (reads[r] == 1) & ~output[r] & (axis[inner] % rank == axis[r] % rank)
          & (g.num_outputs[r] + g.num_outputs[inner] - 1 <= g.shapes.shape[1]))  # the merged split must fit O outputs
    return ok, [inner]


def _build_split_of_split(g, loc):
    outer, inner = loc[0], loc[1]
    width = g.shapes.shape[1]
    k, m = g.input_index[outer, 0], g.num_outputs[outer]
    part = jnp.arange(width)
    from_outer = (part >= k) & (part < k + m)
    source = jnp.where(from_outer, outer, inner)
    source_index = jnp.clip(jnp.where(from_outer, part - k, jnp.where(part < k, part, part - m + 1)), 0, width - 1)
    total = g.num_outputs[inner] + m - 1
    tuple_width = g.attrs.shape[1] - _TUPLE_START
    sizes = g.attrs[source, _TUPLE_START + jnp.minimum(source_index, tuple_width - 1)]
    attrs = g.attrs[inner].at[_TUPLE_LEN].set(total).at[_TUPLE_START:_TUPLE_START + width].set(
        jnp.where(part < total, sizes, 0))
    patch = _Patch(g, [outer, inner])
    split = patch.add_outputs("split", [g.inputs[inner, 0]], attrs, g.shapes[source, source_index],
                              g.rank[source, source_index], total, indices=[g.input_index[inner, 0]])
    for j in range(width):
        patch.replace(source[j], split, source_index[j], j, when=j < total)
    return patch.edit()


def _match_split_concat(g, v, r):
    split = v.producer[r, 0]
    count = g.num_inputs[r]
    position = jnp.arange(g.inputs.shape[1])[None, :]
    rejoined = ((g.inputs[r] == split[:, None]) & (g.input_index[r] == position)) | (position >= count[:, None])
    axis = g.attrs[:, _SCALAR_FIELDS["axis"]]
    rank = jnp.maximum(v.rank[r], 1)
    ok = ((g.op[split] == OP_ID["split"]) & (count == g.num_outputs[split]) & rejoined.all(axis=1)
          & (axis[r] % rank == axis[split] % rank))
    return ok, [split]


def _build_split_concat(g, loc):
    concat, split = loc[0], loc[1]
    patch = _Patch(g, [concat])
    patch.replace(concat, g.inputs[split, 0], 0, g.input_index[split, 0])
    return patch.edit()


def _kernel(v: _View) -> jax.Array:
    """[C, 2] spatial size of each node's input-1 tensor (a conv's kernel)."""
    return v.in_shape[:, 1, 2:4]


def _centred(g: GraphState, v: _View) -> jax.Array:
    """[C] odd kernel with (k - 1) / 2 padding on each side (`rules._centred`)."""
    kernel = _kernel(v)
    half = (kernel - 1) // 2
    pads = g.attrs[:, _PADS_FIELD:_PADS_FIELD + 4]
    return (kernel % 2 == 1).all(axis=1) & (pads == jnp.concatenate([half, half], axis=1)).all(axis=1)


def _mergeable(g: GraphState, v: _View, a: jax.Array, b: jax.Array, activation: jax.Array) -> jax.Array:
    """`rules._mergeable` for conv slots `a`, `b` (broadcast)."""
    groups = g.attrs[:, _SCALAR_FIELDS["groups"]]
    const = _const_weights(g, v)
    stride = g.attrs[:, _PAIR_FIELDS["stride"]:_PAIR_FIELDS["stride"] + 2]
    return ((g.op[a] == OP_ID["conv2d"]) & (g.op[b] == OP_ID["conv2d"]) & (groups[a] == 1) & (groups[b] == 1)
            & (stride[a] == stride[b]).all(axis=-1) & (g.attrs[a, 0] == activation) & (g.attrs[b, 0] == activation)
            & (g.num_inputs[a] == g.num_inputs[b]) & const[a] & const[b])


def _match_merge_convs(g, v, r, table, *, activation, enlarge):
    capacity = g.op.shape[0]
    a = r[:, None]
    b = jnp.minimum(table, capacity - 1)
    kernel, centred = _kernel(v), _centred(g, v)
    pads = g.attrs[:, _PADS_FIELD:_PADS_FIELD + 4]
    same_kernel = (kernel[a] == kernel[b]).all(axis=-1)
    enlarged = ~same_kernel & centred[a] & centred[b] & (v.shape[a, 2:4] == v.shape[b, 2:4]).all(axis=-1)
    plain = same_kernel & (pads[a] == pads[b]).all(axis=-1)
    ok = (table < capacity) & _mergeable(g, v, a, b, activation) & jnp.where(enlarge == 1, enlarged, plain)
    return ok, [table]


def _build_merge_convs(g, loc):
    """Kernels differ only in the enlarging variant, whose pads are then the centred pads of the larger one."""
    a, b = loc[0], loc[1]
    weights = [g.inputs[a, 1], g.inputs[b, 1]]
    indices = [g.input_index[a, 1], g.input_index[b, 1]]
    shapes = [g.shapes[w, i] for w, i in zip(weights, indices)]
    kernel = jnp.maximum(shapes[0][2:4], shapes[1][2:4])
    patch = _Patch(g, [a, b])
    kernel_attrs = _no_attrs(g).at[_PAIR_FIELDS["kernel"]:_PAIR_FIELDS["kernel"] + 2].set(kernel)
    parts, part_indices = [], []
    for w, i, shape in zip(weights, indices, shapes):
        grow = (shape[2:4] != kernel).any()
        code = patch.add("enlarge", [w], kernel_attrs, shape.at[2:4].set(kernel), jnp.int32(4), present=grow,
                         indices=[i])
        parts.append(jnp.where(grow, code, w))
        part_indices.append(jnp.where(grow, 0, i))
    channels = shapes[0][0] + shapes[1][0]
    joined = patch.add("concat", parts, _axis_attrs(g, 0), shapes[0].at[2:4].set(kernel).at[0].set(channels),
                       jnp.int32(4), indices=part_indices)
    has_bias = g.num_inputs[a] == 3
    bias = patch.add("concat", [g.inputs[a, 2], g.inputs[b, 2]], _axis_attrs(g, 0), *_vector(g, channels),
                     present=has_bias, indices=[g.input_index[a, 2], g.input_index[b, 2]])
    half = (kernel - 1) // 2
    enlarged = (shapes[0][2:4] != shapes[1][2:4]).any()
    pads = jnp.where(enlarged, jnp.concatenate([half, half]), g.attrs[a, _PADS_FIELD:_PADS_FIELD + 4])
    merged = patch.add("conv2d", [g.inputs[a, 0], joined, bias], g.attrs[a].at[_PADS_FIELD:_PADS_FIELD + 4].set(pads),
                       g.shapes[a, 0].at[1].set(channels), g.rank[a, 0], count=g.num_inputs[a],
                       indices=[g.input_index[a, 0], jnp.int32(0), jnp.int32(0)])
    _split_in_two(patch, g, merged, a, b, jnp.int32(1))
    return patch.edit()


def _match_merge_convs_into_add(g, v, r):
    a, b = v.producer[r, 0], v.producer[r, 1]
    kernel = _kernel(v)
    pads = g.attrs[:, _PADS_FIELD:_PADS_FIELD + 4]
    ok = ((g.num_inputs[r] == 2) & (a != b) & _mergeable(g, v, a, b, 0)
          & (pads[a] == pads[b]).all(axis=1) & _same_shape(v, a, b) & _same_shape(v, a, r)
          & (kernel[a] == kernel[b]).all(axis=1) & (v.in_shape[:, 0, 2:4][a] == v.in_shape[:, 0, 2:4][b]).all(axis=1)
          & v.sole[a] & v.sole[b])
    return ok, [a, b]


def _build_merge_convs_into_add(g, loc):
    add, a, b = loc[0], loc[1], loc[2]
    patch = _Patch(g, [add, a, b])
    x = [g.shapes[g.inputs[n, 0], g.input_index[n, 0]] for n in (a, b)]
    w = [g.shapes[g.inputs[n, 1], g.input_index[n, 1]] for n in (a, b)]
    inputs = patch.add("concat", [g.inputs[a, 0], g.inputs[b, 0]], _axis_attrs(g, 1), x[0].at[1].add(x[1][1]),
                       jnp.int32(4), indices=[g.input_index[a, 0], g.input_index[b, 0]])
    weights = patch.add("concat", [g.inputs[a, 1], g.inputs[b, 1]], _axis_attrs(g, 1), w[0].at[1].add(w[1][1]),
                        jnp.int32(4), indices=[g.input_index[a, 1], g.input_index[b, 1]])
    bias = patch.add("add", [g.inputs[a, 2], g.inputs[b, 2]], _no_attrs(g), *_vector(g, w[0][0]),
                     present=g.num_inputs[a] == 3, indices=[g.input_index[a, 2], g.input_index[b, 2]])
    fused = patch.add("conv2d", [inputs, weights, bias], g.attrs[a], g.shapes[add, 0], g.rank[add, 0],
                      count=g.num_inputs[a])
    patch.replace(add, fused)
    return patch.edit()


class _JaxRule(NamedTuple):
    root: str  # the op of every location's first node: the family is matched only at slots holding it
    match: Callable  # (GraphState, _View, root slots [N], **params as int32 scalars) -> ([N] bool, [partners [N]])
    build: Callable  # (GraphState, location [M]) -> Edit; the same for every parameter of the family
    pairs: bool = False  # sibling pairs: match also takes the [N, S] sibling table and returns [N, S] masks
    growth: tuple[tuple[str, int], ...] = ()  # ops of which one rewrite can leave more nodes than it found


JAX_RULE_FAMILIES: dict[str, _JaxRule] = {
    "FuseConvRelu": _JaxRule("relu", _match_conv_relu, _build_conv_relu),
    "FuseConvBatchNorm": _JaxRule("batchnorm", _match_conv_batchnorm, _build_conv_batchnorm),
    "FuseConvMul": _JaxRule("mul", _match_conv_mul, _build_conv_mul, growth=(("mul", 1),)),
    "AssociateMatmul": _JaxRule("matmul", _match_associate_matmul, _build_associate_matmul),
    "FoldConvBias": _JaxRule("add", _match_fold_conv_bias, _build_fold_conv_bias),
    "MergeGroupConvs": _JaxRule("conv2d", _match_merge_group_convs, _build_merge_group_convs),
    "ConcatOfRelus": _JaxRule("concat", _match_concat_of_relus, _build_concat_of_relus),
    "MergeMatmuls": _JaxRule("matmul", _match_merge_matmuls, _build_merge_matmuls, pairs=True,
                             growth=(("concat", 1), ("split", 1))),
    "MergeLinears": _JaxRule("matmul", _match_merge_linears, _build_merge_linears, pairs=True,
                             growth=(("concat", 2), ("split", 1))),
    "SplitOfSplit": _JaxRule("split", _match_split_of_split, _build_split_of_split),
    "SplitConcat": _JaxRule("concat", _match_split_concat, _build_split_concat),
    "MergeConvs": _JaxRule("conv2d", _match_merge_convs, _build_merge_convs, pairs=True,
                           growth=(("concat", 2), ("split", 1))),
    "MergeConvsIntoAdd": _JaxRule("add", _match_merge_convs_into_add, _build_merge_convs_into_add,
                                  growth=(("concat", 2),)),
}
JAX_RULES: tuple[Rule, ...] = tuple(rule for rule in RULES if rule.family in JAX_RULE_FAMILIES)


# ---------------------------------------------------------------- cost and observation


_ACTIVATED = np.array(["activation" in OPS[op].defaults for op in OP_TYPES])
_KERNELED = np.array(["kernel" in OPS[op].defaults for op in OP_TYPES])
_STRIDED = np.array(["stride" in OPS[op].defaults for op in OP_TYPES])


def _op_in(g: GraphState, ops: Sequence[str] | frozenset[str], slots: jax.Array | None = None) -> jax.Array:
    """Whether the op of every slot (or of `slots`) is one of `ops`; False for free slots."""
    op = g.op if slots is None else g.op[slots]
    table = jnp.asarray(np.array([name in ops for name in OP_TYPES] + [False]))
    return table[jnp.where(op >= 0, op, len(OP_TYPES))]


def _last_dim(shape: jax.Array, rank: jax.Array) -> jax.Array:
    """[...] the last dimension of right-padded shapes [..., R] of rank `rank` (0 for rank 0)."""
    dims = jnp.arange(shape.shape[-1]).reshape((1,) * rank.ndim + (-1,))
    return jnp.where(dims == rank[..., None] - 1, shape, 0).sum(axis=-1)


def _sizes(g: GraphState, v: _View) -> tuple[jax.Array, jax.Array]:
    """Elements of every input [C, K] and every output [C, O] float32, 0 past num_inputs / num_outputs."""
    in_sizes = jnp.where(g.live_inputs, jnp.prod(v.in_shape.astype(jnp.float32), axis=-1), 0.0)
    out_valid = jnp.arange(g.shapes.shape[1])[None, :] < g.num_outputs[:, None]
    return in_sizes, jnp.where(out_valid, jnp.prod(g.shapes.astype(jnp.float32), axis=-1), 0.0)


def _node_work(g: GraphState, v: _View, in_sizes: jax.Array, out_sizes: jax.Array) -> tuple[jax.Array, jax.Array]:
    """FLOPs and bytes [C] of every slot's op as a kernel of its own (`jaxgraph.cost.flops_and_bytes` of a kernel
    without epilogue): TASO's cost, and the root part of every fused kernel."""
    traffic = 4.0 * (in_sizes.sum(axis=1) + out_sizes.sum(axis=1))
    out = out_sizes[:, 0]
    w = v.in_shape[:, 1].astype(jnp.float32)
    conv = 2.0 * out * w[:, 1] * w[:, 2] * w[:, 3] + jnp.where(g.num_inputs == 3, out, 0.0)
    matmul = 2.0 * out * _last_dim(v.in_shape[:, 0], v.in_rank[:, 0]).astype(jnp.float32)
    pool = out * g.attrs[:, 8].astype(jnp.float32) * g.attrs[:, 9].astype(jnp.float32)
    flops = jnp.select(
        [g.op == OP_ID["conv2d"], g.op == OP_ID["matmul"], _op_in(g, ("maxpool2d", "avgpool2d")),
         _op_in(g, ("sigmoid", "tanh", "softmax")), g.op == OP_ID["batchnorm"]],
        [conv, matmul, pool, 4.0 * out, 2.0 * out], out)
    return flops, traffic


def _chain_inputs(g: GraphState, v: _View) -> jax.Array:
    """[C, K] bool: input k may chain the node into its producer's kernel (`backends._producer`, non-constant):
    output 0 of a non-constant node that nothing else reads and that is not a graph output."""
    return g.live_inputs & ~v.in_const & (g.input_index == 0) & v.sole[v.producer]


_XLA_ARITY = max(OPS[op].max_inputs for op in XLA_ELEMENTWISE)  # the inputs an XLA chain can pass through


def _xla_roots(g: GraphState, v: _View, passes: int) -> tuple[jax.Array, jax.Array]:
    """Per slot the root slot of the XLA kernel that absorbs it (-1: none) and the input position it chains
    through [C]: `backends._xla_absorb` (an elementwise op joins the chain of its first elementwise producer whose
    chain is shorter than `XLA_MAX_CHAIN`), as `passes` simultaneous updates of every slot from its producers'
    previous answers (exact from `XLA.absorb_depth(graph)` passes on). A slot's answer is one int32,
    (root + 1) << 6 | depth << 3 | position, so a pass gathers and selects one array."""
    width = min(g.inputs.shape[1], _XLA_ARITY)
    producer = v.producer[:, :width]
    positions = jnp.arange(width)[None, :]
    link = (_chain_inputs(g, v)[:, :width] & _op_in(g, XLA_ELEMENTWISE)[:, None]
            & _op_in(g, XLA_ELEMENTWISE, producer))
    starts = ((producer + 1) << 6) | (1 << 3) | positions  # [C, W] joining a producer that roots its own chain

    def update(_, code):
        previous = code[producer]  # [C, W]
        chained = previous >= 1 << 6
        depth = (previous >> 3) & 7
        joined = jnp.where(chained, (previous & ~63) | ((depth + 1) << 3) | positions, starts)
        ok = link & (~chained | (depth < XLA_MAX_CHAIN))
        new = jnp.zeros_like(code)
        for k in reversed(range(width)):  # the first position that chains wins
            new = jnp.where(ok[:, k], joined[:, k], new)
        return new

    code = jax.lax.fori_loop(0, passes, update, jnp.zeros(g.op.shape, jnp.int32))
    return (code >> 6) - 1, code & 7


def _xla_epilogue_work(g: GraphState, root: jax.Array, via: jax.Array, in_sizes: jax.Array,
                       out_sizes: jax.Array) -> tuple[jax.Array, jax.Array]:
    """FLOPs and bytes [C] that the ops absorbed into each root's XLA kernel add (`_xla_canonical`'s epilogue
    steps): one op per output element, and reads of every input but the chained one."""
    capacity = g.op.shape[0]
    chained = jnp.where(jnp.arange(in_sizes.shape[1])[None, :] == via[:, None], in_sizes, 0.0).sum(axis=1)
    work = jnp.stack([out_sizes[:, 0], 4.0 * (in_sizes.sum(axis=1) - chained)], axis=1)
    extra = jax.ops.segment_sum(work, jnp.where(root >= 0, root, capacity), capacity + 1)[:capacity]
    return extra[:, 0], extra[:, 1]


# onnxruntime's epilogue stages (`ORT_CONV_STAGES`; `ORT_MATMUL_STAGES` numbers scale and bias alike)
_BATCHNORM, _SCALE, _BIAS, _RESIDUAL, _ACTIVATION = (ORT_CONV_STAGES[kind] for kind in (
    "batchnorm", "scale", "bias", "residual", "activation"))


def _residual_adds(g: GraphState, v: _View) -> jax.Array:
    """[C] bool: Adds of two non-constant inputs of equal shape (residual connections, which onnxruntime fuses into
    a convolution or a LayerNorm)."""
    return ((g.op == OP_ID["add"]) & ~v.in_const[:, :2].any(axis=1) & (v.in_rank[:, 0] == v.in_rank[:, 1])
            & (v.in_shape[:, 0] == v.in_shape[:, 1]).all(axis=1))


def _ort_links(g: GraphState, v: _View, residual: jax.Array) -> jax.Array:
    """[C, 2] int32: the stage (-1: none) through which input 0 and input 1 could join a producer's
    onnxruntime kernel (`backends._ort_link`): a batch norm with constant parameters and an activation through
    input 0, a constant scale or bias through its other input, a `residual` Add through either."""
    const = v.in_const[:, :2]
    one_constant = (g.num_inputs == 2) & (const[:, 0] != const[:, 1])
    scale_bias = jnp.where(g.op == OP_ID["mul"], _SCALE, jnp.where(g.op == OP_ID["add"], _BIAS, -1))
    first = jnp.select(
        [(g.op == OP_ID["batchnorm"]) & v.in_const[:, 1:5].all(axis=1), _op_in(g, ORT_ACTIVATIONS),
         one_constant & const[:, 1], residual],
        [_BATCHNORM, _ACTIVATION, scale_bias, _RESIDUAL], -1)
    second = jnp.select([one_constant & const[:, 0], residual], [scale_bias, _RESIDUAL], -1)
    return jnp.stack([first, second], axis=1).astype(jnp.int32)


def _ort_fits(g: GraphState, v: _View, links: jax.Array) -> tuple[jax.Array, jax.Array]:
    """[C, 2] bool each: can the link of input j join a convolution kernel, a MatMul kernel (`backends._ort_fits`)?
    Every member of a kernel has its root's output shape, so the root's shape is the chained producer's."""
    conv, matmul = [], []
    for side in (0, 1):
        kind = links[:, side]
        same = (v.rank == v.in_rank[:, side]) & (v.shape == v.in_shape[:, side]).all(axis=1)  # as the producer
        constant, rank = v.in_shape[:, 1 - side], v.in_rank[:, 1 - side]
        size = jnp.prod(constant, axis=-1)
        vector = ((size == _last_dim(constant, rank)) & (size == _last_dim(v.shape, v.rank))
                  & ((rank == 1) | ((rank == 2) & (v.rank == 2))))
        scale_bias = (kind == _SCALE) | (kind == _BIAS)
        folds = (_per_channel(v, slice(None), side, v.shape[:, 1], exact=True) & (rank >= 3)) | (
            (kind == _SCALE) & (rank == 0))  # [1, C, 1, 1], [C, 1, 1], or a scalar factor
        conv.append(~scale_bias | (same & folds))
        matmul.append(same & (((kind == _SCALE) & (size == 1)) | ((kind == _BIAS) & vector)))
    return jnp.stack(conv, axis=1), jnp.stack(matmul, axis=1)


_SPARE_PASSES = 2  # fusion passes beyond the instance's need, for rewrites that lengthen a chain of fusions
_NO_ROOT, _CONV_ROOT, _MATMUL_ROOT, _GEMM_ROOT = range(4)  # what kind of onnxruntime kernel a slot is part of


def _ort_root_kinds(g: GraphState, v: _View) -> jax.Array:
    """[C]: the kernel a slot can root for the stage links: a convolution or a MatMul without activation (a Gemm
    when its weight is a 2-D constant, which a bias needs), else `_NO_ROOT`."""
    plain = g.attrs[:, 0] == ACTIVATIONS.index("none")
    gemm = v.in_const[:, 1] & (v.in_rank[:, 1] == 2)
    return jnp.select([(g.op == OP_ID["conv2d"]) & plain, (g.op == OP_ID["matmul"]) & plain & gemm,
                       (g.op == OP_ID["matmul"]) & plain], [_CONV_ROOT, _GEMM_ROOT, _MATMUL_ROOT], _NO_ROOT)


def _skip_layernorms(g: GraphState, v: _View, residual: jax.Array) -> jax.Array:
    """[C] the LayerNorm slot that absorbs each `residual` Add as SkipLayerNormalization (-1: none): the Add is read
    only, as input 0, by a LayerNorm over its last axis."""
    capacity = g.op.shape[0]
    add = v.producer[:, 0]
    rank = jnp.maximum(v.in_rank[:, 0], 1)
    fits = ((g.op == OP_ID["layernorm"]) & (g.input_index[:, 0] == 0) & residual[add] & v.sole[add]
            & (g.attrs[:, _SCALAR_FIELDS["axis"]] % rank == rank - 1))
    found = jnp.full(capacity + 1, -1, jnp.int32).at[jnp.where(fits, add, capacity)].max(jnp.arange(capacity))
    return found[:capacity]


def _ort_code(root: jax.Array, stage: jax.Array, kind: jax.Array | int) -> jax.Array:
    """A slot's answer in the onnxruntime absorb passes as one int32: (root + 1) << 5 | (stage + 1) << 2 | kind of
    the root (0 for none: not absorbed, or absorbed into a LayerNorm)."""
    return ((root + 1) << 5) | ((stage + 1) << 2) | kind


def _ort_roots(g: GraphState, v: _View, block: jax.Array, passes: int) -> tuple[jax.Array, jax.Array]:
    """Per slot the root slot of the onnxruntime kernel that absorbs it (-1: none) and its stage there [C]
    (`backends._ort_absorb`: stages in increasing order after a convolution or MatMul, a residual only when the
    other input is in the NCHWc layout, which a pool keeps over whole channel blocks of `block`; else
    SkipLayerNormalization), as `passes` simultaneous updates of every slot from the previous answers (exact from
    `ONNXRUNTIME.absorb_depth(graph)` passes on). Everything that does not depend on the answers is computed once."""
    producer = v.producer[:, :2]
    residual = _residual_adds(g, v)
    links = jnp.where(_chain_inputs(g, v)[:, :2], _ort_links(g, v, residual), -1)
    fits_conv, fits_matmul = _ort_fits(g, v, links)
    fitting = ((fits_conv.astype(jnp.int32) << _CONV_ROOT) | (fits_matmul.astype(jnp.int32) << _GEMM_ROOT)
               | ((fits_matmul & (links == _SCALE)).astype(jnp.int32) << _MATMUL_ROOT))  # [C, 2] root kinds that fit
    direct = _ort_root_kinds(g, v)[producer]  # [C, 2] the producer roots a kernel itself
    own = direct != _NO_ROOT
    joins_own = own & (links >= 0) & ((fitting >> direct) & 1 == 1)
    own_code = _ort_code(producer, links, direct)
    pooled = _op_in(g, ("maxpool2d", "avgpool2d")) & (v.shape[:, 1] % block == 0)
    blocked = (pooled | (g.op == OP_ID["conv2d"]))[producer][:, ::-1]  # [C, 2] the other input is NCHWc anyway
    needs_layout = links == _RESIDUAL
    skip = _skip_layernorms(g, v, residual)
    skipped = jnp.where(skip >= 0, _ort_code(skip, 0, _NO_ROOT), 0)

    def update(_, code):
        previous = code[producer]  # [C, 2]
        stage, kind = ((previous >> 2) & 7) - 1, previous & 3
        joins = jnp.where(own, joins_own, (links > stage) & ((fitting >> kind) & 1 == 1))
        ok = joins & (~needs_layout | blocked | (kind == _CONV_ROOT)[:, ::-1])
        joined = jnp.where(own, own_code, (previous & ~(7 << 2)) | ((links + 1) << 2))
        return jnp.where(ok[:, 0], joined[:, 0], jnp.where(ok[:, 1], joined[:, 1], skipped))

    code = jax.lax.fori_loop(0, passes, update, jnp.zeros(g.op.shape, jnp.int32))
    return (code >> 5) - 1, ((code >> 2) & 7) - 1


def _ort_epilogue_work(g: GraphState, v: _View, root: jax.Array, stage: jax.Array,
                       out_sizes: jax.Array) -> tuple[jax.Array, jax.Array]:
    """FLOPs and bytes [C] that each onnxruntime kernel adds to its root op (`_ort_canonical`): a convolution's
    bias step (when a batch norm or bias folds in and it had no bias), residual and activation steps; a Gemm's bias
    and a MatMul's activation; SkipLayerNormalization's residual read. Scales fold into weights for free."""
    capacity = g.op.shape[0]
    absorbed = root >= 0
    # a kernel is a chain of strictly increasing stages, so the sum of 2^stage over its members has a bit per stage
    bits = jax.ops.segment_sum(jnp.where(absorbed, 1 << jnp.maximum(stage, 0), 0), jnp.where(absorbed, root, capacity),
                               capacity + 1)[:capacity]
    has = (bits[:, None] >> jnp.arange(len(ORT_CONV_STAGES))[None, :]) & 1 == 1
    conv, matmul = g.op == OP_ID["conv2d"], g.op == OP_ID["matmul"]
    activated = g.attrs[:, 0] != ACTIVATIONS.index("none")
    folded_bias = conv & (g.num_inputs == 2) & (has[:, _BATCHNORM] | has[:, _BIAS])
    residual = conv & has[:, _RESIDUAL]
    gemm_bias = matmul & has[:, _BIAS]
    skip = (g.op == OP_ID["layernorm"]) & has.any(axis=1)
    activation = (conv & has[:, _ACTIVATION]) | ((conv | matmul) & activated)
    steps = sum(step.astype(jnp.float32) for step in (folded_bias, residual, gemm_bias, skip, activation))
    out = out_sizes[:, 0]
    reads = jnp.select([folded_bias, gemm_bias], [v.shape[:, 1], _last_dim(v.shape, v.rank)], 0).astype(jnp.float32)
    return out * steps, 4.0 * (reads + jnp.where(residual | skip, out, 0.0))


def node_costs(g: GraphState, params: EnvParams, backend: Backend = TASO, passes: int = 0,
               rows: jax.Array | None = None) -> jax.Array:
    """[C] float32 ms: `jaxgraph.cost.node_cost` under `Roofline(backend=backend)` for every slot: the time of the
    kernel it roots, 0 when it is absorbed into another node's kernel, free on the backend, constant, an input or
    a free slot. `backend` is TASO (no fusion), XLA or ONNXRUNTIME; the fused backends' absorb relation takes
    `passes` vectorised passes (static), exact from `backend.absorb_depth(graph)` on. With `rows` [N] (in-range
    slots; TASO only, where a node's cost depends on itself and its input shapes alone): [N], those slots' costs."""
    if rows is not None and backend is not TASO:
        raise ValueError(f"node_costs of some rows only under the taso backend, got {backend.name!r}")
    v = _view(g, rows)
    g = _at_rows(g, rows)
    in_sizes, out_sizes = _sizes(g, v)
    flops, traffic = _node_work(g, v, in_sizes, out_sizes)
    root = jnp.full(g.op.shape, -1, jnp.int32)
    if backend is XLA:
        root, via = _xla_roots(g, v, passes)
        extra_flops, extra_traffic = _xla_epilogue_work(g, root, via, in_sizes, out_sizes)
        flops, traffic = flops + extra_flops, traffic + extra_traffic
    elif backend is ONNXRUNTIME:
        root, stage = _ort_roots(g, v, params.nchwc_block, passes)
        extra_flops, extra_traffic = _ort_epilogue_work(g, v, root, stage, out_sizes)
        flops, traffic = flops + extra_flops, traffic + extra_traffic
    elif backend is not TASO:
        raise ValueError(f"node_costs knows the backends taso, xla and onnxruntime, got {backend.name!r}")
    time = 1e3 * (jnp.maximum(flops / params.peak_flops, traffic / params.bandwidth) + params.overhead)
    free = ~g.alive | g.constant | (g.op == OP_ID["input"]) | _op_in(g, backend.free_ops) | (root >= 0)
    return jnp.where(free, 0.0, time).astype(jnp.float32)


def _log2(x: jax.Array) -> jax.Array:
    return jnp.log2(1.0 + x.astype(jnp.float32))


def _shape_features(shape: jax.Array, rank: jax.Array) -> jax.Array:
    """[N, 5] from shapes [N, R] (R >= 4) and ranks [N]: log2 of the first four dims (0 past the rank) and
    log2(size) / 8, the tensor part of `Env`'s node and edge features."""
    dims = jnp.where(jnp.arange(4)[None, :] < rank[:, None], _log2(shape[:, :4]), 0.0)
    size = jnp.prod(shape.astype(jnp.float32), axis=1)
    return jnp.concatenate([dims, (_log2(size) / 8.0)[:, None]], axis=1)


def _node_features(g: GraphState, costs: jax.Array) -> jax.Array:
    """[C + 1, NODE_FEATURES]: `jaxgraph.env.node_features` of every slot; free slots and the dummy are zero."""
    op = jnp.maximum(g.op, 0)
    # one-hot rows as a select, not a bool -> float convert: XLA's CPU loop for the select is about 2x faster
    one_hot = jnp.where(op[:, None] == jnp.arange(len(OP_TYPES))[None, :], 1.0, 0.0)
    activated = jnp.asarray(_ACTIVATED)[op, None]
    activation = jnp.where((g.attrs[:, :1] == jnp.arange(len(ACTIVATIONS))[None, :]) & activated, 1.0, 0.0)
    rank = g.rank[:, 0]
    tensor = _shape_features(g.shapes[:, 0], rank)
    kernel = g.attrs[:, 8:10].astype(jnp.float32) * jnp.asarray(_KERNELED, jnp.float32)[op, None]
    stride = g.attrs[:, 1:3].astype(jnp.float32) * jnp.asarray(_STRIDED, jnp.float32)[op, None]
    rows = jnp.concatenate([
        one_hot, activation, g.constant[:, None].astype(jnp.float32), tensor[:, :4],
        (rank.astype(jnp.float32) / 4.0)[:, None], tensor[:, 4:],
        (g.num_outputs.astype(jnp.float32) / 4.0)[:, None], kernel, stride, _log2(1e3 * costs)[:, None]], axis=1)
    rows = jnp.where(g.alive[:, None], rows, 0.0)
    return jnp.concatenate([rows, jnp.zeros((1, NODE_FEATURES), jnp.float32)])


def _param_code(key: str, value: Any) -> int:
    """A rule parameter as an integer: a padding class as its index in ("SAME", "VALID"), an activation as
    its index in ACTIVATIONS."""
    if key == "padding":
        return _PADDINGS.index(value)
    return ACTIVATIONS.index(value) if key == "activation" else int(value)


def _max_siblings(graph: Graph) -> int:
    """The most nodes that read one tensor as their first input (the partners a sibling-pair rule scans)."""
    readers = Counter(node.inputs[0] for node in graph.nodes.values() if node.inputs)
    return max(readers.values(), default=1)


class JaxEnv:
    """`Env` as pure functions over `EnvState`: `reset(key, params)`, `step(key, state, action, params)`.

    Static sizes live here (node capacity C, inputs per node K, outputs per node O, rank R, graph outputs
    Q, xfers X, locations L, location size M); the instance lives in `EnvParams` (`self.params(graph)`).
    Built for one graph, it accepts any graph that fits the same sizes (`params(other_graph)`).
    `rules` must come from families in `JAX_RULE_FAMILIES` (default: `JAX_RULES`, those of `RULES`);
    `cost_model` must be a `Roofline` (any of the backends taso, xla, onnxruntime; measured models raise
    `ValueError`). `fusion_passes` (static) is how many absorb passes a fused backend's cost runs: by default
    `backend.absorb_depth(graph) + 2`, so a few rewrites that lengthen a chain of fusions stay exact.

    Each family is matched only at the slots of its root op (`_JaxRule.root`): the first N_op slots holding
    that op, N_op = `root_capacity[op]`, by default the graph's count of the op plus, for the ops a rewrite can
    multiply (`_JaxRule.growth`), that growth times the graph's conv, matmul and mul nodes (the nodes those
    rewrites consume). Like the node capacity, a root capacity is never exceeded: a rewrite is offered only
    when every list it can grow has room.
    """

    def __init__(self, graph: Graph, max_locations: int = 200, rules: Sequence[Rule] = JAX_RULES,
                 cost_model: CostModel | None = None, node_capacity: int | None = None,
                 edge_capacity: int | None = None, max_location_size: int = 8, max_steps: int | None = None,
                 invalid_penalty: float = 0.0, max_siblings: int | None = None,
                 root_capacity: dict[str, int] | None = None, fusion_passes: int | None = None) -> None:
        self.rules = tuple(rules)
        if not self.rules:
            raise ValueError("need at least one rule")
        unsupported = sorted({r.family for r in self.rules} - set(JAX_RULE_FAMILIES))
        if unsupported:
            raise ValueError(f"rule families {unsupported} have no JAX implementation; supported: "
                             f"{sorted(JAX_RULE_FAMILIES)}")
        model = cost_model or DEFAULT_COST_MODEL
        if not isinstance(model, Roofline) or model.backend not in BACKENDS.values():
            raise ValueError(f"JaxEnv computes the analytic Roofline cost of the backends {sorted(BACKENDS)}, got "
                             f"{model!r}")
        self.model = model
        if fusion_passes is None:
            fusion_passes = model.backend.absorb_depth(graph) + _SPARE_PASSES if model.backend.fuses else 0
        self.fusion_passes = integer("fusion_passes", fusion_passes, 0)
        self.max_locations = integer("max_locations", max_locations, 1)
        self.max_location_size = integer("max_location_size", max_location_size, 2)
        self.max_steps = 0 if max_steps is None else integer("max_steps", max_steps, 1)
        self.invalid_penalty = number("invalid_penalty", invalid_penalty, 0.0)
        self.node_capacity = 2 * len(graph) if node_capacity is None else integer("node_capacity", node_capacity, 1)
        self.edge_capacity = (2 * graph.num_edges if edge_capacity is None
                              else integer("edge_capacity", edge_capacity, 1))
        nodes = graph.nodes.values()
        self.max_inputs = max(5, max(len(n.inputs) for n in nodes))
        self.max_siblings = (max(4, _max_siblings(graph)) if max_siblings is None
                             else integer("max_siblings", max_siblings, 1))
        self.max_outputs = max(2, self.max_siblings, max(len(n.shapes) for n in nodes))
        self.max_rank = max(4, max(len(s) for n in nodes for s in n.shapes))
        self.num_outputs = len(graph.outputs)
        self.float_values: list[float] = []
        self.graph = graph
        self._growth = np.array([(r.max_node_growth, r.max_edge_growth) for r in self.rules], np.int32)
        # rules grouped by family: one match (vmapped over the family's parameters) and one build per family
        self._families = tuple(dict.fromkeys(r.family for r in self.rules))
        self._family_of = np.array([self._families.index(r.family) for r in self.rules], np.int32)
        grouped = [[x for x, r in enumerate(self.rules) if r.family == f] for f in self._families]
        self._variant_params = [
            {key: np.array([_param_code(key, dict(self.rules[x].params)[key]) for x in xfers], np.int32)
             for key, _ in self.rules[xfers[0]].params} for xfers in grouped]
        self._variant_counts = [len(xfers) for xfers in grouped]
        position = [x for xfers in grouped for x in xfers]
        self._xfer_rows = np.array([position.index(x) for x in range(len(self.rules))], np.int32)
        # root lists: one per root op of the rules' families, each with its static length N_op
        self._roots = tuple(dict.fromkeys(JAX_RULE_FAMILIES[f].root for f in self._families))
        growth = {op: max([dict(JAX_RULE_FAMILIES[f].growth).get(op, 0) for f in self._families])
                  for op in self._roots}
        counts = Counter(node.op for node in nodes)
        consumed = counts["conv2d"] + counts["matmul"] + counts["mul"]
        self.root_capacity = {op: min(self.node_capacity, max(1, counts[op] + growth[op] * consumed))
                              for op in self._roots}
        unknown = sorted(set(root_capacity or {}) - set(self._roots))
        if unknown:
            raise ValueError(f"root_capacity names ops {unknown} that root none of the rules; roots: {self._roots}")
        for op, size in (root_capacity or {}).items():
            self.root_capacity[op] = integer(f"root_capacity[{op!r}]", size, 1)
        self._root_growth = np.array([[dict(JAX_RULE_FAMILIES[r.family].growth).get(op, 0) for op in self._roots]
                                      for r in self.rules], np.int32)

    @property
    def num_xfers(self) -> int:
        return len(self.rules)

    @property
    def attr_size(self) -> int:
        return _TUPLE_START + max(self.max_rank, self.max_outputs)

    # ------------------------------------------------------------ conversion

    def encode(self, graph: Graph) -> GraphState:
        """A `Graph` in slots: node k of `graph.order` in slot k (as `Env` places them). ValueError if it
        does not fit the environment's sizes."""
        capacity, width = self.node_capacity, self.attr_size
        if len(graph) > capacity or len(graph.outputs) != self.num_outputs:
            raise ValueError(f"graph with {len(graph)} nodes and {len(graph.outputs)} outputs does not fit node "
                             f"capacity {capacity} with {self.num_outputs} outputs")
        if graph.num_edges > self.edge_capacity:
            raise ValueError(f"graph with {graph.num_edges} edges does not fit edge capacity {self.edge_capacity}")
        if _max_siblings(graph) > self.max_siblings:
            raise ValueError(f"a tensor of the graph is the first input of {_max_siblings(graph)} nodes, more than "
                             f"max_siblings={self.max_siblings}")
        counts = Counter(node.op for node in graph.nodes.values())
        over = {op: counts[op] for op, size in self.root_capacity.items() if counts[op] > size}
        if over:
            raise ValueError(f"the graph has more nodes of ops {over} than the environment's root_capacity "
                             f"{self.root_capacity}")
        op = np.full(capacity, -1, np.int32)
        attrs = np.zeros((capacity, width), np.int32)
        inputs = np.full((capacity, self.max_inputs), capacity, np.int32)
        input_index = np.zeros((capacity, self.max_inputs), np.int32)
        num_inputs, num_outputs = np.zeros(capacity, np.int32), np.zeros(capacity, np.int32)
        shapes = np.ones((capacity, self.max_outputs, self.max_rank), np.int32)
        rank = np.zeros((capacity, self.max_outputs), np.int32)
        constant, origin = np.zeros(capacity, bool), np.full(capacity, -1, np.int32)
        slot = {node_id: k for k, node_id in enumerate(graph.order)}
        id_rank = {node_id: k for k, node_id in enumerate(sorted(graph.nodes))}  # ids may be 64-bit hashes
        for node_id, k in slot.items():
            node = graph.nodes[node_id]
            if (len(node.inputs) > self.max_inputs or len(node.shapes) > self.max_outputs
                    or any(len(s) > self.max_rank for s in node.shapes)):
                raise ValueError(f"node {node.name or node_id} ({node.op}) exceeds the environment's sizes")
            op[k], attrs[k], constant[k] = OP_ID[node.op], self._attr_row(node), node.constant
            origin[k] = id_rank[node_id]
            num_inputs[k], num_outputs[k] = len(node.inputs), len(node.shapes)
            for position, ref in enumerate(node.inputs):
                inputs[k, position], input_index[k, position] = slot[ref.node], ref.index
            for j, s in enumerate(node.shapes):
                shapes[k, j, :len(s)], rank[k, j] = s, len(s)
        outputs = np.array([(slot[r.node], r.index) for r in graph.outputs], np.int32).reshape(-1, 2)
        return jax.tree.map(jnp.asarray, GraphState(op, attrs, inputs, input_index, num_inputs, shapes, rank,
                                                    num_outputs, constant, origin, outputs))

    def _attr_row(self, node: Node) -> np.ndarray:
        row = np.zeros(self.attr_size, np.int32)
        for key, value in node.attrs.items():
            if key == "activation":
                row[0] = ACTIVATIONS.index(value)
            elif key in _SCALAR_FIELDS:
                row[_SCALAR_FIELDS[key]] = int(value)
            elif key in _PAIR_FIELDS:
                row[_PAIR_FIELDS[key]:_PAIR_FIELDS[key] + 2] = value
            elif key == "pads":
                row[_PADS_FIELD:_PADS_FIELD + 4] = value
            elif key in _FLOAT_FIELDS:
                if value not in self.float_values:
                    self.float_values.append(value)
                row[_FLOAT_FIELDS[key]] = self.float_values.index(value)
            elif key in _TUPLE_FIELDS:
                if len(value) > self.attr_size - _TUPLE_START:
                    raise ValueError(f"{node.op} attribute {key}={value} is longer than the environment allows")
                row[_TUPLE_LEN], row[_TUPLE_START:_TUPLE_START + len(value)] = len(value), value
            else:
                raise ValueError(f"attribute {key!r} of op {node.op!r} has no slot in the attribute vector")
        return row

    def _attrs_of(self, op: str, row: np.ndarray) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        for key in OPS[op].defaults:
            if key == "activation":
                attrs[key] = ACTIVATIONS[row[0]]
            elif key == "count_include_pad":
                attrs[key] = bool(row[_SCALAR_FIELDS[key]])
            elif key in _SCALAR_FIELDS:
                attrs[key] = int(row[_SCALAR_FIELDS[key]])
            elif key in _PAIR_FIELDS:
                attrs[key] = tuple(int(d) for d in row[_PAIR_FIELDS[key]:_PAIR_FIELDS[key] + 2])
            elif key == "pads":
                attrs[key] = tuple(int(d) for d in row[_PADS_FIELD:_PADS_FIELD + 4])
            elif key in _FLOAT_FIELDS:
                attrs[key] = self.float_values[row[_FLOAT_FIELDS[key]]]
            else:
                attrs[key] = tuple(int(d) for d in row[_TUPLE_START:_TUPLE_START + row[_TUPLE_LEN]])
        return attrs

    def decode(self, g: GraphState, instance: Graph | None = None) -> Graph:
        """The `Graph` in `g` (one unbatched state), node ids = slots; shapes re-inferred by the IR and
        checked against the state's. Leaves take their names and weight values from the graph `g` was encoded from
        (`instance`, default the environment's graph), so the decoded graph runs (`jaxgraph.execute`)."""
        instance = self.graph if instance is None else instance
        ids = sorted(instance.nodes)  # `origin` holds ranks in this order
        g = jax.tree.map(np.asarray, g)
        alive = np.flatnonzero(g.op >= 0)
        pending = {int(k): set(int(s) for s in g.inputs[k, :g.num_inputs[k]]) for k in alive}
        nodes: dict[int, Node] = {}
        while pending:
            ready = sorted(k for k, deps in pending.items() if deps <= nodes.keys())
            if not ready:
                raise ValueError("graph state has a cycle or reads a free slot")
            for k in ready:
                del pending[k]
                op = OP_TYPES[g.op[k]]
                shapes = tuple(tuple(int(d) for d in g.shapes[k, j, :g.rank[k, j]]) for j in range(g.num_outputs[k]))
                if op in ("input", "weight"):
                    leaf = instance.nodes[ids[g.origin[k]]]
                    nodes[k] = Node(op, (), {}, shapes, op == "weight", leaf.name, leaf.value)
                    continue
                refs = [Ref(int(s), int(i)) for s, i in zip(g.inputs[k, :g.num_inputs[k]],
                                                            g.input_index[k, :g.num_inputs[k]])]
                node = make_node(op, refs, self._attrs_of(op, g.attrs[k]), nodes.__getitem__, f"slot {k}")
                if node.shapes != shapes or node.constant != bool(g.constant[k]):
                    raise ValueError(f"slot {k} ({op}) holds shapes {shapes}, constness {bool(g.constant[k])}; the IR "
                                     f"infers {node.shapes}, {node.constant}")
                nodes[k] = node
        inputs = [k for k in sorted(nodes) if nodes[k].op == "input"]
        inputs.sort(key=lambda k: instance.inputs.index(ids[g.origin[k]]))
        return Graph.from_nodes(nodes, inputs, [Ref(int(s), int(i)) for s, i in g.outputs], instance.output_names)

    def params(self, graph: Graph | None = None) -> EnvParams:
        """The `EnvParams` of `graph` (default: the environment's own graph). ValueError if the backend's fusions
        in `graph` need more passes than `fusion_passes`."""
        graph = self.graph if graph is None else graph
        depth = self.model.backend.absorb_depth(graph)
        if depth > self.fusion_passes:
            raise ValueError(f"the {self.model.backend.name} fusions of this graph need {depth} passes, the "
                             f"environment runs fusion_passes={self.fusion_passes}")
        return EnvParams(self.encode(graph), jnp.float32(self.model.peak_flops), jnp.float32(self.model.bandwidth),
                         jnp.float32(self.model.overhead), jnp.int32(nchwc_block()), jnp.int32(self.max_steps),
                         jnp.float32(self.invalid_penalty))

    def node_costs(self, g: GraphState, params: EnvParams) -> jax.Array:
        """[C] float32 ms: `node_costs` under this environment's cost model."""
        return node_costs(g, params, self.model.backend, self.fusion_passes)

    # ------------------------------------------------------------ environment

    def _root_lists(self, g: GraphState) -> dict[str, jax.Array]:
        """Per root op, the first N_op slots holding it, increasing, padded with C: where its families match.
        One sort of the slots keyed by (root op, slot) lays the lists end to end (on CPU about 2x cheaper than a
        running count per op)."""
        capacity, count = self.node_capacity, len(self._roots)
        position = np.full(len(OP_TYPES) + 1, count, np.int32)  # an op's place among the root ops; others last
        position[[OP_ID[op] for op in self._roots]] = np.arange(count)
        place = jnp.asarray(position)[jnp.where(g.op >= 0, g.op, len(OP_TYPES))]
        keys = jnp.sort(place * capacity + jnp.arange(capacity, dtype=jnp.int32))
        starts = (place[None, :] < jnp.arange(count)[:, None]).sum(axis=1)
        lists = {}
        for i, op in enumerate(self._roots):
            size = self.root_capacity[op]
            part = jax.lax.dynamic_slice(jnp.pad(keys, (0, size), constant_values=count * capacity), (starts[i],),
                                         (size,))
            lists[op] = jnp.where(part // capacity == i, part % capacity, capacity).astype(jnp.int32)
        return lists

    def _locations(self, g: GraphState, reads: jax.Array | None = None) -> tuple[jax.Array, jax.Array, jax.Array]:
        """xfer mask [X + 1], location mask [X, L], location slots [X, L, M] of a graph state (`reads`: its
        `_reads` where known). Each family is matched once at the slots of its root op, vmapped over the
        parameters of its rules."""
        capacity, big_l, big_m = self.node_capacity, self.max_locations, self.max_location_size
        v = _view(g, reads=reads)
        lists = self._root_lists(g)
        paired = dict.fromkeys(JAX_RULE_FAMILIES[f].root for f in self._families if JAX_RULE_FAMILIES[f].pairs)
        tables = {op: _sibling_table(g, lists[op], self.max_siblings) for op in paired}

        def first(found_x, rows_x):
            index = _first_true(found_x[None], big_l)[0]
            valid = index < found_x.shape[0]
            return valid, jnp.where(valid[:, None], rows_x[jnp.minimum(index, found_x.shape[0] - 1)], capacity)

        masks, members = [], []
        for family, variants, count in zip(self._families, self._variant_params, self._variant_counts):
            rule = JAX_RULE_FAMILIES[family]
            roots = lists[rule.root]
            r = jnp.minimum(roots, capacity - 1)

            def match(params, rule=rule, roots=roots, r=r):
                if rule.pairs:  # [N, S] candidates (root slot, partner slot), flattened root-major
                    found, partners = rule.match(g, v, r, tables[rule.root], **params)
                    roots = jnp.broadcast_to(roots[:, None], found.shape)
                else:
                    found, partners = rule.match(g, v, r, **params)
                found = found & (roots < capacity)
                rows = jnp.stack([roots, *partners], axis=-1).reshape(-1, 1 + len(partners))[:, :big_m]
                rows = jnp.pad(rows, ((0, 0), (0, big_m - rows.shape[1])), constant_values=capacity)
                return first(found.reshape(-1), rows)

            found, rows = jax.vmap(match, axis_size=count)(variants)
            masks.append(found)
            members.append(rows)
        order = jnp.asarray(self._xfer_rows)
        location_mask, location_nodes = jnp.concatenate(masks)[order], jnp.concatenate(members)[order]
        free_nodes = capacity - g.alive.sum()
        free_edges = self.edge_capacity - g.num_inputs.sum()
        growth = jnp.asarray(self._growth)
        free_roots = jnp.stack([self.root_capacity[op] - (lists[op] < capacity).sum() for op in self._roots])
        room = ((free_nodes >= growth[:, 0]) & (free_edges >= growth[:, 1])
                & (free_roots[None, :] >= jnp.asarray(self._root_growth)).all(axis=1))
        xfer_mask = jnp.concatenate([location_mask.any(axis=1) & room, jnp.ones(1, bool)])
        return xfer_mask, location_mask, location_nodes.astype(jnp.int32)

    def _costs_after(self, g: GraphState, params: EnvParams, before: jax.Array, written: jax.Array) -> jax.Array:
        """[C] the node costs of `g`, a rewrite of a graph whose costs were `before` that wrote the slots `written`
        (C: none). Without fusion only those slots' costs change (`cost.affected`: a rewrite keeps the shapes of
        the tensors it replaces): they alone are computed, the freed slots' zeroed. A fused backend's kernels reach
        past them, so it recomputes every slot."""
        if self.model.backend is not TASO:
            return self.node_costs(g, params)
        fresh = node_costs(g, params, TASO, rows=jnp.minimum(written, self.node_capacity - 1))
        return jnp.where(g.alive, before, 0.0).at[written].set(fresh, mode="drop")

    def _state(self, g: GraphState, params: EnvParams, initial_cost, steps) -> EnvState:
        costs = self.node_costs(g, params)
        return EnvState(g, costs, costs.sum(), initial_cost, steps, *self._locations(g))

    def reset(self, key: jax.Array, params: EnvParams) -> tuple[EnvState, Observation]:
        """The instance's initial state and observation (`key` is unused: resets are deterministic)."""
        costs = self.node_costs(params.graph, params)
        state = self._state(params.graph, params, costs.sum(), jnp.int32(0))
        return state, self.observe(state)

    def step(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams
             ) -> tuple[EnvState, Observation, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
        """Apply `action` = [xfer, location id] (int32 [2]); xfer X is the NO-OP that terminates."""
        xfer, location_id = action[0], action[1]
        num_xfers = self.num_xfers
        noop = xfer == num_xfers
        in_range = (xfer >= 0) & (xfer < num_xfers) & (location_id >= 0) & (location_id < self.max_locations)
        safe_xfer = jnp.clip(xfer, 0, num_xfers - 1)
        safe_location = jnp.clip(location_id, 0, self.max_locations - 1)
        valid = in_range & state.xfer_mask[safe_xfer] & state.location_mask[safe_xfer, safe_location]
        location = state.location_nodes[safe_xfer, safe_location]
        branches = [JAX_RULE_FAMILIES[family].build for family in self._families]
        family = jnp.asarray(self._family_of)[safe_xfer]
        edit = jax.lax.switch(family, branches, state.graph, location)
        # an invalid action commits an empty edit (cheaper than selecting between two whole graphs)
        edit = edit._replace(removed=jnp.where(valid, edit.removed, self.node_capacity),
                             present=edit.present & valid, old=jnp.where(valid, edit.old, -1))
        graph, written = apply_edit(state.graph, edit)
        graph, reads = _sweep(graph)
        costs = self._costs_after(graph, params, state.node_cost, written)
        reward = jnp.where(valid, (state.node_cost - costs).sum(), jnp.where(noop, 0.0, -params.invalid_penalty))
        steps = state.steps + jnp.where(noop, 0, 1)
        xfer_mask, location_mask, location_nodes = self._locations(graph, reads)
        new_state = EnvState(graph, costs, state.cost - jnp.where(valid, reward, 0.0), state.initial_cost, steps,
                             xfer_mask, location_mask, location_nodes)
        terminated = noop | ~xfer_mask[:-1].any()
        truncated = ~terminated & (params.max_steps > 0) & (steps >= params.max_steps)
        info = {"cost": new_state.cost, "invalid": ~valid & ~noop}
        return new_state, self.observe(new_state), reward.astype(jnp.float32), terminated, truncated, info

    def observe(self, state: EnvState) -> Observation:
        """The `Observation` of a state: `Env`'s layout and sizes. The live inputs fill the first edge rows, in order
        of (receiving slot, input position); the other `edge_capacity` rows are padding (the dummy node to itself)."""
        g, capacity, max_inputs = state.graph, self.node_capacity, self.max_inputs
        # compacted, not a row per (slot, input position): the agent's GNN pays per edge row
        index = _first_true(g.live_inputs.reshape(1, -1), self.edge_capacity)[0]
        edge_mask = index < capacity * max_inputs
        index = jnp.where(edge_mask, index, 0)
        receivers, position = index // max_inputs, index % max_inputs
        senders = g.inputs.reshape(-1)[index]
        # the logs of the tensors the edges carry, not of every output of every slot (C x O, several times more)
        producer, output = jnp.minimum(senders, capacity - 1), g.input_index.reshape(-1)[index]
        shape_features = _shape_features(_tensors(g.shapes, producer, output), _tensors(g.rank, producer, output))
        edges = jnp.concatenate([shape_features, (position.astype(jnp.float32) / 4.0)[:, None]], axis=1)
        edges = jnp.where(edge_mask[:, None], edges, 0.0)
        globals_ = jnp.stack([state.cost, state.initial_cost, state.cost / state.initial_cost,
                              g.alive.sum().astype(jnp.float32) / capacity]).astype(jnp.float32)[None]
        graph = jraph.GraphsTuple(nodes=_node_features(g, state.node_cost), edges=edges,
                                  senders=jnp.where(edge_mask, senders, capacity).astype(jnp.int32),
                                  receivers=jnp.where(edge_mask, receivers, capacity).astype(jnp.int32),
                                  globals=globals_, n_node=jnp.array([capacity + 1], jnp.int32),
                                  n_edge=jnp.array([self.edge_capacity], jnp.int32))
        node_mask = jnp.concatenate([g.alive, jnp.zeros(1, bool)])
        return Observation(graph, node_mask, edge_mask, state.xfer_mask, state.location_mask, state.location_nodes)


def node_signatures(graph: Graph) -> dict[int, int]:
    """Node id -> a hash of what the node computes (op, attributes, shapes, constness, leaf name, and the
    signatures of its inputs): equal across two graphs for nodes that compute the same thing, whatever
    their ids. Compares `JaxEnv` and `Env` graphs and locations."""
    signature: dict[int, int] = {}
    for node_id in graph.order:
        node = graph.nodes[node_id]
        signature[node_id] = hash((node.op, tuple(sorted(node.attrs.items())), node.shapes, node.constant,
                                   node.name if node.op in ("input", "weight") else "",
                                   tuple((signature[r.node], r.index) for r in node.inputs)))
    return signature


def canonical_form(graph: Graph) -> tuple[Counter, tuple[int, ...]]:
    """The multiset of node signatures and the signatures of the outputs: equal for graphs that compute the
    same thing node for node."""
    signature = node_signatures(graph)
    return Counter(signature.values()), tuple(hash((signature[r.node], r.index)) for r in graph.outputs)

