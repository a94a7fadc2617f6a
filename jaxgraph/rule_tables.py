"""Rule tables side by side: a generated pattern file (`jaxgraph.generate`) against TASO's shipped table.

`table_keys` puts each entry of a pattern file in the generator's canonical form (minimised over renamings of its
inputs, add and mul modulo commutativity: `jaxgraph.generate.known`), so "is this generated rule in TASO's table"
is a set lookup. `generated_table` loads a generated file whole or restricted to the rules TASO's table lacks
(`restrict="new"`), dropping (and naming) any rule the loader's float64 check rejects.
`RuleTable` is one table as every method consumes it: host rules (`RULES`, then the file's data rules, as
`TASO_RULES` is `RULES` then TASO's) and the patterns equality saturation states in egglog (a whole generated
table of 10,618 rules fits: `jaxgraph.saturation`); `reachable` names the rules that can ever match in a graph's
e-graph: each source op's kind (op, inputs, constraints) must occur in the graph (or be a conv kind's fused or
biased form, or a concat or add that the hand rules make) or be made by a target op of a rule already kept (a
fixpoint), since an e-graph only ever holds the graph's nodes and what rules add.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from jaxgraph.graph import Graph
from jaxgraph.pattern_data import (
    DATA_FILE,
    PATTERN_OPS,
    UNARY_OPS,
    Pattern,
    PatternOp,
    conv_pads,
    load_patterns,
    parse_pattern,
)
from jaxgraph.patterns import pattern_rules
from jaxgraph.rules import RULES, Rule

RESTRICTIONS = ("all", "new")


def table_keys(entries: Sequence[Mapping[str, Any]], inputs: int = 6) -> dict[int, tuple | None]:
    """xfer id -> the entry's canonical key (equal for rules equal up to renaming of inputs and commutativity of
    add and mul), or None where the generator's worlds cannot express it (another kernel, stride or op, more than
    `inputs` inputs)."""
    from jaxgraph.generate._prune import canonical
    from jaxgraph.generate.enumerate import Terms, World, op_kinds
    from jaxgraph.generate.known import entry_rank, intern_entry

    terms = {rank: Terms(World(rank, inputs), op_kinds(tuple(PATTERN_OPS), rank)) for rank in (2, 4)}
    keys: dict[int, tuple | None] = {}
    for entry in entries:
        rank = entry_rank(entry)
        world = terms.get(rank)
        try:
            keys[int(entry["xfer"])] = None if world is None else (rank, canonical(intern_entry(entry, world), world))
        except (ValueError, KeyError):
            keys[int(entry["xfer"])] = None
    return keys


def op_key(op: PatternOp) -> tuple:
    """The kind of a pattern op: op, input count and constraints (what a node must have to match it)."""
    return op.op, len(op.inputs), op.attrs


def node_keys(graph: Graph) -> set[tuple]:
    """The kinds (`op_key`) of pattern ops that some node of `graph` meets (a conv may meet several paddings).
    ValueError for something that is not a `Graph`."""
    if not isinstance(graph, Graph):
        raise ValueError(f"expected a jaxgraph Graph, got {type(graph).__name__}")
    keys = set()
    for node in graph.nodes.values():
        shapes = [graph.shape(r) for r in node.inputs]
        if node.op == "matmul":
            keys.add(("matmul", 2, (("activation", node.attrs["activation"]),)))
        elif node.op == "conv2d" and node.attrs["groups"] == 1 and len(shapes[0]) == 4 and len(shapes[1]) == 4:
            kernel, stride = tuple(shapes[1][2:]), tuple(node.attrs["stride"])
            for padding in ("SAME", "VALID", "HALF"):
                if tuple(node.attrs["pads"]) == conv_pads(padding, shapes[0][2:], kernel, stride):
                    keys.add(("conv2d", len(shapes), (("activation", node.attrs["activation"]), ("kernel", kernel),
                                                      ("padding", padding), ("stride", stride))))
        elif node.op in ("add", "mul") and shapes[0] == shapes[1]:
            keys.add((node.op, 2, ()))
        elif node.op in UNARY_OPS:
            keys.add((node.op, 1, ()))
        elif node.op == "concat":
            rank = len(shapes[0])
            keys.add(("concat", len(shapes), (("axis", node.attrs["axis"] % rank), ("rank", rank))))
        elif node.op == "transpose":
            keys.add(("transpose", 1, (("perm", tuple(node.attrs["perm"])),)))
    return keys


def _entries(path: Path | str) -> list[dict[str, Any]]:
    return json.loads(Path(path).read_text())["rules"]


def new_xfers(path: Path | str, reference: Path | str = DATA_FILE) -> frozenset[int]:
    """The xfer ids of `path`'s rules that the `reference` table (default: TASO's) lacks up to renaming of inputs
    and commutativity of add and mul."""
    known = {k for k in table_keys(_entries(reference)).values() if k is not None}
    return frozenset(x for x, k in table_keys(_entries(path)).items() if k is None or k not in known)


def generated_table(path: Path | str, restrict: str = "all", checks: int = 16) -> tuple[tuple[Pattern, ...],
                                                                                    tuple[int, ...]]:
    """The generated pattern file's rules that pass the loader's check (both sides run in float64 on `checks`
    sampled shapes: `jaxgraph.generate.write.loader_error`), all of them or, with `restrict="new"`, those TASO's
    table lacks (`new_xfers`); and the xfer ids the check rejected (dropped: a rule proved on the generator's
    square worlds can be wrong on other shapes). ValueError for another `restrict`; FileNotFoundError for a
    missing file."""
    from jaxgraph.generate.write import loader_error

    if restrict not in RESTRICTIONS:
        raise ValueError(f"restrict must be one of {RESTRICTIONS}, got {restrict!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"pattern file {path} does not exist")
    keep = new_xfers(path) if restrict == "new" else None
    patterns, rejected = [], []
    for raw in _entries(path):
        if keep is not None and raw["xfer"] not in keep:
            continue
        if loader_error(raw, checks) is None:
            patterns.append(parse_pattern(raw))
        else:
            rejected.append(int(raw["xfer"]))
    return tuple(patterns), tuple(rejected)


@dataclass(frozen=True)
class RuleTable:
    """One rule table as the searches (`rules`) and equality saturation (`patterns`, beside its hand rules) use
    it; `new` are the xfer ids of rules TASO's table lacks."""

    name: str
    rules: tuple[Rule, ...]
    patterns: tuple[Pattern, ...]
    new: frozenset[int]
    rejected: tuple[int, ...] = ()  # xfer ids of the file that the loader's check rejected

    def matching(self, graphs: Sequence[Any]) -> frozenset[int]:
        """The xfer ids of this table's data rules that match at least one of `graphs` somewhere."""
        from jaxgraph.locations import LocationIndex

        return frozenset(self.rules[x].pattern.xfer for g in graphs
                         for x, _ in LocationIndex.build(self.rules, g).matches() if self.rules[x].pattern is not None)

    def restricted(self, xfers: frozenset[int]) -> RuleTable:
        """The table with only the data rules of `xfers` (hand rules kept), such as those `reachable` from a
        graph."""
        keep = tuple(r for r in self.rules if r.pattern is None or r.pattern.xfer in xfers)
        patterns = tuple(p for p in self.patterns if p.xfer in xfers)
        return RuleTable(f"{self.name} (matching)", keep, patterns, self.new & xfers, self.rejected)

    def reachable(self, graphs: Sequence[Graph]) -> frozenset[int]:
        """The xfer ids of this table's data rules that can match in the e-graph of any of `graphs`: every source
        op's kind occurs in one of the graphs, is a conv kind there with the other activation or bias (the hand
        rules' fusions make those), a concat or add the hand rules' merges make where the graphs have a matmul or
        a conv, or is made by a target op of a rule kept before (to a fixpoint)."""
        present: set[tuple] = set().union(*(node_keys(g) for g in graphs))
        for op, _, attrs in [k for k in present if k[0] == "conv2d"]:
            for activation in ("none", "relu"):
                for inputs in (2, 3):
                    present.add((op, inputs, (("activation", activation),) + attrs[1:]))
        ops = {k[0] for k in present}  # the hand merges' concats of weights and biases, and MergeConvsIntoAdd's add
        made = {"matmul": ((2, 1), (1, 0)), "conv2d": ((4, 0), (4, 1), (1, 0))}
        present.update(("concat", 2, (("axis", axis), ("rank", rank))) for op in ops & made.keys()
                       for rank, axis in made[op])
        if "conv2d" in ops:
            present.add(("add", 2, ()))
        kept: set[int] = set()
        while True:
            more = [p for p in self.patterns if p.xfer not in kept and all(op_key(o) in present for o in p.src)]
            if not more:
                return frozenset(kept)
            for p in more:
                kept.add(p.xfer)
                present.update(op_key(o) for o in p.dst if o.op != "split")

    def new_rewrites(self, history: Sequence[tuple[int, Any]]) -> list[str]:
        """The names of the rules in a search `history` ((rule index, location) pairs) that TASO's table lacks."""
        return [self.rules[x].name for x, _ in history
                if self.rules[x].pattern is not None and self.rules[x].pattern.xfer in self.new]


def taso_table() -> RuleTable:
    """TASO's table: `RULES`, then the data rules of the xfers no hand rule covers (`TASO_RULES`); saturation
    states all of TASO's data rules (beside `HAND_RULES`, as `saturation.table_rules`)."""
    from jaxgraph.patterns import taso_rules

    return RuleTable("taso", taso_rules(), load_patterns(), frozenset())


def generated_rule_table(path: Path | str, restrict: str = "all") -> RuleTable:
    """A generated file as a table: `RULES` then its rules that pass the loader's check (`generated_table`), the
    xfers TASO's table lacks marked new."""
    patterns, rejected = generated_table(path, restrict)
    new = new_xfers(path) & {p.xfer for p in patterns}
    return RuleTable("generated" if restrict == "all" else f"generated ({restrict})", RULES + pattern_rules(patterns),
                     patterns, frozenset(new), rejected)


