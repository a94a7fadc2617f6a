"""Adversarial instance search: simulated annealing for instances where one scheduler is far worse
than another (PISA: Coleman and Krishnamachari, "PISA: An adversarial approach to comparing task
graph scheduling algorithms", 2024), every chain of every scheduler pair advancing in one program.

A chain holds one `DenseInstance` (related machines: task cost / node speed, data / link strength,
padded to the largest size, so chains of 3 to 5 tasks share one program) and a pair (a, b); its energy
is makespan(a) / makespan(b). Everything PISA fixes is a parameter of `SearchConfig`:

* the distribution: task and processor counts (drawn per chain within a range), the value ranges;
* the start: a random DAG, a chain 0 -> 1 -> ... (PISA), or a given instance (`search(start=...)`);
* the moves (`jaxsched._moves`): which kinds, redraw or nudge by +/- `step` and clip;
* the acceptance: "metropolis" (better always, worse with exp((new - old) / T)) or "pisa" (better
  always, otherwise with exp(-(new / old) / T), SAGA's rule);
* the cooling: T falls geometrically from `temperature_start`, by `cooling_rate` per step until it
  reaches `temperature_end` (PISA), or over exactly `steps` steps when `cooling_rate` is None;
* the restarts: `chains_per_pair` independent chains per ordered pair; a cell is the best of them;
* the pairs: every ordered pair of `names`, or only those whose judged scheduler is one of `targets`;
  `LEARNED` ("DeepSched") among the names is a trained network passed as `search(learned=...)` (a pytree
  with `makespan(instance)`, `jaxsched.deepsched.NeuralScheduler.dense()`), scheduled in the same program;
* the rank convention of HEFT, CPOP and PEFT (`ranks`: "topcuoglu" or "saga", `jaxsched.priorities`).

`SEARCH_PRESETS` / `search_config(name, **overrides)`: "pisa" is SAGA's current PISA (values in
[0.1, 1], +/- 0.1 nudges, chain start, 3 to 5 tasks and nodes, T from 10 by 0.99 down to 0.1, 10
restarts; pairs with ETF start on unit speeds and never change a link, as SAGA's script does; SAGA's
rank convention),
"pisa-2024" the paper's code (values clipped to [1e-9, 1]), "uniform" this module's own default
(random DAG of 6 tasks on 3 processors, values redrawn, Metropolis acceptance). Each step schedules
the candidate with every scheduler (`jaxsched.jax_listsched` on `jaxsched.dense` plans); all chains
are vmapped and the steps scanned, so the whole search is one jitted call.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxsched._moves import MOVES, MoveConfig, perturb
from jaxsched.common.sharding import Devices, batch_mesh, constrain_batch, padded_batch_size
from jaxsched.dense import DenseInstance, dense_facts, dense_plan, dense_positions, random_instance, to_padded
from jaxsched.jax_listsched import list_schedule_padded
from jaxsched.listsched import PRESETS
from jaxsched.priorities import RANK_CONVENTIONS

SEARCH_NAMES = tuple(PRESETS) + ("Duplex",)
LEARNED = "DeepSched"  # a trained network passed to `search(learned=...)`, e.g. `jaxsched.deepsched.DenseScheduler`
STARTS = ("random", "chain")
ACCEPTANCES = ("metropolis", "pisa")
PISA_MOVES = ("add_edge", "remove_edge", "edge_data", "task_weight", "link_strength", "node_speed")


def _count_range(name: str, value) -> tuple[int, int]:
    low, high = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= int(low) <= int(high):
        raise ValueError(f"{name} must be a count >= 1 or a range (low, high) with 1 <= low <= high, got {value}")
    return int(low), int(high)


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Distribution, start, moves, acceptance, cooling and restarts of `search` (module docstring).
    Counts are an int or an inclusive range (low, high); ranges are (low, high) with 0 <= low <= high."""

    num_tasks: int | tuple[int, int] = 6
    num_procs: int | tuple[int, int] = 3
    steps: int = 1000
    chains_per_pair: int = 2  # restarts
    edge_probability: float = 0.3
    temperature_start: float = 0.2
    temperature_end: float = 1e-3
    names: tuple[str, ...] = SEARCH_NAMES
    start: str = "random"
    moves: tuple[str, ...] = MoveConfig.kinds
    step: float | None = None
    value_range: tuple[float, float] = (0.0, 1.0)
    speed_range: tuple[float, float] = (0.1, 1.0)
    start_value_range: tuple[float, float] | None = None  # default value_range
    start_speed_range: tuple[float, float] | None = None  # default speed_range
    acceptance: str = "metropolis"
    cooling_rate: float | None = None
    unit_speed_names: tuple[str, ...] = ()
    ranks: str = "topcuoglu"  # rank convention of every scheduler (`jaxsched.priorities.RANK_CONVENTIONS`)
    targets: tuple[str, ...] = ()  # the schedulers judged (first of a pair); () every one of `names`
    memory_limit: int = 16 * 2**30

    def __post_init__(self):
        object.__setattr__(self, "num_tasks", _count_range("num_tasks", self.num_tasks))
        object.__setattr__(self, "num_procs", _count_range("num_procs", self.num_procs))
        for field in ("names", "moves", "unit_speed_names", "value_range", "speed_range", "targets"):
            object.__setattr__(self, field, tuple(getattr(self, field)))
        unknown = [n for n in self.names + self.unit_speed_names if n not in SEARCH_NAMES + (LEARNED,)]
        if unknown:
            raise ValueError(
                f"unknown scheduler(s) {', '.join(unknown)}; known: {', '.join(SEARCH_NAMES)} (and {LEARNED})"
            )
        if not set(self.targets) <= set(self.names):
            raise ValueError(f"targets {', '.join(self.targets)} must be among the names {', '.join(self.names)}")
        if len(self.names) < 2:
            raise ValueError("the search needs at least two schedulers")
        if self.num_tasks[0] < 2 or self.steps < 1 or self.chains_per_pair < 1:
            raise ValueError(
                "need num_tasks >= 2, steps >= 1 and chains_per_pair >= 1, got "
                f"{self.num_tasks}, {self.steps}, {self.chains_per_pair}"
            )
        if not 0 < self.temperature_end <= self.temperature_start:
            raise ValueError("need 0 < temperature_end <= temperature_start")
        if self.cooling_rate is not None and not 0 < self.cooling_rate < 1:
            raise ValueError(f"cooling_rate must lie in (0, 1) (or be None), got {self.cooling_rate}")
        if self.start not in STARTS:
            raise ValueError(f"unknown start {self.start!r}; known: {', '.join(STARTS)} (or pass an instance)")
        if self.ranks not in RANK_CONVENTIONS:
            raise ValueError(f"unknown rank convention {self.ranks!r}; known: {', '.join(RANK_CONVENTIONS)}")
        if self.acceptance not in ACCEPTANCES:
            raise ValueError(f"unknown acceptance {self.acceptance!r}; known: {', '.join(ACCEPTANCES)}")
        for field in ("start_value_range", "start_speed_range"):
            if getattr(self, field) is not None:
                object.__setattr__(self, field, tuple(getattr(self, field)))
        MoveConfig(self.moves, self.step, self.value_range, self.speed_range)  # ValueError on bad moves or ranges
        MoveConfig(self.moves, None, self.start_values, self.start_speeds)
        needed = self.memory_bytes
        chains = len(self._ordered_pairs()) * self.chains_per_pair
        if needed > self.memory_limit:
            raise ValueError(
                f"{chains:,} chains ({self.chains_per_pair} restarts per pair) of {self.num_tasks[1]} tasks x "
                f"{self.num_procs[1]} processors need about {needed / 2**30:.1f} GiB, over memory_limit "
                f"{self.memory_limit / 2**30:.1f} GiB: use fewer restarts or schedulers"
            )

    @property
    def move_config(self) -> MoveConfig:
        """The moves (`jaxsched._moves.MoveConfig`)."""
        return MoveConfig(self.moves, self.step, self.value_range, self.speed_range)

    @property
    def start_values(self) -> tuple[float, float]:
        """Range of the start's task weights, edge data and link strengths."""
        return self.value_range if self.start_value_range is None else self.start_value_range

    @property
    def start_speeds(self) -> tuple[float, float]:
        """Range of the start's processor speeds."""
        return self.speed_range if self.start_speed_range is None else self.start_speed_range

    @property
    def shape(self) -> tuple[int, int]:
        """(T, P): the padded size every chain's instance has."""
        return self.num_tasks[1], self.num_procs[1]

    @property
    def pairs(self) -> np.ndarray:
        """[C, 2] scheduler indices (worse candidate a, reference b) of every chain: every ordered pair whose
        a is one of `targets` (default all)."""
        return np.repeat(np.array(self._ordered_pairs(), dtype=np.int32), self.chains_per_pair, axis=0)

    def _ordered_pairs(self) -> list[tuple[int, int]]:
        """The pairs of `pairs` once each: what the memory check counts, so that refusing billions of chains
        builds none of them."""
        count = len(self.names)
        judged = [a for a in range(count) if not self.targets or self.names[a] in self.targets]
        return [(a, b) for a in judged for b in range(count) if a != b]

    @property
    def temperatures(self) -> np.ndarray:
        """[N] the temperature of each step actually taken (N <= steps)."""
        if self.cooling_rate is None:
            decay = (self.temperature_end / self.temperature_start) ** (1.0 / max(self.steps - 1, 1))
            return self.temperature_start * decay ** np.arange(self.steps)
        temps = self.temperature_start * self.cooling_rate ** np.arange(self.steps)
        count = max(int(np.sum(temps > self.temperature_end)), 1)
        return temps[:count]

    @property
    def memory_bytes(self) -> int:
        """Estimated working memory of one search step over all chains (float32 scheduler state)."""
        tasks, procs = self.shape
        per_schedule = 4 * (6 * tasks * tasks + 12 * tasks * procs + 8 * procs * procs) + 4096
        return len(self._ordered_pairs()) * self.chains_per_pair * (len(self.names) + 3) * per_schedule

    @property
    def move_masks(self) -> np.ndarray:
        """[C, len(MOVES)] bool: the move kinds each chain draws from (no link moves with a unit-speed
        scheduler in the pair, as SAGA's PISA script does)."""
        allowed = np.array(self.move_config.allowed)
        masks = np.repeat(allowed[None], len(self.pairs), axis=0)
        unit = self.unit_speed_pairs
        masks[unit, MOVES.index("link_strength")] = False
        if not masks.any(axis=1).all():
            raise ValueError("some pairs have no move left: link_strength was the only move")
        return masks

    @property
    def unit_speed_pairs(self) -> np.ndarray:
        """[C] bool: chains whose pair has a scheduler of `unit_speed_names` (start on unit speeds)."""
        unit = np.array([n in self.unit_speed_names for n in self.names])
        return unit[self.pairs].any(axis=1)


