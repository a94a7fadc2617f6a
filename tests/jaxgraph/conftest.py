"""Shared helpers: small versions of the five models, an output comparison at rtol 1e-4, `jit` for the big
programs (JaxEnv, the agents), and one JaxEnv compiled once for the session's parity tests (`jitted`)."""

import chex
import jax
import numpy as np
import pytest

from jaxgraph import GraphBuilder, models
from jaxgraph.jax_env import JaxEnv
from jaxgraph.jax_rules import JAX_RULE_FAMILIES
from jaxgraph.models import SMALL_SIZES

SMALL = SMALL_SIZES
# The faithful builders, kept apart from SMALL (whose sweeps predate them); ONNX round trips of every
# builder, these included, are in test_onnx_import.py.
FAITHFUL = {
    "bert": dict(seq_length=8, hidden=32, heads=4, layers=2, intermediate=64),
    "mobilenet_v2": dict(image_size=32, width=0.25),
}


def small_model(name: str):
    return models.MODELS[name](**{**SMALL, **FAITHFUL}[name])


@pytest.fixture(scope="session")
def small_models():
    return {name: small_model(name) for name in SMALL}


def assert_same_outputs(actual: dict, expected: dict, rtol: float = 1e-4) -> None:
    """Outputs agree to `rtol`, with an absolute floor of rtol x the largest expected magnitude."""
    assert set(actual) == set(expected)
    for name in expected:
        want = np.asarray(expected[name], np.float64)
        got = np.asarray(actual[name], np.float64)
        chex.assert_shape(got, want.shape)
        chex.assert_trees_all_close(got, want, rtol=rtol, atol=rtol * max(np.abs(want).max(), 1e-30))


# LLVM at -O0 (XLA's HLO passes still run; as jaxsched.deepsched's UNOPTIMISED inits): the same values, and the
# big programs the tests compile (JaxEnv's step, dream training) compile 2-3x faster on CPU, where the tests spend
# most of their time compiling.
FAST_COMPILE = {"xla_backend_optimization_level": 0}


def jit(fun, **kwargs):
    """`jax.jit` with `FAST_COMPILE`, for programs a test compiles once and runs a few times."""
    return jax.jit(fun, compiler_options=FAST_COMPILE, **kwargs)


def mixed_graph(seed: int = 0):
    """Every supported family applies somewhere: conv * constant (with and without conv bias, scalar and
    per-channel, either operand order), conv + per-channel constant (with and without bias), stride 2 SAME
    and VALID convs, conv -> batchnorm -> relu, group convs (4 groups, and 2 with bias and relu), a concat of
    relus and a chain of three matmuls."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, rng.uniform(0.5, 1.5, shape).astype(np.float32))

    x = b.input("x", (1, 4, 8, 8))
    left = b.add("relu", [b.add("conv2d", [x, w("wl", (2, 4, 1, 1))])])
    right = b.add("relu", [b.add("conv2d", [x, w("wr", (2, 4, 3, 3))], pads=(1, 1, 1, 1))])
    y = b.add("concat", [left, right], axis=1)
    y = b.add("conv2d", [y, w("w1", (4, 4, 3, 3)), w("b1", (4,))], pads=(1, 1, 1, 1))
    y = b.add("mul", [y, w("s1", (1, 4, 1, 1))])
    y = b.add("conv2d", [y, w("w2", (4, 4, 1, 1))])
    y = b.add("mul", [w("s2", (1,)), y])
    y = b.add("conv2d", [y, w("w3", (8, 4, 3, 3))], stride=(2, 2), pads=(1, 1, 1, 1))
    y = b.add("add", [y, w("c3", (1, 8, 1, 1))])
    y = b.add("relu", [y])
    y = b.add("conv2d", [y, w("wg1", (8, 2, 3, 3))], groups=4, pads=(1, 1, 1, 1))
    y = b.add("conv2d", [y, w("wg2", (8, 4, 3, 3)), w("bg2", (8,))], groups=2, pads=(1, 1, 1, 1), activation="relu")
    y = b.add("conv2d", [y, w("w4", (8, 8, 1, 1)), w("b4", (8,))])
    y = b.add("add", [w("c4", (8, 1, 1)), y])
    y = b.add("conv2d", [y, w("w5", (8, 8, 3, 3))], stride=(2, 2))
    y = b.add("batchnorm", [y, w("g5", (8,)), w("h5", (8,)), w("m5", (8,)), w("v5", (8,))])
    y = b.add("relu", [y])
    y = b.add("reshape", [y], shape=(1, 8))
    for k, shape in enumerate([(8, 16), (16, 16), (16, 4)]):
        y = b.add("matmul", [y, w(f"a{k}", shape)])
    return b.build({"y": y})


def merge_graph(seed: int = 0):
    """The merge and split families fire: three convs on one input (equal 3x3 kernels, and a 1x1 to enlarge,
    with biases), two relu convs (3x3 and 1x1), two 1x1 convs added (MergeConvsIntoAdd), three bias-free
    matmuls and two linears with biases on one input, whose outputs are concatenated (so merging all three
    and splicing the nested splits lets SplitConcat remove the split)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, rng.uniform(0.5, 1.5, shape).astype(np.float32))

    x = b.input("x", (1, 4, 8, 8))
    plain = [b.add("conv2d", [x, w(f"w{k}", (4, 4, size, size)), w(f"b{k}", (4,))], pads=(size // 2,) * 4)
             for k, size in enumerate((3, 1, 3))]
    relus = [b.add("conv2d", [x, w(f"r{k}", (4, 4, size, size))], pads=(size // 2,) * 4, activation="relu")
             for k, size in enumerate((3, 1))]
    z = b.add("add", [b.add("conv2d", [b.add("concat", plain, axis=1), w("p1", (4, 12, 1, 1))]),
                      b.add("conv2d", [b.add("concat", relus, axis=1), w("p2", (4, 8, 1, 1))])])
    t = b.add("reshape", [z], shape=(4, 64))
    heads = [b.add("matmul", [t, w(f"m{k}", (64, 8))]) for k in range(3)]
    linears = [b.add("add", [b.add("matmul", [t, w(f"l{k}", (64, 12))]), w(f"c{k}", (12,))]) for k in range(2)]
    y = b.add("add", [b.add("concat", heads, axis=1), b.add("concat", linears, axis=1)])
    return b.build({"y": y})


CAPACITY = 64
ROOT_OPS = {family.root for family in JAX_RULE_FAMILIES.values()}


@pytest.fixture(scope="session")
def jitted():
    """One JaxEnv (capacity 64) for every test graph, its reset and step jitted once and checked not to retrace."""
    env = JaxEnv(mixed_graph(), max_locations=32, node_capacity=CAPACITY, edge_capacity=2 * CAPACITY, max_siblings=5,
                 root_capacity=dict.fromkeys(ROOT_OPS, CAPACITY))  # every test graph fits
    reset = jit(chex.assert_max_traces(env.reset, n=1))
    step = jit(chex.assert_max_traces(env.step, n=1))
    return env, reset, step
