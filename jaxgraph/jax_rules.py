"""The jitted twin of `jaxgraph.rules`: every rule family of `RULES` as a vectorised match over the slots holding
its root op (one candidate location per root slot, or, for the sibling-pair merges, per (root slot, partner slot)
of an `[N, S]` sibling table) and a builder that writes its rewrite as an `Edit` (`jaxgraph.jax_edits`).

An xfer's locations are its candidates in increasing (root slot, partner slot) order, which `Env` follows too.
Bounds, deliberate: a tensor read as first input by more than S = `max_siblings` nodes is refused by
`JaxEnv.encode` (only SplitConcat can raise that count later; partners of the root's op past S are then not
listed), and a SplitOfSplit whose merged split would have more than O outputs is masked out.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from jaxgraph.jax_edits import EditBuilder
from jaxgraph.jax_graph import (
    OP_ID,
    PADDINGS,
    PADS_FIELD,
    PAIR_FIELDS,
    SCALAR_FIELDS,
    TUPLE_START,
    GraphState,
    SlotView,
    attr_field,
    attr_row,
    first_true,
    last_dim,
    op_in,
    per_channel,
    same_shape,
    tensors,
)
from jaxgraph.ops import ACTIVATIONS
from jaxgraph.rules import RULES, Rule

# ---------------------------------------------------------------- matches: [C] bool and [C, M] location slots


def _fusable_conv(g: GraphState, v: SlotView, conv: jax.Array, stride: jax.Array, padding: jax.Array) -> jax.Array:
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


def _match_conv_mul(g, v, r, *, stride, padding):
    found = []
    for side in (0, 1):
        conv = v.producer[r, side]
        found.append(_fusable_conv(g, v, conv, stride, padding) & same_shape(v, r, conv)
                     & per_channel(v, r, side, v.shape[r, 1], exact=False))
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
                     & same_shape(v, r, conv) & per_channel(v, r, side, v.shape[conv, 1], exact=True))
    conv = jnp.where(found[0], v.producer[r, 0], v.producer[r, 1])
    return found[0] | found[1], [conv]


def _match_merge_group_convs(g, v, r, *, stride, activation):
    groups = g.attrs[r, SCALAR_FIELDS["groups"]]
    return ((groups >= 2) & (groups % 2 == 0) & (v.stride[r] == stride) & (g.attrs[r, 0] == activation)
            & (v.padding[r] == PADDINGS.index("SAME")) & const_weights(g, v)[r]), []


def _match_concat_of_relus(g, v, r):
    capacity = g.op.shape[0]
    used = jnp.arange(g.inputs.shape[1])[None, :] < g.num_inputs[r][:, None]
    producer = v.producer[r]
    relus = (g.op[producer] == OP_ID["relu"]) & v.sole[producer]
    ok = (g.num_inputs[r] >= 2) & (relus | ~used).all(axis=1)
    return ok, [jnp.where(used[:, k], g.inputs[r, k], capacity) for k in range(g.inputs.shape[1])]


def _attrs_like(g: GraphState, slot: jax.Array, **fields: int) -> jax.Array:
    return attr_row(g.attrs[slot], **fields)


def _no_attrs(g: GraphState) -> jax.Array:
    return jnp.zeros(g.attrs.shape[1], jnp.int32)


def _tuple_attrs(g: GraphState, values: Sequence[jax.Array]) -> jax.Array:
    """A reshape's attributes: target shape `values`."""
    return attr_row(_no_attrs(g), shape=jnp.stack(values).astype(jnp.int32))


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
    patch = EditBuilder(g, [relu, conv])
    fused = patch.add("conv2d", [x, w, bias], _attrs_like(g, conv, activation=ACTIVATIONS.index("relu")),
                      g.shapes[conv, 0], g.rank[conv, 0], count=g.num_inputs[conv], indices=_indices(g, conv))
    patch.replace(relu, fused)
    return patch.edit()


def _build_conv_batchnorm(g, loc):
    bn, conv = loc[0], loc[1]
    x, w, bias, has_bias = _conv_parts(g, conv)
    scale, shift, mean, var = (g.inputs[bn, k] for k in range(1, 5))
    eps = attr_row(_no_attrs(g), eps=attr_field(g.attrs[bn], "eps"))
    patch = EditBuilder(g, [bn, conv])
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
    patch = EditBuilder(g, [mul, conv])
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
    patch = EditBuilder(g, [outer, inner])
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
    patch = EditBuilder(g, [add, conv])
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
    groups = g.attrs[conv, SCALAR_FIELDS["groups"]]
    patch = EditBuilder(g, [conv])
    attrs = attr_row(_no_attrs(g), groups=groups, count=2)
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
    patch = EditBuilder(g, [concat, *relus])
    joined = patch.add("concat", [g.inputs[r, 0] for r in safe], g.attrs[concat], g.shapes[concat, 0],
                       g.rank[concat, 0], count=g.num_inputs[concat], indices=[g.input_index[r, 0] for r in safe])
    fused = patch.add("relu", [joined], _no_attrs(g), g.shapes[concat, 0], g.rank[concat, 0])
    patch.replace(concat, fused)
    return patch.edit()


