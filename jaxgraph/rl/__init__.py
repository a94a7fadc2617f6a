"""jaxgraph agents (thesis chapter 4): jraph GNN encoder, masked hierarchical PPO, MDN-RNN world model
and PPO controllers trained inside it."""

from jaxgraph.rl.encoder import GraphEncoder
from jaxgraph.rl.policy import GraphPolicy, LatentPolicy, PolicyOutput, entropy, log_prob, masked_logits, sample_action
from jaxgraph.rl.toy import ToyInstance, toy_graph

__all__ = [
    "GraphEncoder", "GraphPolicy", "LatentPolicy", "PolicyOutput", "ToyInstance", "entropy", "log_prob",
    "masked_logits", "sample_action", "toy_graph",
]