SEARCH_PRESETS = {
    "uniform": {},
    "pisa": dict(
        num_tasks=(3, 5),
        num_procs=(3, 5),
        steps=1000,
        chains_per_pair=10,
        start="chain",
        moves=PISA_MOVES,
        step=0.1,
        value_range=(0.1, 1.0),
        speed_range=(0.1, 1.0),
        acceptance="pisa",
        temperature_start=10.0,
        temperature_end=0.1,
        cooling_rate=0.99,
        unit_speed_names=("ETF",),
        ranks="saga",
    ),
}
SEARCH_PRESETS["pisa-2024"] = dict(
    SEARCH_PRESETS["pisa"],
    value_range=(1e-9, 1.0),
    speed_range=(1e-9, 1.0),
    start_value_range=(0.1, 1.0),
    start_speed_range=(0.1, 1.0),
)


def search_config(preset: str = "uniform", **overrides) -> SearchConfig:
    """The `SearchConfig` of a named preset (`SEARCH_PRESETS`), fields overridden by `overrides`;
    ValueError naming the presets when `preset` is unknown."""
    if preset not in SEARCH_PRESETS:
        raise ValueError(f"unknown search preset {preset!r}; known: {', '.join(SEARCH_PRESETS)}")
    return SearchConfig(**{**SEARCH_PRESETS[preset], **overrides})