# ---------------------------------------------------------------- sibling merges and splits (multi-output rewrites)


def sibling_table(g: GraphState, roots: jax.Array, width: int) -> jax.Array:
    """[N, S] for every slot of `roots` [N] (one op, increasing, padded with C), the slots among `roots` (in
    increasing order, padded with C) of the nodes reading the same tensor as its input 0, also as input 0, itself
    excluded, both with leaf weights where the tensor is constant (`rules._siblings`): the candidate partners of a
    sibling-pair rule rooted there. S = `width` >= the most input-0 readers of one tensor (`JaxEnv.encode` checks the
    instance)."""
    capacity = g.op.shape[0]
    r = jnp.minimum(roots, capacity - 1)
    reads = (roots < capacity) & (g.num_inputs[r] >= 1)
    tensor = g.inputs[r, 0] * g.shapes.shape[1] + g.input_index[r, 0]
    leaf = op_in(g, ("input", "weight"), jnp.minimum(g.inputs[r], capacity - 1)) | ~g.live_inputs[r]
    safe = ~g.constant[jnp.minimum(g.inputs[r, 0], capacity - 1)] | leaf[:, 1:].all(axis=1)
    same = ((tensor[:, None] == tensor[None, :]) & reads[:, None] & reads[None, :] & ~jnp.eye(len(roots), dtype=bool)
            & safe[:, None] & safe[None, :])
    index = first_true(same, width)
    return jnp.concatenate([roots, jnp.full(1, capacity, roots.dtype)])[index]


def const_weights(g: GraphState, v: SlotView) -> jax.Array:
    """[C] every input after the first is constant (`rules._constant_inputs(graph, node, 1)`)."""
    absent = jnp.arange(g.inputs.shape[1])[None, :] >= g.num_inputs[:, None]
    return (v.in_const | absent)[:, 1:].all(axis=1)


def _dim(shape: jax.Array, axis: jax.Array, value: jax.Array) -> jax.Array:
    """`shape` [R] with entry `axis` (traced) set to `value`."""
    return jnp.where(jnp.arange(shape.shape[-1]) == axis, value, shape)


def _axis_attrs(g: GraphState, axis: jax.Array | int) -> jax.Array:
    return attr_row(_no_attrs(g), axis=axis)


def _split_in_two(patch: EditBuilder, g: GraphState, source: jax.Array, first: jax.Array, second: jax.Array,
                  axis: jax.Array) -> jax.Array:
    """A split of new node `source` on `axis` into tensors shaped like output 0 of slots `first` and `second`,
    which it replaces; returns its code."""
    sizes = jnp.stack([g.shapes[first, 0, axis], g.shapes[second, 0, axis]])
    attrs = attr_row(_no_attrs(g), axis=axis, sizes=sizes)
    split = patch.add_outputs("split", [source], attrs, jnp.stack([g.shapes[first, 0], g.shapes[second, 0]]),
                              jnp.stack([g.rank[first, 0], g.rank[second, 0]]), 2)
    patch.replace(first, split, 0, 0)
    patch.replace(second, split, 0, 1)
    return split


def _match_merge_matmuls(g, v, r, table):
    capacity = g.op.shape[0]
    weight = (v.in_rank[:, 1] == 2) & const_weights(g, v)  # the table holds matmuls only
    partner = jnp.minimum(table, capacity - 1)
    ok = weight[r][:, None] & (table < capacity) & weight[partner] & (g.attrs[partner, 0] == g.attrs[r][:, None, 0])
    return ok, [table]


def _build_merge_matmuls(g, loc):
    a, b = loc[0], loc[1]
    axis = g.rank[a, 0] - 1
    weights = [g.inputs[a, 1], g.inputs[b, 1]]
    wa = g.shapes[weights[0], g.input_index[a, 1]]
    patch = EditBuilder(g, [a, b])
    joined = patch.add("concat", weights, _axis_attrs(g, 1), wa.at[1].add(g.shapes[weights[1], g.input_index[b, 1], 1]),
                       jnp.int32(2), indices=[g.input_index[a, 1], g.input_index[b, 1]])
    width = g.shapes[a, 0, axis] + g.shapes[b, 0, axis]
    merged = patch.add("matmul", [g.inputs[a, 0], joined], g.attrs[a], _dim(g.shapes[a, 0], axis, width),
                       g.rank[a, 0], indices=[g.input_index[a, 0], jnp.int32(0)])
    _split_in_two(patch, g, merged, a, b, axis)
    return patch.edit()


