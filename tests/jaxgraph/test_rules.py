"""Every substitution preserves outputs: both sides run on random inputs (NumPy float64 and JAX float32).

This is the numerical counterpart of TASO's Z3 verification. Each rule has a minimal graph where it
applies, hand-made negative cases where it must not, and every rewrite it makes on the five models is
checked too.
"""

import itertools

import numpy as np
import pytest

from jaxgraph import RULES, GraphBuilder, LocationIndex, execute, execute_reference, greedy, random_inputs
from jaxgraph.rules import (
    associate_matmul,
    concat_of_relus,
    fold_conv_bias,
    fuse_conv_batchnorm,
    fuse_conv_mul,
    fuse_conv_relu,
    merge_convs,
    merge_linears,
    merge_matmuls,
    split_concat,
    split_of_split,
)

from .conftest import FAITHFUL, SMALL, assert_same_outputs, small_model

RNG = np.random.default_rng(1)


def weight(b, name, shape):
    return b.weight(name, RNG.uniform(-1, 1, shape).astype(np.float32))


def conv(b, x, name, out, kernel, stride=1, pads=None, bias=True, activation="none", groups=1):
    cin = b.shape(x)[1]
    pads = pads if pads is not None else ((kernel[0] - 1) // 2, (kernel[1] - 1) // 2) * 2
    inputs = [x, weight(b, f"{name}.w", (out, cin // groups) + kernel)]
    inputs += [weight(b, f"{name}.b", (out,))] if bias else []
    return b.add("conv2d", inputs, name, stride=(stride, stride), pads=pads, activation=activation, groups=groups)


def pads_for(padding):
    return (1, 1, 1, 1) if padding == "SAME" else (0, 0, 0, 0)


def example(rule):
    """A small graph on which `rule` applies exactly once."""
    b = GraphBuilder()
    x = b.input("x", (2, 4, 9, 9))
    params = dict(rule.params)
    stride, padding, activation = params.get("stride", 1), params.get("padding"), params.get("activation", "none")
    if rule.family == "FuseConvRelu":
        y = b.add("relu", [conv(b, x, "c", 6, (3, 3), stride, pads_for(padding))])
    elif rule.family == "FuseConvBatchNorm":
        c = conv(b, x, "c", 6, (3, 3), stride, pads_for(padding), bias=stride == 1)
        y = b.add("batchnorm", [c] + [b.weight(f"bn{i}", RNG.uniform(0.5, 1.5, 6).astype(np.float32))
                                      for i in range(4)], eps=1e-3)
    elif rule.family == "FuseConvMul":
        c = conv(b, x, "c", 6, (3, 3), stride, pads_for(padding), bias=padding == "SAME")
        factor = weight(b, "factor", (6, 1, 1) if stride == 1 else (1,))
        y = b.add("mul", [factor, c] if padding == "SAME" else [c, factor])
    elif rule.family == "MergeConvs":
        second = (3, 3) if not params["enlarge"] else (1, 3)
        stride = 2 if params["enlarge"] else 1
        y = [conv(b, x, "a", 5, (3, 3), activation=activation, stride=stride),
             conv(b, x, "b", 3, second, activation=activation, stride=stride)]
    elif rule.family == "MergeGroupConvs":
        y = conv(b, x, "g", 8, (3, 3), stride, pads_for("SAME"), activation=activation, groups=4)
    elif rule.family == "MergeConvsIntoAdd":
        x2 = b.add("tanh", [x])
        y = b.add("add", [conv(b, x, "a", 6, (3, 3)), conv(b, x2, "b", 6, (3, 3))])
    elif rule.family in ("MergeMatmuls", "AssociateMatmul"):
        x = b.input("m", (3, 5, 6))
        if rule.family == "MergeMatmuls":
            y = [b.add("matmul", [x, weight(b, "A", (6, 4))], activation="tanh"),
                 b.add("matmul", [x, weight(b, "B", (6, 2))], activation="tanh")]
        else:
            y = b.add("matmul", [b.add("matmul", [x, weight(b, "A", (6, 4))]), weight(b, "B", (4, 7))],
                      activation="relu")
    elif rule.family == "ConcatOfRelus":
        parts = [b.add("relu", [conv(b, x, f"c{i}", 2 + i, (1, 1))]) for i in range(3)]
        y = b.add("concat", parts, axis=1)
    elif rule.family == "SplitConcat":
        parts = b.add_outputs("split", [b.add("tanh", [x])], axis=2, sizes=(4, 5))
        y = b.add("concat", list(parts), axis=-2)
    elif rule.family == "MergeLinears":
        x = b.input("m", (3, 5, 6))
        y = [b.add("add", [b.add("matmul", [x, weight(b, "A", (6, 4))]), weight(b, "a", (4,))]),
             b.add("add", [weight(b, "b", (2,)), b.add("matmul", [x, weight(b, "B", (6, 2))])])]
    elif rule.family == "FoldConvBias":
        y = b.add("relu", [b.add("add", [weight(b, "c", (1, 6, 1, 1)), conv(b, x, "c", 6, (3, 3), bias=False)])])
    elif rule.family == "SplitOfSplit":
        first, rest = b.add_outputs("split", [b.add("tanh", [x])], axis=1, sizes=(1, 3))
        y = [first, *b.add_outputs("split", [rest], axis=-3, sizes=(2, 1))]
    else:
        raise AssertionError(f"no example for {rule}")
    outputs = y if isinstance(y, list) else [y]
    return b.build({f"y{i}": r for i, r in enumerate(outputs)})


@pytest.mark.parametrize("xfer", range(len(RULES)), ids=[r.name for r in RULES])
def test_rule_preserves_outputs(xfer):
    rule = RULES[xfer]
    graph = example(rule)
    locations = rule.find(graph)
    pair = rule.family in ("MergeConvs", "MergeMatmuls", "MergeLinears")  # a sibling pair matches in both orders
    assert len(locations) == (2 if pair else 1), locations
    if pair:
        assert locations[1][:2] == locations[0][1::-1]
    x = random_inputs(graph, seed=xfer)
    for location in locations:
        rewritten = rule.apply(graph, location)
        rewritten.validate()
        assert rewritten.structure_hash != graph.structure_hash
        assert_same_outputs(execute_reference(rewritten, x), execute_reference(graph, x), rtol=1e-9)
        assert_same_outputs(execute(rewritten, x, jit=False), execute_reference(graph, x))
        assert location not in rule.find(rewritten)  # the matched nodes are gone


def test_taso_ids():
    """xfer ids 0-17 are TASO's hand-written xfers in TASO's order; every claimed id is a real, distinct one."""
    for xfer in range(18):
        assert xfer in RULES[xfer].taso_ids
    claimed = [i for rule in RULES for i in rule.taso_ids]
    assert len(claimed) == len(set(claimed)) and all(0 <= i <= 150 for i in claimed)
    assert len({r.name for r in RULES}) == len(RULES)


def build(fn):
    b = GraphBuilder()
    outputs = fn(b, b.input("x", (1, 4, 8, 8)))
    return b.build({f"y{i}": r for i, r in enumerate(outputs)})


def matmuls_with_computed_weight(b, x):
    rows = b.add("reshape", [x], shape=(32, 8))
    computed = b.add("reshape", [b.add("tanh", [x])], shape=(8, 32))
    return [b.add("matmul", [rows, weight(b, "A", (8, 2))]), b.add("matmul", [rows, computed])]


def inner_product_used_twice(b, x):
    inner = b.add("matmul", [b.add("reshape", [x], shape=(32, 8)), weight(b, "A", (8, 8))])
    return [inner, b.add("matmul", [inner, weight(b, "B", (8, 2))])]


def linears(b, x, computed_bias=False, reuse=False):
    rows = b.add("reshape", [x], shape=(32, 8))
    first = b.add("matmul", [rows, weight(b, "A", (8, 2))])
    second = b.add("matmul", [rows, weight(b, "B", (8, 2))])
    flat = b.add("reshape", [x], shape=(256,))
    bias_a = b.add_outputs("split", [flat], axis=0, sizes=(2, 254))[0] if computed_bias else weight(b, "a", (2,))
    return [b.add("add", [first, bias_a]), b.add("add", [second, weight(b, "b", (2,))])] + ([first] if reuse else [])


def parts_rejoined_out_of_order(b, x):
    first, second = b.add_outputs("split", [x], axis=1, sizes=(2, 2))
    return [b.add("concat", [second, first], axis=1)]


def conv_bn(b, x):
    return [b.add("batchnorm", [conv(b, x, "c", 4, (3, 3))] + [weight(b, f"p{i}", (4,)) for i in range(4)])]


@pytest.mark.parametrize("rule, make", [
    # the conv output has a second consumer
    (fuse_conv_relu(1, "SAME"), lambda b, x: [b.add("relu", [c := conv(b, x, "c", 4, (3, 3))]), c]),
    # stride and padding classes must match the instance
    (fuse_conv_relu(2, "SAME"), lambda b, x: [b.add("relu", [conv(b, x, "c", 4, (3, 3))])]),
    (fuse_conv_batchnorm(1, "VALID"), conv_bn),
    # an activation is already fused
    (fuse_conv_mul(1, "SAME"), lambda b, x: [b.add("mul", [conv(b, x, "c", 4, (3, 3), activation="relu"),
                                                         weight(b, "f", (4, 1, 1))])]),
    # a factor computed from the input is not constant; a per-position factor is not per-channel
    (fuse_conv_mul(1, "SAME"), lambda b, x: [b.add("mul", [conv(b, x, "c", 4, (3, 3)), b.add("tanh", [x])])]),
    (fuse_conv_mul(1, "SAME"), lambda b, x: [b.add("mul", [conv(b, x, "c", 4, (3, 3)), weight(b, "f", (8, 8))])]),
    # enlarging needs centred padding; equal kernels need equal padding; activations must match the rule
    (merge_convs("none", True), lambda b, x: [conv(b, x, "a", 4, (3, 3), pads=(0,) * 4), conv(b, x, "b", 4, (1, 1))]),
    (merge_convs("none", False), lambda b, x: [conv(b, x, "a", 4, (3, 3)), conv(b, x, "b", 4, (3, 3), pads=(0,) * 4)]),
    (merge_convs("relu", False), lambda b, x: [conv(b, x, "a", 4, (3, 3)), conv(b, x, "b", 4, (3, 3))]),
    (merge_matmuls(), matmuls_with_computed_weight),
    (associate_matmul(), inner_product_used_twice),
    (split_concat(), parts_rejoined_out_of_order),
    (concat_of_relus(), lambda b, x: [b.add("concat", [b.add("relu", [x]), b.add("tanh", [x])], axis=1)]),
    # a bias computed from the input; a matmul output used twice (the bias add cannot absorb it)
    (merge_linears(), lambda b, x: linears(b, x, computed_bias=True)),
    (merge_linears(), lambda b, x: linears(b, x, reuse=True)),
    # a scalar or per-position constant is not a conv bias
    (fold_conv_bias(), lambda b, x: [b.add("add", [conv(b, x, "c", 4, (3, 3)), weight(b, "s", (1,))])]),
    (fold_conv_bias(), lambda b, x: [b.add("add", [conv(b, x, "c", 4, (3, 3)), weight(b, "s", (4, 8, 8))])]),
    # nested splits on different axes
    (split_of_split(), lambda b, x: [b.add_outputs("split", [b.add_outputs("split", [x], axis=1, sizes=(2, 2))[1]],
                                                   axis=2, sizes=(4, 4))[0]]),
])
def test_rule_does_not_apply(rule, make):
    graph = build(make)
    assert rule.find(graph) == []


def test_apply_rejects_a_location_that_does_not_match():
    graph = example(fuse_conv_relu(1, "SAME"))
    (location,) = fuse_conv_relu(1, "SAME").find(graph)
    with pytest.raises(ValueError, match="does not apply"):
        fuse_conv_relu(2, "SAME").apply(graph, location)
    with pytest.raises(ValueError, match="does not apply"):
        fuse_conv_relu(1, "SAME").apply(graph, (123456,))


@pytest.mark.parametrize("name", sorted(SMALL) + sorted(FAITHFUL))
def test_every_rewrite_of_every_model_preserves_outputs(name):
    """Every location in each model; every step of greedy descent; a random walk to a graph where no
    rule applies (checked every few steps and at the end)."""
    graph = small_model(name)
    x = random_inputs(graph)
    expected = execute_reference(graph, x)

    def check(g):
        g.validate()
        assert_same_outputs(execute_reference(g, x), expected)

    for rule in RULES:
        for location in rule.find(graph):
            check(rule.apply(graph, location))
    for xfer, location in greedy(graph).history:
        graph = RULES[xfer].apply(graph, location)
        check(graph)
    rng = np.random.default_rng(0)
    graph = small_model(name)
    index = LocationIndex.build(RULES, graph)
    for step in itertools.count():
        matches = index.matches()
        if not matches:
            break
        xfer, location = matches[rng.integers(len(matches))]
        graph, delta = RULES[xfer].rewrite(graph, location)
        index = index.update(graph, delta)
        if step % 4 == 0:
            check(graph)
    check(graph)
