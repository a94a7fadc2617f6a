"""The graph-optimization study's configurations: `GraphoptConfig` (model graphs, agents, budgets, settings) and
`CONFIGS`, the presets `test` (seconds, the test suite), `default` (minutes on 2 CPU cores, small graphs) and `full`
(the thesis's graphs and budgets, a GPU machine); `build_graph` builds a config's model graph.

The imported model of `default` and `full` is the torch-exported BERT (`IMPORTED_BERT`, relative to the working
directory, as `python -m experiments.graphopt_rl` runs from the repository's root); a missing file is reported in the
results' notes, not fatal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experiments.graphopt_rl.settings import SETTINGS
from jaxgraph import MODELS, Graph
from jaxgraph.rl import AgentConfig, DreamConfig, PPOConfig, WorldModelConfig
from jaxsched.common import integer_fields, number_fields

IMPORTED_BERT = "tests/data/bert-legacy-op17.onnx"  # the ONNX file the default and full studies import
THESIS_TAUS = (0.1, 0.5, 0.75, 1.0, 1.2, 1.5, 1.75, 2.0, 2.5, 3.0)


@dataclass(frozen=True)
class GraphoptConfig:
    """What the study runs: model graphs (builder name and keyword arguments), agents and budgets."""

    models: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]
    agent: AgentConfig
    world_model: WorldModelConfig
    dream: DreamConfig
    onnx_models: tuple[str, ...] = ()  # imported ONNX files (relative to the working directory); missing ones
    # are reported, not fatal, since the data may land later
    tau_model: str = "bert"  # the Table 5.1 analog of the deployment setting runs on this model
    research_tau_model: str = "squeezenet1_1"  # and that of the research setting on this one
    held_out: str = "bert"  # the multi-graph agent never sees this model
    taus: tuple[float, ...] = THESIS_TAUS
    seeds: int = 5
    wm_sequences: int = 64  # random-agent sequences of the real Env per model
    wm_length: int = 16
    wm_epochs: int = 20  # passes over the sequences
    wm_batch: int = 16
    noop_probability: float = 0.2  # the thesis's random agent
    taso_alpha: float = 1.05
    taso_budget: int = 1000  # as benchmarks/graphopt.py
    latency_repeats: int = 20  # timed runs of each graph (`Timers.latencies`)
    step_time_envs: int = 4096  # dreams in the batched step-time measurement (`Timers.step_time`)
    eval_samples: int = 8  # episodes sampled from each trained agent besides its most-likely-action episode; the
    # agent returns the cheapest graph any of them visited (each one's real steps counted)
    optimum_budget: int = 2000  # unpruned search (alpha 1e9) on the tau model and the imported models: the
    # reachable optimum, when the search exhausts the reachable graphs within this many expansions (deployment)
    settings: tuple[str, ...] = ("research", "deployment")
    exhaustive_states: int = 5000  # research: the exhaustive optimum is searched up to this many distinct graphs
    saturation_seconds: float = 60.0  # research: time limit of equality saturation and of its ILP extraction
    curve_every: int = 1  # the model-free agent's sample-efficiency curve: an evaluation every this many epochs
    jitted_agent: bool = False  # research: also one model-free agent trained in JaxEnv on every model at once
    # (`experiments.graphopt_rl.jitted_agent`; its compilation takes minutes on a CPU, so the full configuration only)

    def __post_init__(self) -> None:
        names = [name for name, _ in self.models]
        unknown = sorted(set(names) - set(MODELS))
        if unknown or len(names) < 2 or len(set(names)) != len(names):
            raise ValueError(f"models must be at least two distinct names from {sorted(MODELS)} (the held-out "
                             f"agent trains on all but one), got {names}")
        if {self.tau_model, self.research_tau_model, self.held_out} - set(names):
            raise ValueError(f"tau_model {self.tau_model!r}, research_tau_model {self.research_tau_model!r} and "
                             f"held_out {self.held_out!r} must be among {names}")
        integer_fields(self, 1, "seeds", "wm_sequences", "wm_length", "wm_epochs", "wm_batch", "taso_budget",
                       "latency_repeats", "step_time_envs", "optimum_budget", "exhaustive_states", "curve_every")
        integer_fields(self, 0, "eval_samples")
        number_fields(self, 0.0, "noop_probability", maximum=1.0)
        number_fields(self, 0.0, "saturation_seconds", above=True)
        if not self.taus:
            raise ValueError("GraphoptConfig.taus must name at least one temperature")
        if not 0.0 <= self.noop_probability < 1.0 or min(self.taus) <= 0.0:
            raise ValueError("noop_probability must be in [0, 1) and every tau positive")
        if not self.settings or len(set(self.settings)) != len(self.settings) or set(self.settings) - set(SETTINGS):
            raise ValueError(f"settings must be distinct names from {sorted(SETTINGS)}, got {self.settings}")
        if self.wm_sequences % self.wm_batch:
            raise ValueError(f"wm_sequences {self.wm_sequences} must split into batches of {self.wm_batch}")

    def tau_model_of(self, setting_name: str) -> str:
        """The model the Table 5.1 analog runs on in the setting `setting_name`."""
        return self.research_tau_model if setting_name == "research" else self.tau_model


def _models(**models: dict) -> tuple:
    return tuple((name, tuple(sorted(kwargs.items()))) for name, kwargs in models.items())


SMALL_IMAGE = dict(image_size=32, width=0.25, num_classes=10)
SMALL_TRANSFORMER = dict(seq_length=16, hidden=64, heads=2, layers=2)


# `test` (seconds, for the test suite), `default` (minutes on 2 CPU cores, small graphs) and `full` (the thesis's
# sizes and budgets: full-size graphs, LSTM 256, a GPU machine); look one up with `jaxsched.common.named_config`.
CONFIGS = {
    "test": GraphoptConfig(
        models=_models(bert=dict(SMALL_TRANSFORMER, layers=1, intermediate=128),
                       taso_attention_stack=dict(SMALL_TRANSFORMER, layers=1)),
        agent=AgentConfig(ppo=PPOConfig(learning_rate=1e-3, minibatches=2, update_epochs=2), hidden=16, latent=8,
                          message_steps=1, num_envs=4, rollout_steps=4, epochs=2, max_locations=4, max_steps=6),
        world_model=WorldModelConfig(hidden=16, mixtures=2, learning_rate=3e-3),
        dream=DreamConfig(ppo=PPOConfig(minibatches=2, update_epochs=2), hidden=16, num_envs=8, rollout_steps=4,
                          updates=3, horizon=6),
        research_tau_model="taso_attention_stack", taus=(0.5, 2.0), seeds=2, wm_sequences=4, wm_length=4,
        wm_epochs=2, wm_batch=2, taso_budget=5, latency_repeats=1, step_time_envs=16, eval_samples=0,
        optimum_budget=20, exhaustive_states=300, saturation_seconds=10.0),
    "default": GraphoptConfig(
        models=_models(resnet18=SMALL_IMAGE, squeezenet1_1=SMALL_IMAGE, mobilenet_v2=SMALL_IMAGE,
                       bert=dict(SMALL_TRANSFORMER, intermediate=128), taso_attention_stack=SMALL_TRANSFORMER),
        # max_steps 64: room for the 29-52 rewrites greedy makes on the small image builders under TASO's table
        agent=AgentConfig(ppo=PPOConfig(learning_rate=1e-3, minibatches=2), hidden=32, latent=16,
                          message_steps=2, num_envs=8, rollout_steps=16, epochs=15, max_locations=16,
                          max_steps=64),
        world_model=WorldModelConfig(hidden=64, mixtures=4, learning_rate=3e-3),
        dream=DreamConfig(ppo=PPOConfig(learning_rate=1e-3, minibatches=4), hidden=32, num_envs=64,
                          rollout_steps=16, updates=40, horizon=24),
        onnx_models=(IMPORTED_BERT,), wm_sequences=48, wm_length=16, wm_epochs=40,
        wm_batch=16, taso_budget=100, latency_repeats=15, exhaustive_states=2000, saturation_seconds=20.0),
    "full": GraphoptConfig(
        models=_models(resnet18={}, resnet50={}, squeezenet1_1={}, inception_v3={}, mobilenet_v2={}, bert={},
                       taso_attention_stack={}),
        agent=AgentConfig(epochs=2000, max_locations=200, max_steps=100),
        world_model=WorldModelConfig(),
        dream=DreamConfig(num_envs=1024, updates=500),
        onnx_models=(IMPORTED_BERT,), wm_sequences=512, wm_length=32, wm_epochs=200,
        wm_batch=64, latency_repeats=30, step_time_envs=65536, exhaustive_states=100_000, curve_every=20,
        jitted_agent=True),
}


def build_graph(config: GraphoptConfig, name: str) -> Graph:
    """The model graph `name` at the config's size."""
    return MODELS[name](**dict(dict(config.models)[name]))