def makespans(
    instance: DenseInstance, draws: jax.Array, names: tuple[str, ...], ranks: str = "topcuoglu", learned=None
) -> jax.Array:
    """[S] makespan of one dense instance under each scheduler of `names` (WBA uses `draws`), ranks under
    the convention `ranks`; `LEARNED` is `learned.makespan(instance)` (e.g. a `jaxsched.deepsched.DenseScheduler`)."""
    facts = dense_facts(instance, ranks)
    problem = to_padded(instance, facts)
    combined = {"Duplex", LEARNED}
    needed = sorted({n for n in names if n not in combined} | ({"MinMin", "MaxMin"} if "Duplex" in names else set()))
    positions = {kind: dense_positions(instance, facts, kind) for kind in {PRESETS[n].priority for n in needed}}
    spans = {}
    for name in needed:
        config = dataclasses.replace(PRESETS[name], ranks=ranks)
        plan = dense_plan(instance, config, draws, facts, positions[config.priority])
        spans[name] = list_schedule_padded(problem, plan, config).finish.max()
    if "Duplex" in names:
        spans["Duplex"] = jnp.where(spans["MaxMin"] < spans["MinMin"], spans["MaxMin"], spans["MinMin"])
    if LEARNED in names:
        spans[LEARNED] = learned.makespan(instance).astype(instance.weight.dtype)
    return jnp.stack([spans[n] for n in names])


