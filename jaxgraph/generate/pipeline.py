"""The generator end to end: enumerate, fingerprint, group, verify, prune, check shapes and the loader, write.

One world per rank (2: matmul, add, mul, relu, concat, split over `(n, n)` tensors; 4: the same with conv2d in
place of matmul over `(n, n, 3, 3)` tensors, TASO's setup), then the named `EXTRA_WORLDS` asked for (biased convs:
`bias3`, `bias1`). Each finished world is checkpointed next to the
output file (`OUT.ckpt/`, with the configuration it was made for); a rerun with the same configuration resumes
after the last finished world, and a different configuration is refused rather than mixed in.
"""

from __future__ import annotations

import json
import pickle
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from jaxgraph.generate._fingerprint import fingerprint
from jaxgraph.generate._prune import Candidate, Canon, candidates, proved, prune
from jaxgraph.generate._shapes import shape_error
from jaxgraph.generate.enumerate import EXTRA_WORLDS, TASO_OPS, Terms, World, enumerate_graphs, op_kinds, outputs
from jaxgraph.generate.verify import Prover, relu_axioms_hold
from jaxgraph.generate.write import FIRST_XFER, entry, loader_error, write_rules

STAGES = ("graphs", "tensors", "equal tensors", "candidates", "refuted", "proved", "renaming", "unchanged output",
          "common subgraph", "common supergraph", "shape-specific", "loader rejected", "rules")
# Bumped when a world's result changes meaning (2: the shape check; rejected rules and CPU seconds recorded; 3:
# named extra worlds; 4: 8 loader checks), so a checkpoint of an older generator is refused rather than mixed in.
CHECKPOINT_FORMAT = 4
LOADER_CHECKS = 8  # sampled shapes per rule in the loader check (image sizes vary there, not in the shape check)


@dataclass(frozen=True)
class Config:
    """What a generation run enumerates: ops, size bound, input tensors per world, ranks (TASO's worlds), outputs
    per graph, the seed of every random draw and the extra worlds (`EXTRA_WORLDS` names)."""

    ops: tuple[str, ...] = TASO_OPS
    max_ops: int = 3
    inputs: int = 4
    ranks: tuple[int, ...] = (2, 4)
    max_outputs: int = 2
    seed: int = 0
    worlds: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_ops < 1:
            raise ValueError(f"max_ops must be at least 1, got {self.max_ops}")
        if self.max_outputs < 1:
            raise ValueError(f"max_outputs must be at least 1, got {self.max_outputs}")
        for rank in self.ranks:
            World(rank, self.inputs)
            op_kinds(self.ops, rank)
        unknown = [w for w in self.worlds if w not in EXTRA_WORLDS]
        if unknown:
            raise ValueError(f"unknown worlds {unknown}; the extra worlds are {list(EXTRA_WORLDS)}")


@dataclass
class WorldResult:
    """One world's rules (canonical forms and pattern entries without xfer ids), stage counts and times, and the
    proved rules the loader refused with its reasons."""

    rank: int
    world: str = ""  # an `EXTRA_WORLDS` name; "" for TASO's world of this rank
    keys: list[tuple] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # wall seconds per stage
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # this process's CPU seconds (all threads)
    stages: dict[str, set] = field(default_factory=dict)  # canonical forms at candidate / proved / kept
    rejected: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # entries the loader refused, why


def _tensors(graph: frozenset[int], terms: Terms) -> list[int]:
    return [p for t in graph for p in (terms.parts(t) if terms.is_split(t) else (t,))]


class _Clock:
    """Wall and process CPU seconds of consecutive stages, recorded on a `WorldResult`."""

    def __init__(self, result: WorldResult) -> None:
        self.result = result
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self, stage: str) -> None:
        """Record the stage that ends now; the next starts."""
        wall, cpu = time.perf_counter(), time.process_time()
        self.result.seconds[stage], self.result.cpu_seconds[stage] = wall - self.wall, cpu - self.cpu
        self.wall, self.cpu = wall, cpu


