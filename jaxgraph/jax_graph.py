"""The jitted twin of `jaxgraph.graph.Graph`: a graph in fixed-capacity slots (`GraphState`), the integer layout of
its attributes, and the per-slot facts that the rules' matches and the costs read (`slot_view`).

Per slot: the op id (-1 for a free slot), attributes as a fixed integer vector, input slots and output indices,
output shapes padded with 1, constness and the original node (the rank of its id). Weights are not carried: shapes
only (`Env` keeps values for numerical checks). `jaxgraph.graph_codec.GraphCodec` converts; `attr_row` is the one
writer of the attribute vector (the codec on the host, the rules' and patterns' rewrites in jit).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph.ops import ACTIVATIONS, OP_TYPES

OP_ID = {op: i for i, op in enumerate(OP_TYPES)}
PADDINGS = ("SAME", "VALID")

# Attribute vector layout: integer fields, float attributes as a 32-bit fingerprint of their float64 value (no table
# of values grows as graphs are encoded; the value comes back from the graph a state started from, whose floats
# rewrites copy and never add to: `jaxgraph.graph_codec`), and one tuple field (perm, reshape target or split sizes)
# with its length.
SCALAR_FIELDS = {"activation": 0, "groups": 7, "axis": 10, "count": 11, "count_include_pad": 12}
PAIR_FIELDS = {"stride": 1, "kernel": 8}
PADS_FIELD = 3
FLOAT_FIELDS = {"eps": 13, "min": 14, "max": 15}
TUPLE_FIELDS = ("perm", "shape", "sizes")
TUPLE_LEN = 16
TUPLE_START = 17
# attribute -> (first word, words) of every attribute but the tuple
PLACES = {**{key: (start, 1) for key, start in {**SCALAR_FIELDS, **FLOAT_FIELDS}.items()},
          **{key: (start, 2) for key, start in PAIR_FIELDS.items()}, "pads": (PADS_FIELD, 4)}


def float_code(value: float) -> int:
    """A float attribute's code: the two 32-bit halves of its float64 bits xor-ed (an int32 fingerprint: equal
    floats, equal codes)."""
    bits = int(np.array(value, np.float64).view(np.uint64))
    return int(np.array((bits ^ (bits >> 32)) & 0xFFFFFFFF, np.uint32).view(np.int32))


def attr_code(key: str, value: Any) -> int | np.ndarray:
    """An attribute or rule parameter as what the attribute vector holds: an activation as its index in
    `ACTIVATIONS`, a padding class as its index in `PADDINGS`, a float attribute as its `float_code`, a flag or
    count as an int; pairs, pads and tuples as int32 arrays."""
    if key in FLOAT_FIELDS:
        return float_code(value)
    if key == "padding":
        return PADDINGS.index(value)
    if key == "activation":
        return ACTIVATIONS.index(value)
    return int(value) if np.ndim(value) == 0 else np.asarray(value, np.int32)


def attr_value(key: str, code: Any) -> Any:
    """The attribute `key` (not a float: its value comes from a table, `GraphCodec.decode`) from its code
    (`attr_field` of a host row): the inverse of `attr_code`."""
    if key in FLOAT_FIELDS:
        raise ValueError(f"float attribute {key!r} is a fingerprint: read its value from the graph's floats")
    if key == "activation":
        return ACTIVATIONS[code]
    if key == "padding":
        return PADDINGS[code]
    if key == "count_include_pad":
        return bool(code)
    return int(code) if np.ndim(code) == 0 else tuple(int(d) for d in code)


def _place(key: str) -> int | slice:
    if key not in PLACES:
        raise ValueError(f"attribute {key!r} has no place in the attribute vector")
    start, width = PLACES[key]
    return start if width == 1 else slice(start, start + width)


def attr_field(row: Any, key: str) -> Any:
    """The code of attribute `key` (not a tuple) in attribute vectors `row` [..., A]: [...] for a one-word field,
    [..., W] for a pair or the pads."""
    return row[..., _place(key)]


def attr_row(row: Any, tuple_length: Any = None, **codes: Any) -> Any:
    """`row` [..., A] (one attribute vector or a batch) with the attributes `codes` written into their places: the
    one writer of the layout above, on the host (a NumPy `row`: a new array) and in jit (`.at[].set`). `codes` are
    IR attribute names with their codes (`attr_code`); "perm", "shape" or "sizes" fill the tuple field and set its
    length to their last axis' size, or to `tuple_length` when given (traced lengths: the values past it are 0)."""
    host = isinstance(row, np.ndarray)
    row = row.copy() if host else row
    for key, value in codes.items():
        if key in TUPLE_FIELDS:
            count = np.shape(value)[-1]
            writes = [(TUPLE_LEN, count if tuple_length is None else tuple_length),
                      (slice(TUPLE_START, TUPLE_START + count), value)]
        else:
            writes = [(_place(key), value)]
        for index, written in writes:
            if host:
                row[..., index] = written
            else:
                row = row.at[..., index].set(written)
    return row


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


class SlotView(NamedTuple):
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
    reads: jax.Array  # [C * O + 1] `tensor_reads`