class Chain(NamedTuple):
    """One annealing chain (stacked: all of them)."""

    instance: DenseInstance
    ratio: jax.Array  # [] makespan(a) / makespan(b) of `instance`
    best: DenseInstance
    best_ratio: jax.Array  # []
    draws: jax.Array  # [T] int32 WBA's fixed random integers, so that each chain's energy is deterministic


def _ratio(spans, pair) -> jax.Array:
    return spans[pair[0]] / jnp.maximum(spans[pair[1]], jnp.finfo(spans.dtype).tiny)


def _start_instance(key, config: SearchConfig, unit_speed) -> DenseInstance:
    """A chain's start: counts drawn in their ranges, then a random DAG or a chain of random values."""
    k_tasks, k_procs, k_instance = jax.random.split(key, 3)
    num_tasks = jax.random.randint(k_tasks, (), config.num_tasks[0], config.num_tasks[1] + 1, jnp.int32)
    num_procs = jax.random.randint(k_procs, (), config.num_procs[0], config.num_procs[1] + 1, jnp.int32)
    instance = random_instance(
        k_instance,
        num_tasks,
        num_procs,
        config.edge_probability,
        shape=config.shape,
        value_range=config.start_values,
        speed_range=config.start_speeds,
        chain=config.start == "chain",
    )
    return instance._replace(speed=jnp.where(unit_speed, jnp.ones_like(instance.speed), instance.speed))


def _init_chain(key, unit_speed, start, config: SearchConfig) -> Chain:
    """A chain at its start instance, its ratio not yet known (NaN: the first scan step scores it)."""
    k_instance, k_draws = jax.random.split(key)
    instance = _start_instance(k_instance, config, unit_speed) if start is None else start
    draws = jax.random.randint(k_draws, (config.shape[0],), 0, jnp.iinfo(jnp.int32).max)
    nan = jnp.full((), jnp.nan, instance.weight.dtype)
    return Chain(instance, nan, instance, nan, draws)


def accept_probability(new, old, temperature, rule: str) -> jax.Array:
    """Probability of moving from energy `old` to `new` at `temperature`: "metropolis" exp((new - old) / T)
    capped at 1; "pisa" 1 when new > old, else exp(-(new / old) / T) (SAGA's PISA)."""
    if rule == "pisa":
        ratio = new / old
        return jnp.where(ratio > 1, 1.0, jnp.exp(-ratio / temperature))
    return jnp.minimum(jnp.exp((new - old) / temperature), 1.0)


def _anneal_step(chain: Chain, key, pair, allowed, temperature, first, config: SearchConfig, learned) -> Chain:
    """One move and its acceptance; the `first` step keeps the start instance and scores it (the
    schedulers are traced once, here, not also at the start)."""
    k_move, k_accept = jax.random.split(key)
    moved = perturb(k_move, chain.instance, config.move_config, allowed)
    candidate = jax.tree.map(functools.partial(jnp.where, first), chain.instance, moved)
    ratio = _ratio(makespans(candidate, chain.draws, config.names, config.ranks, learned), pair)
    probability = accept_probability(ratio, chain.ratio, temperature, config.acceptance)
    accept = first | (jax.random.uniform(k_accept, (), ratio.dtype) < probability)
    keep = functools.partial(jnp.where, accept)
    instance = jax.tree.map(keep, candidate, chain.instance)
    ratio = jnp.where(accept, ratio, chain.ratio)
    better = first | (ratio > chain.best_ratio)
    best = jax.tree.map(functools.partial(jnp.where, better), instance, chain.best)
    return Chain(instance, ratio, best, jnp.where(better, ratio, chain.best_ratio), chain.draws)