def _bias_add(g: GraphState, v: SlotView) -> tuple[jax.Array, jax.Array]:
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
    last = last_dim(v.shape[consumer], v.rank[consumer])
    leaf_bias = ~g.constant | op_in(g, ("input", "weight"), safe)  # `rules._bias_add`: a leaf bias of constants
    ok = (v.sole & (g.op[consumer] == OP_ID["add"]) & (g.num_inputs[consumer] == 2) & g.constant[safe] & leaf_bias
          & same_shape(v, consumer, jnp.arange(capacity))
          & (tensors(g.rank, safe, bias_index) == 1) & (tensors(g.shapes[:, :, 0], safe, bias_index) == last))
    return ok, consumer


def _match_merge_linears(g, v, r, table):
    capacity = g.op.shape[0]
    biased, add = _bias_add(g, v)
    linear = biased & (g.attrs[:, 0] == 0) & (v.in_rank[:, 1] == 2) & const_weights(g, v)  # matmuls only
    partner = jnp.minimum(table, capacity - 1)
    ok = linear[r][:, None] & (table < capacity) & linear[partner]
    return ok, [table, jnp.broadcast_to(add[r][:, None], table.shape), add[partner]]


def _build_merge_linears(g, loc):
    a, b, add_a, add_b = loc[0], loc[1], loc[2], loc[3]
    axis = g.rank[a, 0] - 1
    patch = EditBuilder(g, [a, b, add_a, add_b])
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
    """Per slot, for the tensor its input 0 reads: how many inputs read it (`reads` from `tensor_reads`), and whether it
    is a graph output."""
    capacity, width = g.op.shape[0], g.shapes.shape[1]
    first = g.inputs[:, 0] * width + g.input_index[:, 0]
    output = ((g.outputs[None, :, 0] == g.inputs[:, :1]) & (g.outputs[None, :, 1] == g.input_index[:, :1])).any(1)
    return reads[jnp.minimum(first, capacity * width)], output


def _match_split_of_split(g, v, r):
    inner = v.producer[r, 0]
    reads, output = _tensor_facts(g, v.reads)
    rank = jnp.maximum(v.rank[r], 1)
    axis = g.attrs[:, SCALAR_FIELDS["axis"]]
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
    tuple_width = g.attrs.shape[1] - TUPLE_START
    sizes = g.attrs[source, TUPLE_START + jnp.minimum(source_index, tuple_width - 1)]
    attrs = attr_row(g.attrs[inner], sizes=jnp.where(part < total, sizes, 0), tuple_length=total)
    patch = EditBuilder(g, [outer, inner])
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
    axis = g.attrs[:, SCALAR_FIELDS["axis"]]
    rank = jnp.maximum(v.rank[r], 1)
    ok = ((g.op[split] == OP_ID["split"]) & (count == g.num_outputs[split]) & rejoined.all(axis=1)
          & (axis[r] % rank == axis[split] % rank))
    return ok, [split]


def _build_split_concat(g, loc):
    concat, split = loc[0], loc[1]
    patch = EditBuilder(g, [concat])
    patch.replace(concat, g.inputs[split, 0], 0, g.input_index[split, 0])
    return patch.edit()


def _kernel(v: SlotView) -> jax.Array:
    """[C, 2] spatial size of each node's input-1 tensor (a conv's kernel)."""
    return v.in_shape[:, 1, 2:4]


def _centred(g: GraphState, v: SlotView) -> jax.Array:
    """[C] odd kernel with (k - 1) / 2 padding on each side (`rules._centred`)."""
    kernel = _kernel(v)
    half = (kernel - 1) // 2
    pads = g.attrs[:, PADS_FIELD:PADS_FIELD + 4]
    return (kernel % 2 == 1).all(axis=1) & (pads == jnp.concatenate([half, half], axis=1)).all(axis=1)


def _mergeable(g: GraphState, v: SlotView, a: jax.Array, b: jax.Array, activation: jax.Array) -> jax.Array:
    """`rules._mergeable` for conv slots `a`, `b` (broadcast)."""
    groups = g.attrs[:, SCALAR_FIELDS["groups"]]
    const = const_weights(g, v)
    stride = g.attrs[:, PAIR_FIELDS["stride"]:PAIR_FIELDS["stride"] + 2]
    return ((g.op[a] == OP_ID["conv2d"]) & (g.op[b] == OP_ID["conv2d"]) & (groups[a] == 1) & (groups[b] == 1)
            & (stride[a] == stride[b]).all(axis=-1) & (g.attrs[a, 0] == activation) & (g.attrs[b, 0] == activation)
            & (g.num_inputs[a] == g.num_inputs[b]) & const[a] & const[b])


