"""Model-free training (thesis 4.2): PPO on batches of real-environment rollouts.

`make_train(config, graphs) -> train(key)` in PureJaxRL's shape. The environments are host Python, so
`train` is a host loop over epochs, but each epoch makes exactly one jitted, vmapped policy call per
lockstep step and one jitted update. Every epoch starts from the unmodified graphs, so an epoch is a
function of (parameters, optimiser state, key) alone: with a `workdir`, those are checkpointed with
orbax after every epoch and a rerun resumes exactly where a killed run stopped (`jaxsched.common.Workdir`: a
workdir of another configuration, graphs or rules is refused). The result also holds the
cheapest graph the training rollouts visited on each training graph (`AgentResult.best`, X-RLflow's
choice of returned graph), tracked from the epochs this call ran.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from jaxgraph.cost import CostModel
from jaxgraph.env import Env
from jaxgraph.graph import Graph
from jaxgraph.rl.configs import AgentConfig, PPOConfig
from jaxgraph.rl.episode import Episode, evaluation_episodes, run_episode, split_keys
from jaxgraph.rl.policy import GraphPolicy
from jaxgraph.rl.ppo import TrainState, make_optimizer, make_update
from jaxgraph.rl.rollout import BestSeen, EnvPool, collect, graph_agent, stack
from jaxgraph.rules import RULES, Rule
from jaxsched.common.workdir import Workdir


class AgentResult(NamedTuple):
    """A trained model-free agent: its policy and parameters, per-epoch history, real env steps used, and the
    cheapest state its training rollouts visited on each training graph (in the order given to `make_train`)."""

    policy: GraphPolicy
    params: Any
    history: list[dict]
    env_steps: int
    best: tuple[BestSeen, ...] = ()


def make_train(config: AgentConfig, graphs: Sequence[Graph], cost_model: CostModel | None = None,
               workdir: str | Path | None = None, progress: bool = False,
               on_epoch: Callable[[AgentResult], bool] | None = None,
               rules: Sequence[Rule] = RULES) -> Callable[[Any], AgentResult]:
    """Build `train(key) -> AgentResult`, training one agent on all `graphs` (cycled over the envs) with
    `rules` (default: all of `RULES`).

    `on_epoch(agent so far) -> stop` is called after every epoch, before its checkpoint (a caller that saves
    what it records of epoch e loses nothing to a kill: the resumed run redoes epoch e whenever its checkpoint
    is missing): a caller can evaluate the agent as training goes and end it early by returning True (the
    result then holds the epochs run)."""
    pool = EnvPool(graphs, config.num_envs, config.max_locations, config.max_steps, cost_model, rules)
    policy = GraphPolicy(pool.num_xfers, config.hidden, config.latent, config.message_steps)
    agent = graph_agent(policy)
    update = _jitted_update(policy, config.ppo)
    optimizer = make_optimizer(config.ppo)
    identity = {"config": {k: v for k, v in dataclasses.asdict(config).items() if k != "epochs"},
                "graphs": [str(g.structure_hash) for g in graphs],
                **({} if tuple(rules) == tuple(RULES) else {"rules": [r.name for r in rules]})}

    def train(key) -> AgentResult:
        key, init_key = jax.random.split(key)
        params = _jitted_init(policy)(init_key, jax.tree.map(lambda x: x[0], pool.reset()))
        state = TrainState(params, optimizer.init(params))
        start, history = 0, []
        pool.forget_best()
        checkpointer = Workdir(workdir, identity).checkpointer() if workdir is not None else None
        try:
            if checkpointer is not None:
                restored = checkpointer.restore_latest({"state": state, "key": jax.random.key_data(key)})
                if restored is not None:
                    state = restored.tree["state"]
                    key = jax.random.wrap_key_data(restored.tree["key"])
                    start, history = restored.epoch, list(restored.meta)
            for epoch in tqdm(range(start, config.epochs), desc="ppo", disable=not progress, initial=start,
                              total=config.epochs):
                key, rollout_key, update_key = jax.random.split(key, 3)
                trajectory, stats = collect(pool, agent, state.params, rollout_key, config.rollout_steps)
                state, metrics = update(state, trajectory, update_key, config.ppo.entropy_at(epoch / config.epochs))
                steps = (history[-1]["env_steps"] if history else 0) + stats.env_steps
                history.append({"epoch": epoch + 1, "env_steps": steps, "episodes": len(stats.returns),
                                "mean_return": float(np.mean(stats.returns)) if stats.returns else None,
                                "mean_final_cost": float(np.mean(stats.final_costs)) if stats.returns else None,
                                **{name: float(value) for name, value in metrics.items()}})
                stop = on_epoch is not None and on_epoch(AgentResult(policy, state.params, history, steps,
                                                                     tuple(pool.best)))
                if checkpointer is not None:
                    checkpointer.save(epoch + 1, {"state": state, "key": jax.random.key_data(key)}, history)
                if stop:
                    break
        finally:
            if checkpointer is not None:
                checkpointer.close()
        return AgentResult(policy, state.params, history, history[-1]["env_steps"] if history else 0,
                           tuple(pool.best))

    return train


@functools.lru_cache(maxsize=16)
def _jitted_update(policy: GraphPolicy, config: PPOConfig) -> Callable:
    return jax.jit(make_update(graph_agent(policy).evaluate, config))


@functools.lru_cache(maxsize=16)
def _jitted_init(policy: GraphPolicy) -> Callable:
    return jax.jit(lambda key, obs: policy.init(key, obs, jnp.argmax))


def evaluate_agent(result: AgentResult, graph: Graph, config: AgentConfig, cost_model: CostModel | None = None,
                   key: Any = None, samples: int = 0, rules: Sequence[Rule] = RULES) -> list[Episode]:
    """The trained agent's real-environment episodes on `graph` (which may be a graph it never saw: the policy
    is size-independent, only xfers and max_locations are fixed): the most-likely-action episode first, then
    `samples` episodes sampled from the policy with `key`, with the `rules` it was trained with. `best_of` picks
    the graph to return."""
    env = Env(graph, max_locations=config.max_locations, rules=rules, cost_model=cost_model,
              max_steps=config.max_steps)
    agent, params, max_steps = graph_agent(result.policy), result.params, config.max_steps or 1000

    def run_one(episode_key):
        if episode_key is None:
            return run_episode(env, lambda obs: np.asarray(agent.greedy(params, stack([obs])))[0], max_steps)
        return run_episode(env, _sampler(agent, params, episode_key, max_steps), max_steps)

    return evaluation_episodes(run_one, key, samples)


def _sampler(agent, params, key, max_steps: int) -> Callable:
    """obs -> an action sampled from the policy, with a fresh key from `key` at every step."""
    step_keys = iter(split_keys(key, max_steps))
    return lambda obs: np.asarray(agent.act(params, stack([obs]), next(step_keys))[0])[0]
