"""Model-free PPO on the jitted environment as one pure function (PureJaxRL style), and its evaluation: the
jitted twin of the host trainer `jaxgraph.rl.train`.

`make_jax_train(config, env)(key)` trains the agents' `GraphPolicy` with the host trainer's PPO update
(`jaxgraph.rl.ppo.make_update`) on `config.num_envs` environments of a `JaxEnv`, rollouts and updates included, so
`jax.jit(jax.vmap(make_jax_train(config, env)))(keys)` trains one agent per key in one program. Many graphs train in
one program: every environment starts each epoch on an instance drawn by `JaxEnv.draw` (uniform over the
`EnvParams`' instances), and an episode that ends restarts in place on a fresh draw; the initial states of all
instances are computed once per run and a restart gathers one. As in the host trainer, every epoch starts from
unmodified graphs and rewards are normalised by the initial cost of the episode's graph.

The rollout runs the policy once per step (PureJaxRL): the value of the state a step led to is the next step's
value, and the last observation's value is computed once after the rollout. Only a truncated episode needs the
value of a final observation that a restart replaced; those are computed on the steps where some environment was
truncated (`lax.cond`), and only when truncation can happen inside an epoch (`max_steps <= rollout_steps`).

`JaxTrainResult.mean_return` means what the host trainer's history entry does: the mean return (normalised total
reward) of the episodes that finished in the epoch's rollout, NaN when none did (the host trainer's None).
`make_trainer` gives the same run in pieces (`init`, then `run` over any number of epoch keys), so a caller can
train in chunks of epochs and watch the agent between them; `make_evaluate` is `jaxgraph.rl.train.evaluate_agent`
in the jitted environment (the most-likely-action episode and sampled episodes, vmapped in one program).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxgraph.jax_env import EnvParams, JaxEnv
from jaxgraph.rl.configs import AgentConfig
from jaxgraph.rl.episode import Episode
from jaxgraph.rl.policy import GraphPolicy, sample_action
from jaxgraph.rl.ppo import TrainState, Trajectory, make_optimizer, make_update
from jaxgraph.rl.rollout import graph_agent
from jaxgraph.timestep import TimeStep
from jaxsched.common.sharding import Devices, batch_mesh, constrain_batch, replicated


class JaxTrainResult(NamedTuple):
    """Trained parameters and per-epoch curves ([epochs] each)."""

    params: Any
    mean_return: jax.Array  # mean normalised return of the episodes the epoch's rollout finished (NaN if none)
    episodes: jax.Array  # episodes finished in the epoch's rollout
    metrics: dict[str, jax.Array]  # PPO loss parts


class JaxTrainer(NamedTuple):
    """A training run in pieces: `init(key) -> TrainState` (fresh policy parameters and optimiser state) and
    `run(state, epoch_keys) -> (state, JaxTrainResult)`, one epoch per key of `epoch_keys` [E] (pure and
    jittable; one compilation per chunk length E)."""

    init: Callable[[jax.Array], TrainState]
    run: Callable[[TrainState, jax.Array], tuple[TrainState, JaxTrainResult]]


def _episode_params(config: AgentConfig, env: JaxEnv, params: EnvParams | None) -> EnvParams:
    env_params = env.params() if params is None else params
    return env_params._replace(max_steps=jnp.int32(config.max_steps or 0))


def _env_mesh(config: AgentConfig, devices: Devices) -> Mesh:
    mesh = batch_mesh(devices)
    if config.num_envs % mesh.devices.size:
        raise ValueError(f"num_envs={config.num_envs} does not split across {mesh.devices.size} devices; "
                         "pass devices= a count that divides it")
    return mesh


def make_trainer(config: AgentConfig, env: JaxEnv, params: EnvParams | None = None, devices: Devices = None
                 ) -> JaxTrainer:
    """The pieces of `make_jax_train` on `params` (default `env.params()`: every instance the environment holds):
    running `init` and then `run` on the epoch keys in several chunks gives exactly the parameters of one `run`
    over all of them. The environments are split across `devices` (`jaxsched.common.batch_mesh`: default all
    devices, whose count must divide `config.num_envs`), the policy parameters replicated; the PPO update's means
    over the batch become cross-device sums, so results equal a one-device run up to float rounding."""
    env_params = _episode_params(config, env, params)
    mesh = _env_mesh(config, devices)
    policy = GraphPolicy(env.num_xfers, config.hidden, config.latent, config.message_steps)
    update = make_update(graph_agent(policy).evaluate, config.ppo)
    optimizer = make_optimizer(config.ppo)
    num_instances = env_params.instances.op.shape[0]
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    draw = jax.vmap(env.draw, in_axes=(0, None))
    # truncation inside an epoch: every epoch starts at step 0, so only when max_steps <= rollout_steps
    truncates = bool(config.max_steps) and config.max_steps <= config.rollout_steps

    def act(policy_params, obs, key):
        action, log_prob, out = sample_action(key, lambda choose: policy.apply(policy_params, obs, choose))
        return action, log_prob, out.value

    def values(policy_params, obs):
        return jax.vmap(lambda o: policy.apply(policy_params, o, jnp.argmax).value)(obs)

    def initial_states() -> tuple[Any, TimeStep]:
        """Every instance's initial state and time step, [N, ...]."""
        return jax.vmap(env.reset_to, in_axes=(0, None))(jnp.arange(num_instances), env_params)

    def pick(pool, index):
        return jax.tree.map(lambda leaf: leaf[index], pool)

    def init(key: jax.Array) -> TrainState:
        _, first = initial_states()
        policy_params = policy.init(key, pick(first.observation, 0), jnp.argmax)
        with jax.numpy_dtype_promotion("standard"):
            state = TrainState(policy_params, optimizer.init(policy_params))
        return jax.lax.with_sharding_constraint(state, replicated(mesh))  # on the mesh, where `run` needs it

    def run(state: TrainState, epoch_keys: jax.Array) -> tuple[TrainState, JaxTrainResult]:
        pool = initial_states()

        def rollout_step(carry, key):
            env_state, timestep, running, policy_params = carry
            act_key, step_key, draw_key = jax.random.split(key, 3)
            obs = timestep.observation
            action, log_prob, value = jax.vmap(act, in_axes=(None, 0, 0))(
                policy_params, obs, jax.random.split(act_key, config.num_envs))
            next_state, next_step = step(jax.random.split(step_key, config.num_envs), env_state, action, env_params)
            done, terminated, truncated = next_step.last(), next_step.terminated, next_step.truncated
            if truncates:  # the value of each truncated final observation, on the steps that truncate one
                final_value = jax.lax.cond(truncated.any(), lambda: values(policy_params, next_step.observation),
                                           lambda: jnp.zeros(config.num_envs, jnp.float32))
            else:
                final_value = jnp.zeros(config.num_envs, jnp.float32)
            reward = next_step.reward / env_state.initial_cost
            running = running + reward
            finished = jnp.where(done, running, 0.0)
            restart = pick(pool, draw(jax.random.split(draw_key, config.num_envs), env_params))
            carried = jax.tree.map(lambda a, b: jnp.where(jnp.reshape(done, done.shape + (1,) * (a.ndim - 1)), a, b),
                                   restart, (next_state, next_step))
            carry = (*constrain_batch(carried, mesh), jnp.where(done, 0.0, running), policy_params)
            return carry, (obs, action, log_prob, value, reward, final_value, terminated, done, finished)

        def epoch(state, key):
            start_key, rollout_key, update_key = jax.random.split(key, 3)
            first = constrain_batch(pick(pool, draw(jax.random.split(start_key, config.num_envs), env_params)), mesh)
            carry = (*first, jnp.zeros(config.num_envs, jnp.float32), state.params)
            carry, steps = jax.lax.scan(rollout_step, carry, jax.random.split(rollout_key, config.rollout_steps))
            obs, action, log_prob, value, reward, final_value, terminated, done, finished = steps
            last_value = values(state.params, carry[1].observation)  # the bootstrap, once per rollout
            next_value = jnp.where(done & ~terminated, final_value, jnp.concatenate([value[1:], last_value[None]]))
            trajectory = Trajectory(obs, action, log_prob, value, reward, next_value, terminated, done)
            state, metrics = update(state, trajectory, update_key)
            episodes = done.sum()
            mean_return = jnp.where(episodes > 0, finished.sum() / jnp.maximum(episodes, 1).astype(jnp.float32),
                                    jnp.float32(jnp.nan))
            return state, (mean_return, episodes, metrics)

        state, (mean_return, episodes, metrics) = jax.lax.scan(epoch, state, epoch_keys)
        return state, JaxTrainResult(state.params, mean_return, episodes, metrics)

    return JaxTrainer(init, run)


