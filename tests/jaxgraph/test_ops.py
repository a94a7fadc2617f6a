"""Every op: shape inference (hand-worked), errors that name the problem, and JAX == NumPy reference."""

import numpy as np
import pytest

from jaxgraph import OP_TYPES, OPS, GraphBuilder, execute, execute_reference
from jaxgraph.ops import broadcast_shapes, normalize_attrs
from jaxgraph.reference import KERNELS

from .conftest import assert_same_outputs

RNG = np.random.default_rng(0)


def one_op_graph(op, activation_shapes, weight_shapes=(), **attrs):
    """A graph computing one op on random inputs (activations) and random weights (constants)."""
    b = GraphBuilder()
    refs = [b.input(f"x{i}", s) for i, s in enumerate(activation_shapes)]
    refs += [b.weight(f"w{i}", RNG.uniform(0.5, 1.5, s).astype(np.float32)) for i, s in enumerate(weight_shapes)]
    outs = b.add_outputs(op, refs, "op", **attrs)
    return b.build({f"y{k}": r for k, r in enumerate(outs)})


CASES = [
    ("conv2d", [(2, 4, 7, 6)], [(6, 2, 3, 3), (6,)],
     dict(stride=(2, 1), pads=(1, 0, 1, 2), groups=2, activation="relu")),
    ("conv2d", [(1, 3, 5, 5), (4, 3, 1, 1)], [], dict(activation="tanh")),
    ("matmul", [(3, 4, 5)], [(5, 2)], dict(activation="sigmoid")),
    ("matmul", [(2, 3, 4), (2, 4, 5)], [], {}),
    ("add", [(2, 3, 4)], [(4,)], {}),
    ("mul", [(2, 1, 4), (3, 1)], [], {}),
    ("relu", [(3, 4)], [], {}),
    ("sigmoid", [(3, 4)], [], {}),
    ("tanh", [(3, 4)], [], {}),
    ("batchnorm", [(2, 3, 4, 4)], [(3,)] * 4, dict(eps=1e-3)),
    ("maxpool2d", [(1, 2, 7, 7)], [], dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1))),
    ("avgpool2d", [(1, 2, 6, 5)], [], dict(kernel=(3, 2), stride=(1, 2), pads=(1, 0, 1, 1))),
    ("avgpool2d", [(1, 2, 6, 5)], [], dict(kernel=(3, 3), pads=(1, 1, 1, 1), count_include_pad=True)),
    ("concat", [(2, 3), (2, 5), (2, 1)], [], dict(axis=-1)),
    ("split", [(2, 6, 3)], [], dict(axis=1, sizes=(1, 2, 3))),
    ("transpose", [(2, 3, 4)], [], dict(perm=(2, 0, 1))),
    ("reshape", [(2, 3, 4)], [], dict(shape=(6, 4))),
    ("softmax", [(2, 3, 4)], [], dict(axis=1)),
    ("layernorm", [(2, 3, 4)], [(3, 4), (3, 4)], dict(axis=1, eps=1e-3)),
    ("layernorm", [(2, 5)], [(5,), (5,)], {}),
    ("gelu", [(3, 4)], [], {}),
    ("clip", [(3, 4)], [], dict(min=-0.5, max=0.25)),
    ("opaque", [(3, 4)], [], dict(op_type="Erf", slots=(0,), input_shapes=((3, 4),), shapes=((3, 4),))),
    ("opaque", [(2, 3)], [(3,)], dict(op_type="Sub", slots=(1, 0), input_shapes=((2, 3), (3,)), shapes=((2, 3),))),
    ("enlarge", [(4, 2, 1, 3)], [], dict(kernel=(3, 5))),
    ("merge_gconv", [(8, 2, 3, 3)], [], dict(groups=4, count=2)),
    ("bn_fold_weight", [(4, 2, 3, 3)], [(4,), (4,)], dict(eps=1e-5)),
    ("bn_fold_bias", [], [(4,)] * 5, dict(eps=1e-5)),
]


def test_cases_cover_every_op_and_reference_covers_every_op():
    assert {c[0] for c in CASES} | {"input", "weight"} == set(OP_TYPES)
    assert set(KERNELS) | {"input", "weight"} == set(OPS)


@pytest.mark.parametrize("op, inputs, weights, attrs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_jax_kernel_matches_numpy_reference(op, inputs, weights, attrs):
    graph = one_op_graph(op, inputs, weights, **attrs)
    x = {f"x{i}": RNG.standard_normal(s).astype(np.float32) for i, s in enumerate(inputs)}
    expected = execute_reference(graph, x)
    assert_same_outputs(execute(graph, x, jit=False), expected)
    assert {k: v.shape for k, v in expected.items()} == graph.output_shapes


def test_hand_worked_shapes():
    conv = one_op_graph("conv2d", [(1, 3, 224, 224)], [(64, 3, 7, 7)], stride=(2, 2), pads=(3, 3, 3, 3))
    assert conv.output_shapes == {"y0": (1, 64, 112, 112)}
    pool = one_op_graph("maxpool2d", [(1, 64, 112, 112)], kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1))
    assert pool.output_shapes == {"y0": (1, 64, 56, 56)}
    assert broadcast_shapes((8, 1, 6, 1), (7, 1, 5)) == (8, 7, 6, 5)


def test_hand_worked_values():
    """A 2x2 average pool without padding on a known input, and a 1x1 convolution that sums channels."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    pool = one_op_graph("avgpool2d", [(1, 1, 4, 4)], kernel=(2, 2), stride=(2, 2))
    np.testing.assert_allclose(execute_reference(pool, {"x0": x})["y0"][0, 0], [[2.5, 4.5], [10.5, 12.5]])
    b = GraphBuilder()
    inp = b.input("x", (1, 2, 1, 1))
    y = b.add("conv2d", [inp, b.weight("w", np.ones((1, 2, 1, 1), np.float32))])
    out = execute(b.build({"y": y}), {"x": np.array([3.0, 4.0], np.float32).reshape(1, 2, 1, 1)}, jit=False)
    assert float(out["y"].ravel()[0]) == 7.0


@pytest.mark.parametrize("op, inputs, weights, attrs, message", [
    ("conv2d", [(1, 3, 8, 8)], [(4, 2, 3, 3)], {}, "input channels"),
    ("conv2d", [(1, 3, 2, 2)], [(4, 3, 3, 3)], {}, "does not fit"),
    ("matmul", [(3, 4), (5, 6)], [], {}, "inner dimensions"),
    ("add", [(3, 4), (5,)], [], {}, "do not broadcast"),
    ("concat", [(2, 3), (3, 3)], [], dict(axis=1), "mismatched shapes"),
    ("split", [(2, 6)], [], dict(axis=1, sizes=(2, 2)), "do not partition"),
    ("reshape", [(2, 6)], [], dict(shape=(5, 2)), "cannot reshape"),
    ("transpose", [(2, 6)], [], dict(perm=(0, 0)), "not a permutation"),
    ("relu", [(2,)], [], dict(axis=1), "no attribute"),
    ("conv2d", [(1, 3, 8, 8)], [(4, 3, 3, 3)], dict(activation="swish"), "unknown activation"),
])
def test_shape_errors_name_the_node(op, inputs, weights, attrs, message):
    with pytest.raises(ValueError, match=f"node op \\({op}\\).*{message}"):
        one_op_graph(op, inputs, weights, **attrs)


def test_unknown_op():
    with pytest.raises(ValueError, match="unknown op 'frobnicate'"):
        normalize_attrs("frobnicate", {})
