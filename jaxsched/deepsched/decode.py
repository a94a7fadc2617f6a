"""`NeuralScheduler`: a trained network turned into valid schedules through the list scheduler.

The network's outputs never reach the user raw. A decoder picks a processor per task (greedy: the
argmax over real processors; sampling: K draws from the softmax, plus the argmax) and a priority
order (HEFT's upward rank, or the predicted start times), and `jaxsched.jax.simulate` (the
wavefront method, in float64: equal to `jaxsched.simulate`) places the tasks. Every schedule
therefore satisfies precedence, communication delays and processor exclusivity. The sampling
decoder simulates all K assignments in one vmapped call and keeps the shortest makespan.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsched.batch import PaddedProblem, Shape, pad_problem
from jaxsched.common.arguments import integer, number
from jaxsched.common.checkpoint import EpochCheckpointer
from jaxsched.deepsched.configs import DeepSchedConfig
from jaxsched.deepsched.dense import DenseScheduler
from jaxsched.deepsched.features import Features, bucket_shape, problem_features, time_scale
from jaxsched.deepsched.model import UNOPTIMISED, DeepSchedNet, eft_rule_params
from jaxsched.jax_simulate import ScheduleArrays, row_capacity, simulate_padded
from jaxsched.problem import Problem, Schedule, check_problem

DECODERS = ("greedy", "sampling")
PRIORITIES = ("rank", "start")


@functools.partial(jax.jit, static_argnames="model")
def _greedy(model: DeepSchedNet, params, features: Features) -> tuple[jax.Array, jax.Array]:
    """(processors [T], predicted (start, finish) [T, 2] on them) of the greedy decision."""
    prediction = model.apply(params, features)
    return jnp.argmax(prediction.logits, axis=1).astype(jnp.int32), prediction.times


@functools.partial(jax.jit, static_argnames=("model", "samples"))
def _sampled(model: DeepSchedNet, params, features: Features, key: jax.Array, temperature: jax.Array, samples: int):
    return model.apply(params, features, key, temperature, samples, method=DeepSchedNet.sample)


_simulate_one = jax.jit(functools.partial(simulate_padded, method="wavefront"), static_argnames="capacity")


@functools.partial(jax.jit, static_argnames="capacity")
def _best_of(problem: PaddedProblem, procs: jax.Array, priorities: jax.Array, capacity: int) -> ScheduleArrays:
    """The shortest-makespan schedule of K (proc, priority) pairs simulated at once."""
    simulate = functools.partial(simulate_padded, capacity=capacity, method="wavefront")
    schedules = jax.vmap(simulate, in_axes=(None, 0, 0))(problem, procs, priorities)
    makespans = jnp.where(problem.task_mask, schedules.finish, -jnp.inf).max(axis=1)
    return jax.tree.map(lambda x: x[jnp.argmin(makespans)], schedules)


def _capacity(problem: PaddedProblem, proc: np.ndarray) -> int:
    """Busy-interval row width: enough for `proc`, and at least min(T, 64) so that small problems of
    one size bucket share one compilation."""
    return max(row_capacity(problem, proc), min(problem.comp.shape[0], 64))


class NeuralScheduler:
    """A trained DeepSched network with its configuration; `schedule(problem)` gives a valid schedule."""

    def __init__(self, config: DeepSchedConfig, params: Any):
        self.config = config
        self.params = params
        self.model = DeepSchedNet(config.model)

    @classmethod
    def load(cls, checkpoint_dir: str | Path, seed: int | None = None) -> "NeuralScheduler":
        """The network of the latest intact checkpoint written by `train.fit` in `checkpoint_dir`:
        seed `seed` (an index among the run's `num_seeds`), or (None) the seed with the lowest final
        validation loss. Raises FileNotFoundError when there is no checkpoint, ValueError for a seed
        the run did not train."""
        path = Path(checkpoint_dir)
        if not path.is_dir():
            raise FileNotFoundError(f"no checkpoint directory at {path}")
        with EpochCheckpointer(path) as checkpointer:
            restored = checkpointer.restore_latest()
        if restored is None:
            raise FileNotFoundError(f"no checkpoint in {path}")
        config = DeepSchedConfig.from_json(json.dumps(restored.meta["config"]))
        num_seeds = config.train.num_seeds
        if seed is None:
            seed = int(np.argmin(restored.meta["history"][-1]["val_loss"]))
        elif isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < num_seeds:
            raise ValueError(f"seed must be one of the trained seeds 0..{num_seeds - 1} of {path}, got {seed!r}")
        # Through the host, so that loaded and in-memory parameters share compiled functions.
        params = jax.tree.map(lambda x: jnp.asarray(np.asarray(x[seed])), restored.tree["params"])
        return cls(config, params)

    @classmethod
    def eft_rule(cls, config: DeepSchedConfig, like: Any = None) -> "NeuralScheduler":
        """The feedback variant's prior alone (`model.eft_rule_params`): HEFT's earliest-finish rule on
        the partial schedule, decoded like any trained network; the baseline training must beat.
        `like`: parameters of a feedback network of `config` to take the structure from (saves
        initialising one)."""
        config = config.replace(model={"variant": "feedback"})
        if like is None:
            one_task = Problem(np.ones((1, 1)), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
            features = problem_features(one_task, bucket_shape(one_task))
            init = jax.jit(DeepSchedNet(config.model).init, compiler_options=UNOPTIMISED)
            like = init(jax.random.key(0), features)
        return cls(config, eft_rule_params(like, config.model.eft_prior))

    def dense(self) -> DenseScheduler:
        """This network as a scheduler of `jaxsched.dense` instances inside jitted code (the adversarial
        search's `learned`): the greedy decoder of `schedule`, in JAX."""
        return DenseScheduler(self.model, self.params)

    def check(self, problem: Problem) -> None:
        """Raises ValueError when `problem` is not a Problem or is larger than the network's configured
        maximum."""
        check_problem(problem)
        model = self.config.model
        if problem.num_tasks > model.max_tasks or problem.num_procs > model.max_procs:
            raise ValueError(
                f"problem has {problem.num_tasks} tasks and {problem.num_procs} processors; this scheduler "
                f"accepts at most {model.max_tasks} tasks and {model.max_procs} processors "
                "(ModelConfig.max_tasks, max_procs)"
            )

    def features(self, problem: Problem) -> Features:
        """`problem`'s features padded to its size bucket (`features.bucket_shape`)."""
        self.check(problem)
        return problem_features(problem, bucket_shape(problem))

    def predict(self, problem: Problem) -> tuple[np.ndarray, np.ndarray]:
        """Raw network outputs for inspection: the greedy processors [T] and predicted (start, finish)
        [T, 2] on them, in the problem's time units. Not a schedule: use `schedule` for that."""
        proc, times = _greedy(self.model, self.params, self.features(problem))
        t = problem.num_tasks
        return np.asarray(proc[:t], np.int64), np.asarray(times[:t], np.float64) * time_scale(problem)

    def schedule(
        self,
        problem: Problem,
        *,
        decoder: str = "greedy",
        priority: str = "rank",
        samples: int = 64,
        temperature: float = 1.0,
        seed: int = 0,
        shape: Shape | None = None,
    ) -> Schedule:
        """A valid schedule of `problem` (see the module docstring).

        decoder: "greedy" or "sampling" (`samples` assignments including the argmax; priorities
          alternate between the upward rank and the predicted start times).
        priority: the order of the greedy decoder: "rank" (HEFT's upward rank) or "start" (earliest
          predicted start first).
        shape: the padded `Shape`; default `bucket_shape`. Scheduling many problems with one shape
          compiles once.
        """
        if decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {PRIORITIES}, got {priority!r}")
        integer("samples", samples, 1)
        number("temperature", temperature, 0.0, above=True)
        integer("seed", seed, 0)
        self.check(problem)
        shape = bucket_shape(problem) if shape is None else Shape(*shape)
        features = problem_features(problem, shape)
        proc, times = _greedy(self.model, self.params, features)
        if decoder == "sampling":
            key, temperature = jax.random.key(seed), jnp.asarray(temperature, jnp.float32)
            procs = _sampled(self.model, self.params, features, key, temperature, samples)
        with jax.enable_x64(True):
            padded = pad_problem(problem, shape, dtype=np.float64)
            by_rank = padded.upward_rank
            by_start = -np.asarray(times[:, 0], np.float64)
            if decoder == "greedy":
                proc = np.asarray(proc)
                ranking = by_rank if priority == "rank" else by_start
                result = _simulate_one(padded, proc, ranking, capacity=_capacity(padded, proc))
            else:
                procs = np.asarray(procs)
                priorities = np.where((np.arange(samples) % 2 == 0)[:, None], by_rank, by_start)
                result = _best_of(padded, procs, priorities, _capacity(padded, procs))
        t = problem.num_tasks
        return Schedule(
            proc=np.asarray(result.proc, np.int64)[:t],
            start=np.asarray(result.start, np.float64)[:t],
            finish=np.asarray(result.finish, np.float64)[:t],
        )
