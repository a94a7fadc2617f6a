"""jaxsched: DAG task scheduling on heterogeneous processors (DeepSched reimplementation).

The face holds the NumPy references (`heft`, `list_schedule`, `simulate`, `ga`), the problem and its padded form
(`Problem`, `Shape`, `PaddedProblem`, `pad_problems`), workload generators and schedule metrics. Their twins sit
in one sub-namespace per tier, each name its reference's: `jaxsched.jax` (jitted JAX over padded problems:
`jaxsched.jax.heft_batch`, `jaxsched.jax.schedule_batch`, `jaxsched.jax.simulate_batch`) and `jaxsched.numba`
(compiled for the CPU: `jaxsched.numba.heft`, `jaxsched.numba.heft_batch`). The two are left out of `__all__`,
so that `from jaxsched import *` cannot shadow the `jax` and `numba` packages.
Each name is imported from its module on first use (`jaxsched.common.lazy`): `import jaxsched` alone loads no tier.
"""

from jaxsched.common.lazy import lazy_face

__version__ = "0.1.0"  # the distribution's version, as in pyproject.toml

__all__ = lazy_face(__name__, {
    "jaxsched.adversarial": (
        "LEARNED", "SEARCH_NAMES", "SEARCH_PRESETS", "SearchConfig", "search", "search_config", "worst_ratios",
    ),
    "jaxsched.batch": ("PaddedProblem", "Shape", "pad_problem", "pad_problems", "stack", "time_bound"),
    "jaxsched.batch_graph": ("BatchGraph",),
    "jaxsched.dense": (
        "DenseInstance", "dense_plan", "random_instance", "related_instance", "to_padded", "to_problem",
    ),
    "jaxsched.ga": ("GAConfig", "GAState", "breed", "fitness_of", "ga", "generation", "numpy_draws"),
    "jaxsched.generate": ("cloudsim", "fft", "fork_join", "gaussian_elimination", "random_dag"),
    "jaxsched.heft": ("heft", "upward_rank"),
    "jaxsched.listsched": (
        "SCHEDULER_NAMES=NAMES", "PRESETS", "ListConfig", "ListPlan", "duplex", "list_schedule", "make_plan", "preset",
        "schedule",
    ),
    "jaxsched.metrics": (
        "average_turnaround", "average_waiting", "critical_path_min", "efficiency", "makespan", "slr", "speedup",
        "summary",
    ),
    "jaxsched.order": ("effective_priority", "placement_order", "priority_order"),
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