def search(
    key: jax.Array, config: SearchConfig, devices: Devices = None, start: DenseInstance | None = None, learned=None
) -> Chain:
    """Runs every chain (`config.pairs`) for `len(config.temperatures)` annealing steps, the chains split
    across `devices` (`jaxsched.common.batch_mesh`: default all devices), each from `config.start` or
    from the one instance `start` (of `config.shape`); returns the final chains, whose `best` and
    `best_ratio` hold the worst instance found for each chain's pair. `learned`: the scheduler named
    `LEARNED` in `config.names`, a pytree with `makespan(instance)` (`jaxsched.deepsched.DenseScheduler`),
    passed traced: new weights reuse the compiled search."""
    if (LEARNED in config.names) != (learned is not None):
        raise ValueError(f"pass learned=<scheduler> exactly when {LEARNED} is one of the search's names")
    if start is not None:
        start = jax.tree.map(jnp.asarray, start)
        if (start.weight.shape[0], start.speed.shape[0]) != config.shape:
            raise ValueError(
                f"the start instance has shape {start.weight.shape[0]} x {start.speed.shape[0]}, "
                f"the search {config.shape[0]} x {config.shape[1]}"
            )
    return _search(key, config, batch_mesh(devices), start, learned)


@functools.partial(jax.jit, static_argnames=("config", "mesh"))
def _search(key: jax.Array, config: SearchConfig, mesh: Mesh, start, learned) -> Chain:
    pairs = jnp.asarray(config.pairs)
    count = pairs.shape[0]
    # chains padded to a multiple of the device count with copies of the last one (dropped at the end); every
    # chain's keys are drawn for the real chains only, so the results do not depend on the device count
    rows = jnp.minimum(jnp.arange(padded_batch_size(count, mesh)), count - 1)
    chain_pairs = pairs[rows]
    allowed = jnp.asarray(config.move_masks)[rows]
    unit = jnp.asarray(config.unit_speed_pairs)[rows]
    k_init, k_steps = jax.random.split(key)
    init = jax.vmap(_init_chain, in_axes=(0, 0, None, None))
    chains = init(jax.random.split(k_init, count)[rows], unit, start, config)
    chains = constrain_batch(chains, mesh)
    # one scoring step first (no move), then one step per temperature
    temperatures = jnp.asarray(np.concatenate([[1.0], config.temperatures]), chains.ratio.dtype)
    firsts = jnp.arange(temperatures.shape[0]) == 0

    def step(chains, x):
        step_key, temperature, first = x
        keys = jax.random.split(step_key, count)[rows]
        advance = jax.vmap(_anneal_step, in_axes=(0, 0, 0, 0, None, None, None, None))
        chains = advance(chains, keys, chain_pairs, allowed, temperature, first, config, learned)
        return constrain_batch(chains, mesh), None

    steps = temperatures.shape[0]
    chains, _ = jax.lax.scan(step, chains, (jax.random.split(k_steps, steps), temperatures, firsts))
    return jax.tree.map(lambda leaf: leaf[:count], chains)


def best_chains(chains: Chain, config: SearchConfig) -> tuple[np.ndarray, np.ndarray]:
    """([S, S] worst ratio per pair, [S, S] the chain that found it, -1 on the diagonal): the best of each
    pair's restarts."""
    count = len(config.names)
    table = np.ones((count, count))
    index = np.full((count, count), -1)
    ratios = np.asarray(chains.best_ratio, dtype=np.float64)
    for c, (a, b) in enumerate(config.pairs):
        if index[a, b] < 0 or ratios[c] > table[a, b]:
            table[a, b], index[a, b] = ratios[c], c
    return table, index


def worst_ratios(chains: Chain, config: SearchConfig) -> np.ndarray:
    """[S, S] the largest makespan(a) / makespan(b) found for each pair (a row, b column; 1 on the
    diagonal)."""
    count = len(config.names)
    table = np.ones((count, count))
    pairs = config.pairs
    np.maximum.at(table, (pairs[:, 0], pairs[:, 1]), np.asarray(chains.best_ratio, dtype=np.float64))
    return table
