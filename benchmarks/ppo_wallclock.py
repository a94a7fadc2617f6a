"""End-to-end wall-clock to TASO's cost on BERT: PPO on the jitted env vs PPO on the host env vs the world model.

    python benchmarks/ppo_wallclock.py [--time-cap 130] [--model bert] [--json out.json]

The graph is the tiny study's BERT (`--model bert`: the `bert` builder at 16 tokens, hidden 64, 2 heads, 2 layers,
intermediate 128) or the imported `tests/data/bert-legacy-op17.onnx` (`--model imported`). The target is TASO's
search (alpha 1.05, budget 100, as in the study) on the same graph, rules (all 28 of `RULES`) and cost model; an
unpruned search checks that it is the reachable optimum. The three trainers (`race`, below) use the tiny
study's sizes (`CONFIGS["default"]`): the same `AgentConfig` for both PPO trainers (8 envs x 16 steps an epoch,
GNN hidden 32, latent 16, 16 locations per xfer, episodes of at most 24 steps), and the study's world model
(48 x 16 random-agent steps, 40 fit epochs) and dream controller (64 dreams x 16 steps per update, tau 1). Each
runs on its own clock, one after another, until an evaluation reaches the target or `--time-cap` seconds pass
(checked after each evaluation). One-shot runs: nothing is alternated, so the load of the machine during each run
matters; the load average is printed before and after.

The cost model is the analytic `Roofline` of `--backend` (default `taso`; the study used `onnxruntime`, which
`JaxEnv` computes too).

`race(graph, config, ...)` sets the target (TASO's search on the same graph, rules and cost model) and runs the
three trainers one after another, each on its own clock that starts before anything of it is built, so every
compilation, environment construction, training step and evaluation counts:
- `jax_env`: `jaxgraph.rl.jax_ppo`'s trainer on `JaxEnv`, one jitted program per chunk of `chunk_epochs` epochs,
  evaluated as `host_env` is (in `Env`, the same function on the same graph), or with `jitted_evaluation` in
  `JaxEnv` (`jax_ppo.make_evaluate`, which costs a second compilation of the environment);
- `host_env`: `jaxgraph.rl.train.make_train` on `Env`, evaluated with `evaluate_agent` after every epoch;
- `world_model`: the study's model-based agent (random-agent data from `Env`, MDN-RNN fit, then dream PPO in
  chunks of `chunk_updates` updates), each controller evaluated in `Env` with `controller_episode`.
Every evaluation is the study's: the policy's most-likely-action episode plus `config.eval_samples` sampled
episodes, the agent returning the cheapest state they visited. A trainer stops at the first evaluation whose
graph reaches the target (up to float32 rounding, `TARGET_RTOL`) or at the first one after `time_cap` seconds.
Compile seconds are the union of the intervals JAX reports for tracing, lowering and XLA compilation.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from experiments.graphopt_rl import CONFIGS, GraphoptConfig, build_graph, reachable_optimum
from jaxgraph import ONNXRUNTIME, RULES, TASO, XLA, CostModel, Env, Graph, JaxEnv, Roofline, Rule, cost, taso_search
from jaxgraph.onnx_io import batch_one, load_onnx
from jaxgraph.rl import (
    MDNRNN,
    AgentResult,
    GraphPolicy,
    LatentPolicy,
    best_of,
    controller_episode,
    dream_start,
    evaluate_agent,
    evaluation_episodes,
    fit_world_model,
    jax_ppo,
    make_dream_trainer,
    make_encoder,
    make_train,
    random_sequences,
)
from jaxsched.common import machine_description

TRAINERS = ("jax_env", "host_env", "world_model")
TARGET_RTOL = 1e-5  # JaxEnv computes costs in float32: a graph within this of the target has reached it
_COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                   "/jax/core/compile/backend_compile_duration")


class Evaluation(NamedTuple):
    """One evaluation of a trainer's agent."""

    seconds: float  # on the trainer's clock, the evaluation included
    env_steps: int  # environment steps so far: training and evaluation (dream steps not included)
    cost: float  # the cheapest state the evaluation's episodes visited


