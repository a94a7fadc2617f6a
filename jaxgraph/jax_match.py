"""Matching TASO's data rules in JAX with a program whose size does not grow with the table.

A data rule is its arrays (`jaxgraph.jax_patterns.LoweredPatterns`). `PatternTable` groups the rules an
environment can fire by the shape of their matching plan and matches each group with ONE matcher
(`structural_passes`) vmapped over the group's rule arrays: an array field equal across the group is a constant
that specialises the traced code (no select over op kinds the group lacks), a field that differs is traced.
Identical rows (a rule listed twice under two xfer ids) are matched once. So a rule of an existing shape adds data,
not code: the program is at most the fully traced matcher once per group (and one shape checker for all), and the
groups are bounded by the shapes of plans (`MATCHERS` names the groupings):

- ``"per-rule"``: every rule its own group, its arrays all constants (the program grows with the table);
- ``"by-ops"``: rules with one root op, one kind per plan step and one op per plan position share a matcher;
- ``"by-plan"``: rules with one root op and one kind per plan step share a matcher (their ops traced too);
- ``"padded"``: every rule one matcher: plans padded to the largest plan's ops, the kind of each step traced and
  each rule matched at its own root op's slots; every rule takes as many candidates per root as the rule with the
  most consumer and external steps (S per step), the others' extra candidates masked. The program is one group's
  whatever the table;
- ``"by-width"``: ``"padded"`` once per number of consumer and external steps (0, 1 or 2 with three-op plans), so
  no rule pays for candidates it does not have: at most three groups whatever the table.

The matching follows `CompiledPattern._complete`: a producer step takes one candidate per root, a consumer or
external step the first S distinct readers of a tensor (`reader_table`); every candidate is checked against the
whole pattern (ops and constraints against `slot_facts`, the tensors each op reads, no external produced inside,
interior tensors read only inside and not graph outputs, the hazards, and the target's shapes, `target_facts`).
Locations are listed as `Env` lists them: roots in increasing slot order, then by the slots of the other source ops
in pattern order; where a rule has more than L = `max_locations` candidates, only the first L that pass the
structural checks get the shape checks. Each group's matcher runs the structural checks, in rounds of a few roots
that end at the root list's last root (a list is mostly padding, its room for the nodes rewrites can make); the
shape checks, the dearest to compile, are ONE checker for every group (`shape_checked`): the passes of all the
rules laid end to end, each checked with its own rule's arrays traced, a few per round up to the last pass.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph.jax_edits import Edit
from jaxgraph.jax_graph import OP_ID, GraphState, first_true, tensors
from jaxgraph.jax_patterns import (
    ARITY,
    MAX_EXTERNALS,
    MAX_HAZARDS,
    MAX_MAPPED,
    MAX_SOURCE,
    MAX_TARGET,
    PARTS,
    LoweredPatterns,
    SlotFacts,
    build_pattern,
    concrete,
    ops_reachable,
    pick,
    reader_table,
    slot_facts,
    stack_lowered,
    target_facts,
    unless,
)
from jaxgraph.pattern_data import Pattern
from jaxgraph.patterns import DATA_FAMILY, CompiledPattern, pattern_rules
from jaxgraph.rules import Rule

MATCHERS = ("per-rule", "by-ops", "by-plan", "padded", "by-width")
PADDED = ("padded", "by-width")  # the matchers of plans padded to the largest, step kinds traced


def default_matcher(backend: str | None = None) -> str:
    """The default matcher of `backend` (default: `jax.default_backend()`): on CPU `by-ops`, measured fastest to run
    and no slower to compile than the padded matchers (docs/benchmarks.md); elsewhere `by-plan`, wide kernels without
    the padded plans' masked candidates (not yet measured on a GPU)."""
    return "by-ops" if (backend or jax.default_backend()) == "cpu" else "by-plan"


