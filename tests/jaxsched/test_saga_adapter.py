"""The SAGA adapter: conversions both ways, and our schedulers against SAGA's on SAGA's own instance
families (out-trees, in-trees, parallel chains on random complete networks).

Where the definitions agree the makespans are equal. They agree for the static presets once both
visit tasks in the same order: SAGA takes its topological order (and HEFT's rank order) from
iteration over hashed sets, so the test hands SAGA's order to our scheduler. Sufferage agrees as is.
They differ, by definition, for HEFT's and CPOP's ranks (SAGA averages a transfer over every link,
self links included, we over the mean bandwidth between distinct processors), MinMin and MaxMin (SAGA
schedules the tasks ready at the start of a round before admitting newly ready ones), ETF (SAGA
advances a clock) and WBA (its own random draws): for those the test checks only that SAGA's
schedules are valid in our machine model with the makespan SAGA reports.
"""

import random
import sys

import numpy as np
import pytest

from jaxsched.listsched import list_schedule, make_plan, preset, schedule
from jaxsched.problem import Problem, validate
from jaxsched.saga_adapter import (
    cost_and_speed,
    from_saga,
    import_saga,
    schedule_from_saga,
    schedule_in_sagas_order,
    to_saga,
)

FAMILIES = ("out_trees", "in_trees", "parallel_chains")
RTOL = 1e-6  # SAGA's random networks have self links of speed 1e9, taken as instant


def saga_instances(family: str, count: int, seed: int):
    """`count` (task graph, network) pairs of a SAGA family, weights uniform in [0.5, 1.5) (SAGA's
    default weight is the constant 2, which makes every comparison a matter of tie-breaking)."""
    pytest.importorskip("saga")
    from saga.schedulers.data import random as saga_random

    rng = random.Random(seed)

    def weight(*_):
        return rng.uniform(0.5, 1.5)

    if family == "parallel_chains":
        graphs = saga_random.gen_parallel_chains(count, 3, 4, weight, weight)
    else:
        graphs = getattr(saga_random, f"gen_{family}")(count, 3, 2, weight, weight)
    return list(zip(graphs, saga_random.gen_random_networks(count, 3, weight, weight)))


def with_order(problem: Problem, name: str, order: np.ndarray):
    """Our preset `name` visiting tasks in `order` (the ready list stays SAGA's: order is topological)."""
    config = preset(name)
    position = np.empty(order.size, dtype=np.int64)
    position[order] = np.arange(order.size)
    return list_schedule(problem, config, make_plan(problem, config)._replace(position=position, order=order))


@pytest.mark.parametrize("family", FAMILIES)
def test_static_presets_equal_saga_in_its_visit_order(family):
    instances = saga_instances(family, 3, seed=1)
    from saga import schedulers
    from saga.schedulers.heft import heft_rank_sort

    theirs = dict(
        HEFT=schedulers.HeftScheduler, MCT=schedulers.MCTScheduler, MET=schedulers.METScheduler,
        OLB=schedulers.OLBScheduler, MST=schedulers.MSTScheduler, FastestNode=schedulers.FastestNodeScheduler,
    )
    for task_graph, network in instances:
        # SAGA's node iteration order, so that ties between idle processors go the same way (OLB)
        ours = from_saga(task_graph, network, node_order=[n.name for n in network.nodes], self_links="instant")
        topological = np.array([ours.tasks.index(t.name) for t in task_graph.topological_sort()])
        by_rank = np.array([ours.tasks.index(t) for t in heft_rank_sort(network, task_graph)])
        for name, scheduler in theirs.items():
            order = by_rank if name == "HEFT" else topological
            expected = scheduler().schedule(network, task_graph).makespan
            assert with_order(ours.problem, name, order).makespan == pytest.approx(expected, rel=RTOL), name


@pytest.mark.parametrize("family", FAMILIES)
def test_sufferage_equals_saga(family):
    instances = saga_instances(family, 3, seed=2)
    from saga.schedulers import SufferageScheduler

    for task_graph, network in instances:
        ours = from_saga(task_graph, network, self_links="instant")
        expected = SufferageScheduler().schedule(network, task_graph).makespan
        assert schedule(ours.problem, "Sufferage").makespan == pytest.approx(expected, rel=RTOL)


@pytest.mark.parametrize("family", FAMILIES)
def test_saga_schedules_are_valid_in_our_model(family):
    task_graph, network = saga_instances(family, 1, seed=3)[0]
    from saga import schedulers

    names = ("CpopScheduler", "MinMinScheduler", "MaxMinScheduler", "ETFScheduler", "WBAScheduler", "HeftScheduler")
    ours = from_saga(task_graph, network, self_links="instant")
    for name in names:
        theirs = getattr(schedulers, name)().schedule(network, task_graph)
        converted = schedule_from_saga(theirs, ours.tasks, ours.nodes)
        validate(ours.problem, converted, rtol=RTOL)
        assert converted.makespan == pytest.approx(theirs.makespan, rel=1e-12), name