class TrainerRun(NamedTuple):
    """A trainer's run: its evaluations, clock totals and counts."""

    trainer: str
    evaluations: list[Evaluation]
    seconds: float  # the whole run
    compile_seconds: float  # included in `seconds`
    evaluation_seconds: float  # included in `seconds`
    target: float
    dream_steps: int  # world-model agent only: dream steps of its controller's training

    @property
    def reached(self) -> Evaluation | None:
        """The first evaluation whose graph reached the target, if any."""
        return next((e for e in self.evaluations if e.cost <= self.target * (1 + TARGET_RTOL)), None)

    @property
    def best_cost(self) -> float:
        """The cheapest graph any evaluation returned (what the run leaves the user with)."""
        return min((e.cost for e in self.evaluations), default=float("inf"))


class Clock:
    """A trainer's stopwatch: elapsed seconds, seconds spent compiling (from JAX's monitoring events) and in
    evaluations, and the evaluations recorded against the target and the cap."""

    def __init__(self, name: str, target: float, time_cap: float, progress: bool = False) -> None:
        self.name, self.target, self.time_cap = name, target, time_cap
        self.evaluations: list[Evaluation] = []
        self.evaluation_seconds = 0.0
        self._compiles: list[tuple[float, float]] = []
        self._bar = tqdm(total=round(time_cap), desc=name, unit="s", disable=not progress, leave=False)
        self._start = time.perf_counter()
        jax.monitoring.register_event_duration_secs_listener(self._on_event)
        self._listening = True

    def _on_event(self, event: str, duration: float, **_: Any) -> None:
        if event in _COMPILE_EVENTS:
            end = time.perf_counter()
            self._compiles.append((end - duration, end))

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._start

    @property
    def compile_seconds(self) -> float:
        """Length of the union of the compile intervals (nested traces count once)."""
        total, reach = 0.0, -np.inf
        for begin, end in sorted(self._compiles):
            begin = max(begin, reach)
            if end > begin:
                total += end - begin
                reach = end
        return total

    @contextlib.contextmanager
    def evaluating(self) -> Iterator[None]:
        """Time the body as evaluation."""
        begin = time.perf_counter()
        yield
        self.evaluation_seconds += time.perf_counter() - begin

    def record(self, env_steps: int, best_cost: float) -> bool:
        """Record an evaluation; True when the trainer should stop (target reached or time cap passed)."""
        now = self.elapsed
        self.evaluations.append(Evaluation(now, int(env_steps), float(best_cost)))
        self._bar.update(min(round(now), self._bar.total) - self._bar.n)
        self._bar.set_postfix(cost=f"{min(e.cost for e in self.evaluations):.5f}", target=f"{self.target:.5f}")
        return best_cost <= self.target * (1 + TARGET_RTOL) or now >= self.time_cap

    def close(self) -> None:
        """Stop listening to JAX's compile events and close the progress bar."""
        if self._listening:
            jax.monitoring.unregister_event_duration_listener(self._on_event)
            self._listening = False
        self._bar.close()

    def run(self, dream_steps: int = 0) -> TrainerRun:
        """The run so far: the clock's totals."""
        return TrainerRun(self.name, self.evaluations, self.elapsed, self.compile_seconds, self.evaluation_seconds,
                          self.target, dream_steps)


def _keys(key: jax.Array) -> Iterator[jax.Array]:
    """An endless stream of keys split from `key`."""
    while True:
        key, sub = jax.random.split(key)
        yield sub