def make_jax_train(config: AgentConfig, env: JaxEnv, params: EnvParams | None = None, devices: Devices = None
               ) -> Callable[[jax.Array], JaxTrainResult]:
    """`train(key) -> JaxTrainResult` on `params` (default `env.params()`), the environments split across
    `devices` (see `make_trainer`); pure and jittable."""
    trainer = make_trainer(config, env, params, devices)

    def train(key: jax.Array) -> JaxTrainResult:
        key, init_key = jax.random.split(key)
        return trainer.run(trainer.init(init_key), jax.random.split(key, config.epochs))[1]

    return train


class JaxEpisodes(NamedTuple):
    """Evaluation episodes in the jitted environment, leaves [E, ...], the most-likely-action episode first.
    Entries past an episode's end repeat its last action and cost; `episodes` cuts them off."""

    actions: jax.Array  # [E, T, 2] int32
    costs: jax.Array  # [E, T + 1] float32: the initial state's cost, then the cost after each action
    length: jax.Array  # [E] int32 actions the episode took (the NO-OP included)

    @property
    def best_cost(self) -> jax.Array:
        """The cheapest state any of the episodes visited."""
        return self.costs.min()

    def episodes(self) -> list[Episode]:
        """The episodes as host `Episode`s (what `jaxgraph.rl.episode.best_of` and the study read)."""
        actions, costs, length = (np.asarray(x) for x in self)
        return [Episode([(int(x), int(loc)) for x, loc in actions[e, :length[e]]],
                        [float(c) for c in costs[e, :length[e] + 1]]) for e in range(len(length))]


