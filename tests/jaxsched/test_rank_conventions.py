"""SAGA's rank convention beside Topcuoglu's: hand-worked values, the JAX dense plans equal to the NumPy
reference under both, and SAGA's own makespans on the worst instances a PISA search finds (extra
`saga`, skipped without it)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsched.dense import dense_plan, random_instance, to_padded, to_problem
from jaxsched.jax_listsched import list_schedule_padded
from jaxsched.listsched import PRESETS, list_schedule, make_plan, schedule
from jaxsched.priorities import critical_path, downward_rank, mean_transfer, optimistic_cost_table
from jaxsched.problem import Problem


def _two_task_problem():
    """Task 0 (cost 2) -> task 1 (cost 4), data 2; speeds 1 and 2; the link between them 0.5."""
    comp = np.outer([2.0, 4.0], [1.0, 0.5])
    return Problem(comp, [0], [1], [2.0], bandwidth=np.array([[1.0, 0.5], [0.5, 1.0]]))


def test_saga_convention_by_hand():
    """Mean transfer: Topcuoglu 2 / 0.5 = 4; SAGA (2 / 0.5 + 0 + 0) / 3 links = 4 / 3.
    Downward rank of task 1: Topcuoglu mean cost of task 0 (1.5) + 4 = 5.5; SAGA task 1's cost over the
    mean speed (4 / 1.5) + 4 / 3 = 4. OCT(0, p0) under SAGA: min(4 + 0, 2 + 2 / 0.5) = 4; on p1: 2."""
    problem = _two_task_problem()
    np.testing.assert_allclose(mean_transfer(problem), [4.0])
    np.testing.assert_allclose(mean_transfer(problem, "saga"), [4.0 / 3.0])
    np.testing.assert_allclose(downward_rank(problem), [0.0, 5.5])
    np.testing.assert_allclose(downward_rank(problem, convention="saga"), [0.0, 4.0])
    np.testing.assert_allclose(optimistic_cost_table(problem, "saga"), [[4.0, 2.0], [0.0, 0.0]])
    # SAGA's critical path: rank sums close to the entry task's; upward rank 0: 1.5 + 4/3 + 3 = 35/6,
    # task 1: 3 + 4 = 7, not close, so task 0 alone, on the processor it runs fastest (p1)
    tasks, proc = critical_path(problem, "saga")
    assert tasks.tolist() == [0] and proc == 1
    with pytest.raises(ValueError, match="rank convention"):
        mean_transfer(problem, "heft")


@pytest.mark.parametrize("name", ["CPOP", "PEFT", pytest.param("HEFT", marks=pytest.mark.slow)])
def test_dense_plans_equal_numpy_under_sagas_convention(name):
    """The JAX plans and schedules of padded instances equal the NumPy reference's with ranks="saga"."""
    config = dataclasses.replace(PRESETS[name], ranks="saga")
    with jax.enable_x64(True):

        @jax.jit
        @jax.vmap
        def run(key):
            instance = random_instance(key, 6, 3, 0.5, jnp.float64, shape=(7, 4), value_range=(0.1, 1.0))
            plan = dense_plan(instance, config, jnp.zeros(7, jnp.int32))
            return instance, list_schedule_padded(to_padded(instance), plan, config)

        instances, out = run(jax.random.split(jax.random.key(5), 8))
        for b in range(8):
            problem = to_problem(jax.tree.map(lambda x, b=b: x[b], instances))
            reference = list_schedule(problem, config, make_plan(problem, config))
            np.testing.assert_array_equal(np.asarray(out.proc[b, :6]), reference.proc)
            np.testing.assert_allclose(np.asarray(out.finish[b, :6]), reference.finish, rtol=1e-12)


def test_topcuoglus_convention_stays_the_default():
    """The default convention is Topcuoglu's (the published schedules live in test_listsched)."""
    problem = _two_task_problem()
    assert schedule(problem, "CPOP").makespan == schedule(problem, "CPOP", ranks="topcuoglu").makespan
    assert PRESETS["HEFT"].ranks == "topcuoglu"


@pytest.mark.slow
def test_sagas_makespans_on_the_worst_instances_found():
    """A short PISA search (SAGA's convention); on every cell's worst instance, SAGA's HEFT, CPOP,
    FastestNode, MET and Sufferage give our makespans (float64 replay; SAGA's self links are instant), and
    so do its MCT, MST and OLB once ours take SAGA's task and node orders of this process
    (`schedule_in_sagas_order`: SAGA's orders follow string hashing, see `jaxsched.saga_adapter`)."""
    pytest.importorskip("saga")
    from saga import schedulers

    from jaxsched.adversarial import search_config
    from jaxsched.pisa import heatmap_search
    from jaxsched.saga_adapter import dense_to_saga, schedule_in_sagas_order

    theirs = {
        "HEFT": schedulers.HeftScheduler(),
        "CPOP": schedulers.CpopScheduler(),
        "FastestNode": schedulers.FastestNodeScheduler(),
        "MET": schedulers.METScheduler(),
        "Sufferage": schedulers.SufferageScheduler(),
        "MCT": schedulers.MCTScheduler(),
        "MST": schedulers.MSTScheduler(),
        "OLB": schedulers.OLBScheduler(),
    }
    in_sagas_order = ("MCT", "MST", "OLB")
    names = tuple(theirs)
    config = search_config("pisa", names=names, chains_per_pair=1, steps=40)
    heatmap = heatmap_search(config, seed=3)
    for a in range(len(names)):
        for b in range(len(names)):
            if a == b:
                continue
            instance = jax.tree.map(lambda x, a=a, b=b: x[a, b], heatmap.instances)
            task_graph, network, _, _ = dense_to_saga(instance)
            problem = to_problem(instance)
            for name in (names[a], names[b]):
                if name in in_sagas_order:
                    ours = schedule_in_sagas_order(task_graph, network, name)[0].makespan
                else:
                    ours = schedule(problem, name, ranks="saga").makespan
                np.testing.assert_allclose(ours, theirs[name].schedule(network, task_graph).makespan, rtol=1e-6)


def test_batched_schedulers_take_the_convention():
    """`schedule_batch(..., ranks="saga")` plans with SAGA's ranks: its CPOP equals the NumPy reference's."""
    from jaxsched.generate import random_dag
    from jaxsched.jax_listsched import schedule_batch

    problems = [random_dag(8, 3, integer=True, seed=s) for s in range(2)]
    out = schedule_batch(problems, "CPOP", ranks="saga")
    for b, problem in enumerate(problems):
        reference = schedule(problem, "CPOP", ranks="saga")
        np.testing.assert_array_equal(np.asarray(out.proc[b, :8]), reference.proc)
        np.testing.assert_allclose(np.asarray(out.finish[b, :8]), reference.finish, rtol=1e-6)
