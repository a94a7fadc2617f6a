"""The network: shapes, masks, padding invariance, MinGRU, and the feedback state machine."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsched.deepsched.configs import ModelConfig
from jaxsched.deepsched.features import problem_features, time_scale
from jaxsched.deepsched.model import (
    MASKED_LOGIT,
    STATE_FEATURES,
    DeepSchedNet,
    MinGRU,
    feedback_decode,
    teacher_state,
)
from jaxsched.generate import cloudsim, random_dag
from jaxsched.heft import mean_communication

SMALL, LARGE = (24, 4, 64, 8), (40, 8, 128, 16)  # (T, P, E, K) paddings of one problem


@pytest.fixture(scope="module")
def problem():
    return cloudsim(20, 4, seed=1)


# Every layer kind is covered by the fast pairs (GRU, MinGRU, message passing, feedback state); the
# rest run with -m slow.
FAST = [("gnn", "gru"), ("feedback", "mingru")]
COMBINATIONS = [
    pytest.param(v, r, marks=() if (v, r) in FAST else pytest.mark.slow)
    for v in ("paper", "dag", "gnn", "feedback")
    for r in ("gru", "mingru")
]


@pytest.mark.parametrize("variant, recurrence", COMBINATIONS)
def test_padding_does_not_change_outputs_for_real_tasks(problem, variant, recurrence):
    model = DeepSchedNet(ModelConfig(variant=variant, recurrence=recurrence, hidden=8, graph_layers=1))
    small, large = problem_features(problem, *SMALL), problem_features(problem, *LARGE)
    params = jax.jit(model.init)(jax.random.key(0), small)
    apply = jax.jit(model.apply)
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
    for t in (range(6, -1, -1) if reverse else range(7)):
        h = (1 - gate[t]) * h + gate[t] * candidate[t]
        expected[t] = h
    np.testing.assert_allclose(module.apply(params, x, mask), jnp.stack(expected), atol=1e-6)


def _append_only_eft(problem, proc):
    """Independent reference: earliest finish of each task on each processor when the tasks before
    it in upward-rank order sit on `proc`, each after the last task of its processor."""
    from jaxsched.heft import priority_order, upward_rank

    comm = mean_communication(problem)
    avail = np.zeros(problem.num_procs)
    finish = np.zeros(problem.num_tasks)
    eft = np.zeros((problem.num_tasks, problem.num_procs))
    for task in priority_order(problem, upward_rank(problem)):
        ready = np.full(problem.num_procs, problem.arrival[task])
        for e in np.flatnonzero(problem.dst == task):
            u = problem.src[e]
            arrive = finish[u] + comm[e] * (np.arange(problem.num_procs) != proc[u])
            ready = np.maximum(ready, arrive)
        eft[task] = np.maximum(avail, ready) + problem.comp[task]
        finish[task] = eft[task, proc[task]]
        avail[proc[task]] = finish[task]
    return eft


def test_teacher_state_matches_an_independent_list_schedule():
    problem = random_dag(18, 3, ccr=2.0, seed=5)
    proc = np.random.default_rng(0).integers(0, 3, 18)
    features = problem_features(problem, 24, 4, 64, 16)
    state = jax.jit(teacher_state)(features, jnp.asarray(np.concatenate([proc, np.zeros(6, int)]), jnp.int32))
    eft = np.asarray(state[:18, :3, STATE_FEATURES.index("eft")]) * time_scale(problem)
    np.testing.assert_allclose(eft, _append_only_eft(problem, proc), rtol=1e-5)
    assert not np.asarray(state[:, 3:]).any()


def test_feedback_decode_sees_the_same_state_as_teacher_forcing(problem):
    """The greedy sequential decode picks the argmax of the teacher-forced logits of its own choices."""
    model = DeepSchedNet(ModelConfig(variant="feedback", hidden=8))
    features = problem_features(problem, *SMALL)
    params = jax.jit(model.init)(jax.random.key(2), features)
    encoding = jax.jit(lambda p, f: model.apply(p, f, method=DeepSchedNet.encode))(params, features)
    proc = jax.jit(feedback_decode)(features, encoding, None, jnp.ones(()))
    forced = jax.jit(model.apply)(params, features, proc)
    np.testing.assert_array_equal(np.argmax(forced.logits, axis=1)[:20], proc[:20])
    sample = jax.jit(lambda p, f, k: model.apply(p, f, k, jnp.ones(()), 4, method=DeepSchedNet.sample))
    drawn = sample(params, features, jax.random.key(3))
    assert drawn.shape == (4, 24) and np.all(np.asarray(drawn[:, :20]) < 4)
    np.testing.assert_array_equal(drawn[0], proc)