def train_jax_env(graph: Graph, config: GraphoptConfig, cost_model: CostModel, rules: Sequence[Rule], clock: Clock,
                  key: jax.Array, chunk_epochs: int = 1, jitted_evaluation: bool = False) -> int:
    """PPO on `JaxEnv`: chunks of `chunk_epochs` epochs (one jitted program), each followed by an evaluation: in
    `Env` with `evaluate_agent` (the host trainer's evaluation), or with `jitted_evaluation` in `JaxEnv` with
    `jaxgraph.rl.jax_ppo.make_evaluate` (a second large compilation); returns 0 (no dream steps)."""
    agent, keys = config.agent, _keys(key)
    env = JaxEnv(graph, max_locations=agent.max_locations, rules=rules, cost_model=cost_model,
                 max_steps=agent.max_steps)
    trainer = jax_ppo.make_trainer(agent, env)
    run = jax.jit(trainer.run)
    if jitted_evaluation:
        jitted = jax.jit(jax_ppo.make_evaluate(agent, env, config.eval_samples))
        evaluate = lambda params, key: jitted(params, key).episodes()  # noqa: E731
    else:
        policy = GraphPolicy(env.num_xfers, agent.hidden, agent.latent, agent.message_steps)
        evaluate = lambda params, key: evaluate_agent(AgentResult(policy, params, [], 0), graph, agent,  # noqa: E731
                                                      cost_model, key, config.eval_samples, rules)
    state, steps = jax.jit(trainer.init)(next(keys)), 0
    while True:
        # blocked here, or the evaluation's first read of the parameters would wait for the epochs (async dispatch)
        state, _ = jax.block_until_ready(run(state, jax.random.split(next(keys), chunk_epochs)))
        steps += chunk_epochs * agent.num_envs * agent.rollout_steps
        with clock.evaluating():
            episodes = evaluate(state.params, next(keys))
        steps += sum(e.env_steps for e in episodes)
        if clock.record(steps, best_of(episodes).best_cost):
            return 0


def train_host_env(graph: Graph, config: GraphoptConfig, cost_model: CostModel, rules: Sequence[Rule], clock: Clock,
                   key: jax.Array) -> int:
    """PPO on `Env` (`rl.train.make_train`), evaluated with `evaluate_agent` after every epoch; returns 0."""
    agent, keys = config.agent, _keys(key)
    evaluation_steps = 0

    def on_epoch(result: AgentResult) -> bool:
        nonlocal evaluation_steps
        with clock.evaluating():
            episodes = evaluate_agent(result, graph, agent, cost_model, next(keys), config.eval_samples, rules)
        evaluation_steps += sum(e.env_steps for e in episodes)
        return clock.record(result.env_steps + evaluation_steps, best_of(episodes).best_cost)

    endless = dataclasses.replace(agent, epochs=2 ** 31 - 1)  # the clock stops it
    make_train(endless, [graph], cost_model, on_epoch=on_epoch, rules=rules)(next(keys))
    return 0


def train_world_model(graph: Graph, config: GraphoptConfig, cost_model: CostModel, rules: Sequence[Rule],
                      clock: Clock, key: jax.Array, chunk_updates: int = 5) -> int:
    """The study's model-based agent: random-agent sequences of `Env`, the MDN-RNN fit, then dream PPO (tau 1)
    in chunks of `chunk_updates` updates, each controller evaluated in `Env`; returns the dream steps."""
    agent, keys = config.agent, _keys(key)
    env = Env(graph, max_locations=agent.max_locations, rules=rules, cost_model=cost_model,
              max_steps=agent.max_steps)
    obs = env.reset().observation
    encode = make_encoder(agent, next(keys), obs)
    seed = int(jax.random.randint(next(keys), (), 0, 2 ** 30))
    data = random_sequences(env, encode, config.wm_sequences, config.wm_length, config.noop_probability,
                            np.random.default_rng(seed))
    model = MDNRNN(agent.latent, env.num_xfers, agent.max_locations, config.world_model)
    wm_params, _ = fit_world_model(model, data, config.wm_epochs, config.wm_batch, next(keys))
    start = dream_start(encode, obs)
    trainer = make_dream_trainer(config.dream, model)
    run = jax.jit(trainer.run)
    carry = jax.jit(trainer.init)(next(keys), start)
    policy = LatentPolicy(env.num_xfers, agent.max_locations, config.dream.hidden)
    steps, dream_steps = config.wm_sequences * config.wm_length, 0
    while True:
        carry, _ = jax.block_until_ready(run(carry, jax.random.split(next(keys), chunk_updates), jnp.float32(1.0),
                                             wm_params, start))
        dream_steps += chunk_updates * config.dream.num_envs * config.dream.rollout_steps
        params = carry[0].params
        with clock.evaluating():
            episodes = evaluation_episodes(lambda episode_key, params=params: controller_episode(
                env, encode, model, wm_params, policy, params, agent.max_steps or 1000, episode_key),
                next(keys), config.eval_samples)
        steps += sum(e.env_steps for e in episodes)
        if clock.record(steps, best_of(episodes).best_cost):
            return dream_steps


