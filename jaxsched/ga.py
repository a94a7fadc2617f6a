"""The DeepSched paper's genetic algorithm (after Kumar et al. 2010), in NumPy and in JAX.

Chromosome: a processor per task and a priority per task in [0, 1); `simulate` turns it into a
valid schedule. Fitness (lower is better): average waiting time, paper Eq. 1 (or the makespan).
Each generation keeps the `elite` best, and breeds the rest from binary-tournament parents by
one-point crossover (probability `crossover_rate`) and per-gene mutation (probability
`mutation_rate`, default 1/T) that redraws a processor or a priority. Initialisation is random.

Every random number a generation needs is drawn up front (`Draws`), and `breed` is written once for
both array modules, so the NumPy reference and the jitted JAX version breed identical offspring from
identical draws. The JAX version evaluates the whole population in one vmapped `simulate_padded`
call and runs generations as a `lax.scan` (`evolve_padded`, vmappable over keys for sweeps).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from tqdm.auto import tqdm

from jaxsched.batch import PaddedProblem, Shape, assert_padded, pad_problem
from jaxsched.common.arguments import integer
from jaxsched.common.sharding import Devices, batch_mesh, gather, replicate, shard_batch
from jaxsched.jax_simulate import simulate_padded
from jaxsched.numba_simulate import population_fitness_numba
from jaxsched.problem import Problem, Schedule, check_problem
from jaxsched.simulate import simulate

OBJECTIVES = ("waiting", "makespan")


@dataclasses.dataclass(frozen=True)
class GAConfig:
    """GA hyperparameters (the paper gives none; these are common choices)."""

    population: int = 100
    generations: int = 100
    crossover_rate: float = 0.9
    mutation_rate: float | None = None  # per gene; None means 1 / num_tasks
    tournament: int = 2
    elite: int | None = None  # None means min(2, population - 1)
    objective: str = "waiting"  # paper Eq. 1; or "makespan"

    def __post_init__(self):
        for name in ("population", "generations", "tournament", "elite"):
            value = getattr(self, name)
            if value is not None:
                integer(name, value)
        if self.population < 2 or self.generations < 0:
            raise ValueError(f"need population >= 2 and generations >= 0, got {self.population}, {self.generations}")
        if self.elite is None:
            object.__setattr__(self, "elite", min(2, self.population - 1))
        if not 0 <= self.elite < self.population:
            raise ValueError(f"elite must lie in [0, population), got {self.elite}")
        if self.tournament < 1:
            raise ValueError(f"tournament must be >= 1, got {self.tournament}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        for name in ("crossover_rate", "mutation_rate"):
            rate = getattr(self, name)
            if rate is not None and not 0 <= rate <= 1:
                raise ValueError(f"{name} must lie in [0, 1], got {rate}")

    def mutation(self, num_tasks: int) -> float:
        """The per-gene mutation probability for `num_tasks` genes."""
        return 1.0 / num_tasks if self.mutation_rate is None else self.mutation_rate


class Draws(NamedTuple):
    """All random numbers of one generation, for C = population - elite children."""

    contestants: np.ndarray  # [C, 2, tournament] int population indices
    crossover: np.ndarray  # [C] bool
    cut: np.ndarray  # [C] int in [1, T): a child takes its first parent's genes before the cut
    mutate_proc: np.ndarray  # [C, T] bool
    new_proc: np.ndarray  # [C, T] int
    mutate_priority: np.ndarray  # [C, T] bool
    new_priority: np.ndarray  # [C, T] float in [0, 1)


def breed(xp, proc, priority, fitness, draws: Draws, elite: int):
    """Next generation from `proc[N, T]`, `priority[N, T]` and `fitness[N]`; `xp` is numpy or jax.numpy."""
    elites = xp.argsort(fitness, stable=True)[:elite]
    winner = xp.argmin(fitness[draws.contestants], axis=-1)[..., None]  # tournament: lowest fitness
    parents = xp.take_along_axis(draws.contestants, winner, axis=-1)[..., 0]  # [C, 2]
    before_cut = xp.arange(proc.shape[1])[None, :] < draws.cut[:, None]
    from_first = before_cut | ~draws.crossover[:, None]
    child_proc = xp.where(from_first, proc[parents[:, 0]], proc[parents[:, 1]])
    child_priority = xp.where(from_first, priority[parents[:, 0]], priority[parents[:, 1]])
    child_proc = xp.where(draws.mutate_proc, draws.new_proc, child_proc)
    child_priority = xp.where(draws.mutate_priority, draws.new_priority, child_priority)
    return xp.concatenate([proc[elites], child_proc]), xp.concatenate([priority[elites], child_priority])


def numpy_draws(rng: np.random.Generator, config: GAConfig, num_tasks: int, num_procs: int) -> Draws:
    """One generation's draws from a NumPy generator."""
    children, rate = config.population - config.elite, config.mutation(num_tasks)
    return Draws(
        contestants=rng.integers(0, config.population, (children, 2, config.tournament)),
        crossover=rng.random(children) < config.crossover_rate,
        cut=rng.integers(1, max(2, num_tasks), children),
        mutate_proc=rng.random((children, num_tasks)) < rate,
        new_proc=rng.integers(0, num_procs, (children, num_tasks)),
        mutate_priority=rng.random((children, num_tasks)) < rate,
        new_priority=rng.random((children, num_tasks)),
    )


