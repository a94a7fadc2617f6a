"""The jitted twin of `jaxgraph.cost` and `jaxgraph.backends`: `node_costs`, the analytic roofline
(`jaxgraph.cost.Roofline`) of the kernels a backend runs, per slot in float32: `taso` (every op its own kernel),
`xla` (elementwise chains fused, up to `XLA_MAX_CHAIN` deep) or `onnxruntime` (convolution and MatMul epilogues,
Gemm, SkipLayerNormalization).

Which kernel absorbs a node is recursive (a node joins the kernel its producer joined); it is computed by a static
number of vectorised passes over all slots, each from the previous pass's answers. That number is not the kernel
length: an XLA chain restarts after `XLA_MAX_CHAIN` ops, and onnxruntime's residual fusion depends on the other
input's layout, which follows a ResNet stage's residual chain. `Backend.absorb_depth(graph)` gives the passes a
graph needs (ResNet-50: 13 for onnxruntime, 2 for XLA); `JaxEnv` runs that of its graph plus `SPARE_PASSES`
(`fusion_passes`) and `params` refuses a graph that needs more. A fused cost depends on a node's neighbours, so the
reward is the full-cost difference. The machine's numbers are a `CostParams`, traced.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxgraph.backends import (
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
from jaxgraph.cost import Roofline
from jaxgraph.jax_graph import (
    OP_ID,
    SCALAR_FIELDS,
    GraphState,
    SlotView,
    at_rows,
    last_dim,
    op_in,
    per_channel,
    slot_view,
)
from jaxgraph.ops import ACTIVATIONS, OPS


class CostParams(NamedTuple):
    """The numbers `node_costs` reads (`jaxgraph.cost.Roofline`'s and the machine's); traced, so one compilation
    serves every machine."""

    peak_flops: jax.Array  # FLOP/s
    bandwidth: jax.Array  # bytes/s
    overhead: jax.Array  # s per kernel
    nchwc_block: jax.Array  # int32 onnxruntime's NCHWc channel block (`backends.nchwc_block`) for its residual fusion

    @classmethod
    def of(cls, model: Roofline) -> CostParams:
        """The numbers of `model` on this machine."""
        return cls(jnp.float32(model.peak_flops), jnp.float32(model.bandwidth), jnp.float32(model.overhead),
                   jnp.int32(nchwc_block()))

def _sizes(g: GraphState, v: SlotView) -> tuple[jax.Array, jax.Array]:
    """Elements of every input [C, K] and every output [C, O] float32, 0 past num_inputs / num_outputs."""
    in_sizes = jnp.where(g.live_inputs, jnp.prod(v.in_shape.astype(jnp.float32), axis=-1), 0.0)
    out_valid = jnp.arange(g.shapes.shape[1])[None, :] < g.num_outputs[:, None]
    return in_sizes, jnp.where(out_valid, jnp.prod(g.shapes.astype(jnp.float32), axis=-1), 0.0)


def _node_work(g: GraphState, v: SlotView, in_sizes: jax.Array, out_sizes: jax.Array) -> tuple[jax.Array, jax.Array]:
    """FLOPs and bytes [C] of every slot's op as a kernel of its own (`jaxgraph.cost.flops_and_bytes` of a kernel
    without epilogue): TASO's cost, and the root part of every fused kernel."""
    traffic = 4.0 * (in_sizes.sum(axis=1) + out_sizes.sum(axis=1))
    out = out_sizes[:, 0]
    w = v.in_shape[:, 1].astype(jnp.float32)
    conv = 2.0 * out * w[:, 1] * w[:, 2] * w[:, 3] + jnp.where(g.num_inputs == 3, out, 0.0)
    matmul = 2.0 * out * last_dim(v.in_shape[:, 0], v.in_rank[:, 0]).astype(jnp.float32)
    pool = out * g.attrs[:, 8].astype(jnp.float32) * g.attrs[:, 9].astype(jnp.float32)
    flops = jnp.select(
        [g.op == OP_ID["conv2d"], g.op == OP_ID["matmul"], op_in(g, ("maxpool2d", "avgpool2d")),
         op_in(g, ("sigmoid", "tanh", "softmax")), g.op == OP_ID["batchnorm"]],
        [conv, matmul, pool, 4.0 * out, 2.0 * out], out)
    return flops, traffic


