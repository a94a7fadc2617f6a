"""`NeuralScheduler`: a trained network turned into valid schedules through the list scheduler.

The network's outputs never reach the user raw. A decoder picks a processor per task (greedy: the
argmax over real processors; sampling: K draws from the softmax, plus the argmax) and a priority
order (HEFT's upward rank, or the predicted start times), and `wavefront_simulate` (equal to
`jaxsched.simulate`, in float64) places the tasks. Every schedule therefore satisfies precedence,
communication delays and processor exclusivity. The sampling decoder simulates all K assignments in
one vmapped call and keeps the shortest makespan.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from jaxsched.batch import PaddedProblem, pad_problem
from jaxsched.deepsched.configs import DeepSchedConfig
from jaxsched.deepsched.features import Features, bucket_shape, problem_features, time_scale
from jaxsched.deepsched.model import DeepSchedNet
from jaxsched.deepsched.train import checkpoint_manager
from jaxsched.deepsched.wavefront import WaveSchedule, placement_order, row_capacity, wavefront_simulate
from jaxsched.heft import priority_order
from jaxsched.problem import Problem, Schedule
from jaxsched.simulate import effective_priority

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


@functools.partial(jax.jit, static_argnames="capacity")
def _simulate_one(problem: PaddedProblem, proc: jax.Array, order: jax.Array, capacity: int) -> WaveSchedule:
    return wavefront_simulate(problem, proc, order, capacity)


@functools.partial(jax.jit, static_argnames="capacity")
def _best_of(problem: PaddedProblem, procs: jax.Array, priorities: jax.Array, capacity: int) -> WaveSchedule:
    """The shortest-makespan schedule of K (proc, priority) pairs simulated at once."""
    orders = jax.vmap(placement_order, in_axes=(None, 0))(problem, priorities)
    schedules = jax.vmap(wavefront_simulate, in_axes=(None, 0, 0, None))(problem, procs, orders, capacity)
    makespans = jnp.where(problem.task_mask, schedules.finish, -jnp.inf).max(axis=1)
    return jax.tree.map(lambda x: x[jnp.argmin(makespans)], schedules)


def _order(problem: Problem, priority: np.ndarray, num_tasks: int) -> np.ndarray:
    """[num_tasks] `jaxsched.simulate`'s placement order for `priority` (padded tasks last), on the host."""
    real = priority_order(problem, effective_priority(problem, priority[: problem.num_tasks]))
    return np.concatenate([real, np.arange(problem.num_tasks, num_tasks)]).astype(np.int32)


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
        """The network of the latest checkpoint written by `train.fit` in `checkpoint_dir`: seed `seed`,
        or (None) the seed with the lowest final validation loss."""
        path = Path(checkpoint_dir)
        if not path.is_dir():
            raise FileNotFoundError(f"no checkpoint directory at {path}")
        with checkpoint_manager(path) as manager:
            step = manager.latest_step()
            if step is None:
                raise FileNotFoundError(f"no checkpoint in {path}")
            restored = manager.restore(
                step, args=ocp.args.Composite(state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore())
            )
        config = DeepSchedConfig.from_json(json.dumps(restored.meta["config"]))
        if seed is None:
            seed = int(np.argmin(restored.meta["history"][-1]["val_loss"]))
        # Through the host, so that loaded and in-memory parameters share compiled functions.
        params = jax.tree.map(lambda x: jnp.asarray(np.asarray(x[seed])), restored.state["params"])
        return cls(config, params)

    def check(self, problem: Problem) -> None:
        """Raises ValueError when `problem` is larger than the network's configured maximum."""
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
        return problem_features(problem, *bucket_shape(problem))

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
        shape: tuple[int, int, int, int] | None = None,
    ) -> Schedule:
        """A valid schedule of `problem` (see the module docstring).

        decoder: "greedy" or "sampling" (`samples` assignments including the argmax; priorities
          alternate between the upward rank and the predicted start times).
        priority: the order of the greedy decoder: "rank" (HEFT's upward rank) or "start" (earliest
          predicted start first).
        shape: padded (tasks, processors, edges, predecessors per task); default `bucket_shape`.
          Scheduling many problems with one shape compiles once.
        """
        if decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {PRIORITIES}, got {priority!r}")
        if samples < 1 or temperature <= 0:
            raise ValueError(f"need samples >= 1 and temperature > 0, got {samples} and {temperature}")
        self.check(problem)
        shape = bucket_shape(problem) if shape is None else shape
        features = problem_features(problem, *shape)
        proc, times = _greedy(self.model, self.params, features)
        if decoder == "sampling":
            key, temperature = jax.random.key(seed), jnp.asarray(temperature, jnp.float32)
            procs = _sampled(self.model, self.params, features, key, temperature, samples)
        num_tasks, num_procs, num_edges, num_preds = shape
        with jax.enable_x64(True):
            padded = pad_problem(problem, num_tasks, num_procs, num_preds, num_edges, dtype=np.float64)
            by_rank = padded.upward_rank
            by_start = -np.asarray(times[:, 0], np.float64)
            if decoder == "greedy":
                proc = np.asarray(proc)
                order = features.rank_order if priority == "rank" else _order(problem, by_start, num_tasks)
                result = _simulate_one(padded, proc, order, _capacity(padded, proc))
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
