"""Known answers: which rules of a reference table (TASO's) a generated table contains, and why others are not.

A reference entry (the pattern-file format) is interned into the world's term table and put in the same
canonical form as generated rules (minimised over renamings of its inputs, add and mul modulo commutativity, a
split's sizes left out as the pattern file leaves them), so membership is a set lookup. A missing entry gets the
first stage that loses it: an op kind or rank outside the set, more inputs than the world has, more ops than the
bound, ill typed on the world's shapes, a disconnected source, not a candidate (its sides' fingerprints differ,
or a graph has more outputs than the bound), refuted by the prover, or pruned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from jaxgraph.generate._prune import Candidate, canonical
from jaxgraph.generate.enumerate import SPLIT_PART, Terms, World, connected, infer, op_kinds, split_parts
from jaxgraph.pattern_data import DATA_FILE


def kind_name(op: Mapping[str, Any]) -> str:
    """The op-kind name of a pattern-file op (`matmul_none`, `conv3s1_same_relu`, `concat1`, ...)."""
    a = op["attrs"]
    if op["op"] == "matmul":
        return f"matmul_{a['activation']}"
    if op["op"] == "conv2d":
        bias = "_b" * (len(op["inputs"]) == 3)
        return f"conv{a['kernel'][0]}s{a['stride'][0]}_{a['padding'].lower()}_{a['activation']}{bias}"
    if op["op"] == "concat" and a["rank"] == 1:
        return "vconcat"
    if op["op"] in ("concat", "split"):
        return f"{op['op']}{a['axis']}"
    return op["op"]


def intern_entry(raw: Mapping[str, Any], terms: Terms) -> Candidate:
    """A pattern-file entry as a candidate over `terms`; ValueError saying why the world cannot express it."""
    names = {k.name: i for i, k in enumerate(terms.kinds)}
    externals = sorted({t[0] for side in ("src", "dst") for o in raw[side] for t in o["inputs"] if t[0] < 0},
                       reverse=True)
    if len(externals) > terms.world.count:
        raise ValueError(f"reads {len(externals)} inputs, the world has {terms.world.count}")
    external = {e: i for i, e in enumerate(externals)}
    sides = []
    for side in ("src", "dst"):
        tensor: dict[tuple[int, int], int] = {}
        ops = set()
        for k, op in enumerate(raw[side]):
            name = kind_name(op)
            if name not in names:
                raise ValueError(f"op kind {name} is not in the set")
            args = tuple(external[t[0]] if t[0] < 0 else tensor[tuple(t)] for t in op["inputs"])
            if len(args) != terms.kinds[names[name]].arity:
                raise ValueError(f"{name} with {len(args)} inputs is not an enumerated kind")
            kind = terms.kinds[names[name]]
            shape = infer(kind, [terms.shapes[a] for a in args], 1)
            if shape is None:
                raise ValueError(f"{name} is ill typed on the world's shapes")
            term = terms.intern((names[name], args, 1 if kind.op == "split" else 0), shape)
            ops.add(term)
            if kind.op == "split":
                for j, part in enumerate(split_parts(kind, shape, 1)):
                    tensor[(k, j)] = terms.intern((SPLIT_PART, (term,), j), part)
            else:
                tensor[(k, 0)] = term
        sides.append((frozenset(ops), tensor))
    (src, src_tensor), (dst, dst_tensor) = sides
    mapped = tuple((src_tensor[tuple(s)], dst_tensor[tuple(d)]) for s, d in raw["mapped"])
    return Candidate(src, dst, mapped)


def explain(raw: Mapping[str, Any], terms: Terms, max_ops: int, stages: Mapping[str, set]) -> str:
    """'found', or the first stage at which the generator loses this reference rule."""
    if len(raw["src"]) > max_ops or len(raw["dst"]) > max_ops:
        return f"more than {max_ops} ops"
    try:
        rule = intern_entry(raw, terms)
    except (ValueError, KeyError) as error:
        return f"not expressible: {error}"
    key = canonical(rule, terms)
    if key in stages["kept"]:
        return "found"
    if not connected(rule.src, terms):
        return "disconnected source (outside the matcher)"
    if key not in stages["candidates"]:
        return "not a candidate (fingerprints differ: not an identity with relu uninterpreted, or too many outputs)"
    if key not in stages["proved"]:
        return "refuted by the prover"
    return "pruned (a special case of a smaller rule, or an unchanged output)"


def entry_rank(raw: Mapping[str, Any]) -> int:
    """The generator world a pattern-file entry lives in: 4 (images) if it has a conv, else its concat's rank, else
    2 (matrices)."""
    ops = [o for side in ("src", "dst") for o in raw[side]]
    if any(o["op"] == "conv2d" for o in ops):
        return 4
    ranks = [o["attrs"]["rank"] for o in ops if o["op"] == "concat"]
    return ranks[0] if ranks else 2


def known_answers(results: Sequence, config, path: Path | str = DATA_FILE) -> tuple[dict[int, str], int]:
    """For a generation run (`WorldResult`s of `config`): reference xfer -> 'found' or why not, and the number of
    generated rules the reference table lacks."""
    table = json.loads(Path(path).read_text())["rules"]
    by_rank = {r.rank: r for r in results if not r.world}  # TASO's worlds
    verdict, taso_keys = {}, {rank: set() for rank in by_rank}
    for raw in table:
        rank = entry_rank(raw)
        if rank not in by_rank:
            verdict[raw["xfer"]] = f"rank {rank} not generated"
            continue
        terms = Terms(World(rank, config.inputs), op_kinds(config.ops, rank))
        verdict[raw["xfer"]] = explain(raw, terms, config.max_ops, by_rank[rank].stages)
        try:
            taso_keys[rank].add(canonical(intern_entry(raw, terms), terms))
        except (ValueError, KeyError):
            pass
    kept = set().union(*(r.stages["kept"] for r in results))
    new = len(kept - set().union(*taso_keys.values()))
    return verdict, new
