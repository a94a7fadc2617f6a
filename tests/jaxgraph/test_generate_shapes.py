"""jaxgraph.generate._shapes: a rule proved at square shapes but wrong at others is caught; general rules pass."""

from __future__ import annotations

import json

import chex
import numpy as np
import pytest

from jaxgraph.generate import Config, World, run_world
from jaxgraph.generate._shapes import generic_shapes, shape_error
from jaxgraph.generate.write import describe
from jaxgraph.pattern_data import DATA_FILE, check_numerics, parse_pattern, sample_shapes


def _op(op, inputs, **attrs):
    return {"op": op, "inputs": [list(t) for t in inputs], "attrs": attrs}


# [a | b] @ [c ; d] -> [b | a] @ [d ; c]: a @ c + b @ d on both sides when the blocks line up (always on square
# inputs), but the source types whenever only the totals agree.
BLOCKS = {"xfer": 0,
          "src": [_op("concat", [(-1, 0), (-2, 0)], axis=1, rank=2), _op("concat", [(-3, 0), (-4, 0)], axis=0, rank=2),
                  _op("matmul", [(0, 0), (1, 0)], activation="none")],
          "dst": [_op("concat", [(-2, 0), (-1, 0)], axis=1, rank=2), _op("concat", [(-4, 0), (-3, 0)], axis=0, rank=2),
                  _op("matmul", [(0, 0), (1, 0)], activation="none")],
          "mapped": [[[2, 0], [2, 0]]]}


def test_a_rule_true_only_when_blocks_line_up_is_caught():
    rng = np.random.default_rng(0)
    # the hand-worked counterexample: a (2, 1), b (2, 2), c (2, 2), d (1, 2): the totals agree (3), blocks do not
    a, b, c, d = (rng.normal(size=s) for s in ((2, 1), (2, 2), (2, 2), (1, 2)))
    assert not np.allclose(np.hstack([a, b]) @ np.vstack([c, d]), np.hstack([b, a]) @ np.vstack([d, c]))
    square = [rng.normal(size=(3, 3)) for _ in range(4)]
    a, b, c, d = square
    np.testing.assert_allclose(np.hstack([a, b]) @ np.vstack([c, d]), np.hstack([b, a]) @ np.vstack([d, c]))
    error = shape_error(BLOCKS, World(2, 4))
    assert error is not None and error.startswith("wrong at generic shapes"), error
    chex.assert_equal(describe(BLOCKS), "matmul(concat1(x1, x2), concat0(x3, x4)) -> "
                                        "matmul(concat1(x2, x1), concat0(x4, x3))")


def test_generic_shapes_type_the_source_and_leave_free_sides_apart():
    shapes = generic_shapes(parse_pattern(BLOCKS), World(2, 4), np.random.default_rng(1))
    (r1, c1), (r2, c2), (r3, c3), (r4, c4) = (shapes[e] for e in (-1, -2, -3, -4))
    chex.assert_equal((r1, c3), (r2, c4))  # the concats' other axes agree
    chex.assert_equal(c1 + c2, r3 + r4)  # the matmul's inner sizes agree
    assert len({r1, c1, c2, c3, r3, r4}) > 2


def test_no_rule_of_tasos_table_is_flagged():
    """TASO's shipped rules hold at every shape on which they apply (the loader checks them on sampled shapes)."""
    rules = json.loads(DATA_FILE.read_text())["rules"]
    for raw in rules:
        ranks = [o["attrs"]["rank"] for o in raw["src"] + raw["dst"] if o["op"] == "concat"]
        rank = ranks[0] if ranks else (4 if any(o["op"] == "conv2d" for o in raw["src"]) else 2)
        chex.assert_equal(shape_error(raw, World(rank, 19)), None)  # external ids reach -19


@pytest.mark.slow
def test_a_run_drops_the_block_products_and_writes_rules_true_at_sampled_shapes():
    """Matmul and concat over 3 inputs: the run drops shape-specific block products, and every written rule holds
    on 8 shapes the loader samples (each input's sides drawn independently from {2, 3})."""
    result = run_world(Config(ops=("matmul", "concat"), max_ops=3, inputs=3, ranks=(2,)), 2)
    assert result.counts["shape-specific"] > 0
    assert all(reason.startswith("wrong at generic shapes") for _, reason in result.rejected)
    assert all("concat" in describe(raw) for raw, _ in result.rejected)
    rng = np.random.default_rng(0)
    for raw in result.entries:
        pattern = parse_pattern(dict(raw, xfer=1))
        for _ in range(8):
            check_numerics(pattern, rng, sample_shapes(pattern, rng))
