"""The time measurements of the graph-optimization study: the end-to-end latency of the graph each method
returned, in onnxruntime and in JAX, and a real `Env` step against a batched dream step. The driver
(`experiments.graphopt_rl.study`) records them in each deployment row."""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments.graphopt_rl.configs import GraphoptConfig
from jaxgraph import Env, Graph, ort_session, random_inputs, runner, to_onnx
from jaxgraph.rl import MDNRNN, DreamConfig, DreamStart, controller_input, initial_env_state, make_dream_rollout
from jaxsched.common import alternated_times, median_time


def latencies(graphs: dict[str, Graph], repeats: int) -> dict[str, dict[str, float]]:
    """Median end-to-end ms of each graph in onnxruntime (ORT_ENABLE_ALL) and in JAX (jitted on the
    current device); identical graphs are timed once, all graphs of a backend in alternation."""
    unique = {g.structure_hash: g for g in graphs.values()}
    inputs = {h: random_inputs(g) for h, g in unique.items()}
    out: dict[str, dict[str, float]] = {}
    for backend in ("onnxruntime", "jax"):
        if backend == "onnxruntime":
            sessions = {h: ort_session(to_onnx(g)) for h, g in unique.items()}
            calls = {h: functools.partial(sessions[h].run, None, inputs[h]) for h in unique}
        else:
            calls = {h: runner(g, inputs[h]) for h, g in unique.items()}
        times = alternated_times(calls, repeats, warmup=3)
        out[backend] = {name: 1e3 * float(np.median(times[g.structure_hash])) for name, g in graphs.items()}
    return out


def dream_step_seconds(config: DreamConfig, model: MDNRNN, world_model_params, start: DreamStart,
                       repeats: int = 5) -> float:
    """Median seconds of one lockstep step of `config.num_envs` vmapped dreams (controller acting and world
    model imagining, as in training): a jitted rollout of `config.rollout_steps` steps timed after a
    compilation call, divided by the steps."""
    policy, rollout = make_dream_rollout(config, model)
    state = initial_env_state(config, model, start)
    first = controller_input(jax.tree.map(lambda x: x[0], state.dream))
    params = policy.init(jax.random.key(0), first.state, first.xfer_mask, first.location_mask, jnp.argmax)
    run = jax.jit(rollout)
    seconds = median_time(functools.partial(run, params, world_model_params, state, jax.random.key(1),
                                            jnp.float32(1.0), start), repeats=repeats, warmup=2)
    return seconds / config.rollout_steps


def step_time(config: GraphoptConfig, env: Env, model: MDNRNN, wm_params, start: DreamStart) -> dict:
    """A real Env step (random valid actions, median ms) against a batched dream step: one jitted rollout of
    `step_time_envs` vmapped dreams (policy + world model), per lockstep step and in dream steps per second."""
    rng, times, obs = np.random.default_rng(0), [], env.reset().observation
    while len(times) < 50:
        valid = np.flatnonzero(obs.xfer_mask[:-1])
        if len(valid) == 0:
            obs = env.reset().observation
            continue
        xfer = int(rng.choice(valid))
        begin = time.perf_counter()
        timestep = env.step((xfer, int(rng.choice(np.flatnonzero(obs.location_mask[xfer])))))
        times.append(time.perf_counter() - begin)
        obs = env.reset().observation if timestep.last() else timestep.observation
    per_step = dream_step_seconds(dataclasses.replace(config.dream, num_envs=config.step_time_envs), model, wm_params,
                                  start)
    return {"real_step_ms": 1e3 * float(np.median(times)), "dream_batch": config.step_time_envs,
            "dream_step_ms": 1e3 * float(per_step), "dream_steps_per_s": float(config.step_time_envs / per_step),
            "device": jax.devices()[0].platform}
