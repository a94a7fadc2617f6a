"""The model-based agent's steps in the real environment (thesis 4.3): the latent space, the random agent's data,
the world model's fit, and where dreams start.

z comes from a GraphEncoder with random, frozen parameters (`make_encoder`; see docs/jaxgraph.md, "Agents"): a
frozen encoder cannot collapse z to a constant that the MDN-RNN would predict perfectly, and it costs no
real-environment interactions, so the model-based agent's count is its random rollouts alone. `random_sequences`
records the thesis's random agent in that latent space, `fit_world_model` fits the MDN-RNN to them (thesis Fig. 5.5),
`dream_start` turns a real initial observation into a dream's start state, and `jitted_dream_train` trains a
controller in the fitted model (`jaxgraph.rl.dream`). The jitted pieces are built once per model and config, so
every graph with the same action space and sizes shares one compilation.
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable

import chex
import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from jaxgraph.env import Env, Observation
from jaxgraph.rl.configs import AgentConfig, DreamConfig
from jaxgraph.rl.dream import DreamStart, make_dream_train
from jaxgraph.rl.encoder import GraphEncoder
from jaxgraph.rl.world_model import MDNRNN, LatentSequence, make_world_model_update


def make_encoder(agent: AgentConfig, key: chex.PRNGKey, obs: Observation) -> Callable[[Observation], jax.Array]:
    """z = a GraphEncoder of the agent's sizes with random, frozen parameters (module doc: why frozen), jitted."""
    encoder = GraphEncoder(agent.hidden, agent.latent, agent.message_steps)
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


def dream_start(encode: Callable, obs: Observation) -> DreamStart:
    """The dream start state of one real initial observation."""
    return DreamStart(jnp.asarray(encode(obs))[None], jnp.asarray(obs.xfer_mask)[None],
                      jnp.asarray(obs.location_mask)[None])
