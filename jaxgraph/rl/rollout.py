"""Rollouts over a batch of host environments stepped in lockstep, one jitted policy call per step.

`EnvPool` holds one `Env` per batch slot (several graphs cycle over the slots) with common node/edge
capacities, so every observation of the batch has the same shapes and the batch stacks into one
pytree. Rewards are normalised by each graph's initial cost (the fraction of cost a rewrite saved),
so graphs of very different sizes train one agent. Episodes that end are reset in place. The pool keeps
the cheapest graph any of its environments visited per graph (`EnvPool.best`): a stochastic policy in
training visits states its converged policy no longer reaches, and an optimiser returns the best graph it
saw, as TASO's search and X-RLflow do.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph.cost import DEFAULT_COST_MODEL, CostModel, cost
from jaxgraph.env import Env, Observation
from jaxgraph.graph import Graph
from jaxgraph.rl.policy import GraphPolicy, entropy, log_prob, sample_action
from jaxgraph.rl.ppo import Trajectory
from jaxgraph.rules import RULES, Rule
from jaxgraph.timestep import TimeStep, outcome


def stack(observations: Sequence[Any]) -> Any:
    """Stack equally shaped pytrees along a new leading axis (NumPy, on the host)."""
    return jax.tree.map(lambda *leaves: np.stack(leaves), *observations)


class BestSeen(NamedTuple):
    """The cheapest state visited on one graph: its cost (as the environment tracked it) and the graph."""

    cost: float
    graph: Graph


class EnvPool:
    """`num_envs` host environments over `graphs` (slot i runs graphs[i % len(graphs)]); `best[g]` is the
    cheapest state any environment visited on graphs[g] since construction or `forget_best()`."""

    def __init__(self, graphs: Sequence[Graph], num_envs: int, max_locations: int = 32,
                 max_steps: int | None = None, cost_model: CostModel | None = None,
                 rules: Sequence[Rule] = RULES) -> None:
        if not graphs or num_envs < 1:
            raise ValueError(f"need at least one graph and one environment, got {len(graphs)} and {num_envs}")
        node_capacity = max(2 * len(g) for g in graphs)
        edge_capacity = max(2 * g.num_edges for g in graphs)
        self.envs = [Env(graphs[i % len(graphs)], max_locations=max_locations, rules=rules, cost_model=cost_model,
                         node_capacity=node_capacity, edge_capacity=edge_capacity, max_steps=max_steps)
                     for i in range(num_envs)]
        self.num_xfers = self.envs[0].num_xfers
        self.graphs, self.cost_model = tuple(graphs), cost_model or DEFAULT_COST_MODEL
        self.forget_best()

    def forget_best(self) -> None:
        """Restart best-seen tracking from the unmodified graphs."""
        self.best = [BestSeen(cost(g, self.cost_model), g) for g in self.graphs]

    def reset(self) -> Observation:
        """Reset every environment; the stacked observations [B, ...]."""
        return stack([env.reset().observation for env in self.envs])

    def step(self, actions: np.ndarray) -> tuple[Observation, TimeStep]:
        """Step each environment with its (xfer, location) row; reset those whose episode ended.

        Returns the next observations (after resets) and the batch's time step [B]: normalised rewards, the
        observations the steps produced (before resets, for bootstrapping truncated episodes), terminated and
        truncated apart, and extras["cost"], the cost of each graph after the step (before resets)."""
        observations, finals, rewards, terminated, truncated, costs = [], [], [], [], [], []
        for i, (env, (xfer, location)) in enumerate(zip(self.envs, actions)):
            timestep = env.step((int(xfer), int(location)))
            g = i % len(self.graphs)
            if timestep.extras["cost"] < self.best[g].cost:
                self.best[g] = BestSeen(timestep.extras["cost"], env.graph)
            finals.append(timestep.observation)
            costs.append(timestep.extras["cost"])
            rewards.append(timestep.reward / env.initial_cost)
            terminated.append(timestep.terminated)
            truncated.append(timestep.truncated)
            observations.append(env.reset().observation if timestep.last() else timestep.observation)
        return stack(observations), outcome(np.asarray(rewards, np.float32), stack(finals), np.asarray(terminated),
                                            np.asarray(truncated), {"cost": np.asarray(costs)})


class GraphAgent(NamedTuple):
    """The jitted functions a rollout and an update need, for one `GraphPolicy`."""

    act: Callable  # (params, obs [B], key) -> actions [B, 2], log_probs [B], values [B]
    greedy: Callable  # (params, obs [B]) -> actions [B, 2]
    value: Callable  # (params, obs [B]) -> values [B]
    evaluate: Callable  # (params, obs, action) -> log_prob, entropy, value (unbatched, not jitted)


@functools.lru_cache(maxsize=16)
def graph_agent(policy: GraphPolicy) -> GraphAgent:
    """Batched, jitted acting functions and the unbatched evaluation of a `GraphPolicy` (cached per
    policy, so agents of equal architecture share compilations)."""

    def act_one(params, obs, key):
        action, lp, out = sample_action(key, lambda choose: policy.apply(params, obs, choose))
        return action, lp, out.value

    def act(params, obs, key):
        keys = jax.random.split(key, obs.xfer_mask.shape[0])
        return jax.vmap(act_one, in_axes=(None, 0, 0))(params, obs, keys)

    def greedy(params, obs):
        return jax.vmap(lambda o: sample_action(None, lambda choose: policy.apply(params, o, choose))[0])(obs)

    def value(params, obs):
        return jax.vmap(lambda o: policy.apply(params, o, jnp.argmax).value)(obs)

    def evaluate(params, obs, action):
        out = policy.apply(params, obs, lambda _: action[0])
        return (log_prob(out.xfer_logits, out.location_logits, action[0], action[1]),
                entropy(out.xfer_logits, out.location_logits, action[0]), out.value)

    return GraphAgent(jax.jit(act), jax.jit(greedy), jax.jit(value), evaluate)


class RolloutStats(NamedTuple):
    """Finished episodes of a rollout: their returns (fraction of initial cost saved) and final costs."""

    returns: list[float]
    final_costs: list[float]
    env_steps: int


def collect(pool: EnvPool, agent: GraphAgent, params: Any, key: Any, num_steps: int
            ) -> tuple[Trajectory, RolloutStats]:
    """Reset the pool, run `num_steps` lockstep steps with the stochastic policy; time-major trajectory."""
    obs = pool.reset()
    steps: list[tuple] = []
    truncated_values = np.zeros((num_steps, len(pool.envs)), np.float32)
    returns, final_costs, running = [], [], np.zeros(len(pool.envs))
    for t in range(num_steps):
        key, sub = jax.random.split(key)
        action, lp, value = (np.asarray(a) for a in agent.act(params, obs, sub))
        next_obs, timestep = pool.step(action)
        reward, term, trunc, costs = timestep.reward, timestep.terminated, timestep.truncated, timestep.extras["cost"]
        if trunc.any():
            truncated_values[t] = np.asarray(agent.value(params, timestep.observation))
        running += reward
        for i in np.flatnonzero(term | trunc):
            returns.append(float(running[i]))
            final_costs.append(float(costs[i]))
            running[i] = 0.0
        steps.append((obs, action, lp, value, reward, term, trunc))
        obs = next_obs
    bootstrap = np.asarray(agent.value(params, obs))
    obs_t, action, lp, value, reward, term, trunc = (stack(x) for x in zip(*steps))
    next_value = np.concatenate([value[1:], bootstrap[None]])
    next_value = np.where(trunc, truncated_values, next_value)
    trajectory = Trajectory(obs_t, action, lp, value, reward, next_value, term, term | trunc)
    return trajectory, RolloutStats(returns, final_costs, num_steps * len(pool.envs))
