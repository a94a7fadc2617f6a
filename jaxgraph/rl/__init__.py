"""jaxgraph agents (thesis chapter 4): jraph GNN encoder, masked hierarchical PPO, MDN-RNN world model
and PPO controllers trained inside it."""

from jaxgraph.rl.configs import AgentConfig, PPOConfig, tiny_agent
from jaxgraph.rl.encoder import GraphEncoder
from jaxgraph.rl.policy import GraphPolicy, LatentPolicy, PolicyOutput, entropy, log_prob, masked_logits, sample_action
from jaxgraph.rl.ppo import (TrainState, Trajectory, clipped_policy_loss, gae, make_optimizer, make_update,
                             ppo_loss, value_loss)
from jaxgraph.rl.rollout import EnvPool, GraphAgent, RolloutStats, collect, graph_agent, greedy_episode, stack
from jaxgraph.rl.toy import ToyInstance, toy_graph
from jaxgraph.rl.train import AgentResult, evaluate_greedy, make_train

__all__ = [
    "AgentConfig", "AgentResult", "EnvPool", "GraphAgent", "RolloutStats", "collect", "evaluate_greedy",
    "graph_agent", "greedy_episode", "make_train", "stack", "tiny_agent",
    "GraphEncoder", "GraphPolicy", "LatentPolicy", "PPOConfig", "PolicyOutput", "ToyInstance", "TrainState",
    "Trajectory", "clipped_policy_loss", "entropy", "gae", "log_prob", "make_optimizer", "make_update",
    "masked_logits", "ppo_loss", "sample_action", "toy_graph", "value_loss",
]
