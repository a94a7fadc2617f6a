"""jaxsched.jax: the jitted JAX tier, the twins of the NumPy references over problems padded to a `Shape`.

Each name is its reference's (`jaxsched.heft` -> `jaxsched.jax.heft`): the unbatched core on one
`jaxsched.PaddedProblem` (`heft`, `list_schedule`, `simulate`, `placement_order`, `evolve`, vmappable) and its
jitted batch over a padded batch (`heft_batch`, `list_schedule_batch`, `simulate_batch`, `schedule_batch` from
`Problem`s), all returning `ScheduleArrays`. The list schedulers' cheaper inputs (`pad_costs`, `pad_edges`) are
fields of the padded problem built alone. Names load on first use; `import jaxsched.jax` loads no JAX. This
module is not the `jax` package: import it as `import jaxsched` (then `jaxsched.jax.heft_batch`) or
`from jaxsched.jax import heft_batch`, not as `from jaxsched import jax`.
"""

from jaxsched.common.lazy import lazy_face

__all__ = lazy_face(__name__, {
    "jaxsched.batch": ("PaddedCosts", "PaddedEdges", "pad_costs", "pad_edges"),
    "jaxsched.ga": ("evolve=evolve_padded", "population_fitness"),
    "jaxsched.jax_listsched": (
        "default_capacity", "heft=heft_padded", "heft_batch", "list_schedule=list_schedule_padded",
        "list_schedule_batch", "pad_plan", "padded_makespan", "plan_batch", "schedule_batch", "stream_batch",
    ),
    "jaxsched.jax_simulate": (
        "ScheduleArrays", "check_batch_assignment", "row_capacity", "simulate=simulate_padded", "simulate_batch",
    ),
    "jaxsched.order": ("effective_priority=effective_priority_padded", "placement_order=placement_order_padded"),
})