def tensor_reads(g: GraphState) -> jax.Array:
    """[C * O + 1] int32: how many live inputs read each tensor (slot * O + output index); the last entry counts
    the unused input positions. One scatter-add serves every consumer count a step needs."""
    capacity, width = g.op.shape[0], g.shapes.shape[1]
    tensor = jnp.where(g.live_inputs, g.inputs * width + g.input_index, capacity * width)
    return jax.ops.segment_sum(jnp.ones(tensor.size, jnp.int32), tensor.reshape(-1), capacity * width + 1)


def consumers(g: GraphState, reads: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per slot: how many live inputs read its outputs [C] int32 (from `tensor_reads`), and whether it holds a graph
    output [C] bool."""
    capacity = g.op.shape[0]
    is_output = jnp.zeros(capacity + 1, bool).at[g.outputs[:, 0]].set(True)
    return reads[:-1].reshape(capacity, -1).sum(axis=1), is_output[:capacity]


def tensors(per_output: jax.Array, slot: jax.Array, index: jax.Array) -> jax.Array:
    """`per_output[slot, index]` for a per-output array [C, O, ...] and in-range tensor ids (slot, index) [...]:
    one gather of rows of the flattened [C * O, ...] array, several times cheaper under vmap on CPU than the
    two-index gather (which XLA lowers to a batched gather)."""
    capacity, width = per_output.shape[:2]
    flat = per_output.reshape(capacity * width, *per_output.shape[2:])
    return flat.at[slot * width + index].get(mode="promise_in_bounds")


def at_rows(g: GraphState, rows: jax.Array | None) -> GraphState:
    """The per-slot arrays of `g` at slots `rows` [N] (all slots for None); the graph outputs as they are."""
    return g if rows is None else GraphState(*(array[rows] for array in g[:-1]), g.outputs)


def slot_view(g: GraphState, rows: jax.Array | None = None, reads: jax.Array | None = None) -> SlotView:
    """The view of every slot, or of the slots `rows` [N] (in-range) only: row i describes slot rows[i].
    `reads`: `tensor_reads(g)` where the caller has it."""
    capacity = g.op.shape[0]
    sub = at_rows(g, rows)
    alive = sub.alive
    valid = sub.live_inputs
    reads = tensor_reads(g) if reads is None else reads
    uses, is_output = (a if rows is None else a[rows] for a in consumers(g, reads))
    producer = jnp.minimum(sub.inputs, capacity - 1)
    # one gather per input position, stacked: XLA drops the positions nothing reads (matches read two; they slice
    # a position before taking rows, `v.in_shape[:, k][rows]`, or the whole stack is built)
    in_shape, in_rank = (jnp.stack([tensors(per_output, producer[:, k], sub.input_index[:, k])
                                    for k in range(producer.shape[1])], axis=1) for per_output in (g.shapes, g.rank))
    shape = sub.shapes[:, 0]
    stride_h, stride_w = sub.attrs[:, 1], sub.attrs[:, 2]
    pads = sub.attrs[:, PADS_FIELD:PADS_FIELD + 4]
    x = in_shape[:, 0]
    same = (shape[:, 2] == -(-x[:, 2] // jnp.maximum(stride_h, 1))) & (
        shape[:, 3] == -(-x[:, 3] // jnp.maximum(stride_w, 1)))
    padding = jnp.where(~pads.any(axis=1), 1, jnp.where(same, 0, -1))
    return SlotView(alive, alive & (uses == 1) & ~is_output, producer, in_shape, in_rank,
                 g.constant[producer] & valid, shape, sub.rank[:, 0],
                 jnp.where(stride_h == stride_w, stride_h, -1), padding, reads)


def left4(shape: jax.Array, rank: jax.Array) -> jax.Array:
    """[C, R] right-padded shapes of rank <= 4 -> [C, 4] left-padded with 1 (NumPy broadcasting)."""
    source = jnp.arange(4)[None, :] - (4 - rank[:, None])  # where in `shape` left-padded dim j is
    # a select over the R dims, not a gather: gathers with batch dimensions are slow on CPU under vmap
    picked = jnp.where(source[:, :, None] == jnp.arange(shape.shape[-1])[None, None, :], shape[:, None, :], 0)
    return jnp.where(source >= 0, picked.sum(axis=-1), 1)


def _running_count(found: jax.Array, block: int = 32) -> jax.Array:
    """[V, C] bool -> [V, C] int32 inclusive running count along each row. A block-triangular matmul: on CPU
    about 3x cheaper than `jnp.cumsum` (an associative scan of many small passes); exact below 2**24."""
    rows, capacity = found.shape
    padded = -(-capacity // block) * block
    x = jnp.pad(found, ((0, 0), (0, padded - capacity))).astype(jnp.float32).reshape(rows, padded // block, block)
    within = x @ jnp.triu(jnp.ones((block, block), jnp.float32))
    before = jnp.cumsum(within[:, :, -1], axis=1) - within[:, :, -1]
    return (within + before[:, :, None]).reshape(rows, padded)[:, :capacity].astype(jnp.int32)


def first_true(found: jax.Array, size: int) -> jax.Array:
    """[V, C] bool -> [V, size] int32: the first `size` true slots of each row in increasing order, padded with
    C (as `jnp.nonzero(size=...)`, which scatters; here a binary search of the running count, no scatter). A row
    holds at most C true slots, so at most C are searched for."""
    capacity = found.shape[1]
    wanted = jnp.arange(1, min(size, capacity) + 1, dtype=jnp.int32)
    count = _running_count(found)
    index = jax.vmap(lambda row: jnp.searchsorted(row, wanted, side="left", method="scan"))(count).astype(jnp.int32)
    return jnp.pad(index, ((0, 0), (0, max(size - capacity, 0))), constant_values=capacity)


def stack_rows(pieces: Sequence[jax.Array], picks: Sequence[tuple[int, int] | None], fill: jax.Array) -> jax.Array:
    """[len(picks), ...]: row `picks[i] = (piece, row)` of `pieces` (arrays [rows, ...] of `fill`'s shape and dtype),
    or the row `fill` where a pick is None, by one concatenation of static slices: consecutive rows of one piece are
    one slice, consecutive fills one constant. Concatenating the pieces and then gathering by a constant order would
    copy every row twice more (under vmap on CPU, through a transposed layout)."""
    runs: list[list] = []  # [piece or None, first row, rows]
    for pick in picks:
        last = runs[-1] if runs else None
        if last is not None and (pick is None) == (last[0] is None) and (
                pick is None or (pick[0] == last[0] and pick[1] == last[1] + last[2])):
            last[2] += 1
        else:
            runs.append([None, 0, 1] if pick is None else [pick[0], pick[1], 1])
    parts = [jnp.broadcast_to(fill, (rows, *fill.shape)) if piece is None else pieces[piece][start:start + rows]
             for piece, start, rows in runs]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts)


def materialized(tree: Any) -> Any:
    """`tree` (arrays), computed into buffers of its own before anything reads it. XLA's fusion pass copies a cheap
    producer into every loop fusion that reads it: a step's edit, a selection among every rule's build under `vmap`,
    read by loops over every slot, is then selected again for each slot, and LLVM does not always hoist that out of
    the loop (on CPU, 4.7x slower loops in the program of TASO's whole table than in the hand rules'). A loop
    boundary stops the fusion where `jax.lax.optimization_barrier` does not (XLA removes barriers before fusing):
    a while loop that runs once, its trip count a 1 that XLA cannot fold."""
    first = jax.tree.leaves(tree)[0].reshape(-1)[0]
    trips = jnp.maximum((first == jnp.zeros_like(first)).astype(jnp.int32), 1)
    blank = jax.tree.map(jnp.zeros_like, tree)
    return jax.lax.while_loop(lambda carry: carry[0] < trips, lambda carry: (carry[0] + 1, tree),
                              (jnp.int32(0), blank))[1]


def clear_slots(g: GraphState, dead: jax.Array) -> GraphState:
    """Free the slots in `dead` [C]."""
    capacity = g.op.shape[0]
    return g._replace(op=jnp.where(dead, -1, g.op), inputs=jnp.where(dead[:, None], capacity, g.inputs),
                      input_index=jnp.where(dead[:, None], 0, g.input_index),
                      num_inputs=jnp.where(dead, 0, g.num_inputs), constant=g.constant & ~dead,
                      origin=jnp.where(dead, -1, g.origin))


def op_in(g: GraphState, ops: Sequence[str] | frozenset[str], slots: jax.Array | None = None) -> jax.Array:
    """Whether the op of every slot (or of `slots`) is one of `ops`; False for free slots."""
    op = g.op if slots is None else g.op[slots]
    table = jnp.asarray(np.array([name in ops for name in OP_TYPES] + [False]))
    return table[jnp.where(op >= 0, op, len(OP_TYPES))]


def last_dim(shape: jax.Array, rank: jax.Array) -> jax.Array:
    """[...] the last dimension of right-padded shapes [..., R] of rank `rank` (0 for rank 0)."""
    dims = jnp.arange(shape.shape[-1]).reshape((1,) * rank.ndim + (-1,))
    return jnp.where(dims == rank[..., None] - 1, shape, 0).sum(axis=-1)


def per_channel(v: SlotView, r: jax.Array | slice, side: int, channels: jax.Array, exact: bool) -> jax.Array:
    """Input `1 - side` of slots `r` (`slice(None)`: every slot) is a [1, channels, 1, 1]-broadcastable constant
    (scalar allowed unless `exact`)."""
    rank = v.in_rank[:, 1 - side][r]
    full = left4(v.in_shape[:, 1 - side][r], rank)
    second = full[:, 1] == channels if exact else (full[:, 1] == 1) | (full[:, 1] == channels)
    return (v.in_const[:, 1 - side][r] & (rank <= 4) & (full[:, 0] == 1) & second
            & (full[:, 2] == 1) & (full[:, 3] == 1))


def same_shape(v: SlotView, a: jax.Array, b: jax.Array) -> jax.Array:
    return (v.rank[a] == v.rank[b]) & (v.shape[a] == v.shape[b]).all(axis=-1)