def jax_draws(key: jax.Array, config: GAConfig, problem: PaddedProblem) -> Draws:
    """One generation's draws for a padded problem (processors drawn among its real ones)."""
    children = config.population - config.elite
    num_tasks, num_procs = problem.task_mask.sum(), problem.proc_mask.sum()
    rate = 1.0 / num_tasks.astype(jnp.float32) if config.mutation_rate is None else config.mutation_rate
    keys = jax.random.split(key, 7)
    genes = (children, problem.task_mask.shape[0])
    return Draws(
        contestants=jax.random.randint(keys[0], (children, 2, config.tournament), 0, config.population),
        crossover=jax.random.bernoulli(keys[1], config.crossover_rate, (children,)),
        cut=jax.random.randint(keys[2], (children,), 1, jnp.maximum(2, num_tasks)),
        mutate_proc=jax.random.bernoulli(keys[3], rate, genes),
        new_proc=jax.random.randint(keys[4], genes, 0, num_procs),
        mutate_priority=jax.random.bernoulli(keys[5], rate, genes),
        new_priority=jax.random.uniform(keys[6], genes),
    )


def fitness_of(problem: Problem, schedule: Schedule, objective: str) -> float:
    """Average waiting time (paper Eq. 1) or makespan of `schedule`."""
    if objective == "makespan":
        return schedule.makespan
    return float(np.mean(schedule.start - problem.arrival))


def population_fitness(problem: PaddedProblem, proc, priority, objective: str, capacity: int | None = None):
    """([N] fitness, overflow) of a population on one padded problem, in one vmapped simulation.

    `capacity` bounds busy tasks per processor (see `jaxsched.jax_simulate`); `overflow` says it was too
    small for some chromosome, whose fitness is then wrong.
    """
    assert_padded(problem)
    chex.assert_rank([proc, priority], [2, 2])
    schedules = jax.vmap(simulate_padded, in_axes=(None, 0, 0, None))(problem, proc, priority, capacity)
    mask = problem.task_mask[None, :]
    if objective == "makespan":
        fitness = jnp.where(mask, schedules.finish, -jnp.inf).max(axis=1)
    else:
        waiting = jnp.where(mask, schedules.start - problem.arrival[None, :], 0).sum(axis=1)
        fitness = waiting / mask.sum().astype(waiting.dtype)
    return fitness, schedules.overflow.any()


class GAState(NamedTuple):
    """A population, its fitness, and whether any evaluation so far overflowed its capacity."""

    proc: jax.Array  # [N, T] int32
    priority: jax.Array  # [N, T]
    fitness: jax.Array  # [N]
    overflow: jax.Array  # [] bool


def random_population(problem: PaddedProblem, key: jax.Array, config: GAConfig):
    """Random chromosomes: processors among the real ones, priorities in [0, 1)."""
    proc_key, priority_key = jax.random.split(key)
    genes = (config.population, problem.task_mask.shape[0])
    proc = jax.random.randint(proc_key, genes, 0, problem.proc_mask.sum())
    return proc, jax.random.uniform(priority_key, genes, dtype=problem.comp.dtype)


def initial_state(problem: PaddedProblem, key: jax.Array, config: GAConfig, capacity: int | None = None) -> GAState:
    """A random population and its fitness."""
    proc, priority = random_population(problem, key, config)
    return GAState(proc, priority, *population_fitness(problem, proc, priority, config.objective, capacity))


def generation(problem: PaddedProblem, state: GAState, key, config: GAConfig, capacity: int | None = None) -> GAState:
    """One GA generation: breed, then evaluate every child with the JAX simulator."""
    draws = jax_draws(key, config, problem)
    proc, priority = breed(jnp, state.proc, state.priority, state.fitness, draws, config.elite)
    fitness, overflow = population_fitness(problem, proc, priority, config.objective, capacity)
    return GAState(proc, priority, fitness, state.overflow | overflow)


@functools.partial(jax.jit, static_argnames=("config", "capacity"))
def evolve_padded(problem: PaddedProblem, key: jax.Array, config: GAConfig, capacity: int | None = None):
    """The whole JAX GA as one `lax.scan`: returns (final GAState, best fitness per generation [G + 1]).

    Pure in (problem, key): `jax.vmap(evolve_padded, in_axes=(None, 0, None))` runs one GA per key.
    With a `capacity` below T, rerun with a larger one if the final state reports `overflow`.
    """
    init_key, loop_key = jax.random.split(key)
    state = initial_state(problem, init_key, config, capacity)

    def step(state, key):
        state = generation(problem, state, key, config, capacity)
        return state, state.fitness.min()

    first = state.fitness.min(keepdims=True)
    state, history = jax.lax.scan(step, state, jax.random.split(loop_key, config.generations))
    return state, jnp.concatenate([first, history])


