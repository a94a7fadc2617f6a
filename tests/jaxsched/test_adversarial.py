from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsched._moves import perturb
from jaxsched.adversarial import LEARNED, SearchConfig, search, worst_ratios
from jaxsched.dense import dense_plan, proc_mask, random_instance, task_mask, to_padded, to_problem
from jaxsched.jax_listsched import list_schedule_padded
from jaxsched.listsched import PRESETS, list_schedule, make_plan, schedule


@pytest.mark.parametrize(
    "name",
    ["CPOP", *(pytest.param(n, marks=pytest.mark.slow) for n in ("Sufferage", "PEFT", "WBA"))],
)
def test_dense_plans_and_schedules_equal_numpy(name):
    """The JAX plans of dense instances (ranks, cost table, critical path, ready-list order) are
    `make_plan`'s, and the schedules `schedule`'s, on random instances (float64). Positions are
    compared where priorities cannot tie: rank sums along a critical path are equal in exact
    arithmetic and differ in the last bit between the two summation orders (the visit order does
    not depend on it, precedence fixes it)."""
    config = PRESETS[name]
    with jax.enable_x64(True):

        @jax.jit
        @jax.vmap
        def run(key, draws):
            instance = random_instance(key, 7, 3, dtype=jnp.float64)
            plan = dense_plan(instance, config, draws)
            return instance, plan, list_schedule_padded(to_padded(instance), plan, config)

        keys = jax.random.split(jax.random.key(7), 16)
        draws = np.random.default_rng(0).integers(0, 2**31 - 1, (16, 7)).astype(np.int32)
        instances, plans, out = run(keys, draws)
        for b in range(16):
            problem = to_problem(jax.tree.map(lambda x, b=b: x[b], instances))
            reference_plan = make_plan(problem, config)
            if config.priority != "rank_sum":
                np.testing.assert_array_equal(np.asarray(plans.position[b]), reference_plan.position)
            np.testing.assert_array_equal(np.asarray(plans.order[b]), reference_plan.order)
            np.testing.assert_array_equal(np.asarray(plans.pin[b]), reference_plan.pin)
            np.testing.assert_allclose(np.asarray(plans.oct[b]), reference_plan.oct, rtol=1e-12)
            reference = list_schedule(problem, config, reference_plan._replace(draws=draws[b]))  # WBA: same draws
            np.testing.assert_array_equal(np.asarray(out.proc[b]), reference.proc)
            np.testing.assert_allclose(np.asarray(out.finish[b]), reference.finish, rtol=1e-12)


def test_perturb_changes_one_thing_and_keeps_the_model():
    instance = random_instance(jax.random.key(0), 6, 3)
    move = jax.jit(perturb)
    for k in jax.random.split(jax.random.key(1), 40):
        new = move(k, instance)
        changed = {f for f, a, b in zip(new._fields, new, instance) if not np.array_equal(np.asarray(a), np.asarray(b))}
        assert len(changed) <= 1 or changed == {"adj", "data"}  # a new dependency gets new data
        np.testing.assert_array_equal(np.asarray(new.strength), np.asarray(new.strength).T)
        assert np.all(np.asarray(new.speed) >= 0.1) and np.all(np.asarray(new.weight) > 0)
        assert not np.asarray(jnp.tril(new.adj)).any()
        instance = new


def test_search_finds_ratios_that_the_numpy_reference_confirms():
    """Every chain's best ratio never falls below its first, and replaying its best instance through
    the NumPy reference gives the same ratio (float32 search against float64 replay)."""
    config = SearchConfig(num_tasks=5, num_procs=2, steps=40, chains_per_pair=2, names=("HEFT", "MET"))
    chains = search(jax.random.key(0), config)
    table = worst_ratios(chains, config)
    assert table.shape == (2, 2) and np.all(np.diag(table) == 1)
    assert table.max() > 1.0
    for c, (a, b) in enumerate(config.pairs):
        best = jax.tree.map(lambda x, c=c: x[c], chains.best)
        problem = to_problem(best)
        ratio = schedule(problem, config.names[a]).makespan / schedule(problem, config.names[b]).makespan
        np.testing.assert_allclose(ratio, float(chains.best_ratio[c]), rtol=1e-4)


class Serial(NamedTuple):
    """A stand-in learned scheduler (a pytree with `makespan`): every task one after another on the fastest
    processor, stretched by `slowdown`."""

    slowdown: jax.Array

    def makespan(self, instance):
        work = jnp.where(task_mask(instance), instance.weight, 0).sum()
        return self.slowdown * work / jnp.where(proc_mask(instance), instance.speed, 0).max()


def test_a_learned_scheduler_joins_the_search_as_a_pytree():
    """Only the pairs of `targets` are searched, and the learned scheduler's makespan is its own, for two
    values of the pytree (checked by hand against the NumPy MET)."""
    config = SearchConfig(
        num_tasks=4, num_procs=2, steps=10, chains_per_pair=2, names=("MET", LEARNED), targets=(LEARNED,)
    )
    np.testing.assert_array_equal(config.pairs, [[1, 0], [1, 0]])
    for slowdown in (1.0, 3.0):
        chains = search(jax.random.key(0), config, learned=Serial(jnp.float32(slowdown)))
        for c in range(2):
            problem = to_problem(jax.tree.map(lambda x, c=c: x[c], chains.best))
            serial = slowdown * problem.comp.min(axis=1).sum()  # comp = weight / speed: the fastest is one processor
            np.testing.assert_allclose(chains.best_ratio[c], serial / schedule(problem, "MET").makespan, rtol=1e-5)
    with pytest.raises(ValueError, match="learned"):
        search(jax.random.key(0), config)
    with pytest.raises(ValueError, match="learned"):
        search(jax.random.key(0), SearchConfig(names=("MET", "HEFT")), learned=Serial(jnp.float32(1)))
    with pytest.raises(ValueError, match="targets"):
        SearchConfig(names=("MET", "HEFT"), targets=("OLB",))


def test_bad_search_configs():
    with pytest.raises(ValueError, match="unknown scheduler"):
        SearchConfig(names=("HEFT", "GA"))
    with pytest.raises(ValueError, match="at least two"):
        SearchConfig(names=("HEFT",))
    with pytest.raises(ValueError, match="temperature"):
        SearchConfig(temperature_end=0.0)
