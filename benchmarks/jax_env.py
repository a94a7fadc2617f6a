"""JaxEnv throughput: steps/s of the jitted environment vmapped over many environments against Env (host).

    python benchmarks/jax_env.py [--models resnet18,bert] [--num-envs 256] [--steps 64] \
        [--chunk 32]
    python benchmarks/jax_env.py --floor --models resnet18,bert   # and the floor a faster matching cannot pass
    python benchmarks/jax_env.py --profile --models resnet18   # where a vmapped step spends its time
    python benchmarks/jax_env.py --profile --models resnet18,bert --backend taso,xla,onnxruntime --pieces step,cost
    python benchmarks/jax_env.py --full-table --models resnet18 [--doubled] [--matcher by-ops,by-plan] [--root-cut 8]

Both run a uniformly random agent over valid rewrites (the NO-OP only when none is left) with the rule
subset JaxEnv implements (`JAX_RULES`), on the same full-size graphs, resetting an environment when its
episode ends, under the analytic `Roofline` cost of `--backend` (taso, xla or onnxruntime; `--profile`
takes a comma-separated list and profiles each). With `--full-table`, instead: JaxEnv with the hand rules, with
`TASO_RULES` (the hand rules and TASO's data rules, `jaxgraph.jax_match`) and, with `--doubled`, with TASO's table
doubled (each data rule cloned under a new xfer id, `cloned_rules`), for each `--matcher`: compile seconds and
steps/s, each environment compiled once and timed in alternated rounds, steps/s over the hand rules' of the same
rounds. `measure_table` is the same measurement for another script (the GPU command).
JaxEnv: `num_envs` copies of the graph in one `jax.jit(jax.vmap(...))` program scanned over `steps` steps
(action sampling and resets included), with every observation built, and again without observations (the
agent reads the masks from the state); the first call (compilation) is timed apart. With `--chunk N`, also
the same `num_envs` environments as groups of N vmapped ones run one after another (`lax.map`) in one
program, so a group's state stays in the CPU's caches. With `--floor`, also the floor of a step: the same graph in a
`JaxEnv` whose only rule (SplitOfSplit) matches nowhere, so every step is the NO-OP with nothing to match or build;
the state, cost, observation, commit of an empty edit and reset are all still paid. No faster matching can take a
step below it. Env: one environment stepped on the host for `--host-seconds`, half before and half after the jitted
runs. Prints a markdown table (and `--json` writes the numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph import (
    BACKENDS,
    DATA_FAMILY,
    JAX_RULES,
    MATCHERS,
    MODELS,
    Env,
    JaxEnv,
    Roofline,
    cloned_rules,
    default_matcher,
    taso_rules,
)
from jaxsched.common import machine_description

DEFAULT_MODELS = ("resnet18", "resnet50", "squeezenet1_1", "inception_v3", "bert")


def random_action(key: jax.Array, obs) -> jax.Array:
    """A uniformly random valid rewrite (xfer, then location), or the NO-OP when none is left."""
    xfer_key, location_key = jax.random.split(key)
    rewrites = obs.xfer_mask[:-1]
    xfer = jax.random.categorical(xfer_key, jnp.where(rewrites, 0.0, -jnp.inf))
    xfer = jnp.where(rewrites.any(), xfer, rewrites.shape[0])
    row = obs.location_mask[jnp.minimum(xfer, rewrites.shape[0] - 1)]
    location = jax.random.categorical(location_key, jnp.where(row, 0.0, -jnp.inf))
    return jnp.stack([xfer, jnp.where(rewrites.any(), location, 0)]).astype(jnp.int32)


def make_rollout(env: JaxEnv, num_steps: int, observe: bool):
    """(key, params) -> a checksum: `num_steps` random steps of one environment, reset when done. With
    `observe` every step's observation is built and read (into the checksum); without, the agent reads
    the masks from the state and XLA drops the unused observation."""

    def rollout(key, params):
        first, _ = env.reset(key, params)

        def body(state, key):
            action_key, step_key = jax.random.split(key)
            state, timestep = env.step(step_key, state, random_action(action_key, state), params)
            state = jax.tree.map(lambda a, b: jnp.where(timestep.last(), a, b), first, state)
            obs = timestep.observation
            read = jnp.sum(obs.graph.nodes[:, -1]) + jnp.sum(obs.graph.edges[:, -2]) if observe else 0.0
            return state, timestep.reward + read

        _, rewards = jax.lax.scan(body, first, jax.random.split(key, num_steps))
        return rewards.sum()

    return rollout


def compiled_rollouts(env: JaxEnv, num_envs: int, num_steps: int, observe: bool = True, chunk: int = 0,
                      opt_level: int | None = None, root_cut: int = 0):
    """(timer, compilation): `timer(repeats, seed)` runs the `num_envs` environments' `num_steps`-step rollouts
    `repeats` times and returns their steps/s (median); compile_s (wall seconds of tracing, lowering and compiling),
    compile_cpu_s (the process's CPU seconds of the same: on a shared machine the work, where wall seconds wait),
    params_s and params_cpu_s (`env.params()`, which encodes the initial graphs and matches them on the host),
    first_call_s (wall seconds of the first call, apart: at a few hundred steps/s it runs for seconds) and
    instructions (of the lowered StableHLO program). With `chunk`, the environments run as groups of `chunk` vmapped
    environments one after another (`lax.map`) in the same program: a group's state stays in the CPU's caches for
    its whole rollout. `opt_level`: XLA's backend optimisation level (`xla_backend_optimization_level`, the LLVM
    passes that take most of a CPU compilation; default XLA's own). `root_cut` (a bound, not an environment): after
    `params()`, every root list of the rollout's steps is cut to its first `root_cut` slots, so each step matches the
    rules at that many roots per op (and offers no rewrite that would grow a cut list): what matching only the roots
    around the last rewrite could at best cost."""
    groups = num_envs // chunk if chunk else 1
    shape = (groups, num_envs // groups) if chunk else (num_envs,)
    start, cpu = time.perf_counter(), time.process_time()
    params = jax.block_until_ready(env.params())
    made = {"params_s": time.perf_counter() - start, "params_cpu_s": time.process_time() - cpu}
    if root_cut:
        env.root_capacity = {op: min(size, root_cut) for op, size in env.root_capacity.items()}
    batched = jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (*shape, *leaf.shape)), params)
    vmapped = jax.vmap(make_rollout(env, num_steps, observe))
    run = jax.jit((lambda keys, p: jax.lax.map(lambda pair: vmapped(*pair), (keys, p))) if chunk else vmapped)

    def timer(repeats: int, seed: int = 1) -> float:
        times = []
        for r in range(repeats):
            keys = jax.random.split(jax.random.key(seed + r), num_envs).reshape(shape)
            start = time.perf_counter()
            run(keys, batched).block_until_ready()
            times.append(time.perf_counter() - start)
        return num_envs * num_steps / float(np.median(times))

    start, cpu = time.perf_counter(), time.process_time()
    keys = jax.random.split(jax.random.key(0), num_envs).reshape(shape)
    lowered = run.lower(keys, batched)
    instructions = sum(" = " in line for line in lowered.as_text().splitlines())
    run = lowered.compile({} if opt_level is None else {"xla_backend_optimization_level": opt_level})
    compiled, compiled_cpu = time.perf_counter(), time.process_time()
    run(keys, batched).block_until_ready()
    return timer, {"compile_s": compiled - start, "compile_cpu_s": compiled_cpu - cpu,
                   "first_call_s": time.perf_counter() - compiled, "instructions": instructions, **made}


def jax_steps_per_second(env: JaxEnv, num_envs: int, num_steps: int, repeats: int, observe: bool, chunk: int = 0
                         ) -> tuple[float, float]:
    """(steps/s after compilation, seconds of the compilation), as `compiled_rollouts` measures them."""
    timer, first = compiled_rollouts(env, num_envs, num_steps, observe, chunk)
    return timer(repeats), first["compile_s"]


TABLES = ("hand", "taso", "doubled")


def table_rules(table: str) -> tuple:
    """The rules of a table: "hand" `JAX_RULES`, "taso" `TASO_RULES`, "doubled" TASO's with every data rule cloned."""
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; known: {', '.join(TABLES)}")
    if table == "hand":
        return JAX_RULES
    rules = taso_rules()
    return cloned_rules(rules, sum(r.family == DATA_FAMILY for r in rules) if table == "doubled" else 0)


def measure_table(model: str, num_envs: int, table: str = "taso", matcher: str | None = None, steps: int = 64,
                  repeats: int = 3, max_locations: int = 64, backend: str = "taso") -> dict[str, float]:
    """{compile_s, params_s, steps_per_s} of `num_envs` random-agent environments on `model` (a `MODELS` name) with
    the rules of `table` (`TABLES`) and the data rules' `matcher` (default: the backend's): the seconds of compilation
    (the first call apart), of `env.params()` (the initial graphs encoded and matched), then steps/s, the median
    of `repeats` calls of `steps` steps each."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(sorted(MODELS))}")
    env = JaxEnv(MODELS[model](), max_locations=max_locations, rules=table_rules(table), matcher=matcher,
                 cost_model=Roofline(backend=BACKENDS[backend]))
    timer, first = compiled_rollouts(env, num_envs, steps)
    return {"compile_s": first["compile_s"], "params_s": first["params_s"], "steps_per_s": timer(repeats)}


def full_table_rows(name: str, num_envs: int, steps: int, repeats: int, max_locations: int, cost_model: Roofline,
                    matchers: list[str], doubled: bool, rounds: int = 2, opt_level: int | None = None,
                    root_cut: int = 0) -> list[dict]:
    """Rows (model, table, matcher, xfers, matched, groups, compile_s, compile_cpu_s, instructions, steps_per_s,
    over_hand) of `--full-table`: every environment compiled once, then timed in `rounds` alternated rounds (a
    change of load weighs on all). With `root_cut`, also TASO's table with each matcher and its root lists cut to
    `root_cut` slots (`compiled_rollouts`): a bound, table "taso, roots cut"."""
    graph = MODELS[name]()
    setups = [("hand", "-", 0)] + [(table, m, 0) for table in ("taso", "doubled")[:1 + doubled] for m in matchers]
    setups += [("taso", m, root_cut) for m in matchers] if root_cut else []
    rows, timers = [], []
    for table, matcher, cut in setups:
        env = JaxEnv(graph, max_locations=max_locations, cost_model=cost_model, rules=table_rules(table),
                     matcher=None if matcher == "-" else matcher)
        timer, first = compiled_rollouts(env, num_envs, steps, opt_level=opt_level, root_cut=cut)
        matched = sum(r.family != DATA_FAMILY for r in env.rules) + (
            sum(len(rows) for _, _, rows in env.data_rules.groups) if env.data_rules else 0)
        rows.append(dict(model=name, table=f"{table}, roots cut to {cut}" if cut else table,
                         matcher=env.matcher if env.data_rules else "-", xfers=env.num_xfers, matched=matched,
                         groups=len(env.data_rules.groups) if env.data_rules else 0, **first))
        timers.append(timer)
    rates = np.array([[timer(repeats, seed=1 + r * repeats) for timer in timers] for r in range(rounds)])
    for row, rate, over in zip(rows, rates.mean(0), (rates / rates[:, :1]).mean(0)):
        row.update(steps_per_s=float(rate), over_hand=float(over))
    return rows


PIECES = {"step": "step", "bare": "step, no observation", "observation": "observation", "cost": "cost (node_costs)",
          "matching": "matching (reset, no observation)"}


def profile(env: JaxEnv, num_envs: int, repeats: int, pieces: tuple[str, ...] = tuple(PIECES)) -> dict[str, float]:
    """Microseconds per environment of the `pieces` (keys of `PIECES`) of a vmapped step over `num_envs`
    mid-episode states (after three random steps), each jitted alone, the minimum over `repeats` calls: the whole
    step with and without the observation, the observation, the cost, and the matching (a reset without its
    observation: the initial graph's cost and every rule's locations)."""
    params = jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (num_envs, *leaf.shape)), env.params())
    keys = jax.random.split(jax.random.key(0), num_envs)
    states, _ = jax.jit(jax.vmap(env.reset))(keys, params)
    act, step = jax.jit(jax.vmap(random_action)), jax.jit(jax.vmap(env.step))
    for r in range(3):
        states = step(keys, states, act(jax.random.split(jax.random.key(r), num_envs), states), params)[0]
    actions = act(jax.random.split(jax.random.key(3), num_envs), states)
    functions = {
        "step": (step, (keys, states, actions, params)),  # compiled above
        "bare": (jax.jit(lambda *a: jax.vmap(env.step)(*a)[0]), (keys, states, actions, params)),
        "observation": (jax.jit(jax.vmap(env.observe)), (states,)),
        "cost": (jax.jit(jax.vmap(env.node_costs)), (states.graph, params)),
        "matching": (jax.jit(lambda *a: jax.vmap(env.reset)(*a)[0]), (keys, params)),
    }
    result = {}
    for piece in pieces:
        function, arguments = functions[piece]
        jax.block_until_ready(function(*arguments))
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(function(*arguments))
            times.append(time.perf_counter() - start)
        result[PIECES[piece]] = 1e6 * min(times) / num_envs
    return result


def host_steps_per_second(graph, max_locations: int, seconds: float, cost_model: Roofline, seed: int = 0) -> float:
    """Env steps/s of the same random agent on the host."""
    env = Env(graph, max_locations=max_locations, rules=JAX_RULES, cost_model=cost_model)
    rng = np.random.default_rng(seed)
    obs, steps = env.reset().observation, 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        xfers = np.flatnonzero(obs.xfer_mask[:-1])
        if len(xfers) == 0:  # the NO-OP, as the jitted agent does
            timestep = env.step((env.num_xfers, 0))
        else:
            xfer = int(rng.choice(xfers))
            location = int(rng.choice(np.flatnonzero(obs.location_mask[xfer])))
            timestep = env.step((xfer, location))
        steps += 1
        obs = env.reset().observation if timestep.last() else timestep.observation
    return steps / (time.perf_counter() - start)


FLOOR_FAMILY = "SplitOfSplit"  # rooted at split, an op none of the builders has: its root list is one slot


def floor_env(graph, max_locations: int, cost_model: Roofline) -> JaxEnv:
    """`graph` in a JaxEnv whose one rule family matches nowhere: every step is the NO-OP (ValueError otherwise)."""
    env = JaxEnv(graph, max_locations=max_locations, cost_model=cost_model,
                 rules=[rule for rule in JAX_RULES if rule.family == FLOOR_FAMILY])
    _, obs = jax.jit(env.reset)(jax.random.key(0), env.params())
    if np.asarray(obs.xfer_mask)[:-1].any():
        raise ValueError(f"{FLOOR_FAMILY} matches in this graph, so it cannot measure the floor")
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--steps", type=int, default=64, help="steps per environment per timed call")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-locations", type=int, default=64)
    parser.add_argument("--host-seconds", type=float, default=5.0)
    parser.add_argument("--profile", action="store_true",
                        help="instead: microseconds per environment of the pieces of a step (`profile`)")
    parser.add_argument("--backend", default="taso",
                        help="cost backend(s) of the Roofline: taso, xla, onnxruntime (a list only with --profile)")
    parser.add_argument("--pieces", default=",".join(PIECES),
                        help=f"with --profile, which pieces of a step to time: {', '.join(PIECES)}")
    parser.add_argument("--chunk", type=int, default=0,
                        help="also time the environments as groups of this many, one group after another (lax.map)")
    parser.add_argument("--floor", action="store_true",
                        help="also time the floor of a step: the NO-OP with nothing to match or build (`floor_env`)")
    parser.add_argument("--full-table", action="store_true",
                        help="instead: JaxEnv with TASO_RULES (and --doubled) against JAX_RULES (`full_table_rows`)")
    parser.add_argument("--doubled", action="store_true", help="with --full-table, also TASO's table doubled")
    parser.add_argument("--matcher", default="",
                        help=f"with --full-table, the data rules' matchers, comma-separated ({', '.join(MATCHERS)}; "
                             "default: the backend's)")
    parser.add_argument("--root-cut", type=int, default=0,
                        help="with --full-table, also TASO's table with every root list cut to this many slots (a "
                             "bound: matching only the roots around the last rewrite)")
    parser.add_argument("--opt-level", type=int, default=None,
                        help="with --full-table, XLA's backend optimisation level (0-3; default XLA's)")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args()
    names = [m for m in args.models.split(",") if m]
    backends = [b for b in args.backend.split(",") if b]
    pieces = tuple(p for p in args.pieces.split(",") if p)
    unknown = sorted((set(names) - set(MODELS)) | (set(backends) - set(BACKENDS)) | (set(pieces) - set(PIECES)))
    if unknown or not backends or min(args.num_envs, args.steps, args.repeats) < 1 or min(
            args.chunk, args.root_cut) < 0 or (args.chunk and args.num_envs % args.chunk):
        parser.exit(2, f"jax_env: unknown models, backends or pieces {unknown}, no backend, non-positive sizes, or "
                       f"a chunk that does not divide --num-envs, or a negative --root-cut\n")
    if len(backends) > 1 and not args.profile:
        parser.exit(2, "jax_env: several backends only with --profile\n")
    matchers = [m for m in args.matcher.split(",") if m] or [default_matcher()]
    if set(matchers) - set(MATCHERS):
        parser.exit(2, f"jax_env: unknown matchers {sorted(set(matchers) - set(MATCHERS))}; known: {MATCHERS}\n")
    models = [Roofline(backend=BACKENDS[b]) for b in backends]
    print(f"# {machine_description(load=True)}")
    print(f"# rules: {len(JAX_RULES)} of the 28 (families {sorted({r.family for r in JAX_RULES})})")
    print(f"# cost: analytic Roofline of the backend(s) {', '.join(backends)}")
    if args.profile:
        for name in names:
            for model in models:
                env = JaxEnv(MODELS[name](), max_locations=args.max_locations, cost_model=model)
                times = profile(env, args.num_envs, max(args.repeats, 5), pieces)
                print(f"# {name} (C={env.node_capacity}), {model.backend.name} cost ({env.fusion_passes} fusion "
                      f"passes), us per environment at {args.num_envs} environments: "
                      + ", ".join(f"{k} {v:.0f}" for k, v in times.items()), flush=True)
        print(f"# load average at the end {os.getloadavg()[0]:.1f}")
        return
    if args.full_table:
        print(f"# {args.num_envs} environments x {args.steps} steps, median of {args.repeats}, 2 alternated rounds")
        print("| model | table | matcher | xfers (matched) | groups | instructions | compile s, wall | compile s, CPU "
              "| params s, CPU | first call s | steps/s | over the hand rules (same rounds) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
        rows = []
        for name in names:
            rows += full_table_rows(name, args.num_envs, args.steps, args.repeats, args.max_locations, models[0],
                                    matchers, args.doubled, opt_level=args.opt_level, root_cut=args.root_cut)
            for r in rows[-(1 + len(matchers) * (1 + args.doubled + bool(args.root_cut))):]:
                print(f"| {r['model']} | {r['table']} | {r['matcher']} | {r['xfers']} ({r['matched']}) | "
                      f"{r['groups']} | {r['instructions']:,} | {r['compile_s']:.0f} | {r['compile_cpu_s']:.0f} | "
                      f"{r['params_cpu_s']:.0f} | "
                      f"{r['first_call_s']:.1f} | {r['steps_per_s']:,.0f} | {r['over_hand']:.2f}x |", flush=True)
        print(f"# load average at the end {os.getloadavg()[0]:.1f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        return
    chunked = f" | JaxEnv steps/s, {args.num_envs // args.chunk} groups of {args.chunk} | ratio" if args.chunk else ""
    floored = " | floor steps/s | ratio | floor steps/s, no observation | ratio" if args.floor else ""
    print("| model | nodes | capacity | Env steps/s | JaxEnv steps/s | ratio | compile s | JaxEnv steps/s, "
          f"no observation | ratio{chunked}{floored} |")
    print("|---|---|---|---|---|---|---|---|---|" + "---|---|" * bool(args.chunk) + "---|---|---|---|" * args.floor)
    rows = []
    for name in names:
        graph = MODELS[name]()
        env = JaxEnv(graph, max_locations=args.max_locations, cost_model=models[0])
        # Env is measured before and after the jitted runs (half the time each), so a load that changes
        # during the model's measurement weighs on both sides
        before = host_steps_per_second(graph, args.max_locations, args.host_seconds / 2, models[0])
        jitted, compile_seconds = jax_steps_per_second(env, args.num_envs, args.steps, args.repeats, True)
        bare, _ = jax_steps_per_second(env, args.num_envs, args.steps, args.repeats, False)
        grouped = jax_steps_per_second(env, args.num_envs, args.steps, args.repeats, True, args.chunk)[0] \
            if args.chunk else None
        try:
            floor = floor_env(graph, args.max_locations, models[0]) if args.floor else None
        except ValueError as error:
            parser.exit(2, f"jax_env: {name}: {error}\n")
        floors = [jax_steps_per_second(floor, args.num_envs, args.steps, args.repeats, observe)[0]
                  for observe in (True, False)] if floor else [None, None]
        host = (before + host_steps_per_second(graph, args.max_locations, args.host_seconds / 2, models[0], seed=1)) / 2
        rows.append(dict(model=name, nodes=len(graph), capacity=env.node_capacity, env_steps_per_s=host,
                         jax_steps_per_s=jitted, compile_s=compile_seconds, jax_state_only_steps_per_s=bare,
                         jax_grouped_steps_per_s=grouped, floor_steps_per_s=floors[0],
                         floor_state_only_steps_per_s=floors[1]))
        extra = f" {grouped:,.0f} | {grouped / host:.1f}x |" if args.chunk else ""
        extra += "".join(f" {rate:,.0f} | {rate / host:.1f}x |" for rate in floors) if args.floor else ""
        print(f"| {name} | {len(graph)} | {env.node_capacity} | {host:,.0f} | {jitted:,.0f} | {jitted / host:.1f}x "
              f"| {compile_seconds:.0f} | {bare:,.0f} | {bare / host:.1f}x |{extra}", flush=True)
    print(f"# load average at the end {os.getloadavg()[0]:.1f}; {args.num_envs} environments x {args.steps} steps, "
          f"median of {args.repeats}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
