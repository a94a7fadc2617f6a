"""GA speed: one generation (breed + evaluate the whole population): NumPy reference, compiled (numba), jitted JAX.

    python benchmarks/ga.py                       # population 100 on 486 tasks x 188 processors
    python benchmarks/ga.py --tasks 486 --procs 16 --population 100

All breed from the same draws; the NumPy generation evaluates chromosomes one `simulate` at a time, the
numba one breeds in NumPy and evaluates the population with `jaxsched.numba.population_fitness` (every core),
the JAX one evaluates it in one vmapped `simulate_padded` call. The runs alternate and the best of
`--repeats` is shown. The fitness of the same population is compared too (numba: exactly equal).
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxsched
from jaxsched import GAConfig, GAState, breed, fitness_of, generation, numpy_draws, random_dag
from jaxsched.common import alternated_times, machine_description


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=486)
    parser.add_argument("--procs", type=int, default=188)
    parser.add_argument("--population", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="cpu: process CPU time (steady on a shared machine; threads add up)")
    parser.add_argument("--capacity", type=int, default=None, help="busy tasks per processor (default: T)")
    args = parser.parse_args()

    problem = random_dag(args.tasks, args.procs, integer=True, seed=0)
    config = GAConfig(population=args.population, generations=1)
    rng = np.random.default_rng(0)
    proc = rng.integers(0, problem.num_procs, (config.population, problem.num_tasks))
    priority = rng.random((config.population, problem.num_tasks)).astype(np.float32)

    def numpy_fitness(proc, priority):
        return np.array([
            fitness_of(problem, jaxsched.simulate(problem, p, q), config.objective) for p, q in zip(proc, priority)
        ])

    fitness = numpy_fitness(proc, priority)
    draws = numpy_draws(rng, config, problem.num_tasks, problem.num_procs)

    def numpy_generation():
        return numpy_fitness(*breed(np, proc, priority, fitness, draws, config.elite))

    def numba_generation():
        children = breed(np, proc, priority, fitness, draws, config.elite)
        return jaxsched.numba.population_fitness(problem, *children, config.objective)

    padded = jax.device_put(jaxsched.pad_problem(problem))
    state = GAState(
        jnp.asarray(proc, jnp.int32), jnp.asarray(priority), jnp.asarray(fitness, jnp.float32), jnp.zeros((), bool)
    )
    capacity = args.capacity
    step = jax.jit(generation, static_argnames=("config", "capacity"))
    key = jax.random.key(0)
    t0 = time.perf_counter()
    jax.block_until_ready(step(padded, state, key, config, capacity))
    compile_s = time.perf_counter() - t0

    times = alternated_times(  # alternated, so a slow spell of the machine hits both alike
        {
            "numpy": numpy_generation,
            "numba": numba_generation,
            "jax": lambda: jax.block_until_ready(step(padded, state, key, config, capacity)),
        },
        args.repeats,
        warmup=0,
        clock=args.clock,
    )
    numpy_s, numba_s, jax_s = (float(times[name].min()) for name in ("numpy", "numba", "jax"))
    numba_same = np.array_equal(numba_generation(), numpy_generation())
    overflow = bool(step(padded, state, key, config, capacity).overflow)
    jax_fitness, _ = jaxsched.jax.population_fitness(padded, state.proc, state.priority, config.objective, capacity)
    jax_fitness = np.asarray(jax_fitness)
    same = np.allclose(jax_fitness, fitness, rtol=1e-5)

    print(f"Machine: {machine_description(load=True)}\n")
    print(f"GA, one generation: population {config.population}, {args.tasks} tasks x {args.procs} processors\n")
    print("| implementation | time per generation (s) | speed-up | same fitness |")
    print("|---|---|---|---|")
    print(f"| NumPy (loop of simulate) | {numpy_s:.3f} | 1.0x | |")
    print(f"| numba (population_fitness_numba, {os.cpu_count()} cores) | {numba_s:.4f} | {numpy_s / numba_s:.1f}x "
          f"| {numba_same} |")
    label = f"JAX (jit + vmap, capacity {capacity or 'T'}, compile {compile_s:.1f} s once)"
    print(f"| {label} | {jax_s:.4f} | {numpy_s / jax_s:.1f}x | {same and not overflow} |")


if __name__ == "__main__":
    main()
