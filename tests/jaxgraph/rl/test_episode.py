"""Evaluation episodes return the cheapest graph they visited: hand-worked cost sequences (a scripted
environment), the toy graph's known optimum in the real Env, and the honest count of real steps."""

import pytest

from jaxgraph import Env, cost
from jaxgraph.rl import Episode, best_of, replay, run_episode, toy_graph
from jaxgraph.timestep import StepType, TimeStep


class ScriptedEnv:
    """An environment whose states cost `costs[0], costs[1], ...`, one per step; the last step terminates."""

    def __init__(self, costs):
        self.costs, self.i = costs, 0

    @property
    def cost(self):
        return self.costs[self.i]

    def reset(self):
        self.i = 0
        return TimeStep(StepType.FIRST, 0.0, 1.0, self.i, {"cost": self.costs[0]})

    def step(self, action):
        self.i += 1
        done = self.i == len(self.costs) - 1
        return TimeStep(StepType.LAST if done else StepType.MID, self.costs[self.i - 1] - self.costs[self.i],
                        0.0 if done else 1.0, self.i, {"cost": self.costs[self.i]})


def scripted(costs, max_steps=100):
    return run_episode(ScriptedEnv(costs), lambda obs: (obs, 0), max_steps)


def test_up_then_down_returns_the_lowest_state_and_its_prefix():
    episode = scripted([1.0, 1.2, 0.9, 1.1, 0.95])
    assert episode.actions == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert episode.best_cost == 0.9 and episode.best_step == 2 and episode.best_actions == [(0, 0), (1, 0)]
    assert episode.final_cost == 0.95 and episode.env_steps == 4


def test_only_up_returns_the_initial_graph():
    episode = scripted([1.0, 1.1, 1.3, 1.25])
    assert episode.best_cost == 1.0 and episode.best_actions == [] and episode.final_cost == 1.25


def test_ties_keep_the_shortest_prefix_and_max_steps_cuts_the_episode():
    assert scripted([1.0, 0.8, 0.8, 0.9]).best_actions == [(0, 0)]
    cut = scripted([1.0, 1.1, 0.5, 0.4], max_steps=1)
    assert cut.costs == [1.0, 1.1] and cut.best_cost == 1.0
    with pytest.raises(ValueError, match="max_steps"):
        scripted([1.0, 0.9], max_steps=0)


def test_best_of_picks_the_episode_with_the_cheapest_state():
    greedy, first, second = scripted([1.0, 1.1, 1.2]), scripted([1.0, 0.7, 0.9, 1.0]), scripted([1.0, 0.8, 0.6])
    assert best_of([greedy, first, second]) is second
    with pytest.raises(ValueError, match="at least one"):
        best_of([])


def test_the_real_env_records_the_toy_optimum():
    """The toy's optimal sequence (fold each batch norm, then fuse each relu) in the real Env, followed by the
    NO-OP: the best state is the independently built optimal graph, reached before the NO-OP; replaying the best
    prefix rebuilds it, and a replay that starts with the NO-OP applies nothing."""
    toy = toy_graph(2)
    env = Env(toy.graph, max_locations=4)

    def first_valid(obs):
        valid = [x for x in range(env.num_xfers) if obs.xfer_mask[x]]
        return (valid[0], 0) if valid else (env.num_xfers, 0)

    episode = run_episode(env, first_valid)
    assert isinstance(episode, Episode)
    assert episode.costs[0] == pytest.approx(cost(toy.graph))
    assert episode.best_cost == pytest.approx(cost(toy.optimal_graph), rel=1e-9)
    assert episode.best_cost < episode.costs[0]
    optimal = cost(toy.optimal_graph)
    assert cost(replay(toy.graph, episode.best_actions, 4, None, env.rules)) == pytest.approx(optimal, rel=1e-9)
    stopped = replay(toy.graph, [(env.num_xfers, 0)] + episode.best_actions, 4, None, env.rules)
    assert cost(stopped) == pytest.approx(cost(toy.graph), rel=1e-12)  # the NO-OP ends it: nothing applied
