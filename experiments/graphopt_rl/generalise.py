"""One agent trained on generated graphs only, evaluated on graphs it never saw (the builders, imported models).

Training distribution (`training_graphs`): seeded trap graphs (`jaxgraph.traps`: concat(relu(conv 1x1),
relu(conv k x k)) pairs of parallel convs, the motif of SqueezeNet's fire modules and Inception's branches, whose
optimum needs a dearer merge before `SplitConcat` pays it back, chained with conv + relu pairs and inert ops) and seeded
random graphs (`jaxgraph.random_graphs`: convs with batch norms and relus, sibling convs and matmuls sharing an
input, residual adds, concats of splits, attention), so every motif the builders hold is in it.

Trainer: the host PPO trainer (`jaxgraph.rl.train.make_train`, the reference) with the hand-written `RULES`. On
the five builders greedy and TASO's search reach the same costs with `RULES` as with TASO's full table
(`TASO_RULES`), so the smaller table loses nothing there, and it is the jitted environment's table too. The host
trainer rather than the jitted one: the builders (up to 787 nodes) are evaluated in the host `Env` anyway, and at
equal work a jitted multi-graph epoch was 1.1-1.6x the host epoch on 2 CPU cores after a 50-70 s compilation. The
pool runs one environment per training graph (`EnvPool` gives graph i to slot i mod num_envs), so every graph is
in every epoch's rollout.

Evaluation (`evaluate_unseen`): the real `Env` on the unseen graph, episodes long enough to rewrite it (at least
`steps_per_op` steps per op: a builder needs far more rewrites than the training graphs), the most-likely-action
episode and `samples` sampled ones. The agent returns the cheapest state any of them visited (never dearer than
the input graph), rebuilt by replaying that episode's action prefix; the most-likely episode's best is kept too.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, NamedTuple

from jaxgraph import RULES, CostModel, Graph, cost, random_instances, trap_instances
from jaxgraph.rl import AgentConfig, AgentResult, Episode, PPOConfig, best_of, evaluate_agent, make_train, replay
from jaxsched.common import integer_fields, number_fields


@dataclasses.dataclass(frozen=True)
class GeneralistConfig:
    """The training distribution, the agent and its evaluation on unseen graphs."""

    agent: AgentConfig = AgentConfig(ppo=PPOConfig(learning_rate=1e-3, minibatches=2), hidden=32, latent=16,
                                     message_steps=2, rollout_steps=16, epochs=40, max_locations=8, max_steps=24)
    traps: int = 12  # trap graphs (seeds seed .. seed + traps - 1)
    trap_ops: tuple[int, int] = (10, 40)  # their smallest and largest op counts
    max_traps: int = 3  # trap motifs per trap graph, at most
    random_graphs: int = 4  # random graphs (seeds seed .. seed + random_graphs - 1)
    random_blocks: int = 4  # blocks per random graph
    seed: int = 0  # first seed of both generators
    samples: int = 8  # sampled evaluation episodes besides the most-likely one
    steps_per_op: float = 1.0  # evaluation episodes run at least this many steps per op of the graph

    def __post_init__(self) -> None:
        integer_fields(self, 0, "traps", "random_graphs", "samples", "seed")
        integer_fields(self, 1, "random_blocks")
        if self.traps + self.random_graphs < 1:
            raise ValueError("the training distribution needs at least one trap or random graph")
        number_fields(self, 0.0, "steps_per_op", above=True)


def training_graphs(config: GeneralistConfig, cost_model: CostModel | None = None) -> tuple[Graph, ...]:
    """The generated graphs the agent trains on: the trap graphs (traps under `cost_model`), then the random
    graphs."""
    graphs: tuple[Graph, ...] = ()
    if config.traps:
        low, high = config.trap_ops
        graphs += trap_instances(config.traps, config.seed, low, high, config.max_traps,
                                 cost_model=cost_model).graphs
    if config.random_graphs:
        graphs += random_instances(config.random_graphs, config.seed, config.random_blocks).graphs
    return graphs


def train_generalist(config: GeneralistConfig, key: Any, cost_model: CostModel | None = None,
                     workdir: str | Path | None = None, progress: bool = False) -> AgentResult:
    """Train one host PPO agent on `training_graphs(config)` only, one environment per graph (resumable in
    `workdir`, as `make_train`)."""
    graphs = training_graphs(config, cost_model)
    agent_config = dataclasses.replace(config.agent, num_envs=len(graphs))
    return make_train(agent_config, graphs, cost_model, workdir=workdir, progress=progress)(key)


def evaluation_steps(config: GeneralistConfig, graph: Graph) -> int:
    """Episode length on `graph`: `steps_per_op` per op, and never less than the training episodes'."""
    return max(config.agent.max_steps or 1, math.ceil(config.steps_per_op * graph.num_ops))


class UnseenResult(NamedTuple):
    """An agent on a graph it never saw: the cheapest graph its evaluation episodes visited and its cost, the
    input's cost, the best cost of the most-likely-action episode, and every episode (real steps each)."""

    graph: Graph
    cost: float
    initial_cost: float
    likely_cost: float
    episodes: list[Episode]

    @property
    def env_steps(self) -> int:
        """Real-environment steps the evaluation used."""
        return sum(e.env_steps for e in self.episodes)


def evaluate_unseen(agent: AgentResult, graph: Graph, config: GeneralistConfig, key: Any,
                    cost_model: CostModel | None = None) -> UnseenResult:
    """Run `agent` on `graph` (episodes of `evaluation_steps`): its most-likely episode and `config.samples`
    sampled ones; return the cheapest state any of them visited, rebuilt by replaying its action prefix."""
    agent_config = dataclasses.replace(config.agent, max_steps=evaluation_steps(config, graph))
    episodes = evaluate_agent(agent, graph, agent_config, cost_model, key, config.samples)
    best = best_of(episodes)
    found = replay(graph, best.best_actions, agent_config.max_locations, cost_model, RULES)
    return UnseenResult(found, cost(found, cost_model), cost(graph, cost_model), episodes[0].best_cost, episodes)