def run_world(config: Config, rank: int | str, progress: Callable[[str, int, int], None] | None = None
              ) -> WorldResult:
    """Generate one world's rules: TASO's world of a `rank`, or the extra world of that name. ValueError if no op
    of the set types on the world's inputs."""
    world = World(rank, config.inputs) if isinstance(rank, int) else EXTRA_WORLDS[rank]
    kinds = world.kinds(config.ops)
    if not kinds:
        raise ValueError(f"none of {list(config.ops)} applies to rank-{world.rank} tensors")
    terms = Terms(world, kinds)
    result = WorldResult(world.rank, "" if isinstance(rank, int) else rank)
    rank = world.rank
    clock = _Clock(result)
    levels = enumerate_graphs(terms, config.max_ops, (lambda k: progress(f"enumerate rank {rank}", k, 0))
                              if progress else None)
    outs = {g: outputs(g, terms) for level in levels for g in level}
    graphs = [g for g, o in outs.items() if len(o) <= config.max_outputs]
    result.counts["graphs"] = len(graphs)
    clock.lap("enumerate")

    tensors = sorted(set(range(world.count)) | {t for g in graphs for t in _tensors(g, terms)})
    result.counts["tensors"] = len(tensors)
    step = (lambda k: progress(f"fingerprint rank {rank}", k, len(tensors))) if progress else None
    prints = fingerprint(terms, tensors, seed=config.seed, progress=step)
    given = [prints[i] for i in range(world.count)]
    distinct = [g for g in graphs if len({prints[t] for t in _tensors(g, terms)}.union(given))
                == len(_tensors(g, terms)) + len(given)]
    result.counts["equal tensors"] = len(graphs) - len(distinct)
    groups: dict[tuple, list[frozenset[int]]] = defaultdict(list)
    for g in distinct:
        groups[tuple(sorted(prints[t] for t in outs[g]))].append(g)
    pairs = candidates([g for g in groups.values() if len(g) > 1], terms, prints.__getitem__)
    result.counts["candidates"] = len(pairs)
    clock.lap("fingerprint")

    if "relu" in config.ops and not relu_axioms_hold():
        raise RuntimeError("z3 refuted the relu axioms the verifier relies on")
    prover = Prover(terms, config.seed)
    good = []
    for k, pair in enumerate(pairs):
        if proved(pair, prover):
            good.append(k)
        if progress and (k + 1) % 1000 == 0:
            progress(f"verify rank {rank}", 1000, len(pairs))
    result.counts["refuted"] = len(pairs) - len(good)
    result.counts["proved"] = len(good)
    clock.lap("verify")

    canon = Canon(terms)
    keys = [canon(p) for p in pairs]
    result.stages["candidates"] = set(keys)
    result.stages["proved"] = {keys[k] for k in good}
    kept, counts = prune([pairs[k] for k in good], terms, [keys[k] for k in good])
    result.counts.update(counts)
    clock.lap("prune")

    raws = [entry(rule, terms, 0) for rule in kept]
    specific = [shape_error(raw, world, config.seed) for raw in raws]
    result.rejected += [(raw, error) for raw, error in zip(raws, specific) if error is not None]
    result.counts["shape-specific"] = len(result.rejected)
    clock.lap("shape check")

    for rule, raw, error in zip(kept, raws, specific):
        if error is None:
            error = loader_error(raw, LOADER_CHECKS)
            if error is None:
                result.keys.append(canon(rule))
                result.entries.append(raw)
            else:
                result.rejected.append((raw, error))
    result.counts["loader rejected"] = len(kept) - len(result.entries) - result.counts["shape-specific"]
    result.counts["rules"] = len(result.entries)
    result.stages["kept"] = set(result.keys)
    clock.lap("loader check")
    return result


def _checkpoint(out: Path) -> Path:
    return out.with_name(out.name + ".ckpt")


def generate(config: Config, out: Path | str, progress: Callable[[str, int, int], None] | None = None,
             resume: bool = True) -> list[WorldResult]:
    """Run every world of `config`, write the pattern file `out` (a rule found in two worlds once), and return
    each world's result. Finished worlds are checkpointed in `OUT.ckpt/`; ValueError if that checkpoint was made
    for another configuration or by another checkpoint format (`CHECKPOINT_FORMAT`)."""
    out = Path(out)
    folder = _checkpoint(out)
    stamp = json.dumps(dict(asdict(config), checkpoint_format=CHECKPOINT_FORMAT), sort_keys=True)
    if folder.exists() and resume:
        previous = (folder / "config.json").read_text() if (folder / "config.json").exists() else ""
        if previous != stamp:
            raise ValueError(f"checkpoint {folder} was made for another configuration or checkpoint format "
                             f"({previous or 'none'}); "
                             "remove it or use the same options")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(stamp)
    results = []
    for rank in (*config.ranks, *config.worlds):
        saved = folder / (f"rank{rank}.pkl" if isinstance(rank, int) else f"{rank}.pkl")
        if resume and saved.exists():
            results.append(pickle.loads(saved.read_bytes()))
            continue
        result = run_world(config, rank, progress)
        saved.write_bytes(pickle.dumps(result))
        results.append(result)
    unique: dict[tuple, dict[str, Any]] = {}
    for r in results:  # rules over add, mul and relu alone come out of every world: written once
        for key, raw in zip(r.keys, r.entries):
            unique.setdefault(key, raw)
    entries = [dict(e, xfer=FIRST_XFER + k) for k, e in enumerate(unique.values())]
    write_rules(entries, out, f"jaxgraph.generate: ops {list(config.ops)}, max_ops {config.max_ops}, "
                              f"{config.inputs} inputs per world, ranks {list(config.ranks)}, seed {config.seed}"
                              + (f", worlds {list(config.worlds)}" if config.worlds else ""))
    return results


__all__ = ["Candidate", "Config", "STAGES", "WorldResult", "generate", "run_world"]
