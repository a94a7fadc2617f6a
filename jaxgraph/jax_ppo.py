"""Model-free PPO on the jitted environment as one pure function (PureJaxRL style).

`make_train(config, env)(key)` trains the agents issue's `GraphPolicy` with its PPO update
(`jaxgraph.rl.ppo.make_update`) on `config.num_envs` copies of a `JaxEnv` instance, rollouts and updates
included, so `jax.jit(jax.vmap(make_train(config, env)))(keys)` trains one agent per key in one program.
As in `jaxgraph.rl.train`, every epoch starts from the unmodified graph, rewards are normalised by the
initial cost, and episodes that end are reset in place.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxgraph.jax_env import EnvParams, JaxEnv
from jaxgraph.rl.configs import AgentConfig
from jaxgraph.rl.policy import GraphPolicy, sample_action
from jaxgraph.rl.ppo import TrainState, Trajectory, make_optimizer, make_update
from jaxgraph.rl.rollout import graph_agent


class JaxTrainResult(NamedTuple):
    """Trained parameters and per-epoch curves ([epochs] each)."""

    params: Any
    mean_return: jax.Array  # the rollout's total normalised reward over the episodes it finished (0 if none)
    episodes: jax.Array  # episodes finished in the epoch's rollout
    metrics: dict[str, jax.Array]  # PPO loss parts


def make_train(config: AgentConfig, env: JaxEnv, params: EnvParams | None = None) -> Callable[[jax.Array],
                                                                                             JaxTrainResult]:
    """`train(key) -> JaxTrainResult` on `params` (default `env.params()`); pure and jittable."""
    env_params = env.params() if params is None else params
    env_params = env_params._replace(max_steps=jnp.int32(config.max_steps or 0))
    policy = GraphPolicy(env.num_xfers, config.hidden, config.latent, config.message_steps)
    update = make_update(graph_agent(policy).evaluate, config.ppo)
    optimizer = make_optimizer(config.ppo)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def act(policy_params, obs, key):
        action, log_prob, out = sample_action(key, lambda choose: policy.apply(policy_params, obs, choose))
        return action, log_prob, out.value

    def value(policy_params, obs):
        return policy.apply(policy_params, obs, jnp.argmax).value

    def train(key: jax.Array) -> JaxTrainResult:
        key, init_key = jax.random.split(key)
        first, first_obs = reset(jax.random.split(key, config.num_envs), env_params)
        policy_params = policy.init(init_key, jax.tree.map(lambda x: x[0], first_obs), jnp.argmax)
        with jax.numpy_dtype_promotion("standard"):
            state = TrainState(policy_params, optimizer.init(policy_params))

        def rollout_step(carry, key):
            env_state, obs, policy_params = carry
            act_key, step_key = jax.random.split(key)
            action, log_prob, values = jax.vmap(act, in_axes=(None, 0, 0))(
                policy_params, obs, jax.random.split(act_key, config.num_envs))
            next_state, next_obs, reward, terminated, truncated, _ = step(
                jax.random.split(step_key, config.num_envs), env_state, action, env_params)
            next_values = jax.vmap(value, in_axes=(None, 0))(policy_params, next_obs)
            done = terminated | truncated
            restart = jax.tree.map(lambda a, b: jnp.where(jnp.reshape(done, done.shape + (1,) * (a.ndim - 1)), a, b),
                                   (first, first_obs), (next_state, next_obs))
            transition = Trajectory(obs, action, log_prob, values, reward / env_state.initial_cost, next_values,
                                    terminated, done)
            return (*restart, policy_params), transition

        def epoch(state, key):
            rollout_key, update_key = jax.random.split(key)
            _, trajectory = jax.lax.scan(rollout_step, (first, first_obs, state.params),
                                         jax.random.split(rollout_key, config.rollout_steps))
            state, metrics = update(state, trajectory, update_key)
            episodes = trajectory.done.sum()
            finished = jnp.maximum(episodes, 1).astype(jnp.float32)
            mean_return = jnp.where(episodes > 0, trajectory.reward.sum() / finished, 0.0)
            return state, (mean_return, episodes, metrics)

        state, (mean_return, episodes, metrics) = jax.lax.scan(epoch, state, jax.random.split(key, config.epochs))
        return JaxTrainResult(state.params, mean_return, episodes, metrics)

    return train
