"""JaxEnv throughput: steps/s of the jitted environment vmapped over many environments against Env (host).

    python benchmarks/jax_env.py [--models resnet18,bert] [--num-envs 256] [--steps 64] \
        [--chunk 32]
    python benchmarks/jax_env.py --floor --models resnet18,bert   # and the floor a faster matching cannot pass
    python benchmarks/jax_env.py --profile --models resnet18   # where a vmapped step spends its time
    python benchmarks/jax_env.py --profile --models resnet18,bert --backend taso,xla,onnxruntime --pieces step,cost
    python benchmarks/jax_env.py --full-table --models resnet18,bert   # and JaxEnv with TASO's whole table

Both run a uniformly random agent over valid rewrites (the NO-OP only when none is left) with the rule
subset JaxEnv implements (`JAX_RULES`), on the same full-size graphs, resetting an environment when its
episode ends, under the analytic `Roofline` cost of `--backend` (taso, xla or onnxruntime; `--profile`
takes a comma-separated list and profiles each).
JaxEnv: `num_envs` copies of the graph in one `jax.jit(jax.vmap(...))` program scanned over `steps` steps
(action sampling and resets included), with every observation built, and again without observations (the
agent reads the masks from the state); the first call (compilation) is timed apart. With `--chunk N`, also
the same `num_envs` environments as groups of N vmapped ones run one after another (`lax.map`) in one
program, so a group's state stays in the CPU's caches. With `--floor`, also the floor of a step: the same graph in a
`JaxEnv` whose only rule (SplitOfSplit) matches nowhere, so every step is the NO-OP with nothing to match or build;
the state, cost, observation, commit of an empty edit and reset are all still paid. No faster matching can take a
step below it. Env: one environment
stepped on the host for `--host-seconds`, half before and half after the jitted runs. With `--full-table`, also
`JaxEnv` with `TASO_RULES` (the hand rules and TASO's data rules, `jaxgraph.jax_patterns`), timed alternately with
the hand rules' environment (two rounds each), its steps/s divided by theirs. Prints a markdown table (and `--json`
writes the numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph import MODELS, Env, Roofline
from jaxgraph.backends import BACKENDS
from jaxgraph.jax_env import JaxEnv
from jaxgraph.jax_rules import JAX_RULES
from jaxgraph.patterns import taso_rules
from jaxsched.common.machine import machine_description

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


def jax_steps_per_second(env: JaxEnv, num_envs: int, num_steps: int, repeats: int, observe: bool, chunk: int = 0
                         ) -> tuple[float, float]:
    """(steps/s after compilation, seconds of the first call). With `chunk`, the `num_envs` environments run as
    groups of `chunk` vmapped environments one after another (`lax.map`) in the same program: a group's state
    stays in the CPU's caches for its whole rollout."""
    params = env.params()
    groups = num_envs // chunk if chunk else 1
    shape = (groups, num_envs // groups) if chunk else (num_envs,)
    batched = jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (*shape, *leaf.shape)), params)
    vmapped = jax.vmap(make_rollout(env, num_steps, observe))
    run = jax.jit((lambda keys, p: jax.lax.map(lambda pair: vmapped(*pair), (keys, p))) if chunk else vmapped)
    keys = jax.random.split(jax.random.key(0), num_envs).reshape(shape)
    start = time.perf_counter()
    run(keys, batched).block_until_ready()
    compile_seconds = time.perf_counter() - start
    times = []
    for r in range(repeats):
        keys = jax.random.split(jax.random.key(r + 1), num_envs).reshape(shape)
        start = time.perf_counter()
        run(keys, batched).block_until_ready()
        times.append(time.perf_counter() - start)
    return num_envs * num_steps / float(np.median(times)), compile_seconds


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
                        help="also time JaxEnv with TASO_RULES (hand rules and TASO's data rules) against JAX_RULES")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args()
    names = [m for m in args.models.split(",") if m]
    backends = [b for b in args.backend.split(",") if b]
    pieces = tuple(p for p in args.pieces.split(",") if p)
    unknown = sorted((set(names) - set(MODELS)) | (set(backends) - set(BACKENDS)) | (set(pieces) - set(PIECES)))
    if unknown or not backends or min(args.num_envs, args.steps, args.repeats) < 1 or args.chunk < 0 or (
            args.chunk and args.num_envs % args.chunk):
        parser.exit(2, f"jax_env: unknown models, backends or pieces {unknown}, no backend, non-positive sizes, or "
                       f"a chunk that does not divide --num-envs\n")
    if len(backends) > 1 and not args.profile:
        parser.exit(2, "jax_env: several backends only with --profile\n")
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
    chunked = f" | JaxEnv steps/s, {args.num_envs // args.chunk} groups of {args.chunk} | ratio" if args.chunk else ""
    floored = " | floor steps/s | ratio | floor steps/s, no observation | ratio" if args.floor else ""
    full = (" | full table: xfers (matched) | steps/s | compile s | over the hand rules' steps/s (same rounds)"
            if args.full_table else "")
    print("| model | nodes | capacity | Env steps/s | JaxEnv steps/s | ratio | compile s | JaxEnv steps/s, "
          f"no observation | ratio{chunked}{floored}{full} |")
    print("|---|---|---|---|---|---|---|---|---|" + "---|---|" * bool(args.chunk) + "---|---|---|---|" * args.floor
          + "---|---|---|---|" * args.full_table)
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
        if args.full_table:
            table = JaxEnv(graph, max_locations=args.max_locations, cost_model=models[0], rules=taso_rules())
            matched = len(JAX_RULES) + sum(len(rows) for _, _, rows in table.data_rules.groups)
            rounds = [[jax_steps_per_second(e, args.num_envs, args.steps, args.repeats, True) for e in (env, table)]
                      for _ in range(2)]  # alternated, so a change of load weighs on both
            full_rate = float(np.mean([r[1][0] for r in rounds]))
            full_ratio = full_rate / float(np.mean([r[0][0] for r in rounds]))
            full_compile = rounds[0][1][1]
        host = (before + host_steps_per_second(graph, args.max_locations, args.host_seconds / 2, models[0], seed=1)) / 2
        rows.append(dict(model=name, nodes=len(graph), capacity=env.node_capacity, env_steps_per_s=host,
                         jax_steps_per_s=jitted, compile_s=compile_seconds, jax_state_only_steps_per_s=bare,
                         jax_grouped_steps_per_s=grouped, floor_steps_per_s=floors[0],
                         floor_state_only_steps_per_s=floors[1]))
        if args.full_table:
            rows[-1].update(full_table_xfers=table.num_xfers, full_table_matched=matched,
                            full_table_steps_per_s=full_rate, full_table_compile_s=full_compile,
                            full_table_over_hand=full_ratio)
        extra = f" {grouped:,.0f} | {grouped / host:.1f}x |" if args.chunk else ""
        extra += "".join(f" {rate:,.0f} | {rate / host:.1f}x |" for rate in floors) if args.floor else ""
        extra += (f" {table.num_xfers} ({matched}) | {full_rate:,.0f} | {full_compile:.0f} | {full_ratio:.2f}x |"
                  if args.full_table else "")
        print(f"| {name} | {len(graph)} | {env.node_capacity} | {host:,.0f} | {jitted:,.0f} | {jitted / host:.1f}x "
              f"| {compile_seconds:.0f} | {bare:,.0f} | {bare / host:.1f}x |{extra}", flush=True)
    print(f"# load average at the end {os.getloadavg()[0]:.1f}; {args.num_envs} environments x {args.steps} steps, "
          f"median of {args.repeats}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
