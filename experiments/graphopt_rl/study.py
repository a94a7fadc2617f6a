"""The agents' evaluation (thesis chapter 5) end to end: `run_study(config, workdir)`, the driver behind
`python -m experiments.graphopt_rl`.

It runs in two settings, named and never mixed (`experiments.graphopt_rl.settings`): `research` (TASO's cost and
rule table: greedy, TASO's search at alpha 1.0 and 1.05, equality saturation, the exhaustive optimum where the
reachable space is small enough, and the agents; a lower cost is a cost reduction) and `deployment` (onnxruntime's
runtime-aware cost, `Roofline(backend=ONNXRUNTIME)`: greedy, TASO search and the agents, with the measured latency
of every resulting graph, `experiments.graphopt_rl.timing`). For every agent each row also holds its
sample-efficiency curve, the best cost found against the real-environment steps used (`jaxgraph.rl.efficiency`). In
each setting, on that setting's tau model (BERT in the deployment setting, SqueezeNet in the research setting,
where there is most to find), it runs the Table 5.1 analog: the tau sweep x seeds of dream-trained controllers as
one vmapped program, each controller then evaluated in the real Env; on the deployment tau model it also times a
real Env step against a batched dream step. In the deployment setting it also trains one agent on several graphs
and evaluates it on a graph it never saw. The model-based agent's pieces outside the dream (frozen random encoder,
random-agent data, world-model fit) are `jaxgraph.rl.model_based`.

Every stage writes its JSON under the workdir as soon as it is done (model-free training also checkpoints
per epoch); a rerun of the same configuration loads finished stages and resumes the rest, and another
configuration is refused (`jaxsched.common.Workdir`).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from pathlib import Path
from typing import Any, Callable, Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from experiments.graphopt_rl.baselines import deployment_baselines, reachable_optimum, research_baselines
from experiments.graphopt_rl.configs import GraphoptConfig, build_graph
from experiments.graphopt_rl.jitted_agent import jitted_multi_graph
from experiments.graphopt_rl.report import plot_results, results_table
from experiments.graphopt_rl.settings import SETTINGS, setting
from experiments.graphopt_rl.timing import latencies, step_time
from jaxgraph import Env, Graph, Rule, cost, greedy, load_onnx
from jaxgraph.onnx_io import batch_one
from jaxgraph.rl import (
    MDNRNN,
    DreamStart,
    Episode,
    LatentPolicy,
    best_of,
    best_so_far,
    controller_episode,
    dream_start,
    evaluate_agent,
    evaluation_episodes,
    extend,
    fit_world_model,
    jitted_dream_train,
    make_dream_sweep,
    make_encoder,
    make_train,
    model_free_recorder,
    random_sequences,
    replay,
)
from jaxsched.common import Devices, Workdir, machine_description, write_json, write_text

# ----------------------------------------------------------------------------------------- evaluation

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

def run_model(config: GraphoptConfig, setting_name: str, name: str, graph: Graph, out: Path, key: chex.PRNGKey,
              progress: bool = False, devices: Devices = None) -> dict:
    """One graph in one setting: the setting's searches (`experiments.graphopt_rl.baselines`), the model-free and
    the model-based agent with their sample-efficiency curves, every method with the setting's rule table; on the
    setting's tau model the tau sweep (its members split across `devices`); in the deployment setting also the
    measured latencies of every resulting graph and, on the tau model, the step times. A JSON-able row."""
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
    graphs["model_free"] = replay(graph, row["methods"]["model_free"]["actions"], agent.max_locations, cm, rules)
    row["model_free_curve"] = [h["mean_return"] for h in trained.history]

    env = Env(graph, max_locations=agent.max_locations, rules=rules, cost_model=cm, max_steps=agent.max_steps)
    obs = env.reset().observation
    encode = make_encoder(agent, encoder_key, obs)
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
    graphs["model_based"] = replay(graph, row["methods"]["model_based"]["actions"], agent.max_locations, cm, rules)
    row["dream_curve"] = [float(v) for v in np.asarray(result.metrics["mean_return"])]
    row["agent_xfers"] = {"model_free": trained.policy.num_xfers, "model_based": model.num_xfers}  # actions offered
    if chosen.measured and (name == config.tau_model or name.startswith("imported:")):
        row["reachable_optimum"] = reachable_optimum(graph, config.optimum_budget, cm, rules)
    if name == config.tau_model_of(chosen.name):
        row["tau_sweep"] = tau_sweep(config, env, encode, model, wm_params, start, sweep_key, devices)
    if chosen.measured and name == config.tau_model:
        row["step_time"] = step_time(config, env, model, wm_params, start)
    for numbers in row["methods"].values():
        numbers["reduction"] = None if numbers["cost"] is None else 1.0 - numbers["cost"] / initial
    if chosen.measured:
        row["latency_ms"] = latencies(graphs, config.latency_repeats)
    return row


def tau_sweep(config: GraphoptConfig, env: Env, encode: Callable, model: MDNRNN, wm_params, start: DreamStart,
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


def held_out(config: GraphoptConfig, graphs: dict[str, Graph], out: Path, key: chex.PRNGKey,
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


def imported_models(config: GraphoptConfig) -> tuple[dict[str, Graph], list[str]]:
    """The config's ONNX files that exist (name: file stem), and a note for each that does not."""
    found, notes = {}, []
    for path in config.onnx_models:
        if Path(path).is_file():
            found[f"imported:{Path(path).stem}"] = load_onnx(path, batch_one(path))
        else:
            notes.append(f"{path} not found: the imported model was skipped")
    return found, notes


def run_study(config: GraphoptConfig, workdir: str | Path, seed: int = 0, progress: bool = True,
              devices: Devices = None) -> dict:
    """Run (or resume) every stage of every setting in `workdir`, then write results.json, table.md and the plots
    there; the tau sweep's members are split across `devices` (default all); each deployment row carries the
    measured latencies of its graphs. Raises `ConfigMismatch` when `workdir` holds results of another
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
                                                      jax.random.fold_in(key, i), progress, devices))
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