def _chain_inputs(g: GraphState, v: SlotView) -> jax.Array:
    """[C, K] bool: input k may chain the node into its producer's kernel (`backends._producer`, non-constant):
    output 0 of a non-constant node that nothing else reads and that is not a graph output."""
    return g.live_inputs & ~v.in_const & (g.input_index == 0) & v.sole[v.producer]


_XLA_ARITY = max(OPS[op].max_inputs for op in XLA_ELEMENTWISE)  # the inputs an XLA chain can pass through


def _xla_roots(g: GraphState, v: SlotView, passes: int) -> tuple[jax.Array, jax.Array]:
    """Per slot the root slot of the XLA kernel that absorbs it (-1: none) and the input position it chains
    through [C]: `backends._xla_absorb` (an elementwise op joins the chain of its first elementwise producer whose
    chain is shorter than `XLA_MAX_CHAIN`), as `passes` simultaneous updates of every slot from its producers'
    previous answers (exact from `XLA.absorb_depth(graph)` passes on). A slot's answer is one int32,
    (root + 1) << 6 | depth << 3 | position, so a pass gathers and selects one array."""
    width = min(g.inputs.shape[1], _XLA_ARITY)
    producer = v.producer[:, :width]
    positions = jnp.arange(width)[None, :]
    link = (_chain_inputs(g, v)[:, :width] & op_in(g, XLA_ELEMENTWISE)[:, None]
            & op_in(g, XLA_ELEMENTWISE, producer))
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


def _residual_adds(g: GraphState, v: SlotView) -> jax.Array:
    """[C] bool: Adds of two non-constant inputs of equal shape (residual connections, which onnxruntime fuses into
    a convolution or a LayerNorm)."""
    return ((g.op == OP_ID["add"]) & ~v.in_const[:, :2].any(axis=1) & (v.in_rank[:, 0] == v.in_rank[:, 1])
            & (v.in_shape[:, 0] == v.in_shape[:, 1]).all(axis=1))


def _ort_links(g: GraphState, v: SlotView, residual: jax.Array) -> jax.Array:
    """[C, 2] int32: the stage (-1: none) through which input 0 and input 1 could join a producer's
    onnxruntime kernel (`backends._ort_link`): a batch norm with constant parameters and an activation through
    input 0, a constant scale or bias through its other input, a `residual` Add through either."""
    const = v.in_const[:, :2]
    one_constant = (g.num_inputs == 2) & (const[:, 0] != const[:, 1])
    scale_bias = jnp.where(g.op == OP_ID["mul"], _SCALE, jnp.where(g.op == OP_ID["add"], _BIAS, -1))
    first = jnp.select(
        [(g.op == OP_ID["batchnorm"]) & v.in_const[:, 1:5].all(axis=1), op_in(g, ORT_ACTIVATIONS),
         one_constant & const[:, 1], residual],
        [_BATCHNORM, _ACTIVATION, scale_bias, _RESIDUAL], -1)
    second = jnp.select([one_constant & const[:, 0], residual], [scale_bias, _RESIDUAL], -1)
    return jnp.stack([first, second], axis=1).astype(jnp.int32)


def _ort_fits(g: GraphState, v: SlotView, links: jax.Array) -> tuple[jax.Array, jax.Array]:
    """[C, 2] bool each: can the link of input j join a convolution kernel, a MatMul kernel (`backends._ort_fits`)?
    Every member of a kernel has its root's output shape, so the root's shape is the chained producer's."""
    conv, matmul = [], []
    for side in (0, 1):
        kind = links[:, side]
        same = (v.rank == v.in_rank[:, side]) & (v.shape == v.in_shape[:, side]).all(axis=1)  # as the producer
        constant, rank = v.in_shape[:, 1 - side], v.in_rank[:, 1 - side]
        size = jnp.prod(constant, axis=-1)
        vector = ((size == last_dim(constant, rank)) & (size == last_dim(v.shape, v.rank))
                  & ((rank == 1) | ((rank == 2) & (v.rank == 2))))
        scale_bias = (kind == _SCALE) | (kind == _BIAS)
        folds = (per_channel(v, slice(None), side, v.shape[:, 1], exact=True) & (rank >= 3)) | (
            (kind == _SCALE) & (rank == 0))  # [1, C, 1, 1], [C, 1, 1], or a scalar factor
        conv.append(~scale_bias | (same & folds))
        matmul.append(same & (((kind == _SCALE) & (size == 1)) | ((kind == _BIAS) & vector)))
    return jnp.stack(conv, axis=1), jnp.stack(matmul, axis=1)


