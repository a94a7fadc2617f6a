"""The batch graph against the per-problem forms it vectorises (`jaxsched.heft`, `jaxsched.priorities`,
`jaxsched.listsched`), to the last bit, on batches of mixed sizes, processor counts and bandwidths."""

import numpy as np
import pytest

from jaxsched import Shape, pad_problems
from jaxsched.batch_graph import BatchGraph
from jaxsched.heft import upward_rank
from jaxsched.jax_listsched import plan_batch
from jaxsched.listsched import PRESETS, ListConfig, make_plan, ready_list_order
from jaxsched.order import priority_order
from jaxsched.priorities import critical_path, downward_rank, optimistic_cost_table
from tests.jaxsched.problems import random_problem


def _problems():
    return [
        random_problem(seed, max_tasks=12, max_procs=4, bandwidth=seed % 2 == 0, arrival=seed % 3 == 0)
        for seed in range(30)
    ]


def test_ranks_tables_and_pins_equal_the_per_problem_forms():
    problems = _problems()
    shape = Shape.of(problems)
    graph = BatchGraph.of(problems, shape.num_tasks, shape.num_procs)
    upward, downward, table = graph.upward_rank(), graph.downward_rank(), graph.optimistic_cost_table()
    pins = graph.critical_path_pins(upward + downward)
    for b, problem in enumerate(problems):
        t, p = problem.comp.shape
        np.testing.assert_array_equal(upward[b, :t], upward_rank(problem))
        np.testing.assert_array_equal(downward[b, :t], downward_rank(problem))
        np.testing.assert_array_equal(table[b, :t, :p], optimistic_cost_table(problem))
        tasks, proc = critical_path(problem)
        expected = np.full(t, -1)
        expected[tasks] = proc
        np.testing.assert_array_equal(pins[b, :t], expected)
        assert (upward[b, t:] == 0).all() and (pins[b, t:] == -1).all()


def test_ready_list_order_equals_the_heap_walk():
    problems = _problems()
    shape = Shape.of(problems)
    graph = BatchGraph.of(problems, shape.num_tasks, shape.num_procs)
    rng = np.random.default_rng(0)
    position = np.tile(np.arange(shape.num_tasks), (len(problems), 1))  # padded tasks last, as in a plan
    for b, problem in enumerate(problems):
        position[b, : problem.num_tasks] = rng.permutation(problem.num_tasks)
    order = graph.ready_list_order(position)
    for b, problem in enumerate(problems):
        t = problem.num_tasks
        np.testing.assert_array_equal(order[b, :t], ready_list_order(problem, position[b, :t]))
        np.testing.assert_array_equal(order[b, t:], np.arange(t, shape.num_tasks))


@pytest.mark.parametrize(
    "config",
    list(PRESETS.values()) + [ListConfig("downward", "eft"), ListConfig("oct", "est", False, "fastest_processor")],
)
def test_plan_batch_equals_per_problem_plans(config):
    problems = _problems()
    shape = Shape.of(problems)
    plans = plan_batch(problems, config, shape)
    for b, problem in enumerate(problems):
        t, p = problem.comp.shape
        plan = make_plan(problem, config)
        np.testing.assert_array_equal(plans.position[b, :t], plan.position)
        np.testing.assert_array_equal(plans.order[b, :t], plan.order)
        np.testing.assert_array_equal(plans.pin[b, :t], plan.pin)
        np.testing.assert_array_equal(plans.oct[b, :t, :p], plan.oct.astype(np.float32))
        np.testing.assert_array_equal(plans.draws[b, :t], plan.draws)


def test_padded_upward_ranks_and_heft_order_equal_the_per_problem_forms():
    problems = _problems()
    batch = pad_problems(problems, dtype=np.float64)
    for b, problem in enumerate(problems):
        t = problem.num_tasks
        np.testing.assert_array_equal(batch.upward_rank[b, :t], upward_rank(problem))
        np.testing.assert_array_equal(batch.heft_order[b, :t], priority_order(problem, upward_rank(problem)))
        np.testing.assert_array_equal(batch.topo_order[b, :t], problem.topological_order)
