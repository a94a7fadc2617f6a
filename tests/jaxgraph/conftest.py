"""Shared helpers: small versions of the five models, an output comparison at rtol 1e-4, and `jit` for the big
programs (JaxEnv, the agents)."""

import chex
import jax
import numpy as np
import pytest

from jaxgraph import models

# Full structure (every layer), reduced widths and image sizes: numerical checks stay fast.
SMALL = {
    "resnet18": dict(image_size=32, width=0.125),
    "resnet50": dict(image_size=32, width=0.125),
    "squeezenet1_1": dict(image_size=48, width=0.25),
    "inception_v3": dict(image_size=75, width=0.0625),
    "taso_attention_stack": dict(seq_length=8, hidden=32, heads=4, layers=3),
}
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
