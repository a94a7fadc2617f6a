"""DeepSched on dense instances in JAX (`jaxsched.deepsched.dense`) against the host path it twins: the
features of `problem_features` and the makespan of `NeuralScheduler.schedule` on `to_problem(instance)`."""

import chex
import jax
import numpy as np
import pytest

from jaxsched.batch import Shape
from jaxsched.deepsched import (
    CONFIGS,
    DeepSchedNet,
    NeuralScheduler,
    dense_features,
    problem_features,
)
from jaxsched.dense import related_instance, to_problem

SHAPE = (6, 4)  # padded tasks x processors of every instance
HOST_SHAPE = Shape(8, 8, 16, 8)  # the host path's padding: one compilation for all


@pytest.fixture(scope="module")
def instances():
    """20 random related-machines instances of 2 to 6 tasks on 1 to 4 processors, padded to one shape;
    every fifth a chain, and two with tied values (clipped to 1, as PISA's moves leave them)."""
    rng = np.random.default_rng(3)
    made = []
    for i in range(20):
        tasks, procs = rng.integers(2, 7), rng.integers(1, 5)
        pairs = np.array([(a, b) for a in range(tasks) for b in range(a + 1, tasks)])
        keep = (pairs[:, 1] == pairs[:, 0] + 1) if i % 5 == 0 else rng.random(len(pairs)) < 0.4
        src, dst = pairs[keep].T
        cost = np.ones(tasks) if i in (3, 4) else rng.uniform(0.1, 1.0, tasks)
        strength = rng.uniform(0.1, 1.0, (procs, procs))
        strength = np.triu(strength, 1) + np.triu(strength, 1).T + np.eye(procs)
        data = rng.uniform(0.1, 1.0, len(src))
        made.append(related_instance(cost, rng.uniform(0.1, 1.0, procs), src, dst, data, strength, *SHAPE))
    return jax.tree.map(lambda *leaves: np.stack(leaves).astype(leaves[0].dtype), *made)


@pytest.fixture(scope="module")
def network(instances):
    """An untrained feedback network with random normal weights (every feature moves its decisions),
    drawn on the host from the parameter shapes (no initialiser to compile)."""
    config = CONFIGS["test"].replace(model={"recurrence": "mingru"})
    features = jax.eval_shape(dense_features, jax.tree.map(lambda x: x[0], instances))
    shapes = jax.eval_shape(DeepSchedNet(config.model).init, jax.random.key(1), features)
    rng = np.random.default_rng(1)
    params = jax.tree.map(lambda leaf: jax.numpy.asarray(rng.normal(0.0, 0.5, leaf.shape), leaf.dtype), shapes)
    return NeuralScheduler(config, params)


def _instance(instances, i):
    return jax.tree.map(lambda x: x[i], instances)


def test_features_equal_the_host_features(instances):
    features = jax.jit(jax.vmap(dense_features))(instances)
    for i in range(20):
        problem = to_problem(_instance(instances, i))
        host = problem_features(problem, HOST_SHAPE)
        mine = jax.tree.map(lambda x, i=i: np.asarray(x[i]), features)
        t, p = problem.num_tasks, problem.num_procs
        chex.assert_trees_all_close(
            (mine.task[:t], mine.proc[:p], mine.comp[:t, :p]),
            (host.task[:t], host.proc[:p], host.comp[:t, :p]),
            rtol=1e-5,
            atol=1e-6,
        )
        np.testing.assert_array_equal(mine.rank_order[:t], host.rank_order[:t])
        assert not mine.task[t:].any() and not mine.proc[p:].any()
        # each task's predecessors and their mean transfer times, as sets
        for task in range(t):
            mine_preds = {(int(k), round(float(d), 5)) for k, d in zip(mine.pred[task], mine.pred_data[task]) if k < 6}
            host_preds = {(int(k), round(float(d), 5)) for k, d in zip(host.pred[task], host.pred_data[task]) if k < t}
            assert mine_preds == host_preds


def test_makespans_equal_the_neural_schedulers_and_new_weights_reuse_the_program(instances, network):
    @jax.jit
    @chex.assert_max_traces(n=1)
    def spans(scheduler, instances):
        return jax.vmap(scheduler.makespan)(instances)

    other = NeuralScheduler(network.config, jax.tree.map(lambda x: -x, network.params))
    for scheduler, count in ((network, 20), (other, 5)):
        expected = [
            scheduler.schedule(to_problem(_instance(instances, i)), shape=HOST_SHAPE).makespan for i in range(count)
        ]
        np.testing.assert_allclose(np.asarray(spans(scheduler.dense(), instances))[:count], expected, rtol=1e-5)
