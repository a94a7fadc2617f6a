"""The compiled HEFT (numba) against the NumPy reference, to the last bit: on one problem and on a padded
batch (also against the JAX `heft_batch`)."""

import numpy as np
import pytest

import jaxsched
from jaxsched import heft, pad_problems
from jaxsched.generate import random_dag
from jaxsched.jax import heft_batch
from jaxsched.numba import heft as heft_numba
from jaxsched.numba import heft_batch as heft_batch_numba
from tests.jaxsched.problems import random_problem, topcuoglu_example, varied_problems
from tests.jaxsched.test_jax_simulate import SHAPE


def _assert_same(schedule, proc, start, finish):
    np.testing.assert_array_equal(proc, schedule.proc)
    np.testing.assert_array_equal(start, schedule.start)
    np.testing.assert_array_equal(finish, schedule.finish)


def test_published_example():
    """Topcuoglu, Hariri and Wu (2002), Fig. 3(a): makespan 80."""
    schedule = heft_numba(topcuoglu_example())
    np.testing.assert_array_equal(schedule.proc, [2, 0, 2, 1, 2, 1, 2, 0, 1, 1])
    np.testing.assert_array_equal(schedule.finish, [9, 40, 28, 26, 38, 42, 49, 62, 68, 80])


def test_heft_numba_equals_numpy_heft():
    for problem in varied_problems():
        reference = heft(problem)
        _assert_same(reference, *(getattr(heft_numba(problem), f) for f in ("proc", "start", "finish")))


def test_heft_batch_numba_equals_numpy_heft_and_jax_heft_batch():
    problems = [random_problem(s, bandwidth=s % 4 == 0, arrival=s % 3 == 0) for s in range(64)]
    out = heft_batch_numba(pad_problems(problems, SHAPE, dtype=np.float64))
    jax_out = heft_batch(pad_problems(problems, SHAPE))  # float32: exact on integer times
    assert out.proc.shape == (64, SHAPE.num_tasks)
    for i, problem in enumerate(problems):
        t = problem.num_tasks
        _assert_same(heft(problem), out.proc[i, :t], out.start[i, :t], out.finish[i, :t])
        if problem.bandwidth is None:  # integer times
            np.testing.assert_array_equal(out.proc[i, :t], np.asarray(jax_out.proc[i, :t]))
            np.testing.assert_array_equal(out.start[i, :t], np.asarray(jax_out.start[i, :t]))
        assert not out.start[i, t:].any()


def test_heft_batch_numba_on_topcuoglu_dags_equals_numpy_and_jax():
    """Mixed sizes, CCR and heterogeneity in one padded batch, with the published example; integer costs,
    so the float32 JAX `heft_batch` is exact too."""
    settings = ((20, 4, 0.1, 0.1), (60, 8, 5.0, 1.0), (100, 16, 1.0, 0.5), (80, 3, 10.0, 2.0))
    problems = [topcuoglu_example()] + [
        random_dag(n, p, ccr=ccr, beta=beta, integer=True, seed=n) for n, p, ccr, beta in settings
    ]
    shape = jaxsched.Shape.of(problems)
    out = heft_batch_numba(pad_problems(problems, shape, dtype=np.float64))
    jax_out = heft_batch(pad_problems(problems, shape))
    for i, problem in enumerate(problems):
        t = problem.num_tasks
        _assert_same(heft(problem), out.proc[i, :t], out.start[i, :t], out.finish[i, :t])
        _assert_same(heft(problem), np.asarray(jax_out.proc[i, :t]), np.asarray(jax_out.start[i, :t]),
                     np.asarray(jax_out.finish[i, :t]))


def test_bad_input_is_named():
    problem = random_problem(1)
    with pytest.raises(ValueError, match="needs a batch"):
        heft_batch_numba(jaxsched.pad_problem(problem))
    with pytest.raises(ValueError, match="expected a jaxsched.Problem"):
        heft_numba("dag")