def cloned_rules(rules: Sequence[Rule], copies: int, first_xfer: int = 100_000) -> tuple[Rule, ...]:
    """`rules`, then `copies` clones of its data rules (in turn) under new xfer ids from `first_xfer`: a larger table
    of the same shapes (the doubled table of the benchmarks, the program-size test)."""
    data = [r.pattern for r in rules if r.family == DATA_FAMILY]
    if copies and not data:
        raise ValueError("no data rules to clone")
    clones = tuple(dataclasses.replace(data[i % len(data)], xfer=first_xfer + i) for i in range(copies))
    return tuple(rules) + pattern_rules(clones)


def _either(condition, when_true, when_false):
    """`when_true` where `condition`, else `when_false`; chosen at trace time when `condition` is known."""
    if concrete(condition):
        return when_true if condition else when_false
    return jnp.where(condition, when_true, when_false)


STEP_KINDS = ("producer", "consumer", "external")  # a step's code in a padded plan; len(STEP_KINDS) pads


def _bind(g: GraphState, facts: SlotFacts, table: jax.Array, roots: jax.Array, row: LoweredPatterns,
          kinds: tuple[str, ...] | jax.Array, digits: int = 0) -> tuple[jax.Array, jax.Array]:
    """[N, W, M] the plan ops' slots of every candidate binding at roots `roots` [N]: one per producer step, the
    readers of a tensor (`table`, S per tensor) at a consumer or external step; and [N, W] which bindings exist.
    `kinds` names the steps (every binding exists), or holds their codes (`STEP_KINDS`, traced: a padded plan, a pad
    binds C) and then `digits` is the most consumer and external steps of any rule matched alike: W = S ** digits,
    the rule's j-th such step takes the reader at digit j (base S, the first the most significant) of the binding's
    index, and a binding exists where its digits past the rule's own such steps are 0."""
    capacity, outputs, size = g.op.shape[0], g.shapes.shape[1], table.shape[1]
    codes = facts.code.reshape(-1)
    named = isinstance(kinds, tuple)
    index = jnp.arange(1 if named else size ** digits)
    bound = [jnp.broadcast_to(roots[:, None], (roots.shape[0], index.shape[0]))]  # every entry has one shape [N, W]
    live, digit = jnp.ones(bound[0].shape, bool), 0  # digit: the consumer and external steps so far
    place = jnp.asarray([size ** max(digits - 1 - j, 0) for j in range(digits + 1)])
    for s in range(len(kinds)):
        kind = kinds[s]
        anchor, position = row.steps[s, 0], row.steps[s, 1]
        produced = lambda: codes[pick(bound, anchor) * ARITY + jnp.maximum(position, 0)] // outputs  # noqa: B023, E731
        if kind == "producer":
            bound.append(produced())
            continue
        slot = pick(bound, anchor)
        own = jnp.where(slot < capacity, slot * outputs, capacity * outputs)
        if named:  # an external step reads the first reader's input: plan op anchor // ARITY, input anchor % ARITY
            tensor = own if kind == "consumer" else codes[pick(bound, anchor // ARITY) * ARITY + anchor % ARITY]
            readers = table[jnp.minimum(tensor, capacity * outputs)]  # [N, W, S]
            shape = readers.shape
            bound = [jnp.broadcast_to(b[..., None], shape).reshape(shape[0], -1) for b in bound]
            bound.append(readers.reshape(shape[0], -1))
            live = jnp.ones(bound[0].shape, bool)
            continue
        external = codes[pick(bound, jnp.maximum(anchor, 0) // ARITY) * ARITY + jnp.maximum(anchor, 0) % ARITY]
        tensor = jnp.where(kind == STEP_KINDS.index("consumer"), own, external)
        readers = table[jnp.minimum(tensor, capacity * outputs)]  # [N, W, S]
        column = (index // place[jnp.minimum(digit, digits)]) % size
        reader = jnp.take_along_axis(readers, column[None, :, None], axis=-1)[..., 0]
        multi = (kind == STEP_KINDS.index("consumer")) | (kind == STEP_KINDS.index("external"))
        bound.append(jnp.where(multi, reader, jnp.where(kind == STEP_KINDS.index("producer"), produced(), capacity)))
        digit = digit + multi.astype(jnp.int32)
    for j in range(0 if named else digits):
        live &= ((j < digit) | ((index // place[j]) % size == 0))[None, :]
    return jnp.stack(jnp.broadcast_arrays(*bound), axis=-1), live


def _structure(f: SlotFacts, row: LoweredPatterns, plan: list, codes: list, readable: list, ext_slot: list
               ) -> jax.Array:
    """`_accept`'s structural checks of the bindings `plan` (their slots' facts `f`, input codes `codes`, the codes
    the pattern's reads may name `readable`, the externals' slots `ext_slot`)."""
    m, ok = len(plan), True
    conv, concat = OP_ID["conv2d"], OP_ID["concat"]
    for q in range(m):  # a padded plan's ops past its size have no op, arity or constraint to check
        op = row.op[q]
        ok &= unless(q >= row.size, lambda: (f.op[..., q] == op) & (f.num_inputs[..., q] == row.arity[q]))  # noqa: B023
        ok &= functools.reduce(jnp.logical_and, [unless(k >= row.size, lambda: plan[q] != plan[k])  # noqa: B023
                                                 for k in range(q + 1, m)], True)
        ok &= unless(row.activation[q] < 0, lambda: f.activation[..., q] == row.activation[q])  # noqa: B023
        ok &= unless(op != conv, lambda: (  # noqa: B023  padding: 0 SAME, 1 VALID (`jax_graph.PADDINGS`)
            (f.in_rank[..., q, :] == 4).all(-1) & (f.groups[..., q] == 1)  # noqa: B023
            & (f.kernel[..., q, 0] == row.kernel[q, 0]) & (f.kernel[..., q, 1] == row.kernel[q, 1])  # noqa: B023
            & (f.stride[..., q, 0] == row.stride[q, 0]) & (f.stride[..., q, 1] == row.stride[q, 1])  # noqa: B023
            & pick([f.same[..., q], f.unpadded[..., q]], row.padding[q])))  # noqa: B023
        ok &= unless((op != OP_ID["add"]) & (op != OP_ID["mul"]), lambda: f.equal_inputs[..., q])  # noqa: B023
        ok &= unless(op != concat, lambda: (f.in_rank[..., q, 0] == row.rank[q])  # noqa: B023
                     & (f.concat_axis[..., q] == row.axis[q]))  # noqa: B023
        for p in range(ARITY):
            ok &= unless(p >= row.arity[q], lambda: codes[q * ARITY + p] == pick(  # noqa: B023
                readable, row.reads[q, p] + MAX_EXTERNALS))  # noqa: B023
        ok &= unless(~row.interior[q], lambda: (f.reads[..., q] == row.uses[q]) & ~f.output[..., q])  # noqa: B023
    for e in range(MAX_EXTERNALS):
        ok &= unless(row.ext_reader[e] < 0, lambda: functools.reduce(  # noqa: B023
            jnp.logical_and, [ext_slot[e] != slot for slot in plan]))  # noqa: B023
    return ok


def _accept(g: GraphState, facts: SlotFacts, row: LoweredPatterns, slots: jax.Array, part: str) -> jax.Array:
    """[...] whether each binding `slots` [..., M] passes one `part` of `CompiledPattern._complete`'s conditions:
    "structure" (ops, constraints, reads, interior tensors, externals) or "shapes" (hazards and the target's shapes);
    a location passes both. A field of `row` known at trace time traces only its own checks."""
    capacity, outputs = g.op.shape[0], g.shapes.shape[1]
    m = slots.shape[-1]
    f = SlotFacts(*(a[slots] for a in facts))  # [..., M, ...]
    ok = slots[..., 0] < capacity
    plan = [slots[..., q] for q in range(m)]
    codes = [f.code[..., q, p] for q in range(m) for p in range(ARITY)]  # input p of plan op q at q * ARITY + p
    externals = [_either(r >= 0, pick(codes, r), facts.code[-1, 0]) for r in row.ext_reader]
    readable = externals[::-1] + [slot * outputs for slot in plan]  # read code c at c + MAX_EXTERNALS
    constant = [f.constant[..., q] for q in range(m)]
    ext_slot = [jnp.minimum(code // outputs, capacity) for code in externals]
    if part == "structure":
        return ok & _structure(f, row, plan, codes, readable, ext_slot)
    for h in range(MAX_HAZARDS):
        k, e = row.hazard[h, 0], row.hazard[h, 1]
        slot = pick(ext_slot, e)
        ok &= unless(k < 0, lambda: facts.leaf[slot] | (facts.constant[slot] & ~pick(constant, k)))  # noqa: B023
    sources = jnp.concatenate([slots, jnp.full(slots.shape[:-1] + (MAX_SOURCE - m,), capacity, slots.dtype)], -1)
    target = target_facts(g, row, jnp.stack(jnp.broadcast_arrays(*externals), -1), sources)
    ok &= target.valid
    outs = [(d, j) for d in range(MAX_TARGET) for j in range(PARTS)]  # target code d * PARTS + j

    def same_tensor(q, t):
        slot = jnp.minimum(pick(plan, q), capacity - 1)
        return ((tensors(g.shapes, slot, 0) == pick([target.shapes[..., d, j, :] for d, j in outs], t)).all(-1)
                & (tensors(g.rank, slot, 0) == pick([target.ranks[..., d, j] for d, j in outs], t))
                & (pick(constant, q) == pick([target.constant[..., d] for d, _ in outs], t)))

    for i in range(MAX_MAPPED):
        ok &= unless(row.mapped[i, 0] < 0, lambda: same_tensor(row.mapped[i, 0], row.mapped[i, 1]))  # noqa: B023
    return ok


def _location_order(location: np.ndarray | jax.Array, m: int) -> np.ndarray | jax.Array:
    """[..., m] the plan ops in location order, from rules' `location` [..., M] (a padded plan's pads last): a
    location's slots are a binding's `slots[..., order]`."""
    position = location[..., :m]
    if isinstance(position, np.ndarray):
        return np.argsort(np.where(position < 0, m, position), axis=-1, kind="stable")
    return jnp.argsort(jnp.where(position < 0, m, position), axis=-1)


def _candidates(g: GraphState, facts: SlotFacts, table: jax.Array, roots: jax.Array, row: LoweredPatterns,
                kinds: tuple[str, ...] | jax.Array, digits: int) -> tuple[jax.Array, jax.Array]:
    """Every candidate binding at roots `roots` [N] in location order (roots increasing, within a root as `Env`
    lists them): whether it passes `_accept`'s structural checks [N * W] and its plan ops' slots [N * W, M], in plan
    order (`_location_order` puts them in location order)."""
    capacity = g.op.shape[0]
    m = len(kinds) + 1
    slots, live = _bind(g, facts, table, roots, row, kinds, digits)  # [N, W, M], [N, W]
    ok = live & _accept(g, facts, row, slots, "structure")
    order = _location_order(row.location, m)
    if isinstance(kinds, tuple):  # bindings come with earlier steps varying slower, each step's readers increasing:
        multi = [s for s, kind in enumerate(kinds) if kind != "producer"]  # in order where locations keep plan order
        varying = bool(multi) and m - 1 - multi[0] > 1 and not (
            isinstance(order, np.ndarray) and (order == np.arange(m)).all())
    else:  # a padded plan: decided per rule, from the codes
        multi = (kinds == STEP_KINDS.index("consumer")) | (kinds == STEP_KINDS.index("external"))
        varying = multi.any() & (row.size - 1 - jnp.argmax(multi) > 1)
    if varying is not False:  # two ops vary within one root: order them by their slots, in location order
        location = jnp.take(slots, order, axis=-1)
        key = sum(location[..., t] * (capacity + 1) ** (m - 1 - t) for t in range(1, m))
        by_key = jnp.argsort(jnp.where(ok, key, jnp.iinfo(jnp.int32).max), axis=1)
        by_key = jnp.where(varying, by_key, jnp.arange(by_key.shape[1]))
        ok = jnp.take_along_axis(ok, by_key, axis=1)
        slots = jnp.take_along_axis(slots, by_key[..., None], axis=1)
    return ok.reshape(-1), slots.reshape(-1, m)


ROOT_CHUNK = 8  # a long root list is matched this many roots per round, the rounds stopping past its last root
SHAPE_BLOCK = 16  # the structural passes of every rule are checked for shapes this many per round, up to the last


def structural_passes(g: GraphState, facts: SlotFacts, table: jax.Array, roots: jax.Array, row: LoweredPatterns,
                      kinds: tuple[str, ...] | jax.Array, max_locations: int, digits: int = 0
                      ) -> tuple[jax.Array, jax.Array]:
    """The candidate bindings of one data rule (`row`: its arrays, NumPy values or traced; `kinds`: its plan's steps,
    or their codes [M - 1] for a plan padded to M ops, `STEP_KINDS`, and `digits` as `_bind` takes them) at root
    slots `roots` [N] (increasing, padded with C) that pass `_accept`'s structural checks: how many (at most
    size = min(L, N * W)) and the first `size` of them in location order, their plan ops' slots [size, M] (unset
    past the count). `shape_checked` checks them for shapes: where a rule has more than L candidates, only its first
    L structural passes are, as `Env` lists them.

    A long root list is matched `ROOT_CHUNK` roots per round of a loop that ends at the list's last root (a list is
    mostly padding where a rewrite can grow it: the rounds past its roots are not run) or at the L-th pass."""
    capacity = g.op.shape[0]
    m, n = len(kinds) + 1, roots.shape[0]
    named = isinstance(kinds, tuple)
    width = table.shape[1] ** (sum(kind != "producer" for kind in kinds) if named else digits)
    size = min(max_locations, n * width)

    def collect(at):  # the first `size` structural passes at roots `at`, and how many there are
        passes, rows = _candidates(g, facts, table, at, row, kinds, digits)
        index = first_true(passes[None], size)[0]
        return (index < passes.shape[0]).sum(), rows[jnp.minimum(index, passes.shape[0] - 1)]

    if n <= ROOT_CHUNK:
        return collect(roots)
    chunks = -(-n // ROOT_CHUNK)
    padded = jnp.pad(roots, (0, chunks * ROOT_CHUNK - n), constant_values=capacity)
    last = (roots < capacity).sum()
    position = jnp.arange(size)

    def more(carry):
        done, found, _ = carry
        return (done * ROOT_CHUNK < last) & (found < size)

    def round_(carry):  # append this round's passes after those found so far
        done, found, slots = carry
        new, rows = collect(jax.lax.dynamic_slice(padded, (done * ROOT_CHUNK,), (ROOT_CHUNK,)))
        slots = jnp.where((position >= found)[:, None], rows[jnp.clip(position - found, 0, size - 1)], slots)
        return done + 1, jnp.minimum(found + new, size), slots

    _, found, slots = jax.lax.while_loop(more, round_, (jnp.int32(0), jnp.int32(0),
                                                        jnp.full((size, m), capacity, roots.dtype)))
    return found, slots


def shape_checked(g: GraphState, facts: SlotFacts, lowered: LoweredPatterns,
                  passes: Sequence[tuple[jax.Array, jax.Array]], rules: Sequence[np.ndarray]) -> list[jax.Array]:
    """Which structural passes are locations: `_accept`'s shape checks (hazards and the target's shapes, the dearest)
    of every group's passes (`passes`: per group, as `group_passes` gives them, of the rules `rules` [D], indices
    into `lowered`) by ONE checker traced once whatever the groups, each pass checked with its own rule's arrays:
    per group [D, size]. The passes are laid end to end (rule by rule, the first `found` of each) and checked
    `SHAPE_BLOCK` per round up to the last."""
    capacity = g.op.shape[0]
    rule = np.concatenate(rules)
    found = jnp.concatenate([count for count, _ in passes])  # [R]
    ends = jnp.cumsum(found)
    starts, total = ends - found, ends[-1]
    first_rule = np.cumsum([0] + [len(r) for r in rules])
    fixed, varying = _split_fields(LoweredPatterns(*(a[rule] for a in lowered)))
    room = sum(slots.shape[0] * slots.shape[1] for _, slots in passes)  # the passes there can be

    def check(position):  # [B] positions in the laid-out passes -> [B] locations
        r = jnp.minimum(jnp.searchsorted(ends, position, side="right"), rule.shape[0] - 1)
        j = position - starts[r]
        slots = jnp.full((position.shape[0], MAX_SOURCE), capacity, jnp.int32)
        for k, (_, group) in enumerate(passes):
            d = jnp.clip(r - first_rule[k], 0, group.shape[0] - 1)
            mine = group[d, jnp.clip(j, 0, group.shape[1] - 1)]  # [B, m]
            mine = jnp.pad(mine, ((0, 0), (0, MAX_SOURCE - mine.shape[1])), constant_values=capacity)
            slots = jnp.where(((r >= first_rule[k]) & (r < first_rule[k + 1]))[:, None], mine, slots)
        rows = {name: a[r] for name, a in varying.items()}
        return (position < total) & jax.vmap(
            lambda row, b: _accept(g, facts, LoweredPatterns(**fixed, **row), b, "shapes"))(rows, slots)

    blocks = -(-room // SHAPE_BLOCK)

    def round_(carry):
        done, ok = carry
        first = done * SHAPE_BLOCK
        return done + 1, jax.lax.dynamic_update_slice_in_dim(ok, check(first + jnp.arange(SHAPE_BLOCK)), first, 0)

    _, ok = jax.lax.while_loop(lambda carry: carry[0] * SHAPE_BLOCK < total, round_,
                               (jnp.int32(0), jnp.zeros(blocks * SHAPE_BLOCK, bool)))
    checked = []
    for k, (count, group) in enumerate(passes):
        j = jnp.arange(group.shape[1])[None, :]
        at = starts[first_rule[k]:first_rule[k + 1], None] + j
        checked.append((j < count[:, None]) & ok[jnp.minimum(at, ok.shape[0] - 1)])
    return checked


def located(ok: jax.Array, slots: jax.Array, orders: np.ndarray, capacity: int, max_locations: int,
            location_size: int) -> tuple[jax.Array, jax.Array]:
    """A group's locations from its checked passes `ok` [D, size] and their plan ops' slots [D, size, m]: a mask
    [D, L] and the location slots [D, L, location_size], the first L passes that are locations, each rule's plan ops
    in its location order (`orders` [D, m]), padded with C = `capacity`."""
    index = first_true(ok, max_locations)  # [D, L]
    valid = index < ok.shape[1]
    rows = jnp.take_along_axis(slots, jnp.minimum(index, ok.shape[1] - 1)[..., None], axis=1)  # [D, L, m]
    if not (orders == np.arange(orders.shape[1])).all():
        rows = jnp.take_along_axis(rows, jnp.asarray(orders)[:, None, :], axis=2)
    rows = jnp.where(valid[..., None], rows, capacity)
    return valid, jnp.pad(rows, ((0, 0), (0, 0), (0, location_size - rows.shape[2])), constant_values=capacity)


def distinct_rows(rows: LoweredPatterns, kinds: tuple[str, ...] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct, inverse): the first of each set of identical rows of `rows` [P, ...] (with their plan codes `kinds`
    [P, M - 1] when padded), increasing, and for every row the position of its own among them: a rule listed twice
    under two xfer ids is matched once."""
    padded = not isinstance(kinds, tuple)
    keys = [b"".join(a[i].tobytes() for a in rows) + (kinds[i].tobytes() if padded else b"")
            for i in range(len(rows.size))]
    first = {key: i for i, key in reversed(list(enumerate(keys)))}
    distinct = sorted(first.values())
    return np.array(distinct, np.int32), np.array([distinct.index(first[key]) for key in keys], np.int32)


def _split_fields(rows: LoweredPatterns) -> tuple[dict[str, np.ndarray], dict[str, jax.Array]]:
    """(fixed, varying) fields of rules `rows` [P, ...]: one rule's value of each field equal in all of them (a
    constant that specialises the traced code) and the others [P, ...] (traced)."""
    fixed = {name: a[0] for name, a in rows._asdict().items() if (a == a[:1]).all()}
    return fixed, {name: jnp.asarray(a) for name, a in rows._asdict().items() if name not in fixed}


def group_passes(g: GraphState, facts: SlotFacts, table: jax.Array, roots: jax.Array, rows: LoweredPatterns,
                 kinds: tuple[str, ...] | np.ndarray, max_locations: int) -> tuple[jax.Array, jax.Array]:
    """`structural_passes` of every rule of `rows` [P, ...] (NumPy arrays) with one traced matcher: vmapped over the
    rows, the fields equal in all of them constants. The rules share one plan (`kinds`, its step names) and root
    slots `roots` [N], or each has its own: `kinds` [P, M - 1] the codes of its plan padded to M ops and `roots`
    [P, N]. Counts [P], slots [P, size, M]."""
    padded = not isinstance(kinds, tuple)
    fixed, varying = _split_fields(rows)
    digits = 0
    if padded:  # the plan's kinds traced as data, and the roots of each rule's own root op
        varying.update(kinds=jnp.asarray(kinds), roots=roots)
        digits = int(np.isin(kinds, [STEP_KINDS.index("consumer"), STEP_KINDS.index("external")]).sum(1).max())

    def one(traced):
        traced = dict(traced)
        plan, at = traced.pop("kinds", kinds), traced.pop("roots", roots)
        return structural_passes(g, facts, table, at, LoweredPatterns(**fixed, **traced), plan, max_locations,
                                 digits=digits)

    return jax.vmap(one)(varying) if varying else tuple(x[None] for x in one({}))


class PatternTable:
    """An environment's data rules (`patterns`, in its xfer order), lowered, grouped by `matcher` (one of
    `MATCHERS`) and matched only where they can fire: a rule is pruned, statically, when one of its source ops is
    outside the ops the instances can come to hold (`reachable`: their ops closed under `makes`, the (needs, makes)
    op sets of the other rules, and under the data rules themselves). A pattern of more source ops than
    `location_size` raises `ValueError` naming it."""

    def __init__(self, patterns: Sequence[Pattern], graph_ops: set[str],
                 makes: Sequence[tuple[frozenset[str], frozenset[str]]], matcher: str = "by-ops",
                 location_size: int = MAX_SOURCE) -> None:
        if matcher not in MATCHERS:
            raise ValueError(f"unknown matcher {matcher!r}; known: {', '.join(MATCHERS)}")
        for p in patterns:
            if len(p.src) > location_size:
                raise ValueError(f"TASO xfer {p.xfer}: its locations have {len(p.src)} nodes, over "
                                 f"max_location_size={location_size}")
        self.patterns, self.matcher = tuple(patterns), matcher
        compiled = [CompiledPattern(p) for p in self.patterns]
        self.lowered = stack_lowered(compiled)
        needs = [frozenset(o.op for o in p.src) for p in self.patterns]
        self.reachable = ops_reachable(graph_ops, list(makes) + [
            (need, frozenset(o.op for o in p.dst)) for need, p in zip(needs, self.patterns)])
        groups: dict[tuple, list[int]] = {}
        plans = {}  # matched rule: (root op, step kinds)
        for i, (p, c) in enumerate(zip(self.patterns, compiled)):
            if needs[i] <= self.reachable:
                plans[i] = (p.src[c.root].op, tuple(step[0] for step in c.steps))
                width = sum(kind != "producer" for kind in plans[i][1])  # consumer and external steps
                key = {"per-rule": plans[i] + (i,), "by-ops": plans[i] + tuple(self.lowered.op[i]),
                       "by-plan": plans[i], "padded": ("", ()), "by-width": ("", (), width)}[matcher]
                groups.setdefault(key, []).append(i)
        self.groups = tuple((key[0], key[1], np.array(rows, np.int32)) for key, rows in groups.items())
        self.roots = tuple(dict.fromkeys(root for root, _ in plans.values()))
        # `padded`: each matched rule's root (its index in `roots`) and its steps' codes, plans padded to the largest
        steps = max((len(kinds) for _, kinds in plans.values()), default=0)
        self._root_index = {i: self.roots.index(root) for i, (root, _) in plans.items()}
        step_codes = {i: [STEP_KINDS.index(k) for k in kinds] + [len(STEP_KINDS)] * (steps - len(kinds))
                      for i, (_, kinds) in plans.items()}
        # each group matched once per distinct row: its plan (step names, or padded codes [D, M - 1]) and rules [D]
        self._matched: list[tuple[tuple[str, ...] | np.ndarray, np.ndarray]] = []
        self.picks: list[tuple[int, int] | None] = [None] * len(self.patterns)  # (group, row) of `locations`
        for index, (_, kinds, rows) in enumerate(self.groups):
            if matcher in PADDED:
                kinds = np.array([step_codes[int(i)] for i in rows], np.int32).reshape(len(rows), -1)
            distinct, inverse = distinct_rows(LoweredPatterns(*(a[rows] for a in self.lowered)), kinds)
            self._matched.append((kinds[distinct] if matcher in PADDED else kinds, rows[distinct]))
            for i, row in zip(rows, inverse):
                self.picks[i] = (index, int(row))

    def growth(self, i: int) -> dict[str, int]:
        """Ops of which a rewrite of rule `i` leaves more nodes than it found, and how many more."""
        made, found = (Counter(o.op for o in side) for side in (self.patterns[i].dst, self.patterns[i].src))
        return {op: count - found[op] for op, count in made.items() if count > found[op]}

    def locations(self, g: GraphState, reads: jax.Array, lists: dict[str, jax.Array], max_readers: int,
                  max_locations: int, location_size: int) -> tuple[list[jax.Array], list[jax.Array]]:
        """Location masks [D, L] and slots [D, L, location_size] of each group's distinct rules: rule i's are row
        `picks[i]` of them (None: a pruned rule, no location), which `jax_graph.stack_rows` lays in table order.
        `reads` is `tensor_reads(g)`, `lists` the root lists of `JaxEnv`."""
        if not self.groups:
            return [], []
        capacity = g.op.shape[0]
        facts, table = slot_facts(g, reads), reader_table(g, max_readers)
        size = max(lists[op].shape[0] for op in self.roots)  # padded plans: every root list, to the longest
        stack = jnp.stack([jnp.pad(lists[op], (0, size - lists[op].shape[0]), constant_values=capacity)
                           for op in self.roots]) if self.matcher in PADDED else None
        passes = []
        for (root, _, _), (kinds, rows) in zip(self.groups, self._matched):
            at = lists[root] if stack is None else stack[np.array([self._root_index[int(i)] for i in rows])]
            passes.append(group_passes(g, facts, table, at, LoweredPatterns(*(a[rows] for a in self.lowered)), kinds,
                                       max_locations))
        checked = shape_checked(g, facts, self.lowered, passes, [rows for _, rows in self._matched])
        masks, members = [], []
        for (_, slots), ok, (_, rows) in zip(passes, checked, self._matched):
            orders = _location_order(self.lowered.location[rows], slots.shape[2])
            found, nodes = located(ok, slots, orders, capacity, max_locations, location_size)
            masks.append(found)
            members.append(nodes)
        return masks, members

    def build(self, g: GraphState, location: jax.Array, index: jax.Array) -> Edit:
        """The rewrite of rule `index` (traced) at `location`."""
        return build_pattern(g, location, LoweredPatterns(*(jnp.asarray(a)[index] for a in self.lowered)))
