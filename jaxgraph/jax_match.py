"""Matching TASO's data rules in JAX with a program whose size does not grow with the table.

A data rule is its arrays (`jaxgraph.jax_patterns.LoweredPatterns`). `PatternTable` groups the rules an
environment can fire by the shape of their matching plan and matches each group with ONE matcher (`match_rule`)
vmapped over the group's rule arrays: an array field equal across the group is a constant that specialises the
traced code (no select over op kinds the group lacks), a field that differs is traced. Identical rows (a rule
listed twice under two xfer ids) are matched once. So a rule of an existing shape adds data, not code: the program
is at most the fully traced matcher once per group, and the groups are bounded by the shapes of plans
(`MATCHERS` names the groupings):

- ``"per-rule"``: every rule its own group, its arrays all constants (the program grows with the table);
- ``"by-ops"``: rules with one root op, one kind per plan step and one op per plan position share a matcher;
- ``"by-plan"``: rules with one root op and one kind per plan step share a matcher (their ops traced too).

`match_rule` follows `CompiledPattern._complete`: a producer step takes one candidate per root, a consumer or
external step the first S distinct readers of a tensor (`reader_table`); every candidate is checked against the
whole pattern (ops and constraints against `slot_facts`, the tensors each op reads, no external produced inside,
interior tensors read only inside and not graph outputs, the hazards, and the target's shapes, `target_facts`).
Locations are listed as `Env` lists them: roots in increasing slot order, then by the slots of the other source ops
in pattern order; where a rule has more than L = `max_locations` candidates, only the first L that pass the
structural checks get the shape checks.
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
from jaxgraph.patterns import FAMILY, CompiledPattern, pattern_rules
from jaxgraph.rules import Rule

MATCHERS = ("per-rule", "by-ops", "by-plan")


def default_matcher(backend: str | None = None) -> str:
    """The default matcher of `backend` (default: `jax.default_backend()`): on CPU `by-ops`, measured fastest
    (docs/benchmarks.md); elsewhere `by-plan`, the fewest and widest kernels (not yet measured on a GPU)."""
    return "by-ops" if (backend or jax.default_backend()) == "cpu" else "by-plan"


def cloned_rules(rules: Sequence[Rule], copies: int, first_xfer: int = 100_000) -> tuple[Rule, ...]:
    """`rules`, then `copies` clones of its data rules (in turn) under new xfer ids from `first_xfer`: a larger table
    of the same shapes (the doubled table of the benchmarks, the program-size test)."""
    data = [r.pattern for r in rules if r.family == FAMILY]
    if copies and not data:
        raise ValueError("no data rules to clone")
    clones = tuple(dataclasses.replace(data[i % len(data)], xfer=first_xfer + i) for i in range(copies))
    return tuple(rules) + pattern_rules(clones)


def _either(condition, when_true, when_false):
    """`when_true` where `condition`, else `when_false`; chosen at trace time when `condition` is known."""
    if concrete(condition):
        return when_true if condition else when_false
    return jnp.where(condition, when_true, when_false)


def _bind(g: GraphState, facts: SlotFacts, table: jax.Array, roots: jax.Array, row: LoweredPatterns,
          kinds: tuple[str, ...]) -> jax.Array:
    """[N, W, M] the plan ops' slots of every candidate binding at roots `roots` [N]: one per producer step, the
    readers of a tensor (`table`) at a consumer or external step."""
    capacity, outputs = g.op.shape[0], g.shapes.shape[1]
    codes = facts.code.reshape(-1)
    bound = [roots[:, None]]  # every entry has one shape [N, W]
    for s, kind in enumerate(kinds):
        anchor, position = row.steps[s, 0], row.steps[s, 1]
        if kind == "producer":
            bound.append(codes[pick(bound, anchor) * ARITY + position] // outputs)
            continue
        if kind == "consumer":
            slot = pick(bound, anchor)
            tensor = jnp.where(slot < capacity, slot * outputs, capacity * outputs)
        else:  # the external's first reader: plan op anchor // ARITY, input anchor % ARITY
            tensor = codes[pick(bound, anchor // ARITY) * ARITY + anchor % ARITY]
        readers = table[jnp.minimum(tensor, capacity * outputs)]  # [N, W, S]
        shape = readers.shape
        bound = [jnp.broadcast_to(b[..., None], shape).reshape(shape[0], -1) for b in bound]
        bound.append(readers.reshape(shape[0], -1))
    return jnp.stack(jnp.broadcast_arrays(*bound), axis=-1)


def _accept(g: GraphState, facts: SlotFacts, row: LoweredPatterns, slots: jax.Array, shapes: bool = True) -> jax.Array:
    """[...] whether each binding `slots` [..., M] is a location (`CompiledPattern._complete`'s conditions). A field
    of `row` known at trace time traces only its own checks. Without `shapes`, the structure only: ops,
    constraints, reads, interior tensors, externals (not hazards, not the target's shapes)."""
    capacity, outputs = g.op.shape[0], g.shapes.shape[1]
    m = slots.shape[-1]
    f = SlotFacts(*(a[slots] for a in facts))  # [..., M, ...]
    ok = slots[..., 0] < capacity
    plan = [slots[..., q] for q in range(m)]
    codes = [f.code[..., q, p] for q in range(m) for p in range(ARITY)]  # input p of plan op q at q * ARITY + p
    externals = [_either(r >= 0, pick(codes, r), facts.code[-1, 0]) for r in row.ext_reader]
    readable = externals[::-1] + [slot * outputs for slot in plan]  # read code c at c + MAX_EXTERNALS
    constant = [f.constant[..., q] for q in range(m)]
    conv, concat = OP_ID["conv2d"], OP_ID["concat"]
    for q in range(m):
        op = row.op[q]
        ok &= (f.op[..., q] == op) & (f.num_inputs[..., q] == row.arity[q])
        ok &= functools.reduce(jnp.logical_and, [plan[q] != plan[k] for k in range(q + 1, m)], True)
        ok &= unless(row.activation[q] < 0, lambda: f.activation[..., q] == row.activation[q])  # noqa: B023
        ok &= unless(op != conv, lambda: (  # noqa: B023  padding: 0 SAME, 1 VALID (`PADDING`)
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
    ext_slot = [jnp.minimum(code // outputs, capacity) for code in externals]
    for e in range(MAX_EXTERNALS):
        ok &= unless(row.ext_reader[e] < 0, lambda: functools.reduce(  # noqa: B023
            jnp.logical_and, [ext_slot[e] != slot for slot in plan]))  # noqa: B023
    if not shapes:
        return ok
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


def match_rule(g: GraphState, facts: SlotFacts, table: jax.Array, roots: jax.Array, row: LoweredPatterns,
               kinds: tuple[str, ...], max_locations: int, location_size: int) -> tuple[jax.Array, jax.Array]:
    """The locations of one data rule (`row`: its arrays, NumPy values or traced; `kinds`: its plan's steps) at root
    slots `roots` [N] (increasing, padded with C): a mask [L] and the location slots [L, location_size], padded
    with C."""
    capacity = g.op.shape[0]
    m = len(kinds) + 1
    slots = _bind(g, facts, table, roots, row, kinds)  # [N, W, M]
    many = slots[..., 0].size > max_locations  # then the shapes of the first L structural candidates only
    ok = _accept(g, facts, row, slots, shapes=not many)
    if isinstance(row.location, np.ndarray):
        in_order = slots[..., np.argsort(row.location[:m])]
    else:
        in_order = jnp.take(slots, jnp.argsort(row.location[:m]), axis=-1)
    slots = jnp.concatenate([slots, in_order], -1)  # plan order, location order
    location = slots[..., m:]
    multi = [s for s, kind in enumerate(kinds) if kind != "producer"]
    if multi and m - 1 - multi[0] > 1:  # two ops vary within one root: order them by their slots, in location order
        key = sum(location[..., t] * (capacity + 1) ** (m - 1 - t) for t in range(1, m))
        order = jnp.argsort(jnp.where(ok, key, jnp.iinfo(jnp.int32).max), axis=1)
        ok = jnp.take_along_axis(ok, order, axis=1)
        slots = jnp.take_along_axis(slots, order[..., None], axis=1)
    ok, slots = ok.reshape(-1), slots.reshape(-1, 2 * m)
    if many:
        index = first_true(ok[None], max_locations)[0]
        slots = slots[jnp.minimum(index, ok.shape[0] - 1)]
        ok = (index < ok.shape[0]) & _accept(g, facts, row, slots[:, :m])
    index = first_true(ok[None], max_locations)[0]
    valid = index < ok.shape[0]
    rows = jnp.where(valid[:, None], slots[jnp.minimum(index, ok.shape[0] - 1), m:], capacity)
    return valid, jnp.pad(rows, ((0, 0), (0, location_size - m)), constant_values=capacity)


def match_group(g: GraphState, facts: SlotFacts, table: jax.Array, roots: jax.Array, rows: LoweredPatterns,
                kinds: tuple[str, ...], max_locations: int, location_size: int) -> tuple[jax.Array, jax.Array]:
    """`match_rule` for every rule of `rows` [P, ...] (NumPy arrays; one plan `kinds`) with one traced matcher:
    vmapped over the distinct rows, the fields equal in all of them constants. Masks [P, L], slots [P, L, size]."""
    keys = [b"".join(a[i].tobytes() for a in rows) for i in range(len(rows.size))]
    first = {key: i for i, key in reversed(list(enumerate(keys)))}
    distinct = sorted(first.values())
    inverse = np.array([distinct.index(first[key]) for key in keys])
    rows = LoweredPatterns(*(a[distinct] for a in rows))
    fixed = {name: a[0] for name, a in rows._asdict().items() if (a == a[:1]).all()}
    varying = {name: jnp.asarray(a) for name, a in rows._asdict().items() if name not in fixed}

    def one(traced):
        return match_rule(g, facts, table, roots, LoweredPatterns(**fixed, **traced), kinds, max_locations,
                          location_size)

    found, nodes = jax.vmap(one)(varying) if varying else (x[None] for x in one({}))
    return found[inverse], nodes[inverse]


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
        for i, (p, c) in enumerate(zip(self.patterns, compiled)):
            if needs[i] <= self.reachable:
                kinds = tuple(step[0] for step in c.steps)
                key = {"per-rule": (i,), "by-ops": tuple(self.lowered.op[i]), "by-plan": ()}[matcher]
                groups.setdefault((p.src[c.root].op, kinds) + key, []).append(i)
        self.groups = tuple((key[0], key[1], np.array(rows, np.int32)) for key, rows in groups.items())
        matched = [i for _, _, rows in self.groups for i in rows]
        pruned = sorted(set(range(len(self.patterns))) - set(matched))
        self._order = np.argsort(np.array(matched + pruned))
        self.roots = tuple(dict.fromkeys(root for root, _, _ in self.groups))
        self.size = max(len(p.src) for p in self.patterns)

    def growth(self, i: int) -> dict[str, int]:
        """Ops of which a rewrite of rule `i` leaves more nodes than it found, and how many more."""
        made, found = (Counter(o.op for o in side) for side in (self.patterns[i].dst, self.patterns[i].src))
        return {op: count - found[op] for op, count in made.items() if count > found[op]}

    def locations(self, g: GraphState, reads: jax.Array, lists: dict[str, jax.Array], max_readers: int,
                  max_locations: int, location_size: int) -> tuple[jax.Array, jax.Array]:
        """Location mask [P, L] and slots [P, L, location_size] of every rule, in table order (pruned rules: none).
        `reads` is `tensor_reads(g)`, `lists` the root lists of `JaxEnv`."""
        capacity = g.op.shape[0]
        masks, members = [], []
        if self.groups:
            facts, table = slot_facts(g, reads), reader_table(g, max_readers)
            for root, kinds, rows in self.groups:
                found, nodes = match_group(g, facts, table, lists[root], LoweredPatterns(
                    *(a[rows] for a in self.lowered)), kinds, max_locations, location_size)
                masks.append(found)
                members.append(nodes)
        pruned = len(self.patterns) - sum(len(rows) for _, _, rows in self.groups)
        masks.append(jnp.zeros((pruned, max_locations), bool))
        members.append(jnp.full((pruned, max_locations, location_size), capacity, jnp.int32))
        order = jnp.asarray(self._order)
        return jnp.concatenate(masks)[order], jnp.concatenate(members)[order]

    def build(self, g: GraphState, location: jax.Array, index: jax.Array) -> Edit:
        """The rewrite of rule `index` (traced) at `location`."""
        return build_pattern(g, location, LoweredPatterns(*(jnp.asarray(a)[index] for a in self.lowered)))
