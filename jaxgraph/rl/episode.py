"""Evaluation episodes in the real environment, and the best graph an agent visited.

The real `Env` reports the cost of every state it reaches, so an evaluated agent returns the cheapest graph
of its episode (the initial graph included), as TASO search returns the best graph it saw rather than the
last one: an agent then never ends dearer than where it started. `run_episode` records the cost of every
state; `Episode.best_actions` is the shortest action prefix that reaches the cheapest one (replaying it and
stopping there gives that graph, `replay`). Every `step` an episode made is a real-environment interaction,
whether or not its state was kept.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import jax
import numpy as np

from jaxgraph.cost import CostModel
from jaxgraph.env import Env, Observation
from jaxgraph.graph import Graph
from jaxgraph.rules import Rule


class Episode(NamedTuple):
    """One episode: the actions taken and the cost of every state visited, `costs[0]` the initial graph
    and `costs[i]` the graph after `actions[i - 1]` (so `len(costs) == len(actions) + 1`)."""

    actions: list[tuple[int, int]]
    costs: list[float]

    @property
    def env_steps(self) -> int:
        """Real-environment steps the episode used (the NO-OP included)."""
        return len(self.actions)

    @property
    def final_cost(self) -> float:
        """Cost of the state the episode ended in."""
        return self.costs[-1]

    @property
    def best_step(self) -> int:
        """Number of actions to the cheapest state visited (the earliest, if several tie)."""
        return int(np.argmin(self.costs))

    @property
    def best_cost(self) -> float:
        """Cost of the cheapest state visited: what the agent returns."""
        return self.costs[self.best_step]

    @property
    def best_actions(self) -> list[tuple[int, int]]:
        """The action prefix that reaches the cheapest state."""
        return self.actions[:self.best_step]


def run_episode(env: Env, choose: Callable[[Observation], tuple[int, int]], max_steps: int = 1000) -> Episode:
    """Reset `env` and step it with `choose(observation) -> (xfer, location)` until the episode ends or
    `max_steps` actions were taken, recording the cost of every state."""
    if max_steps < 1:
        raise ValueError(f"max_steps must be positive, got {max_steps}")
    timestep = env.reset()
    actions, costs = [], [env.cost]
    while not timestep.last() and len(actions) < max_steps:
        xfer, location = (int(a) for a in choose(timestep.observation))
        actions.append((xfer, location))
        timestep = env.step((xfer, location))
        costs.append(float(timestep.extras["cost"]))
    return Episode(actions, costs)


def best_of(episodes: Sequence[Episode]) -> Episode:
    """The episode whose best state is the cheapest (the first, if several tie)."""
    if not episodes:
        raise ValueError("best_of needs at least one episode")
    return min(episodes, key=lambda e: e.best_cost)


def evaluation_episodes(run_one: Callable[[Any], Episode], key: Any, samples: int) -> list[Episode]:
    """An agent's evaluation: its most-likely-action episode (`run_one(None)`) first, then `samples` episodes
    sampled with keys split from `key` (`run_one(episode_key)`). `best_of` picks the graph to return."""
    if samples and key is None:
        raise ValueError("sampled evaluation episodes need a key")
    return [run_one(None), *(run_one(episode_key) for episode_key in split_keys(key, samples))]


def replay(graph: Graph, actions: Sequence[tuple[int, int]], max_locations: int, cost_model: CostModel | None,
           rules: Sequence[Rule]) -> Graph:
    """The graph an action sequence of an agent with the rule table `rules` leads to from `graph` (the NO-OP
    ends it): how an agent's returned graph is rebuilt from `Episode.best_actions`."""
    env = Env(graph, max_locations=max_locations, rules=rules, cost_model=cost_model, max_steps=None)
    env.reset()
    for xfer, location in actions:
        if xfer == env.num_xfers:
            break
        env.step((xfer, location))
    return env.graph


def split_keys(key: Any, count: int) -> list:
    """`count` keys split from `key` (none for 0): one per sampled episode, or one per step of an episode."""
    return list(jax.random.split(key, count)) if count else []
