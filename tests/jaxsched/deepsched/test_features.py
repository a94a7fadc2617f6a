"""Features: padded shapes and masks, documented defaults, rank references, scale invariance."""

import numpy as np
import pytest

import jaxsched
from jaxsched.batch import Shape
from jaxsched.deepsched.features import (
    PROC_FEATURES,
    TASK_FEATURES,
    padded_size,
    problem_features,
    time_scale,
)
from jaxsched.generate import cloudsim, random_dag
from jaxsched.priorities import downward_rank
from tests.jaxsched.problems import random_problem


def _longest_mean_path_through(problem):
    """Brute force: longest mean-cost path (mean comp + mean comm) from an entry task to each task,
    excluding the task's own cost, by relaxing edges T times."""
    mean = problem.comp.mean(axis=1)
    rank = np.zeros(problem.num_tasks)
    for _ in range(problem.num_tasks):
        for u, v, d in zip(problem.src, problem.dst, problem.data):
            rank[v] = max(rank[v], rank[u] + mean[u] + d)
    return rank


def test_downward_rank_matches_brute_force():
    for seed in range(10):
        problem = random_problem(seed, max_tasks=15)
        np.testing.assert_allclose(downward_rank(problem), _longest_mean_path_through(problem))


def test_shapes_masks_orders_and_predecessor_table():
    problem = random_dag(20, 3, seed=0)
    features = problem_features(problem, Shape(32, 8, 128, 16))
    assert features.task.shape == (32, len(TASK_FEATURES)) and features.proc.shape == (8, len(PROC_FEATURES))
    assert features.comp.shape == (32, 8) and features.pred.shape == (32, 16)
    assert (
        features.task_mask.sum() == 20
        and features.proc_mask.sum() == 3
        and features.edge_mask.sum() == problem.num_edges
    )
    assert not features.task[20:].any() and not features.proc[3:].any() and not features.comp[:, 3:].any()
    for order in (features.arrival_order, features.rank_order):
        assert sorted(order[:20]) == list(range(20)) and list(order[20:]) == list(range(20, 32))
    position = np.argsort(features.rank_order)
    assert np.all(position[problem.src] < position[problem.dst])  # HEFT's order is topological
    parents = {(int(u), int(v)) for v in range(32) for u in features.pred[v] if u < 32}
    assert parents == set(zip(problem.src.tolist(), problem.dst.tolist()))


def test_too_small_padding_raises():
    with pytest.raises(ValueError, match="tasks"):
        problem_features(random_dag(20, 3, seed=0), Shape(16, 8, 128, 16))


def test_defaults_for_missing_features():
    problem = random_dag(12, 4, seed=1)  # no task or processor features
    features = problem_features(problem, Shape(16, 4, 64, 16))
    column = {name: i for i, name in enumerate(TASK_FEATURES)}
    assert not features.task[:12, [column["arrival"], column["priority"], column["memory"]]].any()
    proc = {name: features.proc[:4, i] for i, name in enumerate(PROC_FEATURES)}
    np.testing.assert_array_equal(proc["cores"], 1.0)
    np.testing.assert_array_equal(proc["memory"], 1.0)
    np.testing.assert_array_equal(proc["frequency"], proc["speed"])  # derived from comp
    fastest = int(np.argmin(problem.comp.mean(axis=0)))
    assert proc["speed"][fastest] == 1.0


def test_present_features_are_used():
    problem = cloudsim(12, 4, seed=2)
    features = problem_features(problem, Shape(16, 4, 64, 16))
    proc = {name: features.proc[:4, i] for i, name in enumerate(PROC_FEATURES)}
    np.testing.assert_allclose(proc["cores"], problem.proc_cores / problem.proc_cores.max(), rtol=1e-6)
    priority = features.task[:12, TASK_FEATURES.index("priority")]
    np.testing.assert_allclose(priority, problem.task_priority / problem.task_priority.max(), rtol=1e-6)


def test_time_scale_is_a_makespan_lower_bound():
    for seed in range(20):
        problem = random_problem(seed, arrival=seed % 2 == 0)
        assert time_scale(problem) <= jaxsched.heft(problem).makespan + 1e-9 or problem.comp.max() == 0


def test_features_do_not_change_when_all_times_scale():
    problem = cloudsim(15, 3, seed=4)
    scaled = jaxsched.Problem(
        problem.comp * 7.0, problem.src, problem.dst, problem.data * 7.0, task_arrival=problem.task_arrival * 7.0
    )
    base = problem_features(
        jaxsched.Problem(problem.comp, problem.src, problem.dst, problem.data, task_arrival=problem.task_arrival),
        Shape(16, 3, 64, 16),
    )
    other = problem_features(scaled, Shape(16, 3, 64, 16))
    for a, b in zip(base, other):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("needed, expected", [(1, 8), (9, 16), (17, 24), (100, 112), (10_000, 10_240)])
def test_padded_size_buckets(needed, expected):
    assert padded_size(needed) == expected
