"""jaxsched.autotune: a load-aware scheduler for the stages of many autotuning jobs (Stiller 2019).

Jobs are state machines over four stages (propose, build, profile, update), each declaring the
resource it needs (CPU cores or an exclusive device). One central `Scheduler` decides which stage
runs when under a policy (sequential, parallel, load_aware, predictive); it drives the event
simulator, the process runner and the Ray backend alike.
"""

from jaxsched.autotune.jobs import (
    BUILD,
    DEFAULT_DEMANDS,
    PROFILE,
    PROPOSE,
    STAGES,
    UPDATE,
    Job,
    MockJob,
    Progress,
    StageDistributions,
    assign_machines,
    check_placement,
    fit_stage_distributions,
    mock_jobs,
)
from jaxsched.autotune.policies import (
    POLICIES,
    DurationEstimator,
    LoadAware,
    Parallel,
    Policy,
    Predictive,
    Sequential,
    make_policy,
)
from jaxsched.autotune.ray_backend import node_resources, resource_name, run_on_ray
from jaxsched.autotune.records import Record, TuningRecords
from jaxsched.autotune.resources import CPU, DEVICE, Demand, Machine, local_machine, pin_to_cores, thread_affinities
from jaxsched.autotune.runner import ProcessRunner, RunResult
from jaxsched.autotune.scheduler import Scheduler, StageStart
from jaxsched.autotune.service import Answer, TuningService
from jaxsched.autotune.simulator import simulate_policy
from jaxsched.autotune.trace import Trace, check_trace, gantt
from jaxsched.autotune.tuning import TuningJob, TuningResult, TuningState, check_protocol, measure_alone, profile_calls
from jaxsched.autotune.workloads import KINDS, Workload

__all__ = [
    "Answer",
    "assign_machines",
    "check_placement",
    "check_trace",
    "CPU",
    "DEFAULT_DEMANDS",
    "Demand",
    "DEVICE",
    "DurationEstimator",
    "fit_stage_distributions",
    "gantt",
    "Job",
    "KINDS",
    "LoadAware",
    "local_machine",
    "Machine",
    "make_policy",
    "measure_alone",
    "mock_jobs",
    "MockJob",
    "node_resources",
    "Parallel",
    "pin_to_cores",
    "POLICIES",
    "Policy",
    "Predictive",
    "ProcessRunner",
    "profile_calls",
    "Progress",
    "Record",
    "resource_name",
    "run_on_ray",
    "RunResult",
    "Scheduler",
    "Sequential",
    "simulate_policy",
    "StageDistributions",
    "STAGES",
    "PROPOSE",
    "BUILD",
    "PROFILE",
    "UPDATE",
    "StageStart",
    "thread_affinities",
    "Trace",
    "TuningJob",
    "check_protocol",
    "TuningRecords",
    "TuningResult",
    "TuningService",
    "TuningState",
    "Workload",
]
