"""The network: shapes, masks, padding invariance, MinGRU, and the feedback state machine."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsched
from jaxsched.batch import Shape
from jaxsched.deepsched._feedback import GAP_SLOTS, STATE_FEATURES, decode, teacher_state
from jaxsched.deepsched.configs import ModelConfig
from jaxsched.deepsched.features import problem_features, time_scale
from jaxsched.deepsched.model import MASKED_LOGIT, UNOPTIMISED, DeepSchedNet, MinGRU, eft_rule_params
from jaxsched.generate import cloudsim, random_dag
from tests.jaxsched.problems import topcuoglu_example

SMALL, LARGE = Shape(24, 4, 64, 8), Shape(40, 8, 128, 16)  # two paddings of one problem


PROBLEM = cloudsim(20, 4, seed=1)
FEEDBACK = ModelConfig(variant="feedback", recurrence="gru", hidden=8, graph_layers=1)


@functools.lru_cache
def network(config: ModelConfig):
    """(model, parameters, jitted apply) of a configuration, built once per test session."""
    model = DeepSchedNet(config)
    init = jax.jit(model.init, compiler_options=UNOPTIMISED)
    # Unoptimised code too: these tests check what is computed, not how fast (compiles 2x faster).
    apply = jax.jit(model.apply, compiler_options=UNOPTIMISED)
    return model, init(jax.random.key(0), problem_features(PROBLEM, SMALL)), apply


# The fast pair covers the GRU's padded reverse pass and the feedback state; MinGRU masking is checked
# against the sequential recurrence below; every other combination runs with -m slow.
FAST = [("feedback", "gru")]  # = FEEDBACK, shared with the tests below
COMBINATIONS = [
    pytest.param(v, r, marks=() if (v, r) in FAST else pytest.mark.slow)
    for v in ("paper", "dag", "gnn", "feedback")
    for r in ("gru", "mingru")
]


@pytest.mark.parametrize("variant, recurrence", COMBINATIONS)
def test_padding_does_not_change_outputs_for_real_tasks(variant, recurrence):
    _, params, apply = network(ModelConfig(variant=variant, recurrence=recurrence, hidden=8, graph_layers=1))
    small, large = problem_features(PROBLEM, SMALL), problem_features(PROBLEM, LARGE)
    out_small, out_large = apply(params, small), apply(params, large)
    assert out_small.logits.shape == (24, 4) and out_small.times.shape == (24, 2)
    assert out_large.logits.shape == (40, 8)
    np.testing.assert_allclose(out_small.logits[:20], out_large.logits[:20, :4], atol=2e-5)
    np.testing.assert_allclose(out_small.times[:20], out_large.times[:20], atol=2e-5)
    assert np.all(np.asarray(out_large.logits[:, 4:]) == MASKED_LOGIT)
    assert not np.asarray(out_large.times[20:]).any()


@pytest.mark.parametrize("reverse", [False, True])
def test_mingru_equals_the_sequential_recurrence(reverse):
    x = jax.random.normal(jax.random.key(0), (7, 3))
    mask = jnp.array([1, 1, 1, 1, 1, 0, 0], jnp.float32)
    module = MinGRU(4, reverse=reverse)
    params = module.init(jax.random.key(1), x, mask)
    p = params["params"]
    gate = jax.nn.sigmoid(x @ p["gate"]["kernel"] + p["gate"]["bias"][None, :]) * mask[:, None]
    candidate = x @ p["candidate"]["kernel"] + p["candidate"]["bias"][None, :]
    h, expected = jnp.zeros(4), [None] * 7
    for t in range(6, -1, -1) if reverse else range(7):
        h = (1 - gate[t]) * h + gate[t] * candidate[t]
        expected[t] = h
    np.testing.assert_allclose(module.apply(params, x, mask), jnp.stack(expected), atol=1e-6)


def test_teacher_state_matches_the_exact_list_schedule_while_gaps_fit_in_memory():
    """With at most GAP_SLOTS tasks per processor no gap is forgotten, so the partial schedule is the
    exact insertion-based list schedule: the eft at each task's own processor is its finish time in
    `simulate` (upward-rank order), an independent NumPy reference."""
    problem = random_dag(12, 3, ccr=2.0, seed=5)
    proc = np.random.default_rng(0).permutation(np.arange(12) % 3)
    assert np.bincount(proc).max() <= GAP_SLOTS
    expected = jaxsched.simulate(problem, proc, jaxsched.upward_rank(problem))
    features = problem_features(problem, Shape(16, 4, 64, 16))
    state = jax.jit(teacher_state)(features, jnp.asarray(np.concatenate([proc, np.zeros(4, int)]), jnp.int32))
    eft = np.asarray(state[np.arange(12), proc, STATE_FEATURES.index("eft")]) * time_scale(problem)
    np.testing.assert_allclose(eft, expected.finish, rtol=1e-5)
    assert not np.asarray(state[:, 3:]).any()


@pytest.fixture(scope="module")
def feedback_model():
    """Parameters of the FEEDBACK network and one jitted function returning (sequential greedy
    decode, logits teacher-forced with those choices)."""
    model, params, _ = network(FEEDBACK)

    @functools.partial(jax.jit, compiler_options=UNOPTIMISED)
    def decode_and_force(params, features):
        encoding = model.apply(params, features, method=DeepSchedNet.encode)
        proc = decode(features, encoding.logits, encoding.state_weights, None, jnp.ones(()))
        return proc, model.apply(params, features, proc).logits

    return params, decode_and_force


def test_feedback_decode_sees_the_same_state_as_teacher_forcing(feedback_model):
    """The greedy sequential decode picks the argmax of the teacher-forced logits of its own choices."""
    params, decode_and_force = feedback_model
    proc, forced_logits = decode_and_force(params, problem_features(PROBLEM, SMALL))
    np.testing.assert_array_equal(np.argmax(forced_logits, axis=1)[:20], proc[:20])


def test_untrained_feedback_prior_follows_heft_on_the_published_example(feedback_model):
    """With only the EFT prior (every learned weight zero), the greedy decode reproduces HEFT's
    processors on Topcuoglu et al.'s example (no gap is forgotten at this size)."""
    params, decode_and_force = feedback_model
    prior_only = eft_rule_params(params, FEEDBACK.eft_prior)
    problem = topcuoglu_example()
    proc, _ = decode_and_force(prior_only, problem_features(problem, SMALL))
    np.testing.assert_array_equal(proc[:10], jaxsched.heft(problem).proc)