def rank_one_problem(seed: int) -> Problem:
    """A random DAG whose times are a task cost over a processor speed, with symmetric bandwidths,
    one link instant."""
    rng = np.random.default_rng(seed)
    num_tasks, num_procs = 12, 3
    cost, speed = rng.uniform(1, 10, num_tasks), rng.uniform(0.5, 2, num_procs)
    pairs = np.array([(i, j) for i in range(num_tasks) for j in range(i + 1, num_tasks)])
    pairs = pairs[rng.random(len(pairs)) < 0.3]
    bandwidth = rng.uniform(0.5, 2, (num_procs, num_procs))
    bandwidth = bandwidth + bandwidth.T
    bandwidth[0, 1] = bandwidth[1, 0] = np.inf
    return Problem(np.outer(cost, 1 / speed), pairs[:, 0], pairs[:, 1], rng.uniform(0, 5, len(pairs)), bandwidth)


@pytest.mark.parametrize("seed", range(3))
def test_round_trip_problem_saga_problem(seed):
    pytest.importorskip("saga")
    problem = rank_one_problem(seed)
    task_graph, network, tasks, nodes = to_saga(problem)
    back = from_saga(task_graph, network)
    assert back.tasks == tasks and back.nodes == nodes
    np.testing.assert_allclose(back.problem.comp, problem.comp, rtol=1e-12)
    np.testing.assert_array_equal(back.problem.src, problem.src)
    np.testing.assert_array_equal(back.problem.dst, problem.dst)
    np.testing.assert_array_equal(back.problem.data, problem.data)
    np.testing.assert_array_equal(back.problem.bandwidth, problem.bandwidth)
    # SAGA's HEFT on the converted instance is a valid schedule of the original problem
    from saga.schedulers import HeftScheduler

    validate(problem, schedule_from_saga(HeftScheduler().schedule(network, task_graph), tasks, nodes))


def test_unit_links_round_trip_to_no_bandwidth():
    pytest.importorskip("saga")
    problem = Problem(np.outer([1.0, 2.0, 3.0], [1.0, 0.5]), [0, 0], [1, 2], [4.0, 5.0])
    task_graph, network, _, _ = to_saga(problem)
    assert {(e.source, e.target, e.speed) for e in network.edges} == {
        ("p0", "p0", np.inf), ("p0", "p1", 1.0), ("p1", "p1", np.inf)
    }
    assert from_saga(task_graph, network).problem.bandwidth is None


def test_cost_and_speed_recovers_the_factors():
    cost, speed = np.array([2.0, 0.0, 6.0]), np.array([1.0, 4.0])
    problem = Problem(np.outer(cost, 1 / speed), [0], [1], [1.0])  # comp [[2, 0.5], [0, 0], [6, 1.5]]
    found_cost, found_speed = cost_and_speed(problem)  # processor 0 has speed 1
    np.testing.assert_array_equal(found_cost, cost)
    np.testing.assert_array_equal(found_speed, speed)


def test_conversions_refuse_what_the_other_model_cannot_hold():
    saga = pytest.importorskip("saga")
    with pytest.raises(ValueError, match="not a task cost over a processor speed"):
        to_saga(Problem(np.array([[1.0, 2.0], [2.0, 1.0]]), [], [], []))
    with pytest.raises(ValueError, match="zero time on some processors only"):
        to_saga(Problem(np.array([[3.0, 0.0]]), [], [], []))
    with pytest.raises(ValueError, match="undirected"):
        to_saga(Problem(np.ones((1, 2)), [], [], [], bandwidth=np.array([[1.0, 2.0], [3.0, 1.0]])))
    with pytest.raises(ValueError, match="release times"):
        to_saga(Problem(np.ones((1, 1)), [], [], [], task_arrival=[1.0]))
    task_graph = saga.TaskGraph.create([("a", 1.0), ("b", 1.0)], [("a", "b", 1.0)])
    finite_self = saga.Network.create([("n0", 1.0)], [("n0", "n0", 1e9)])
    with pytest.raises(ValueError, match="self link"):
        from_saga(task_graph, finite_self)
    assert from_saga(task_graph, finite_self, self_links="instant").problem.num_procs == 1
    unlinked = saga.Network.create([("n0", 1.0), ("n1", 1.0)], [])  # SAGA gives missing links speed 0
    with pytest.raises(ValueError, match="transfers would never end"):
        from_saga(task_graph, unlinked)
    with pytest.raises(ValueError, match="speed 0"):
        from_saga(task_graph, saga.Network.create([("n0", 0.0)], []))
    with pytest.raises(ValueError, match="task_order must list each task once"):
        from_saga(task_graph, saga.Network.create([("n0", 1.0)], []), task_order=["a"])
    with pytest.raises(ValueError, match="self_links"):
        from_saga(task_graph, finite_self, self_links="drop")


def test_missing_saga_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "saga", None)
    with pytest.raises(ImportError, match="extra `saga`"):
        import_saga()


@pytest.mark.parametrize("name", ["HEFT", "MinMin"])
def test_sagas_order_is_only_for_topological_presets(name):
    with pytest.raises(ValueError, match="topological order"):
        schedule_in_sagas_order(None, None, name)  # refused before SAGA's objects are read
