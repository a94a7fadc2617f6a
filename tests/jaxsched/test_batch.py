"""Padding: one `Shape` for every padded form, the float32 range contract, checked batch inputs."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxsched import Problem, Shape, heft, pad_problem, pad_problems, simulate
from jaxsched.deepsched.features import problem_features
from jaxsched.jax import heft_batch, simulate_batch
from tests.jaxsched.problems import random_problem

CHAIN = dict(src=[0, 1], dst=[1, 2], data=[1.0, 1.0])


def test_shape_of_fits_every_problem_and_padded_forms_report_it():
    problems = [random_problem(seed) for seed in range(6)]
    shape = Shape.of(problems)
    assert shape.num_tasks == max(p.num_tasks for p in problems)
    assert shape.max_in_degree == max(1, max(int(np.bincount(p.dst, minlength=1).max()) for p in problems))
    assert pad_problems(problems).shape == shape
    assert problem_features(problems[0], shape).shape == shape
    largest = max(problems, key=lambda p: p.num_tasks)
    with pytest.raises(ValueError, match="more than the padded capacity"):
        pad_problem(largest, shape._replace(num_tasks=shape.num_tasks - 1))


@pytest.mark.parametrize(
    "comp, message",
    [
        (np.full((3, 2), 1e39), "beyond float32's range"),  # NumPy's makespan is 3e39; float32 gave inf
        (np.full((3, 2), 2e38), "beyond float32's range"),  # each fits, the sum does not
        (np.full((3, 2), 1e-50), "smallest normal"),  # float32 gave 0
    ],
)
def test_float32_padding_raises_for_times_out_of_range(comp, message):
    problem = Problem(comp, **CHAIN)
    with pytest.raises(ValueError, match=message):
        pad_problems([problem])
    pad_problem(problem, dtype=np.float64)  # float64 holds them


def test_integer_costs_up_to_2_24_are_exact_in_float32():
    """The stated contract: integer costs and every time at most 2**24 give NumPy's schedule exactly."""
    rng = np.random.default_rng(0)
    problems = []
    for _ in range(8):
        comp = rng.integers(2**20, 2**21, (7, 3)).astype(float)  # 7 tasks: bound below 7 * 2**21 + 2**23
        problems.append(Problem(comp, [0, 0, 1, 2, 3], [1, 2, 3, 4, 5], rng.integers(0, 2**20, 5).astype(float)))
    out = heft_batch(pad_problems(problems))
    for i, problem in enumerate(problems):
        reference = heft(problem)
        np.testing.assert_array_equal(np.asarray(out.proc[i]), reference.proc)
        np.testing.assert_array_equal(np.asarray(out.finish[i], np.float64), reference.finish)


def test_simulate_batch_rejects_processors_a_problem_does_not_have():
    two = Problem(np.ones((3, 2)), **CHAIN)
    three = Problem(np.ones((3, 3)), **CHAIN)
    priority = jnp.zeros((1, 3))
    with pytest.raises(ValueError, match=r"proc\[0, 1\] = 2 is not a processor of problem 0, which has 2"):
        simulate_batch(pad_problems([two]), jnp.array([[0, 2, 0]]), priority)
    mixed = pad_problems([three, two])  # problem 1's processor 2 is padding: its tasks would take no time
    with pytest.raises(ValueError, match=r"proc\[1, 0\] = 2 is not a processor of problem 1"):
        simulate_batch(mixed, np.array([[2, 2, 2], [2, 0, 0]]), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="integer"):
        simulate_batch(mixed, np.full((2, 3), 0.5), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="finite"):
        simulate_batch(mixed, np.zeros((2, 3), int), np.full((2, 3), np.nan))
    with pytest.raises(ValueError, match="shape"):
        simulate_batch(mixed, np.zeros((3,), int), np.zeros(3))
    good = simulate_batch(mixed, np.array([[2, 2, 2], [1, 0, 0]]), np.zeros((2, 3)))
    np.testing.assert_array_equal(np.asarray(good.finish[1]), simulate(two, [1, 0, 0], np.zeros(3)).finish)


def test_other_wrong_arguments_get_named_errors():
    problem = Problem(np.ones((3, 2)), **CHAIN)
    with pytest.raises(ValueError, match="Shape.num_edges must be an integer >= 1, got 0"):
        pad_problem(problem, Shape(3, 2, 0, 1))
    with pytest.raises(ValueError, match=r"capacity \(idle gaps per processor\) must be an integer >= 1"):
        heft_batch(pad_problems([problem]), capacity=0)  # was an IndexError while tracing
    for call in (lambda: heft("problem"), lambda: pad_problem(None), lambda: simulate([1], [0], [0.0])):
        with pytest.raises(ValueError, match="expected a jaxsched.Problem"):
            call()
