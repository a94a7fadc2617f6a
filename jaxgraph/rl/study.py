"""The agents' evaluation (thesis chapter 5) end to end: `run_study(config, workdir)` behind
`python -m experiments.graphopt_rl`.

It runs in two settings, named and never mixed (`jaxgraph.rl.settings`): `research` (TASO's cost and rule table:
greedy, TASO's search at alpha 1.0 and 1.05, equality saturation, the exhaustive optimum where the reachable
space is small enough, and the agents; a lower cost is a cost reduction) and `deployment` (onnxruntime's
runtime-aware cost, `Roofline(backend=ONNXRUNTIME)`: greedy, TASO search and the agents, with measured
latencies). For every agent each row also holds its sample-efficiency curve, the best cost found against the
real-environment steps used (`jaxgraph.rl.efficiency`). In each setting, on that setting's tau model (BERT in
the deployment setting, SqueezeNet in the research setting, where there is most to find), it runs the Table 5.1
analog: the tau sweep x seeds of dream-trained controllers as one vmapped program, each controller then
evaluated in the real Env. In the deployment setting it also trains one agent on several graphs and evaluates
it on a graph it never saw. With `Timers` (what
`experiments.graphopt_rl` passes) a row also records the measured latency of every resulting graph and, on the tau
model, a real Env step against a batched dream step.

The world model's latent z comes from a GraphEncoder with random, frozen parameters (see docs/jaxgraph.md,
"Agents"): a frozen encoder cannot collapse z to a constant that the MDN-RNN would predict perfectly, and
it costs no real-environment interactions, so the model-based agent's count is its random rollouts alone.

Every stage writes its JSON under the workdir as soon as it is done (model-free training also checkpoints
per epoch); a rerun of the same configuration loads finished stages and resumes the rest, and another
configuration is refused (`jaxsched.common.Workdir`).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from jaxgraph.cost import cost
from jaxgraph.env import Env, Observation
from jaxgraph.graph import Graph
from jaxgraph.models import MODELS
from jaxgraph.rl.baselines import deployment_baselines, research_baselines
from jaxgraph.rl.configs import AgentConfig, DreamConfig, PPOConfig, WorldModelConfig
from jaxgraph.rl.dream import DreamStart, controller_episode, make_dream_sweep, make_dream_train
from jaxgraph.rl.efficiency import best_so_far, extend, model_free_recorder
from jaxgraph.rl.encoder import GraphEncoder
from jaxgraph.rl.episode import Episode, best_of, evaluation_episodes
from jaxgraph.rl.jitted_agent import jitted_multi_graph
from jaxgraph.rl.policy import LatentPolicy
from jaxgraph.rl.report import plot_results, results_table
from jaxgraph.rl.settings import SETTINGS, setting
from jaxgraph.rl.train import evaluate_agent, make_train
from jaxgraph.rl.world_model import MDNRNN, LatentSequence, make_world_model_update
from jaxgraph.rules import Rule
from jaxgraph.search import greedy, taso_search
from jaxsched.common.arguments import integer_fields, number_fields
from jaxsched.common.machine import machine_description
from jaxsched.common.sharding import Devices
from jaxsched.common.workdir import Workdir, write_json, write_text

AGENTS = ("model_free", "model_based")
THESIS_TAUS = (0.1, 0.5, 0.75, 1.0, 1.2, 1.5, 1.75, 2.0, 2.5, 3.0)


@dataclass(frozen=True)
class StudyConfig:
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
    # (`jaxgraph.rl.jitted_agent`; its compilation takes minutes on a CPU, so the full configuration only)

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
            raise ValueError("StudyConfig.taus must name at least one temperature")
        if not 0.0 <= self.noop_probability < 1.0 or min(self.taus) <= 0.0:
            raise ValueError("noop_probability must be in [0, 1) and every tau positive")
        if not self.settings or len(set(self.settings)) != len(self.settings) or set(self.settings) - set(SETTINGS):
            raise ValueError(f"settings must be distinct names from {sorted(SETTINGS)}, got {self.settings}")
        if self.wm_sequences % self.wm_batch:
            raise ValueError(f"wm_sequences {self.wm_sequences} must split into batches of {self.wm_batch}")

    def tau_model_of(self, setting_name: str) -> str:
        """The model the Table 5.1 analog runs on in the setting `setting_name`."""
        return self.research_tau_model if setting_name == "research" else self.tau_model


class Timers(NamedTuple):
    """Time measurements a study row may carry, supplied by the study's caller: `latencies(graphs, repeats)` ->
    {backend: {graph name: median ms}} of the original graph and each method's result, and `step_time(config,
    env, model, wm_params, start)` -> a dict comparing a real Env step with a batched dream step (tau model)."""

    latencies: Callable[[dict[str, Graph], int], dict[str, dict[str, float]]]
    step_time: Callable[..., dict]


def _models(**models: dict) -> tuple:
    return tuple((name, tuple(sorted(kwargs.items()))) for name, kwargs in models.items())


SMALL_IMAGE = dict(image_size=32, width=0.25, num_classes=10)
SMALL_TRANSFORMER = dict(seq_length=16, hidden=64, heads=2, layers=2)


# `test` (seconds, for the test suite), `default` (minutes on 2 CPU cores, small graphs) and `full` (the thesis's
# sizes and budgets: full-size graphs, LSTM 256, a GPU machine); look one up with `jaxsched.common.preset`.
CONFIGS = {
    "test": StudyConfig(
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
    "default": StudyConfig(
        models=_models(resnet18=SMALL_IMAGE, squeezenet1_1=SMALL_IMAGE, mobilenet_v2=SMALL_IMAGE,
                       bert=dict(SMALL_TRANSFORMER, intermediate=128), taso_attention_stack=SMALL_TRANSFORMER),
        # max_steps 64: room for the 29-52 rewrites greedy makes on the small image builders under TASO's table
        agent=AgentConfig(ppo=PPOConfig(learning_rate=1e-3, minibatches=2), hidden=32, latent=16,
                          message_steps=2, num_envs=8, rollout_steps=16, epochs=15, max_locations=16,
                          max_steps=64),
        world_model=WorldModelConfig(hidden=64, mixtures=4, learning_rate=3e-3),
        dream=DreamConfig(ppo=PPOConfig(learning_rate=1e-3, minibatches=4), hidden=32, num_envs=64,
                          rollout_steps=16, updates=40, horizon=24),
        onnx_models=("tests/data/bert-legacy-op17.onnx",), wm_sequences=48, wm_length=16, wm_epochs=40,
        wm_batch=16, taso_budget=100, latency_repeats=15, exhaustive_states=2000, saturation_seconds=20.0),
    "full": StudyConfig(
        models=_models(resnet18={}, resnet50={}, squeezenet1_1={}, inception_v3={}, mobilenet_v2={}, bert={},
                       taso_attention_stack={}),
        agent=AgentConfig(epochs=2000, max_locations=200, max_steps=100),
        world_model=WorldModelConfig(),
        dream=DreamConfig(num_envs=1024, updates=500),
        onnx_models=("tests/data/bert-legacy-op17.onnx",), wm_sequences=512, wm_length=32, wm_epochs=200,
        wm_batch=64, latency_repeats=30, step_time_envs=65536, exhaustive_states=100_000, curve_every=20,
        jitted_agent=True),
}



# ------------------------------------------------------------------------------------- world model data

def make_encoder(config: StudyConfig, key: chex.PRNGKey, obs: Observation) -> Callable[[Observation], jax.Array]:
    """z = a GraphEncoder with random, frozen parameters (module doc: why frozen), jitted per shape."""
    encoder = GraphEncoder(config.agent.hidden, config.agent.latent, config.agent.message_steps)
    params = jax.jit(encoder.init)(key, obs.graph, obs.node_mask, obs.edge_mask)
    encode = jax.jit(lambda o: encoder.apply(params, o.graph, o.node_mask, o.edge_mask)[1])
    return lambda obs: encode(obs)


def random_sequences(env: Env, encode: Callable[[Observation], jax.Array], count: int, length: int,
                     noop_probability: float, rng: np.random.Generator,
                     costs: list[float] | None = None) -> LatentSequence:
    """`count` sequences of `length` real steps of the thesis's random agent (NO-OP with probability
    `noop_probability`, else a uniform valid xfer and location), in latent space, leaves [count, length, ...];
    rewards are fractions of the initial cost, episodes continue across the sequence (is_first marks starts).
    The cost of the graph after each step is appended to `costs` when given (what the random agent found)."""
    rows: list[list] = []
    obs, first = env.reset().observation, True
    z = np.asarray(encode(obs))
    for _ in range(count * length):
        valid = np.flatnonzero(obs.xfer_mask[:-1])
        if len(valid) == 0 or rng.random() < noop_probability:
            action = (env.num_xfers, 0)
        else:
            xfer = int(rng.choice(valid))
            action = (xfer, int(rng.choice(np.flatnonzero(obs.location_mask[xfer]))))
        timestep = env.step(action)
        next_obs, reward, terminated = timestep.observation, timestep.reward, timestep.terminated
        if costs is not None:
            costs.append(float(timestep.extras["cost"]))
        next_z = np.asarray(encode(next_obs))
        rows.append([z, np.asarray(action, np.int32), next_z, np.float32(reward / env.initial_cost), terminated,
                     next_obs.xfer_mask, next_obs.location_mask, first])
        first = timestep.last()
        if first:
            obs = env.reset().observation
            z = np.asarray(encode(obs))
        else:
            obs, z = next_obs, next_z
    columns = [np.stack(c) for c in zip(*rows)]
    return LatentSequence(*(c.reshape((count, length) + c.shape[1:]) for c in columns))


def fit_world_model(model: MDNRNN, data: LatentSequence, epochs: int, batch: int, key: chex.PRNGKey,
                    progress: bool = False) -> tuple[Any, list[float]]:
    """Adam on shuffled minibatches of sequences; the parameters and the mean latent log-likelihood (per
    latent dimension) of each epoch (thesis Fig. 5.5)."""
    init_key, key = jax.random.split(key)
    d = data.z.shape[-1]
    init, optimizer, update = jitted_world_model(model)
    params = init(init_key, model.initial_carry(), jnp.zeros(d), jnp.zeros(2, jnp.int32))
    opt_state, curve = optimizer.init(params), []
    count = data.z.shape[0]
    for _ in tqdm(range(epochs), desc="world model", disable=not progress, leave=False):
        key, sub = jax.random.split(key)
        order = np.asarray(jax.random.permutation(sub, count))
        nll = []
        for i in range(0, count, batch):
            minibatch = jax.tree.map(operator.itemgetter(order[i:i + batch]), data)
            params, opt_state, metrics = update(params, opt_state, minibatch)
            nll.append(float(metrics["latent_nll"]))
        curve.append(-float(np.mean(nll)))
    return params, curve


@functools.lru_cache(maxsize=8)
def jitted_world_model(model: MDNRNN) -> tuple[Callable, Any, Callable]:
    """(jitted init, optimizer, jitted update) of `model`, built once per model: every graph and setting with the
    same action space and sizes shares one compilation."""
    optimizer, update = make_world_model_update(model)
    return jax.jit(model.init), optimizer, jax.jit(update)


@functools.lru_cache(maxsize=8)
def jitted_dream_train(config: DreamConfig, model: MDNRNN) -> Callable:
    """`make_dream_train(config, model)` jitted once per (config, model), shared like `jitted_world_model`."""
    return jax.jit(make_dream_train(config, model))


# ----------------------------------------------------------------------------------------- evaluation

def replay(graph: Graph, actions: list, config: AgentConfig, cost_model, rules: Sequence[Rule]) -> Graph:
    """The graph an action sequence of an agent with the rule table `rules` leads to (the NO-OP ends it)."""
    env = Env(graph, max_locations=config.max_locations, rules=rules, cost_model=cost_model,
              max_steps=config.max_steps)
    env.reset()
    for xfer, location in actions:
        if xfer == env.num_xfers:
            break
        env.step((xfer, location))
    return env.graph


def dream_start(encode: Callable, obs: Observation) -> DreamStart:
    """The dream start state of one real initial observation."""
    return DreamStart(jnp.asarray(encode(obs))[None], jnp.asarray(obs.xfer_mask)[None],
                      jnp.asarray(obs.location_mask)[None])


def evaluate_controllers(env: Env, encode: Callable, model: MDNRNN, wm_params, policy: LatentPolicy,
                         params_batch: Any, count: int) -> list[Episode]:
    """The most-likely-action episode of each of `count` dream-trained controllers (leaves [count, ...]) in the
    real Env."""
    return [controller_episode(env, encode, model, wm_params, policy,
                               jax.tree.map(operator.itemgetter(i), params_batch), max_steps=env.max_steps or 1000)
            for i in range(count)]


def agent_row(episodes: list[Episode], training_steps: int, rules: Sequence[Rule]) -> dict:
    """The JSON row of an evaluated agent with the rule table `rules`: the cheapest graph its episodes visited
    (`cost`, reached by `actions`, the names of the rules they apply), the final cost of its most-likely-action
    episode (`final_cost`, the first episode), and the real-environment interactions of training and of every
    evaluation episode."""
    best = best_of(episodes)
    evaluation = sum(e.env_steps for e in episodes)
    return {"cost": best.best_cost, "final_cost": episodes[0].final_cost, "actions": best.best_actions,
            "rules": [rules[x].name for x, _ in best.best_actions if x < len(rules)],
            "interactions": training_steps + evaluation,
            "evaluation_steps": evaluation, "evaluation_episodes": len(episodes)}


# ------------------------------------------------------------------------------------------- stages

def build_graph(config: StudyConfig, name: str) -> Graph:
    """The model graph `name` at the config's size."""
    return MODELS[name](**dict(dict(config.models)[name]))


def run_model(config: StudyConfig, setting_name: str, name: str, graph: Graph, out: Path, key: chex.PRNGKey,
              progress: bool = False, devices: Devices = None, timers: Timers | None = None) -> dict:
    """One graph in one setting: the setting's searches (`jaxgraph.rl.baselines`), the model-free and the
    model-based agent with their sample-efficiency curves, every method with the setting's rule table; on the
    setting's tau model the tau sweep (its members split across `devices`); in the deployment setting also the
    `timers`' measurements if given. A JSON-able row."""
    chosen, agent = setting(setting_name), config.agent
    cm, rules = chosen.cost_model(), chosen.rules()
    initial = cost(graph, cm)
    row: dict[str, Any] = {"setting": chosen.name, "rules": chosen.rule_table, "ops": graph.num_ops,
                           "initial_cost": initial}
    graphs = {"original": graph}
    if chosen.measured:
        row["methods"], searched = deployment_baselines(graph, rules, cm, config.taso_alpha, config.taso_budget,
                                                        progress)
        graphs.update(searched)
    else:
        row["methods"] = research_baselines(graph, rules, cm, config.taso_budget, config.exhaustive_states,
                                            config.saturation_seconds, progress)
    mf_key, encoder_key, data_key, wm_key, dream_key, sweep_key = jax.random.split(key, 6)
    mf_eval_key, mb_eval_key = jax.random.split(jax.random.fold_in(key, 1))
    checkpoints = (out / "checkpoints" / f"{chosen.name}-model_free-{name}").absolute()
    on_epoch, read_curve = model_free_recorder(
        lambda trained: evaluate_agent(trained, graph, agent, cm, rules=rules), initial, config.curve_every,
        checkpoints.with_name(checkpoints.name + "-curve.json"))
    trained = make_train(agent, [graph], cm, progress=progress, on_epoch=on_epoch, rules=rules,
                         workdir=checkpoints)(mf_key)
    episodes = evaluate_agent(trained, graph, agent, cm, mf_eval_key, config.eval_samples, rules)
    curve, curve_steps = read_curve()
    row["methods"]["model_free"] = {**agent_row(episodes, trained.env_steps + curve_steps, rules),
                                    "curve_evaluation_steps": curve_steps}
    row["curves"] = {"model_free": extend(curve, trained.env_steps + curve_steps, episodes)[0]}
    graphs["model_free"] = replay(graph, row["methods"]["model_free"]["actions"], agent, cm, rules)
    row["model_free_curve"] = [h["mean_return"] for h in trained.history]

    env = Env(graph, max_locations=agent.max_locations, rules=rules, cost_model=cm, max_steps=agent.max_steps)
    obs = env.reset().observation
    encode = make_encoder(config, encoder_key, obs)
    visited: list[float] = []
    data = random_sequences(env, encode, config.wm_sequences, config.wm_length, config.noop_probability,
                            np.random.default_rng(int(jax.random.randint(data_key, (), 0, 2 ** 30))), visited)
    model = MDNRNN(agent.latent, env.num_xfers, agent.max_locations, config.world_model)
    wm_params, loglik = fit_world_model(model, data, config.wm_epochs, config.wm_batch, wm_key, progress)
    row["world_model_loglik"] = loglik
    start = dream_start(encode, obs)
    result = jitted_dream_train(config.dream, model)(dream_key, jnp.float32(1.0), wm_params, start)
    policy = LatentPolicy(env.num_xfers, agent.max_locations, config.dream.hidden)
    episodes = evaluation_episodes(lambda episode_key: controller_episode(
        env, encode, model, wm_params, policy, result.params, agent.max_steps or 1000, episode_key),
        mb_eval_key, config.eval_samples)
    # the curve counts what the random data collection found too (real steps); the returned graph is the controller's
    collected = best_so_far([(0, initial)] + [(i + 1, c) for i, c in enumerate(visited)])
    row["curves"]["model_based"], _ = extend(collected, len(visited), episodes)
    row["methods"]["model_based"] = {**agent_row(episodes, len(visited), rules),
                                     "dream_return": float(result.metrics["mean_return"][-1])}
    graphs["model_based"] = replay(graph, row["methods"]["model_based"]["actions"], agent, cm, rules)
    row["dream_curve"] = [float(v) for v in np.asarray(result.metrics["mean_return"])]
    row["agent_xfers"] = {"model_free": trained.policy.num_xfers, "model_based": model.num_xfers}  # actions offered
    if chosen.measured and (name == config.tau_model or name.startswith("imported:")):
        row["reachable_optimum"] = reachable_optimum(graph, config.optimum_budget, cm, rules)
    if name == config.tau_model_of(chosen.name):
        row["tau_sweep"] = tau_sweep(config, env, encode, model, wm_params, start, sweep_key, devices)
    if chosen.measured and name == config.tau_model and timers is not None:
        row["step_time"] = timers.step_time(config, env, model, wm_params, start)
    for numbers in row["methods"].values():
        numbers["reduction"] = None if numbers["cost"] is None else 1.0 - numbers["cost"] / initial
    if chosen.measured and timers is not None:
        row["latency_ms"] = timers.latencies(graphs, config.latency_repeats)
    return row


def reachable_optimum(graph: Graph, budget: int, cm, rules: Sequence[Rule]) -> dict:
    """TASO's search without pruning (alpha 1e9): when it stops before `budget` expansions it has expanded every
    graph the rules reach (within the node capacity), so its best cost is the optimum no agent can beat."""
    result = taso_search(graph, 1e9, budget, rules, cost_model=cm, progress=False)
    return {"cost": result.cost, "explored": result.explored, "exhausted": result.explored < budget,
            "rules": [rules[x].name for x, _ in result.history]}


def tau_sweep(config: StudyConfig, env: Env, encode: Callable, model: MDNRNN, wm_params, start: DreamStart,
              key: chex.PRNGKey, devices: Devices = None) -> dict:
    """Table 5.1 analog: controllers trained in dreams at every tau x seed as ONE vmapped jitted program; per
    tau the world-model score (dream return at the last update), the real score (cost change of the final
    state of the controller's episode in the real Env, what the dream return predicts) and the returned score
    (the cheapest state the episode visited), as cost changes in percent (negative: cheaper)."""
    sweep = make_dream_sweep(config.dream, model, devices)
    taus = jnp.asarray(config.taus, jnp.float32)
    result = sweep(jax.random.split(key, config.seeds), taus, wm_params, start)
    dream = -100.0 * np.asarray(result.metrics["mean_return"])[:, :, -1]  # [taus, seeds]
    policy = LatentPolicy(env.num_xfers, config.agent.max_locations, config.dream.hidden)
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), result.params)
    episodes = evaluate_controllers(env, encode, model, wm_params, policy, flat, len(config.taus) * config.seeds)
    real = np.asarray([100.0 * (e.final_cost / env.initial_cost - 1.0) for e in episodes]).reshape(dream.shape)
    returned = np.asarray([100.0 * (e.best_cost / env.initial_cost - 1.0) for e in episodes]).reshape(dream.shape)
    return {"taus": list(config.taus), "dream_pct": dream.tolist(), "real_pct": real.tolist(),
            "returned_pct": returned.tolist()}


def held_out(config: StudyConfig, graphs: dict[str, Graph], out: Path, key: chex.PRNGKey,
             progress: bool = False) -> dict:
    """One model-free agent trained on every graph but `config.held_out`, evaluated on that one against greedy
    (returning the cheapest graph its evaluation episodes visited; the final state is reported too), in the
    deployment setting."""
    cm, rules = SETTINGS["deployment"].cost_model(), SETTINGS["deployment"].rules()
    train_names = [n for n in graphs if n != config.held_out]
    target = graphs[config.held_out]
    train_key, eval_key = jax.random.split(key)
    trained = make_train(config.agent, [graphs[n] for n in train_names], cm, progress=progress, rules=rules,
                         workdir=(out / "checkpoints" / "deployment-model_free-multi").absolute())(train_key)
    evaluated = agent_row(evaluate_agent(trained, target, config.agent, cm, eval_key, config.eval_samples, rules),
                          trained.env_steps, rules)
    return {"trained_on": train_names, "graph": config.held_out, "initial_cost": cost(target, cm),
            "agent_cost": evaluated["cost"], "agent_final_cost": evaluated["final_cost"],
            "greedy_cost": greedy(target, rules, cost_model=cm).cost, "rules": evaluated["rules"],
            "interactions": evaluated["interactions"], "evaluation_steps": evaluated["evaluation_steps"]}


def imported_models(config: StudyConfig) -> tuple[dict[str, Graph], list[str]]:
    """The config's ONNX files that exist (name: file stem), and a note for each that does not."""
    from jaxgraph.onnx_io import load_onnx

    found, notes = {}, []
    for path in config.onnx_models:
        if Path(path).is_file():
            found[f"imported:{Path(path).stem}"] = load_onnx(path, batch_one(path))
        else:
            notes.append(f"{path} not found: the imported model was skipped")
    return found, notes


def batch_one(path: str) -> dict[str, tuple[int, ...]]:
    """The ONNX file's input shapes with every symbolic dimension (a dynamic batch) fixed to 1."""
    import onnx

    shapes = {}
    for value in onnx.load(path, load_external_data=False).graph.input:
        dims = value.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
    return shapes


def run_study(config: StudyConfig, workdir: str | Path, seed: int = 0, progress: bool = True,
              devices: Devices = None, timers: Timers | None = None) -> dict:
    """Run (or resume) every stage of every setting in `workdir`, then write results.json, table.md and the plots
    there; the tau sweep's members are split across `devices` (default all); each deployment row carries the
    `timers`' measurements when given. Raises `ConfigMismatch` when `workdir` holds results of another
    configuration or seed."""
    work = Workdir(workdir, {"study": config, "seed": seed})
    key = jax.random.key(seed)
    graphs = {name: build_graph(config, name) for name, _ in config.models}
    imported, notes = imported_models(config)
    sections: dict[str, dict] = {}
    for setting_name in config.settings:
        rows = {}
        for i, (name, graph) in enumerate(tqdm({**graphs, **imported}.items(), desc=f"models ({setting_name})",
                                               disable=not progress)):
            rows[name] = work.stage(f"{setting_name}/models/{name.replace(':', '_')}.json",
                                    functools.partial(run_model, config, setting_name, name, graph, work.path,
                                                      jax.random.fold_in(key, i), progress, devices, timers))
        sections[setting_name] = {"models": rows}
    if "research" in sections and config.jitted_agent:
        sections["research"]["jitted_multi_graph"] = work.stage("research/jitted_multi_graph.json", lambda: (
            jitted_multi_graph(config.agent, {**graphs, **imported}, SETTINGS["research"],
                               jax.random.fold_in(key, 20_000), config.eval_samples)))
    if "deployment" in sections:
        sections["deployment"]["held_out"] = work.stage("deployment/held_out.json", lambda: held_out(
            config, graphs, work.path, jax.random.fold_in(key, 10_000), progress))
    results = {"machine": machine_description(load=True), "config": dataclasses.asdict(config),
               "settings": sections, "notes": notes}
    write_json(work / "results.json", results)
    write_text(work / "table.md", results_table(results))
    plot_results(results, work.path)
    return results
