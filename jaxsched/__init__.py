"""jaxsched: DAG task scheduling on heterogeneous processors (DeepSched reimplementation).

NumPy references (`heft`, `simulate`, `ga`), their compiled CPU twins (`heft_numba`, `heft_batch_numba`,
`population_fitness_numba`), jitted JAX kernels over problems padded to a `Shape`
(`heft_batch`, `simulate_batch`, the vmappable GA `evolve_padded`), workload generators and schedule metrics.
"""

from jaxsched.batch import PaddedProblem, ProblemBatch, Shape, pad_problem, pad_problems, stack, time_bound
from jaxsched.compiled import heft_batch_numba, heft_numba, population_fitness_numba, simulate_population_numba
from jaxsched.ga import GAConfig, GAState, evolve_padded, ga, population_fitness
from jaxsched.generate import cloudsim, fft, fork_join, gaussian_elimination, random_dag
from jaxsched.heft import heft, upward_rank
from jaxsched.kernels import (
    ScheduleArrays,
    check_batch_assignment,
    heft_batch,
    heft_padded,
    row_capacity,
    simulate_batch,
    simulate_padded,
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
    "GAConfig",
    "GAState",
    "PaddedProblem",
    "Problem",
    "ProblemBatch",
    "Schedule",
    "ScheduleArrays",
    "Shape",
    "average_turnaround",
    "average_waiting",
    "check_batch_assignment",
    "cloudsim",
    "critical_path_min",
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
    "load_problem",
    "load_schedule",
    "makespan",
    "pad_problem",
    "pad_problems",
    "placement_order",
    "placement_order_padded",
    "population_fitness",
    "population_fitness_numba",
    "priority_order",
    "random_dag",
    "real_array",
    "row_capacity",
    "save_problem",
    "save_schedule",
    "simulate",
    "simulate_batch",
    "simulate_padded",
    "simulate_population_numba",
    "slr",
    "speedup",
    "stack",
    "summary",
    "time_bound",
    "upward_rank",
    "validate",
]
