"""jaxgraph.generate: enumeration, fingerprints, the prover, pruning, the written file, the CLI and resuming."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import chex
import numpy as np
import pytest

from jaxgraph.generate import Config, describe, generate, relu_axioms_hold, run_world
from jaxgraph.generate import pipeline as pipeline_module
from jaxgraph.generate.__main__ import main
from jaxgraph.generate._fingerprint import fingerprint
from jaxgraph.generate._prune import Candidate, canonical, proved, prune
from jaxgraph.generate.enumerate import SPLIT_PART, Terms, World, enumerate_graphs, infer, op_kinds, split_parts
from jaxgraph.generate.verify import Prover
from jaxgraph.pattern_data import load_patterns, parse_pattern, run_side
from jaxgraph.patterns import pattern_rules

OPS = ("matmul", "add", "mul", "relu", "concat", "split")


def _terms(rank=2, inputs=3, ops=OPS):
    return Terms(World(rank, inputs), op_kinds(ops, rank))


def _t(terms, name, *args, size=0):
    """Intern an op term by kind name (a small expression builder for the tests)."""
    index = next(i for i, k in enumerate(terms.kinds) if k.name == name)
    kind = terms.kinds[index]
    shape = infer(kind, [terms.shapes[a] for a in args], size)
    assert shape is not None, (name, args)
    term = terms.intern((index, tuple(sorted(args) if kind.commutative else args), size), shape)
    if kind.op == "split":
        parts = [terms.intern((SPLIT_PART, (term,), j), s) for j, s in enumerate(split_parts(kind, shape, size))]
        return term, parts
    return term


def test_enumeration_counts_match_hand_counts():
    # one op over two (n, n) inputs: add modulo commutativity {x+x, x+y, y+y}, relu of each input, matmul ordered.
    for ops, expected in ((("add",), 3), (("relu",), 2), (("matmul",), 8), (("add", "relu"), 5)):
        levels = enumerate_graphs(_terms(inputs=2, ops=ops), 1)
        chex.assert_equal(len(levels[0]), expected)
    # two relus over one input: relu(x), then {relu(x), relu(relu(x))}; a graph never repeats a term.
    levels = enumerate_graphs(_terms(inputs=1, ops=("relu",)), 2)
    chex.assert_equal([len(level) for level in levels], [1, 1])


def test_fingerprints_equal_for_identities_and_differ_otherwise():
    terms = _terms(inputs=3)
    x, y, z = 0, 1, 2
    left = _t(terms, "add", _t(terms, "add", x, y), z)
    right = _t(terms, "add", x, _t(terms, "add", y, z))
    ab = _t(terms, "matmul_none", x, y)
    ba = _t(terms, "matmul_none", y, x)
    # x@z + y@z = concat(x, y, axis 1) @ concat(z, z, axis 0)
    block = _t(terms, "matmul_none", _t(terms, "concat1", x, y), _t(terms, "concat0", z, z))
    sum_ = _t(terms, "add", _t(terms, "matmul_none", x, z), _t(terms, "matmul_none", y, z))
    fused = _t(terms, "matmul_relu", x, y)
    relu_after = _t(terms, "relu", ab)
    twice = _t(terms, "relu", relu_after)
    prints = fingerprint(terms, [left, right, ab, ba, block, sum_, fused, relu_after, twice])
    chex.assert_equal(prints[left], prints[right])
    chex.assert_equal(prints[block], prints[sum_])
    chex.assert_equal(prints[fused], prints[relu_after])
    chex.assert_equal(prints[twice], prints[relu_after])
    assert prints[ab] != prints[ba]
    assert prints[fused] != prints[ab]


def test_fingerprint_of_convolutions_and_splits():
    terms = _terms(rank=4, inputs=3, ops=("conv2d", "add", "concat", "split"))
    x, w, v = 0, 1, 2
    for pad in ("same", "valid"):
        two = _t(terms, "add", _t(terms, f"conv3s1_{pad}_none", x, w), _t(terms, f"conv3s1_{pad}_none", x, v))
        one = _t(terms, f"conv3s1_{pad}_none", x, _t(terms, "add", w, v))
        stacked = _t(terms, f"conv3s1_{pad}_none", x, _t(terms, "concat0", w, v))
        _, parts = _t(terms, "split1", stacked, size=1)
        alone = _t(terms, f"conv3s1_{pad}_none", x, w)
        prints = fingerprint(terms, [two, one, parts[0], alone, parts[1]])
        chex.assert_equal(prints[two], prints[one])
        chex.assert_equal(prints[parts[0]], prints[alone])
        assert prints[parts[1]] != prints[alone]


def test_fingerprint_of_a_tensor_does_not_depend_on_its_batch():
    """Each term is computed once in a group of its kind, padded to a power of two: fingerprinting every tensor of
    a world together gives each the fingerprint it gets alone."""
    terms = _terms(inputs=2)
    levels = enumerate_graphs(terms, 2)
    tensors = sorted({t for level in levels for g in level for t in g if not terms.is_split(t)})
    together = fingerprint(terms, tensors)
    for t in tensors[::max(1, len(tensors) // 12)]:
        chex.assert_equal(fingerprint(terms, [t])[t], together[t])
    assert len(set(together.values())) > len(tensors) // 2


def test_the_package_face_loads_the_generator_on_use():
    code = ("import sys, jaxgraph; print('jaxgraph.generate' in sys.modules); "
            "print(jaxgraph.generate.generate.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-2000:]
    chex.assert_equal(done.stdout.split(), ["False", "jaxgraph.generate.pipeline"])


def _pair(terms, src, dst):
    return Candidate(frozenset(terms.ops_of(src)), frozenset(terms.ops_of(dst)), ((src, dst),))


def test_prover_rejects_a_planted_wrong_candidate():
    """relu(x) + relu(y) = relu(x + y) holds on every nonnegative input, so a fingerprint drawn there would
    pair them; the prover must refute it, and accept the true identities next to it."""
    terms = _terms(inputs=2)
    x, y = 0, 1
    wrong = _pair(terms, _t(terms, "add", _t(terms, "relu", x), _t(terms, "relu", y)),
                  _t(terms, "relu", _t(terms, "add", x, y)))
    raw = {"xfer": 0, "src": [{"op": "relu", "inputs": [[-1, 0]], "attrs": {}},
                              {"op": "relu", "inputs": [[-2, 0]], "attrs": {}},
                              {"op": "add", "inputs": [[0, 0], [1, 0]], "attrs": {}}],
           "dst": [{"op": "add", "inputs": [[-1, 0], [-2, 0]], "attrs": {}},
                   {"op": "relu", "inputs": [[0, 0]], "attrs": {}}], "mapped": [[[2, 0], [1, 0]]]}
    pattern = parse_pattern(raw)
    rng = np.random.default_rng(0)
    inputs = {-1: rng.uniform(0, 1, (3, 3)), -2: rng.uniform(0, 1, (3, 3))}
    np.testing.assert_allclose(run_side(pattern.src, inputs)[(2, 0)], run_side(pattern.dst, inputs, {})[(1, 0)])
    prover = Prover(terms, seed=0)
    assert not proved(wrong, prover)
    fused = _pair(terms, _t(terms, "relu", _t(terms, "matmul_none", x, y)), _t(terms, "matmul_relu", x, y))
    assert proved(fused, prover)


def test_no_unverified_rule_is_written(tmp_path, monkeypatch):
    """With fingerprints that only see a tensor's shape, inputs and op count (planted collisions: x + y, x * y and
    relu(x) + relu(y) against relu(x + y) all pair up), the prover refutes the wrong candidates and every written
    rule is one an honest run writes too."""
    config = Config(ops=("add", "mul", "relu"), max_ops=2, inputs=2, ranks=(2,))
    honest = generate(config, tmp_path / "honest.json")[0]
    real = pipeline_module.fingerprint

    def colliding(terms, tensors, **kwargs):
        coarse = {t: (fp[0], tuple(sorted(terms.inputs_of(t))), len(terms.ops_of(t)))
                  for t, fp in real(terms, tensors, **kwargs).items()}
        return coarse

    monkeypatch.setattr(pipeline_module, "fingerprint", colliding)
    planted = generate(config, tmp_path / "planted.json")[0]
    assert planted.counts["refuted"] > 0
    assert planted.counts["rules"] > 0
    assert set(planted.keys) <= set(honest.keys)
    chex.assert_equal(len(load_patterns(tmp_path / "planted.json")), planted.counts["rules"])


def test_pruning_renaming_common_subgraph_and_supergraph():
    terms = _terms(inputs=4)
    x, y, z, w = 0, 1, 2, 3
    # (x + y) + z -> x + (y + z), and the same rule over other names: one survives renaming.
    a = _pair(terms, _t(terms, "add", _t(terms, "add", x, y), z), _t(terms, "add", x, _t(terms, "add", y, z)))
    b = _pair(terms, _t(terms, "add", _t(terms, "add", z, w), x), _t(terms, "add", z, _t(terms, "add", w, x)))
    chex.assert_equal(canonical(a, terms), canonical(b, terms))
    # relu(x) @ y + relu(x) @ z -> relu(x) @ (y + z): relu(x) on both sides, the rule u @ y + u @ z -> u @ (y + z)
    # with u = relu(x).
    r = _t(terms, "relu", x)
    below = _pair(terms, _t(terms, "add", _t(terms, "matmul_none", r, y), _t(terms, "matmul_none", r, z)),
                  _t(terms, "matmul_none", r, _t(terms, "add", y, z)))
    # relu(x @ y) + z -> matmul_relu(x, y) + z: the fusion rule under the context "+ z".
    above = _pair(terms, _t(terms, "add", _t(terms, "relu", _t(terms, "matmul_none", x, y)), z),
                  _t(terms, "add", _t(terms, "matmul_relu", x, y), z))
    prover = Prover(terms, seed=1)
    assert all(proved(c, prover) for c in (a, b, below, above))
    kept, counts = prune([a, b, below, above], terms)
    chex.assert_equal(counts, {"renaming": 1, "unchanged output": 0, "common subgraph": 1, "common supergraph": 1})
    chex.assert_equal(len(kept), 1)


def test_relu_axioms_proved_by_z3():
    assert relu_axioms_hold()


def test_generated_file_loads_and_becomes_rules(tmp_path):
    out = tmp_path / "rules.json"
    results = generate(Config(ops=OPS, max_ops=2, inputs=2, ranks=(2,)), out)
    patterns = load_patterns(out)
    chex.assert_equal(len(patterns), results[0].counts["rules"])
    assert len(patterns) > 10
    assert len(pattern_rules(patterns)) == len(patterns)
    # the associativity of add and the fusion of relu into matmul are among them
    ops = {tuple(o.op for o in p.src) + ("->",) + tuple(o.op for o in p.dst) for p in patterns}
    assert ("matmul", "relu", "->", "matmul") in ops
    assert ("add", "add", "->", "add", "add") in ops


def test_bad_input_is_a_named_error(tmp_path, capsys):
    with pytest.raises(ValueError, match="softmax"):
        Config(ops=("softmax",))
    with pytest.raises(ValueError, match="max_ops"):
        Config(max_ops=0)
    with pytest.raises(ValueError, match="none of"):
        generate(Config(ops=("matmul",), max_ops=1, inputs=2, ranks=(4,)), tmp_path / "r.json")
    chex.assert_equal(main(["--ops", "softmax", "--out", str(tmp_path / "r.json")]), 2)
    chex.assert_equal(main(["--max-ops", "0", "--out", str(tmp_path / "r.json")]), 2)
    err = capsys.readouterr().err.strip().splitlines()
    chex.assert_equal(len(err), 2)


def test_cli_writes_and_resumes_and_refuses_another_configuration(tmp_path, capsys, monkeypatch):
    out = tmp_path / "rules.json"
    argv = ["--ops", "add,relu", "--max-ops", "2", "--inputs", "2", "--ranks", "2", "--out", str(out), "--quiet"]
    chex.assert_equal(main(argv), 0)
    first = json.loads(out.read_text())
    out.unlink()

    def fail(*args, **kwargs):
        raise AssertionError("a finished world was generated again")

    monkeypatch.setattr(pipeline_module, "run_world", fail)
    chex.assert_equal(main(argv), 0)  # resumed from the checkpoint
    chex.assert_equal(json.loads(out.read_text()), first)
    chex.assert_equal(main(argv[:-1] + ["--seed", "5", "--quiet"]), 2)  # another configuration: refused
    assert "another configuration" in capsys.readouterr().err


@pytest.mark.slow
def test_taso_operator_set_rediscovers_taso_table(tmp_path):
    """The full run on TASO's operator set and size bound: at least 95% of TASO's generated xfers that the worlds
    can express are found, and the file loads."""
    from jaxgraph.generate.known import known_answers

    config = Config(max_ops=3, inputs=4)
    results = generate(config, tmp_path / "rules.json")
    verdict, _ = known_answers(results, config)
    expressible = [x for x, v in verdict.items() if not v.startswith(("not expressible", "more than", "disconnected"))]
    found = [x for x in expressible if verdict[x] == "found"]
    assert len(found) >= 0.95 * len(expressible), {x: verdict[x] for x in expressible if verdict[x] != "found"}
    written = set().union(*(set(r.keys) for r in results))  # a rule found in both worlds is written once
    chex.assert_equal(len(load_patterns(tmp_path / "rules.json", checks=1)), len(written))


def test_a_world_of_biased_convs_finds_the_fusions_at_both_strides(tmp_path):
    """Biased 1x1 convs and relu, 2 ops: by hand, the only identities are relu(conv(x, w, b)) = conv_relu(x, w, b)
    at stride 1 and 2, each rule in both directions (relu(conv_relu) = conv_relu is dropped with the graphs that
    hold two equal tensors, as TASO drops them). The rules load, biased, and run in the host matcher."""
    result = run_world(Config(ops=("conv2d", "relu"), max_ops=2, worlds=("bias1",)), "bias1")
    chex.assert_equal(result.counts["refuted"], 0)
    found = sorted((describe(raw), raw["src"][0]["attrs"]["stride"][0]) for raw in result.entries)
    chex.assert_equal(found, sorted((text, stride) for stride in (1, 2) for text in (
        "conv1_valid_relu(x1, x2, x5) -> relu(conv1_valid(x1, x2, x5))",
        "relu(conv1_valid(x1, x2, x5)) -> conv1_valid_relu(x1, x2, x5)")))
    path = tmp_path / "bias.json"
    path.write_text(json.dumps({"rules": [dict(raw, xfer=1000 + k) for k, raw in enumerate(result.entries)]}))
    patterns = load_patterns(path)
    assert all(len(p.src[0].inputs) == 3 for p in patterns)
    assert len(pattern_rules(patterns)) == 4
