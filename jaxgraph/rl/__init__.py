"""jaxgraph agents (thesis chapter 4): jraph GNN encoder, masked hierarchical PPO, MDN-RNN world model
and PPO controllers trained inside it."""

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
from jaxgraph.rl.encoder import GraphEncoder
from jaxgraph.rl.episode import Episode, best_of, evaluation_episodes, run_episode
from jaxgraph.rl.generalise import (
    GeneralistConfig,
    UnseenResult,
    evaluate_unseen,
    evaluation_steps,
    train_generalist,
    training_graphs,
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
from jaxgraph.rl.report import judge_targets, plot_results, results_table
from jaxgraph.rl.rollout import BestSeen, EnvPool, GraphAgent, RolloutStats, collect, graph_agent, stack
from jaxgraph.rl.study import CONFIGS, StudyConfig, Timers, fit_world_model, make_encoder, random_sequences, run_study
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
    "StudyConfig", "fit_world_model", "judge_targets", "make_encoder", "plot_results", "random_sequences",
    "results_table", "run_study", "CONFIGS", "Timers",
    "GeneralistConfig", "UnseenResult", "evaluate_unseen", "evaluation_steps", "train_generalist", "training_graphs",
]
