"""The research setting's jitted multi-graph agent: one model-free PPO agent trained in `JaxEnv` on every model of
the setting at once (TASO's cost and `TASO_RULES`, whose data rules run jitted, `jaxgraph.jax_patterns`), then
evaluated on each model in the same compiled environment.

`jaxgraph.rl.make_jax_train` runs the whole training (rollouts over all the graphs, each environment drawing an
instance per episode, and the PPO updates) as one program, and `make_evaluate` the most-likely-action episode and
`samples` sampled ones per model; the agent's cost on a model is the cheapest state those episodes visited, as for
the host agents. The study runs it where `GraphoptConfig.jitted_agent` is set (the `full` configuration, for a GPU: on
two CPU cores the program's compilation alone takes minutes). A jitted environment holds graphs of one output count:
models of another count are listed as skipped.
"""

from __future__ import annotations

import time
from collections import Counter

import chex
import jax
import numpy as np

from experiments.graphopt_rl.settings import Setting
from jaxgraph import Graph, JaxEnv
from jaxgraph.rl import AgentConfig, best_of, jax_ppo, make_jax_train


def jitted_multi_graph(agent: AgentConfig, graphs: dict[str, Graph], setting: Setting, key: chex.PRNGKey,
                       samples: int) -> dict:
    """Train one agent in `JaxEnv` on `graphs` (name: graph) under `setting`'s cost and rules and evaluate it on each:
    {"graphs": {name: initial_cost, agent_cost, actions (reaching it), evaluation_steps}, "skipped", "env_steps" (real
    steps of training),
    "train_seconds" (compilation included), "mean_return" (per epoch, NaN where no episode ended)}."""
    outputs = Counter(len(g.outputs) for g in graphs.values()).most_common(1)[0][0]
    kept = {name: g for name, g in graphs.items() if len(g.outputs) == outputs}
    env = JaxEnv(list(kept.values()), max_locations=agent.max_locations, rules=setting.rules(),
                 cost_model=setting.cost_model(), max_steps=agent.max_steps)
    train_key, eval_key = jax.random.split(key)
    start = time.perf_counter()
    trained = jax.jit(make_jax_train(agent, env))(train_key)
    params = jax.block_until_ready(trained.params)
    seconds = time.perf_counter() - start
    evaluate = jax.jit(jax_ppo.make_evaluate(agent, env, samples))
    rows = {}
    for index, name in enumerate(kept):
        episodes = evaluate(params, jax.random.fold_in(eval_key, index), index)
        best = best_of(episodes.episodes())
        rows[name] = {"initial_cost": best.costs[0], "agent_cost": best.best_cost,
                      "actions": [list(action) for action in best.best_actions],
                      "evaluation_steps": int(np.asarray(episodes.length).sum())}
    return {"graphs": rows, "skipped": sorted(set(graphs) - set(kept)),
            "env_steps": agent.epochs * agent.num_envs * agent.rollout_steps, "train_seconds": seconds,
            "mean_return": np.asarray(trained.mean_return, np.float64).tolist()}