def _match_merge_convs(g, v, r, table, *, activation, enlarge):
    capacity = g.op.shape[0]
    a = r[:, None]
    b = jnp.minimum(table, capacity - 1)
    kernel, centred = _kernel(v), _centred(g, v)
    pads = g.attrs[:, PADS_FIELD:PADS_FIELD + 4]
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
    patch = EditBuilder(g, [a, b])
    kernel_attrs = attr_row(_no_attrs(g), kernel=kernel)
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
    pads = jnp.where(enlarged, jnp.concatenate([half, half]), g.attrs[a, PADS_FIELD:PADS_FIELD + 4])
    merged = patch.add("conv2d", [g.inputs[a, 0], joined, bias], attr_row(g.attrs[a], pads=pads),
                       g.shapes[a, 0].at[1].set(channels), g.rank[a, 0], count=g.num_inputs[a],
                       indices=[g.input_index[a, 0], jnp.int32(0), jnp.int32(0)])
    _split_in_two(patch, g, merged, a, b, jnp.int32(1))
    return patch.edit()


def _match_merge_convs_into_add(g, v, r):
    a, b = v.producer[r, 0], v.producer[r, 1]
    kernel = _kernel(v)
    pads = g.attrs[:, PADS_FIELD:PADS_FIELD + 4]
    ok = ((g.num_inputs[r] == 2) & (a != b) & _mergeable(g, v, a, b, 0)
          & (pads[a] == pads[b]).all(axis=1) & same_shape(v, a, b) & same_shape(v, a, r)
          & (kernel[a] == kernel[b]).all(axis=1) & (v.in_shape[:, 0, 2:4][a] == v.in_shape[:, 0, 2:4][b]).all(axis=1)
          & v.sole[a] & v.sole[b])
    return ok, [a, b]


def _build_merge_convs_into_add(g, loc):
    add, a, b = loc[0], loc[1], loc[2]
    patch = EditBuilder(g, [add, a, b])
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


class JaxRule(NamedTuple):
    root: str  # the op of every location's first node: the family is matched only at slots holding it
    match: Callable  # (GraphState, SlotView, root slots [N], **params as int32 scalars) -> ([N] bool, [partners [N]])
    build: Callable  # (GraphState, location [M]) -> Edit; the same for every parameter of the family
    makes: tuple[str, ...]  # the ops of the nodes its rewrite adds
    pairs: bool = False  # sibling pairs: match also takes the [N, S] sibling table and returns [N, S] masks
    growth: tuple[tuple[str, int], ...] = ()  # ops of which one rewrite can leave more nodes than it found


JAX_RULE_FAMILIES: dict[str, JaxRule] = {
    "FuseConvRelu": JaxRule("relu", _match_conv_relu, _build_conv_relu, ("conv2d",)),
    "FuseConvBatchNorm": JaxRule("batchnorm", _match_conv_batchnorm, _build_conv_batchnorm,
                                 ("bn_fold_weight", "bn_fold_bias", "conv2d")),
    "FuseConvMul": JaxRule("mul", _match_conv_mul, _build_conv_mul, ("reshape", "mul", "conv2d"), growth=(("mul", 1),)),
    "AssociateMatmul": JaxRule("matmul", _match_associate_matmul, _build_associate_matmul, ("matmul",)),
    "FoldConvBias": JaxRule("add", _match_fold_conv_bias, _build_fold_conv_bias, ("reshape", "add", "conv2d")),
    "MergeGroupConvs": JaxRule("conv2d", _match_merge_group_convs, _build_merge_group_convs,
                               ("merge_gconv", "conv2d")),
    "ConcatOfRelus": JaxRule("concat", _match_concat_of_relus, _build_concat_of_relus, ("concat", "relu")),
    "MergeMatmuls": JaxRule("matmul", _match_merge_matmuls, _build_merge_matmuls, ("concat", "matmul", "split"),
                            pairs=True, growth=(("concat", 1), ("split", 1))),
    "MergeLinears": JaxRule("matmul", _match_merge_linears, _build_merge_linears,
                            ("concat", "matmul", "add", "split"), pairs=True, growth=(("concat", 2), ("split", 1))),
    "SplitOfSplit": JaxRule("split", _match_split_of_split, _build_split_of_split, ("split",)),
    "SplitConcat": JaxRule("concat", _match_split_concat, _build_split_concat, ()),
    "MergeConvs": JaxRule("conv2d", _match_merge_convs, _build_merge_convs, ("enlarge", "concat", "conv2d", "split"),
                          pairs=True, growth=(("concat", 2), ("split", 1))),
    "MergeConvsIntoAdd": JaxRule("add", _match_merge_convs_into_add, _build_merge_convs_into_add,
                                 ("concat", "add", "conv2d"), growth=(("concat", 2),)),
}
JAX_RULES: tuple[Rule, ...] = tuple(rule for rule in RULES if rule.family in JAX_RULE_FAMILIES)
