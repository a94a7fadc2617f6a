"""jaxsched: DAG task scheduling on heterogeneous processors (DeepSched reimplementation).

NumPy references (`heft`, `simulate`, `ga`), jitted JAX kernels over padded batches
(`heft_batch`, `simulate_batch`, the vmappable GA `evolve_padded`), workload generators and schedule metrics.
"""

from jaxsched.batch import PaddedProblem, ProblemBatch, pad_problem, pad_problems
from jaxsched.ga import GAConfig, GAState, evolve_padded, ga, population_fitness
from jaxsched.generate import cloudsim, fft, fork_join, gaussian_elimination, random_dag
from jaxsched.heft import heft, upward_rank
from jaxsched.kernels import (
    ScheduleArrays,
    heft_batch,
    heft_padded,
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
from jaxsched.problem import (
    Problem,
    Schedule,
    load_problem,
    load_schedule,
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
    "average_turnaround",
    "average_waiting",
    "critical_path_min",
    "cloudsim",
    "efficiency",
    "evolve_padded",
    "fft",
    "fork_join",
    "ga",
    "gaussian_elimination",
    "heft",
    "heft_batch",
    "heft_padded",
    "load_problem",
    "load_schedule",
    "makespan",
    "pad_problem",
    "pad_problems",
    "population_fitness",
    "random_dag",
    "save_problem",
    "save_schedule",
    "simulate",
    "simulate_batch",
    "simulate_padded",
    "slr",
    "speedup",
    "summary",
    "upward_rank",
    "validate",
]
