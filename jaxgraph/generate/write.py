"""Proved rules as entries of the pattern file (`jaxgraph/data/*.json`), checked again by the loader's own path.

An entry has the loader's keys (`xfer`, `src`, `dst`, `mapped`; see `jaxgraph.pattern_data`): world input `i` is
external `-(i + 1)`, ops are listed in term order (arguments first), a split is one target op with two outputs.
Each entry is parsed and run by the loader's float64 NumPy evaluator on sampled shapes before it is written;
an entry that fails is dropped, counted and kept with the loader's reason. The proof is exact in the world, whose
tensors all have sides `n`; the loader samples each input's sides independently, so it refuses a rule true only
when sides the source leaves free are equal (a matmul of concats whose blocks line up only on square inputs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from jaxgraph.generate._prune import Candidate
from jaxgraph.generate.enumerate import INPUT, Terms
from jaxgraph.pattern_data import check_numerics, parse_pattern, sample_shapes

FIRST_XFER = 1000  # generated rules are numbered from here, clear of TASO's ids 0-150


def _side(ops: frozenset[int], terms: Terms) -> tuple[list[dict[str, Any]], dict[int, list[int]]]:
    order = sorted(ops)
    position = {t: k for k, t in enumerate(order)}
    tensor: dict[int, list[int]] = {}
    entries = []
    for t in order:
        kind, args, _ = terms.entries[t]
        spec = terms.kinds[kind]
        reads = [[-(a + 1), 0] if terms.entries[a][0] == INPUT else tensor[a] for a in args]
        attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in spec.attrs}
        entries.append({"op": spec.op, "inputs": reads, "attrs": attrs})
        if spec.op == "split":
            for j, part in enumerate(terms.parts(t)):
                tensor[part] = [position[t], j]
        else:
            tensor[t] = [position[t], 0]
    return entries, tensor


def entry(rule: Candidate, terms: Terms, xfer: int) -> dict[str, Any]:
    """One rule as a pattern-file entry."""
    src, src_tensor = _side(rule.src, terms)
    dst, dst_tensor = _side(rule.dst, terms)
    mapped = [[src_tensor[s], dst_tensor[d]] for s, d in rule.mapped]
    return {"xfer": xfer, "src": src, "dst": dst, "mapped": mapped}


def loader_error(raw: dict[str, Any], checks: int = 2) -> str | None:
    """Why the loader refuses the entry (its parser, or its float64 check on `checks` sampled shapes), or None
    if it accepts it."""
    try:
        pattern = parse_pattern(raw)
        rng = np.random.default_rng(pattern.xfer)
        for _ in range(checks):
            shapes = sample_shapes(pattern, rng)
            if shapes is None:
                return "no sampled input shapes make both sides well typed"
            check_numerics(pattern, rng, shapes)
    except ValueError as error:
        return str(error)
    return None


def describe(raw: dict[str, Any]) -> str:
    """A pattern-file entry as one line, each mapped source tensor `->` its target (`x1` is external -1, a split
    part `split0(...)[j]`): for reports."""
    def term(side: list[dict[str, Any]], tensor: list[int]) -> str:
        k, j = tensor
        if k < 0:
            return f"x{-k}"
        op = side[k]
        name = op["op"] + (str(op["attrs"]["axis"]) if op["op"] in ("concat", "split") else "")
        name += "_relu" if op["attrs"].get("activation") == "relu" else ""
        if op["op"] == "conv2d":
            name = f"conv{op['attrs']['kernel'][0]}_{op['attrs']['padding'].lower()}" + name[6:]
        text = f"{name}({', '.join(term(side, t) for t in op['inputs'])})"
        return f"{text}[{j}]" if op["op"] == "split" else text

    return "; ".join(f"{term(raw['src'], s)} -> {term(raw['dst'], d)}" for s, d in raw["mapped"])


def write_rules(entries: Sequence[dict[str, Any]], path: Path | str, source: str) -> None:
    """Write the pattern file: one entry per line, as the shipped table."""
    lines = ",\n".join(json.dumps(e, separators=(",", ":")) for e in entries)
    Path(path).write_text(f'{{"source": {json.dumps(source)},\n"rules": [\n{lines}\n]}}\n')

