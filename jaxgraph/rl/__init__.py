"""jaxgraph agents (thesis chapter 4): jraph GNN encoder, masked hierarchical PPO (the host trainer `make_train` and
its jitted twin `make_jax_train`, the rest of that twin as the sub-namespace `jax_ppo`), MDN-RNN world model and PPO
controllers trained inside it (`model_based`: the random agent's data and the world model's fit), evaluation
episodes and sample-efficiency curves. The study that compares them with the searches is `experiments.graphopt_rl`."""

from jaxgraph.rl import jax_ppo  # the rest of the jitted trainer (make_trainer, make_evaluate), as a sub-namespace
from jaxgraph.rl.configs import AgentConfig, DreamConfig, PPOConfig, WorldModelConfig, tiny_agent
from jaxgraph.rl.dream import (
    ControllerInput,
    DreamEnvState,
    DreamResult,
    DreamStart,
    DreamTrainer,
    controller_episode,
    controller_input,
    initial_env_state,
    make_dream_rollout,
    make_dream_sweep,
    make_dream_train,
    make_dream_trainer,
)
from jaxgraph.rl.efficiency import (
    best_so_far,
    curve_table,
    extend,
    model_free_recorder,
    plot_curves,
    steps_to_reach,
    value_at,
)
from jaxgraph.rl.encoder import GraphEncoder
from jaxgraph.rl.episode import Episode, best_of, evaluation_episodes, replay, run_episode
from jaxgraph.rl.jax_ppo import JaxTrainResult, make_jax_train
from jaxgraph.rl.model_based import (
    dream_start,
    fit_world_model,
    jitted_dream_train,
    jitted_world_model,
    make_encoder,
    random_sequences,
)
from jaxgraph.rl.policy import GraphPolicy, LatentPolicy, PolicyOutput, entropy, log_prob, masked_logits, sample_action
from jaxgraph.rl.ppo import (
    TrainState,
    Trajectory,
    clipped_policy_loss,
    gae,
    make_optimizer,
    make_update,
    ppo_loss,
    value_loss,
)
from jaxgraph.rl.rollout import BestSeen, EnvPool, GraphAgent, RolloutStats, collect, graph_agent, stack
from jaxgraph.rl.toy import ToyInstance, toy_graph
from jaxgraph.rl.train import AgentResult, evaluate_agent, make_train
from jaxgraph.rl.world_model import (
    MDNRNN,
    DreamState,
    LatentSequence,
    Prediction,
    imagine,
    make_world_model_update,
    mixture_log_likelihood,
    observe,
    predicted_masks,
    sample_component,
    sample_latent,
    world_model_loss,
)

__all__ = [
    "ControllerInput", "DreamEnvState", "DreamResult", "DreamStart", "controller_episode", "controller_input",
    "initial_env_state", "make_dream_rollout", "make_dream_sweep", "make_dream_train", "DreamTrainer",
    "make_dream_trainer",
    "DreamConfig", "DreamState", "LatentSequence", "MDNRNN", "Prediction", "WorldModelConfig", "imagine",
    "make_world_model_update", "mixture_log_likelihood", "observe", "predicted_masks", "sample_component",
    "sample_latent", "world_model_loss",
    "AgentConfig", "AgentResult", "BestSeen", "EnvPool", "GraphAgent", "RolloutStats", "collect", "evaluate_agent",
    "graph_agent", "make_train", "stack", "tiny_agent", "Episode", "best_of", "evaluation_episodes", "run_episode",
    "GraphEncoder", "GraphPolicy", "LatentPolicy", "PPOConfig", "PolicyOutput", "ToyInstance", "TrainState",
    "Trajectory", "clipped_policy_loss", "entropy", "gae", "log_prob", "make_optimizer", "make_update",
    "masked_logits", "ppo_loss", "sample_action", "toy_graph", "value_loss",
    "JaxTrainResult", "make_jax_train", "jax_ppo",
    "dream_start", "fit_world_model", "jitted_dream_train", "jitted_world_model", "make_encoder", "random_sequences",
    "best_so_far", "curve_table", "extend", "model_free_recorder", "plot_curves", "replay", "steps_to_reach",
    "value_at",
]
