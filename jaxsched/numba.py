"""jaxsched.numba: the compiled CPU tier, the twins of the NumPy references compiled with numba.

Each name is its reference's (`jaxsched.heft` -> `jaxsched.numba.heft`) and equals it to the last bit in
float64: `heft`, `list_schedule` and `simulate_population` on a `Problem`, `population_fitness` (the GA's
evaluation), `heft_batch` on a padded batch (`jaxsched.pad_problems(..., dtype=np.float64)`) over every core.
Names load on first use: `import jaxsched.numba` loads no numba. This module is not the `numba` package (the
package's modules import that one by its absolute name): import it as `import jaxsched` (then
`jaxsched.numba.heft`) or `from jaxsched.numba import heft`, not as `from jaxsched import numba`.
"""

from jaxsched.common.lazy import lazy_face

__all__ = lazy_face(__name__, {
    "jaxsched.numba_heft": ("heft=heft_numba", "heft_batch=heft_batch_numba", "heft_inputs", "heft_kernel"),
    "jaxsched.numba_listsched": ("list_schedule=list_schedule_numba",),
    "jaxsched.numba_simulate": (
        "population_fitness=population_fitness_numba", "simulate_population=simulate_population_numba",
    ),
})