def make_evaluate(config: AgentConfig, env: JaxEnv, samples: int, params: EnvParams | None = None
                  ) -> Callable[..., JaxEpisodes]:
    """`evaluate(policy_params, key, instance=0) -> JaxEpisodes`: `evaluate_agent`'s protocol in `env` (pure,
    jittable): the policy's most-likely-action episode and `samples` episodes sampled with keys split from `key`,
    each until it ends or takes `config.max_steps` actions (1000 when None), on instance `instance` (an index into
    the instances of `params`, default `env.params()`; traced, so one compilation evaluates every instance).
    The agent returns the cheapest state the episodes visited (`best_cost`; `episodes()` and `best_of` give
    the actions that reach it)."""
    if samples < 0:
        raise ValueError(f"samples must be >= 0, got {samples}")
    env_params = _episode_params(config, env, params)
    policy = GraphPolicy(env.num_xfers, config.hidden, config.latent, config.message_steps)
    max_steps = config.max_steps or 1000

    def episode(policy_params, likeliest: jax.Array, key: jax.Array, instance: jax.Array):
        state, timestep = env.reset_to(instance, env_params)

        def body(carry, step_key):
            state, obs, cost, done = carry
            apply = lambda choose: policy.apply(policy_params, obs, choose)  # noqa: E731
            action = jnp.where(likeliest, sample_action(None, apply)[0], sample_action(step_key, apply)[0])
            next_state, next_step = env.step(step_key, state, action, env_params)
            cost = jnp.where(done, cost, next_state.cost)
            return (next_state, next_step.observation, cost, done | next_step.last()), (action, cost, ~done)

        _, (actions, costs, taken) = jax.lax.scan(body, (state, timestep.observation, state.cost, jnp.bool_(False)),
                                                  jax.random.split(key, max_steps))
        length = taken.sum().astype(jnp.int32)
        last = actions[jnp.maximum(length - 1, 0)]
        actions = jnp.where((jnp.arange(max_steps) < length)[:, None], actions, last)
        return actions, jnp.concatenate([state.cost[None], costs]), length

    def evaluate(policy_params, key: jax.Array, instance: jax.Array | int = 0) -> JaxEpisodes:
        keys = jnp.concatenate([key[None], jax.random.split(key, samples)]) if samples else key[None]
        likeliest = jnp.arange(samples + 1) == 0
        return JaxEpisodes(*jax.vmap(episode, in_axes=(None, 0, 0, None))(policy_params, likeliest, keys,
                                                                           jnp.asarray(instance, jnp.int32)))

    return evaluate