_fitness_jit = jax.jit(population_fitness, static_argnames=("objective", "capacity"))


@functools.partial(jax.jit, static_argnames="config")
def _children(problem: PaddedProblem, state: GAState, key: jax.Array, config: GAConfig):
    return breed(jnp, state.proc, state.priority, state.fitness, jax_draws(key, config, problem), config.elite)


def ga(
    problem: Problem,
    *,
    population: int = 100,
    generations: int = 100,
    seed: int = 0,
    backend: str = "numpy",
    shape: Shape | None = None,
    progress: bool = False,
    devices: Devices = None,
    **options,
) -> Schedule:
    """Best schedule found by the GA; `schedule.makespan` gives its makespan.

    `backend="numpy"` is the reference (one `simulate` per chromosome); `backend="numba"` is the same
    GA with each population evaluated by compiled code on every CPU core (identical results, from the
    same draws); `backend="jax"` breeds with
    the same operators and evaluates each generation in one vmapped call, with the simulator's
    per-processor capacity sized from the population (doubled and retried on overflow). With
    `shape`, the JAX GA runs on the problem padded to it, so that problems of one shape share one
    compilation (the padding changes the random draws, not the quality). `options` are the other
    `GAConfig` fields (crossover_rate, mutation_rate, tournament, elite, objective). The JAX GA splits each
    generation's population across `devices` (`jaxsched.common.batch_mesh`: default all devices); the best
    schedule is the same on any number of devices.
    """
    check_problem(problem)
    config = GAConfig(population=population, generations=generations, **options)
    if shape is not None and backend != "jax":
        raise ValueError("shape pads the problem for the JAX GA; it needs backend='jax'")
    integer("seed", seed, 0)
    if backend in ("numpy", "numba"):
        proc, priority = _evolve_numpy(problem, config, seed, progress, compiled=backend == "numba")
    elif backend == "jax":
        proc, priority = _evolve_jax(problem, config, seed, progress, shape, batch_mesh(devices))
    else:
        raise ValueError(f"backend must be 'numpy', 'numba' or 'jax', got {backend!r}")
    return simulate(problem, proc[: problem.num_tasks], priority[: problem.num_tasks])


def _evolve_jax(problem: Problem, config: GAConfig, seed: int, progress: bool, shape: Shape | None, mesh: Mesh):
    """The JAX GA driven from Python: breed on device, then evaluate the population split across `mesh`
    with the smallest capacity that has not overflowed so far (doubling on overflow), so each capacity
    compiles once."""
    padded = jax.device_put(pad_problem(problem, shape))  # breeding runs on the default device
    shared = replicate(padded, mesh)
    capacity = _initial_capacity(problem)

    def evaluate(proc, priority):
        nonlocal capacity
        population, size = shard_batch((proc, priority), mesh)
        while True:
            fitness, overflow = _fitness_jit(shared, *population, config.objective, capacity)
            if not overflow or capacity == problem.num_tasks:
                return GAState(proc, priority, gather(fitness, size), overflow)
            capacity = min(problem.num_tasks, 2 * capacity)

    init_key, loop_key = jax.random.split(jax.random.key(seed))
    state = evaluate(*random_population(padded, init_key, config))
    for key in tqdm(jax.random.split(loop_key, config.generations), disable=not progress, desc="GA (jax)"):
        state = evaluate(*_children(padded, state, key, config))
    best = int(jnp.argmin(state.fitness))
    return np.asarray(state.proc[best]), np.asarray(state.priority[best], np.float64)


def _initial_capacity(problem: Problem) -> int:
    """Busy-task slots per processor to try first: twice a fair share, as a power of two (>= 8)."""
    fair_share = -(-problem.num_tasks // problem.num_procs)
    return min(problem.num_tasks, 1 << max(3, (2 * fair_share - 1).bit_length()))


def _evolve_numpy(problem: Problem, config: GAConfig, seed: int, progress: bool, compiled: bool = False):
    """The reference GA; `compiled` evaluates each population with `population_fitness_numba` (equal values)."""
    rng = np.random.default_rng(seed)
    shape = (config.population, problem.num_tasks)
    proc, priority = rng.integers(0, problem.num_procs, shape), rng.random(shape)

    def evaluate(proc, priority):
        if compiled:
            return population_fitness_numba(problem, proc, priority, config.objective)
        schedules = (simulate(problem, p, q) for p, q in zip(proc, priority))
        return np.array([fitness_of(problem, schedule, config.objective) for schedule in schedules])

    fitness = evaluate(proc, priority)
    for _ in tqdm(range(config.generations), disable=not progress, desc=f"GA ({'numba' if compiled else 'numpy'})"):
        draws = numpy_draws(rng, config, problem.num_tasks, problem.num_procs)
        proc, priority = breed(np, proc, priority, fitness, draws, config.elite)
        fitness = evaluate(proc, priority)
    best = int(np.argmin(fitness))
    return proc[best], priority[best]
