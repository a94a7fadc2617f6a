"""Candidate rules from fingerprint groups, and TASO's pruning of redundant ones.

A candidate pairs two graphs of one fingerprint group, outputs matched by fingerprint: the source may not contain
a split (the pattern format allows split in targets only), the target may read only inputs the source reads, and
the source must be connected through its ops and inputs (the matcher needs a bounded match). TASO's pruning then
drops, in order: rules equal to a kept one up to a renaming of the inputs; rules that map an output to the same
term (the rewrite leaves it unchanged, so the rule is a larger copy of the rule without it); rules whose sides
share an op over the same world inputs (a special case of the rule with that op's output as an input); and rules
whose sides make a mapped output with the same op from the same inputs but one (a smaller rule in a context).
Graphs in which two tensors are equal were already dropped before pairing (TASO drops them while enumerating).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from jaxgraph.generate.enumerate import INPUT, SPLIT_PART, Terms, connected, outputs
from jaxgraph.generate.verify import Prover


@dataclass(frozen=True)
class Candidate:
    """A rule over interned terms: source and target op sets, and (source tensor, target tensor) pairs."""

    src: frozenset[int]
    dst: frozenset[int]
    mapped: tuple[tuple[int, int], ...]


def _inputs(graph: frozenset[int], terms: Terms) -> frozenset[int]:
    return frozenset().union(*(terms.inputs_of(t) for t in graph))


def candidates(groups: Iterable[Sequence[frozenset[int]]], terms: Terms, key: Callable[[int], object],
               require_connected: bool = True) -> list[Candidate]:
    """Every ordered pair of graphs of a group that can be a rule, outputs matched by sorting on `key`."""
    result = []
    for group in groups:
        facts = []
        for graph in group:
            outs = sorted(outputs(graph, terms), key=lambda t: (key(t), t))
            facts.append((graph, outs, any(terms.is_split(t) for t in graph), _inputs(graph, terms),
                          connected(graph, terms) if require_connected else True))
        for (src, so, split, ins, joined), (dst, do, _, dins, _) in itertools.permutations(facts, 2):
            if not split and joined and dins <= ins and len(so) == len(do):
                result.append(Candidate(src, dst, tuple(zip(so, do))))
    return result


def proved(candidate: Candidate, prover: Prover) -> bool:
    """Whether every mapped pair has equal exact values (see `verify` for the error bound)."""
    return all(prover.key(s) == prover.key(d) for s, d in candidate.mapped)


class Canon:
    """Canonical forms of rules over one term table, with every renamed term tree memoised (a term recurs in
    many candidates and renamings)."""

    def __init__(self, terms: Terms) -> None:
        self.terms = terms
        self.memo: dict[tuple[int, tuple[int, ...]], tuple] = {}

    def tree(self, tensor: int, names: dict[int, int]) -> tuple:
        """The term as nested tuples, inputs renamed by `names`, add and mul arguments sorted."""
        terms = self.terms
        key = (tensor, tuple(names[i] for i in sorted(terms.inputs_of(tensor))))
        if key not in self.memo:
            kind, args, size = terms.entries[tensor]
            if kind == INPUT:
                form: tuple = ("in", names[tensor])
            elif kind == SPLIT_PART:
                form = ("part", size, self.tree(args[0], names))
            else:
                children = [self.tree(a, names) for a in args]
                spec = terms.kinds[kind]
                if spec.commutative:
                    children.sort()
                form = (spec.name, spec.attrs, tuple(children))  # a split's size is left out, as in the file
            self.memo[key] = form
        return self.memo[key]

    def __call__(self, candidate: Candidate) -> tuple:
        """The rule as nested terms, minimised over renamings of its inputs: equal keys, equal rules up to
        renaming."""
        used = sorted(_inputs(candidate.src, self.terms))
        best = None
        for order in itertools.permutations(range(len(used))):
            names = dict(zip(used, order))
            form = tuple(sorted((self.tree(s, names), self.tree(d, names)) for s, d in candidate.mapped))
            if best is None or form < best:
                best = form
        return best  # type: ignore[return-value]


def canonical(candidate: Candidate, terms: Terms) -> tuple:
    """The canonical form of one rule (see `Canon`)."""
    return Canon(terms)(candidate)


def common_subgraph(candidate: Candidate, terms: Terms) -> bool:
    """TASO's first pruning rule: both sides compute one op (same kind) from the same inputs of the world, so the
    rule is a special case of the rule with that op's output as a fresh input."""
    inputs = range(terms.world.count)
    return any(all(a in inputs for a in terms.entries[t][1]) for t in candidate.src & candidate.dst)


def common_supergraph(candidate: Candidate, terms: Terms) -> bool:
    """TASO's second pruning rule: a mapped output is made on both sides by the same op kind whose arguments all
    but at most one are the same world input, so the rule is a smaller rule under a common context."""
    inputs = range(terms.world.count)
    for s, d in candidate.mapped:
        (ks, sargs, _), (kd, dargs, _) = terms.entries[s], terms.entries[d]
        if ks == kd and ks >= 0 and sum(not (a == b and a in inputs) for a, b in zip(sargs, dargs)) <= 1:
            return True
    return False


def prune(rules: Sequence[Candidate], terms: Terms, keys: Sequence[tuple] | None = None
          ) -> tuple[list[Candidate], dict[str, int]]:
    """TASO's pruning; returns the kept rules (in a canonical order) and the count dropped by each stage.
    `keys` are the rules' canonical forms if already computed."""
    if keys is None:
        canon = Canon(terms)
        keys = [canon(rule) for rule in rules]
    unique: dict[tuple, Candidate] = {}
    for key, rule in zip(keys, rules):
        unique.setdefault(key, rule)
    renamed = len(rules) - len(unique)
    kept = [r for _, r in sorted(unique.items()) if all(s != d for s, d in r.mapped)]
    counts = {"renaming": renamed, "unchanged output": len(unique) - len(kept)}
    below = [r for r in kept if not common_subgraph(r, terms)]
    counts["common subgraph"] = len(kept) - len(below)
    above = [r for r in below if not common_supergraph(r, terms)]
    counts["common supergraph"] = len(below) - len(above)
    return above, counts