SPARE_PASSES = 2  # fusion passes beyond the instance's need, for rewrites that lengthen a chain of fusions
_NO_ROOT, _CONV_ROOT, _MATMUL_ROOT, _GEMM_ROOT = range(4)  # what kind of onnxruntime kernel a slot is part of


def _ort_root_kinds(g: GraphState, v: SlotView) -> jax.Array:
    """[C]: the kernel a slot can root for the stage links: a convolution or a MatMul without activation (a Gemm
    when its weight is a 2-D constant, which a bias needs), else `_NO_ROOT`."""
    plain = g.attrs[:, 0] == ACTIVATIONS.index("none")
    gemm = v.in_const[:, 1] & (v.in_rank[:, 1] == 2)
    return jnp.select([(g.op == OP_ID["conv2d"]) & plain, (g.op == OP_ID["matmul"]) & plain & gemm,
                       (g.op == OP_ID["matmul"]) & plain], [_CONV_ROOT, _GEMM_ROOT, _MATMUL_ROOT], _NO_ROOT)


def _skip_layernorms(g: GraphState, v: SlotView, residual: jax.Array) -> jax.Array:
    """[C] the LayerNorm slot that absorbs each `residual` Add as SkipLayerNormalization (-1: none): the Add is read
    only, as input 0, by a LayerNorm over its last axis."""
    capacity = g.op.shape[0]
    add = v.producer[:, 0]
    rank = jnp.maximum(v.in_rank[:, 0], 1)
    fits = ((g.op == OP_ID["layernorm"]) & (g.input_index[:, 0] == 0) & residual[add] & v.sole[add]
            & (g.attrs[:, SCALAR_FIELDS["axis"]] % rank == rank - 1))
    found = jnp.full(capacity + 1, -1, jnp.int32).at[jnp.where(fits, add, capacity)].max(jnp.arange(capacity))
    return found[:capacity]


def _ort_code(root: jax.Array, stage: jax.Array, kind: jax.Array | int) -> jax.Array:
    """A slot's answer in the onnxruntime absorb passes as one int32: (root + 1) << 5 | (stage + 1) << 2 | kind of
    the root (0 for none: not absorbed, or absorbed into a LayerNorm)."""
    return ((root + 1) << 5) | ((stage + 1) << 2) | kind


def _ort_roots(g: GraphState, v: SlotView, block: jax.Array, passes: int) -> tuple[jax.Array, jax.Array]:
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
    pooled = op_in(g, ("maxpool2d", "avgpool2d")) & (v.shape[:, 1] % block == 0)
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


def _ort_epilogue_work(g: GraphState, v: SlotView, root: jax.Array, stage: jax.Array,
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
    reads = jnp.select([folded_bias, gemm_bias], [v.shape[:, 1], last_dim(v.shape, v.rank)], 0).astype(jnp.float32)
    return out * steps, 4.0 * (reads + jnp.where(residual | skip, out, 0.0))


def node_costs(g: GraphState, params: CostParams, backend: Backend = TASO, passes: int = 0,
               rows: jax.Array | None = None) -> jax.Array:
    """[C] float32 ms: `jaxgraph.cost.node_cost` under `Roofline(backend=backend)` for every slot: the time of the
    kernel it roots, 0 when it is absorbed into another node's kernel, free on the backend, constant, an input or
    a free slot. `backend` is TASO (no fusion), XLA or ONNXRUNTIME; the fused backends' absorb relation takes
    `passes` vectorised passes (static), exact from `backend.absorb_depth(graph)` on. With `rows` [N] (in-range
    slots; TASO only, where a node's cost depends on itself and its input shapes alone): [N], those slots' costs."""
    if rows is not None and backend is not TASO:
        raise ValueError(f"node_costs of some rows only under the taso backend, got {backend.name!r}")
    v = slot_view(g, rows)
    g = at_rows(g, rows)
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
    free = ~g.alive | g.constant | (g.op == OP_ID["input"]) | op_in(g, backend.free_ops) | (root >= 0)
    return jnp.where(free, 0.0, time).astype(jnp.float32)
