"""jaxsched: DAG task scheduling on heterogeneous processors (DeepSched reimplementation).

NumPy references (`heft`, `simulate`, `ga`), their compiled CPU twins (`heft_numba`, `heft_batch_numba`,
`population_fitness_numba`, `list_schedule_numba`), jitted JAX kernels over problems padded to a `Shape`
(`heft_batch`, `simulate_batch`, the vmappable GA `evolve_padded`), workload generators and schedule metrics.
"""

from jaxsched.adversarial import SEARCH_NAMES, SEARCH_PRESETS, SearchConfig, search, search_config, worst_ratios
from jaxsched.batch import (
    PaddedCosts,
    PaddedEdges,
    PaddedProblem,
    ProblemBatch,
    Shape,
    pad_costs,
    pad_edges,
    pad_problem,
    pad_problems,
    stack,
    time_bound,
)
from jaxsched.compiled import heft_batch_numba, heft_numba, population_fitness_numba, simulate_population_numba
from jaxsched.compiled_listsched import list_schedule_numba
from jaxsched.dense import DenseInstance, dense_plan, random_instance, related_instance, to_padded, to_problem
from jaxsched.ga import GAConfig, GAState, evolve_padded, ga, population_fitness
from jaxsched.generate import cloudsim, fft, fork_join, gaussian_elimination, random_dag
from jaxsched.heft import heft, upward_rank
from jaxsched.kernels import (
    ScheduleArrays,
    check_batch_assignment,
    row_capacity,
    simulate_batch,
    simulate_padded,
)
from jaxsched.listsched import NAMES as SCHEDULER_NAMES
from jaxsched.listsched import PRESETS, ListConfig, ListPlan, list_schedule, make_plan, schedule
from jaxsched.listsched_jax import (
    heft_batch,
    heft_padded,
    list_schedule_batch,
    list_schedule_padded,
    pad_plan,
    plan_batch,
    schedule_batch,
    stream_batch,
)
from jaxsched.metrics import (
    average_turnaround,
    average_waiting,
    critical_path_min,
    efficiency,
    makespan,
    slr,
    speedup,
    summary,
)
from jaxsched.order import (
    effective_priority,
    effective_priority_padded,
    placement_order,
    placement_order_padded,
    priority_order,
)
from jaxsched.priorities import critical_path, downward_rank, optimistic_cost_table, priority_position
from jaxsched.problem import (
    Problem,
    Schedule,
    load_problem,
    load_schedule,
    real_array,
    save_problem,
    save_schedule,
    validate,
)
from jaxsched.simulate import simulate

__all__ = [
    "DenseInstance",
    "GAConfig",
    "GAState",
    "ListConfig",
    "ListPlan",
    "PRESETS",
    "PaddedCosts",
    "PaddedEdges",
    "PaddedProblem",
    "Problem",
    "ProblemBatch",
    "SCHEDULER_NAMES",
    "SEARCH_NAMES",
    "SEARCH_PRESETS",
    "Schedule",
    "ScheduleArrays",
    "SearchConfig",
    "Shape",
    "average_turnaround",
    "average_waiting",
    "check_batch_assignment",
    "cloudsim",
    "critical_path",
    "critical_path_min",
    "dense_plan",
    "downward_rank",
    "effective_priority",
    "effective_priority_padded",
    "efficiency",
    "evolve_padded",
    "fft",
    "fork_join",
    "ga",
    "gaussian_elimination",
    "heft",
    "heft_batch",
    "heft_batch_numba",
    "heft_numba",
    "heft_padded",
    "list_schedule",
    "list_schedule_batch",
    "list_schedule_numba",
    "list_schedule_padded",
    "load_problem",
    "load_schedule",
    "make_plan",
    "makespan",
    "optimistic_cost_table",
    "pad_costs",
    "pad_edges",
    "pad_plan",
    "pad_problem",
    "pad_problems",
    "placement_order",
    "placement_order_padded",
    "plan_batch",
    "population_fitness",
    "population_fitness_numba",
    "priority_order",
    "priority_position",
    "random_dag",
    "random_instance",
    "related_instance",
    "real_array",
    "row_capacity",
    "save_problem",
    "save_schedule",
    "schedule",
    "schedule_batch",
    "search",
    "search_config",
    "simulate",
    "simulate_batch",
    "simulate_padded",
    "simulate_population_numba",
    "slr",
    "speedup",
    "stack",
    "stream_batch",
    "summary",
    "time_bound",
    "to_padded",
    "to_problem",
    "upward_rank",
    "validate",
    "worst_ratios",
]