_TRAIN: dict[str, Callable[..., int]] = {"jax_env": train_jax_env, "host_env": train_host_env,
                                         "world_model": train_world_model}


def race(graph: Graph, config: GraphoptConfig, cost_model: CostModel, time_cap: float, key: jax.Array,
         rules: Sequence[Rule] = RULES, trainers: Sequence[str] = TRAINERS, chunk_epochs: int = 1,
         chunk_updates: int = 5, jitted_evaluation: bool = False, progress: bool = False) -> dict:
    """The target (TASO's search with `config.taso_alpha` and `config.taso_budget`; and the reachable optimum, an
    unpruned search of `config.optimum_budget` expansions) and each trainer's run (see module doc), as a dict.
    JAX's caches are cleared before each trainer, so none reuses another's compilations."""
    unknown = sorted(set(trainers) - set(TRAINERS))
    if unknown or not trainers:
        raise ValueError(f"trainers must be among {TRAINERS}, got {list(trainers)}")
    if time_cap <= 0 or chunk_epochs < 1 or chunk_updates < 1:
        raise ValueError(f"time_cap, chunk_epochs and chunk_updates must be positive, got {time_cap}, "
                         f"{chunk_epochs}, {chunk_updates}")
    taso = taso_search(graph, config.taso_alpha, config.taso_budget, rules, cost_model=cost_model)
    options = {"jax_env": dict(chunk_epochs=chunk_epochs, jitted_evaluation=jitted_evaluation),
               "world_model": dict(chunk_updates=chunk_updates)}
    runs = {}
    for name in trainers:
        jax.clear_caches()
        clock = Clock(name, taso.cost, time_cap, progress)
        try:  # each trainer's key depends on its name only, so a subset of trainers reruns the same runs
            trainer_key = jax.random.fold_in(key, TRAINERS.index(name))
            runs[name] = clock.run(_TRAIN[name](graph, config, cost_model, rules, clock, trainer_key,
                                                **options.get(name, {})))
        finally:
            clock.close()
    return {"initial_cost": cost(graph, cost_model), "taso_cost": taso.cost, "taso_seconds": taso.seconds,
            "optimum": reachable_optimum(graph, config.optimum_budget, cost_model, rules), "runs": runs}


TRAINER_NAMES = {"jax_env": "PPO on JaxEnv (jitted)", "host_env": "PPO on Env (host)",
                 "world_model": "world model (Env data, dream PPO)"}


def wallclock_table(result: dict, time_cap: float) -> str:
    """The markdown table: trainer, environment steps, wall-clock to the target, compile and evaluation seconds
    (both included in the wall-clock), and the cheapest graph returned against TASO's."""
    taso = result["taso_cost"]
    lines = ["| trainer | env steps | wall-clock to target (s) | compile s | evaluation s | evaluations | "
             "best cost vs TASO |", "|---|---|---|---|---|---|---|"]
    for name, run in result["runs"].items():
        reached = run.reached
        last = run.evaluations[-1] if run.evaluations else Evaluation(run.seconds, 0, float("inf"))
        steps = f"{(reached or last).env_steps:,}"
        if run.dream_steps:
            steps += f" (+ {run.dream_steps:,} dream)"
        clock = (f"{reached.seconds:.1f}" if reached else
                 f"not reached in {time_cap:g} s cap (stopped at {run.seconds:.1f})")
        versus = 100.0 * (run.best_cost / taso - 1.0)
        lines.append(f"| {TRAINER_NAMES[name]} | {steps} | {clock} | {run.compile_seconds:.1f} | "
                     f"{run.evaluation_seconds:.1f} | {len(run.evaluations)} | {run.best_cost:.5f} ({versus:+.2f}%) |")
    return "\n".join(lines)


