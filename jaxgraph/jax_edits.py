"""The jitted twin of `jaxgraph.graph.Patch`: a rewrite as data (`Edit`, written by `EditBuilder`) and its commit
(`apply_edit`, then `sweep` for the nodes it leaves without consumers), in fixed shapes, so one step selects one
edit of any rule and commits it once.

Slots are `Env`'s: new nodes take the lowest free slots in the order the rewrite makes them, before its orphans free
theirs, and a rewrite that makes a node identical to a rewrite-made node shares it, as `Patch.add` does.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp

from jaxgraph.jax_graph import OP_ID, GraphState, clear_slots, consumers, tensor_reads

# `origin` of a rewrite-made node: its id (in Env) is the content hash of the op, attributes and inputs it was made
# with, so a later rewrite that makes the same node shares it (`Patch.add`); `_ALTERED` once that no longer holds
# (its inputs were redirected since, or it was made while an identical node was being removed, which took the id)
_MADE, _ALTERED = -1, -2


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


class EditBuilder:
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

    def add_outputs(self, op: str | jax.Array, inputs: Sequence[jax.Array], attrs: jax.Array, shapes: jax.Array,
                    ranks: jax.Array, num_outputs: jax.Array | int, count: jax.Array | int | None = None,
                    present: jax.Array | bool = True, indices: Sequence[jax.Array] | None = None) -> jax.Array:
        """`add` for a node with `num_outputs` outputs (traced, at most O), of shapes `shapes` [<= O, R] and
        ranks `ranks` [<= O]; returns its input code. `op` is an op name or a traced op id."""
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
        op_id = OP_ID[op] if isinstance(op, str) else op
        self.nodes.append((op_id, attrs, row, index_row, jnp.asarray(count, jnp.int32),
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
    `sweep`. Returns the graph and the slot each new node was written to [MAX_NEW_NODES] (C: absent or shared)."""
    capacity, positions = g.op.shape[0], jnp.arange(g.inputs.shape[1])
    keep = g.alive & ~jnp.zeros(capacity, bool).at[edit.removed].set(True, mode="drop")
    before, g = g, clear_slots(g, ~keep)
    slots, written = [], []
    fresh = jnp.zeros(capacity, bool)  # written by this edit: shared even when made `_ALTERED` (Env's salted id)
    for j in range(edit.op.shape[0]):  # static: MAX_NEW_NODES
        codes, used = edit.inputs[j], positions < edit.count[j]
        if slots:
            made = jnp.stack(slots)
            codes = jnp.where(codes < 0, made[jnp.clip(-1 - codes, 0, j - 1)], codes)
        index = jnp.where(used, edit.input_index[j], 0)

        def identical(g, shareable, codes=codes, index=index, used=used, j=j):
            return (g.alive & shareable & (g.op == edit.op[j])
                    & (g.attrs == edit.attrs[j][None, :]).all(axis=1) & (g.num_inputs == edit.count[j])
                    & (((g.inputs == codes[None, :]) & (g.input_index == index[None, :])) | ~used[None, :]).all(axis=1))

        same = identical(g, (g.origin == _MADE) | fresh)
        shared = same.any()
        collides = (identical(before, before.origin == _MADE) & ~keep).any()
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
        fresh = put(fresh, True)
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


def sweep(g: GraphState) -> tuple[GraphState, jax.Array]:
    """Remove nodes left without consumers (not inputs or graph outputs), repeatedly: `Patch.commit`'s cascade.
    Returns the graph and its `tensor_reads`."""

    def orphans(g):
        reads = tensor_reads(g)
        uses, is_output = consumers(g, reads)
        return g.alive & (uses == 0) & ~is_output & (g.op != OP_ID["input"]), reads

    def body(carry):
        g, dead, _ = carry
        g = clear_slots(g, dead)
        return g, *orphans(g)

    g, _, reads = jax.lax.while_loop(lambda carry: carry[1].any(), body, (g, *orphans(g)))
    return g, reads
