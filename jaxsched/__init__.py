"""jaxsched: DAG task scheduling on heterogeneous processors (DeepSched reimplementation).

NumPy references (`heft`, `simulate`, `ga`), their compiled CPU twins (`heft_numba`, `heft_batch_numba`,
`population_fitness_numba`, `list_schedule_numba`), jitted JAX kernels over problems padded to a `Shape`
(`heft_batch`, `simulate_batch`, the vmappable GA `evolve_padded`), workload generators and schedule metrics.
Each name is imported from its module on first use (`jaxsched.common.lazy`): `import jaxsched` alone loads no tier.
"""

from jaxsched.common.lazy import lazy_face

__version__ = "0.1.0"  # the distribution's version, as in pyproject.toml

__all__ = lazy_face(__name__, {
    "jaxsched.adversarial": (
        "LEARNED", "SEARCH_NAMES", "SEARCH_PRESETS", "SearchConfig", "search", "search_config", "worst_ratios",
    ),
    "jaxsched.batch": (
        "PaddedCosts", "PaddedEdges", "PaddedProblem", "ProblemBatch", "Shape", "pad_costs", "pad_edges",
        "pad_problem", "pad_problems", "stack", "time_bound",
    ),
    "jaxsched.batch_graph": ("BatchGraph",),
    "jaxsched.dense": (
        "DenseInstance", "dense_plan", "random_instance", "related_instance", "to_padded", "to_problem",
    ),
    "jaxsched.ga": ("GAConfig", "GAState", "evolve_padded", "ga", "population_fitness"),
    "jaxsched.generate": ("cloudsim", "fft", "fork_join", "gaussian_elimination", "random_dag"),
    "jaxsched.heft": ("heft", "upward_rank"),
    "jaxsched.jax_listsched": (
        "default_capacity", "heft_batch", "heft_padded", "list_schedule_batch", "list_schedule_padded", "pad_plan",
        "padded_makespan", "plan_batch", "schedule_batch", "stream_batch",
    ),
    "jaxsched.jax_simulate": (
        "ScheduleArrays", "check_batch_assignment", "row_capacity", "simulate_batch", "simulate_padded",
    ),
    "jaxsched.listsched": (
        "SCHEDULER_NAMES=NAMES", "PRESETS", "ListConfig", "ListPlan", "duplex", "list_schedule", "make_plan", "preset",
        "schedule",
    ),
    "jaxsched.metrics": (
        "average_turnaround", "average_waiting", "critical_path_min", "efficiency", "makespan", "slr", "speedup",
        "summary",
    ),
    "jaxsched.numba_heft": ("heft_batch_numba", "heft_numba"),
    "jaxsched.numba_listsched": ("list_schedule_numba",),
    "jaxsched.numba_simulate": ("population_fitness_numba", "simulate_population_numba"),
    "jaxsched.order": (
        "effective_priority", "effective_priority_padded", "placement_order", "placement_order_padded",
        "priority_order",
    ),
    "jaxsched.pisa": (
        "Heatmap", "against_best", "heatmap_search", "judge", "replay", "save_heatmap", "table_markdown",
    ),
    "jaxsched.plot": ("gantt", "heatmap"),
    "jaxsched.priorities": ("critical_path", "downward_rank", "optimistic_cost_table", "priority_position"),
    "jaxsched.problem": (
        "Problem", "Schedule", "load_problem", "load_schedule", "real_array", "save_problem", "save_schedule",
        "validate",
    ),
    "jaxsched.saga_adapter": ("from_saga", "import_saga"),
    "jaxsched.simulate": ("simulate",),
    "jaxsched.workflows": ("wfcommons_problem",),
})