IMPORTED = "tests/data/bert-legacy-op17.onnx"
BACKENDS = {"taso": TASO, "xla": XLA, "onnxruntime": ONNXRUNTIME}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-cap", type=float, default=130.0, help="seconds per trainer (default 130: the "
                        "whole script within 8 minutes on 2 CPU cores)")
    parser.add_argument("--model", default="bert", choices=("bert", "imported"))
    parser.add_argument("--backend", default="taso", choices=sorted(BACKENDS))
    parser.add_argument("--trainers", default=",".join(TRAINERS), help="comma-separated subset of "
                        f"{','.join(TRAINERS)}")
    parser.add_argument("--chunk-updates", type=int, default=5, help="dream updates between evaluations")
    parser.add_argument("--eval-samples", type=int, help="sampled episodes per evaluation besides the most-likely-"
                        "action one (default: the study's 8; 0 asks the policy itself to reach the target)")
    parser.add_argument("--jitted-evaluation", action="store_true", help="evaluate the JaxEnv-trained policy in "
                        "JaxEnv (jax_ppo.make_evaluate, a second large compilation) instead of in Env")
    parser.add_argument("--ppo-envs", type=int, help="environments per PPO epoch, both PPO trainers (default: the "
                        "study's 8); the jitted environment's advantage is many environments in one program")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    config = CONFIGS["default"]
    trainers = [t for t in args.trainers.split(",") if t]
    try:
        if args.eval_samples is not None:
            config = dataclasses.replace(config, eval_samples=args.eval_samples)  # validates it
        if args.ppo_envs is not None:
            config = dataclasses.replace(config, agent=dataclasses.replace(config.agent, num_envs=args.ppo_envs))
        if args.model == "imported" and not os.path.isfile(IMPORTED):
            raise FileNotFoundError(f"{IMPORTED} not found (run from the repository root)")
        graph = build_graph(config, "bert") if args.model == "bert" else load_onnx(IMPORTED, batch_one(IMPORTED))
        cost_model = Roofline(backend=BACKENDS[args.backend])
        if "jax_env" in trainers:
            try:  # JaxEnv refuses a graph that does not fit its sizes before any clock starts
                JaxEnv(graph, max_locations=config.agent.max_locations, cost_model=cost_model).params()
            except ValueError as error:
                raise ValueError(f"JaxEnv cannot run this model and cost ({error}); leave jax_env out of "
                                 f"--trainers") from error
        if args.time_cap <= 0 or args.chunk_updates < 1 or not set(trainers) <= set(TRAINERS) or not trainers:
            raise ValueError(f"need --time-cap > 0, --chunk-updates >= 1 and --trainers among {TRAINERS}")
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{machine_description(load=True)}; model {args.model} ({graph.num_ops} ops), "
          f"cost Roofline(backend={args.backend}), "
          f"{config.agent.num_envs} environments x {config.agent.rollout_steps} steps per PPO epoch, "
          f"time cap {args.time_cap:g} s per trainer, seed {args.seed}; each evaluation: the most-likely-action "
          f"episode + {config.eval_samples} sampled, in {'JaxEnv' if args.jitted_evaluation else 'Env'} for the "
          f"jitted trainer, every epoch (PPO) or {args.chunk_updates} dream updates\n", flush=True)
    result = race(graph, config, cost_model, args.time_cap, jax.random.key(args.seed), trainers=trainers,
                  chunk_updates=args.chunk_updates, jitted_evaluation=args.jitted_evaluation, progress=True)
    optimum = result["optimum"]
    print(f"initial cost {result['initial_cost']:.5f} ms; target: TASO's search {result['taso_cost']:.5f} ms "
          f"({100 * (1 - result['taso_cost'] / result['initial_cost']):.2f}% saved, {result['taso_seconds']:.1f} s); "
          f"reachable optimum {optimum['cost']:.5f} ms ({optimum['explored']} graphs, "
          f"{'all' if optimum['exhausted'] else 'budget hit'})\n")
    print(wallclock_table(result, args.time_cap))
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        runs = {name: {**run._asdict(), "evaluations": [e._asdict() for e in run.evaluations]}
                for name, run in result["runs"].items()}
        with open(args.json, "w") as file:
            json.dump({**result, "runs": runs, "time_cap": args.time_cap, "model": args.model,
                       "backend": args.backend, "ppo_envs": config.agent.num_envs,
                       "eval_samples": config.eval_samples, "machine": machine_description(load=True)}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
