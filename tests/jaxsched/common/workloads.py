"""Tiny runs of the batched entry points, shared by the device-count and multi-process checks (imported after
those scripts have set the device count)."""

import dataclasses
import functools

import jax
import jax.numpy as jnp

import jaxquant as jq
import jaxsched
from jaxgraph import RULES, JaxEnv
from jaxgraph.rl import (
    MDNRNN,
    DreamConfig,
    DreamStart,
    PPOConfig,
    WorldModelConfig,
    jax_ppo,
    make_dream_sweep,
    tiny_agent,
    toy_graph,
)
from jaxsched.deepsched import configs, fit
from jaxsched.deepsched.data import label, padded_shape
from tests.jaxquant.conftest import TINY

# A latent weight one ulp from the threshold Δ flips its ternary value, so a rounding difference between two
# device counts grows in ternary training: compared with rtol 1e-2 (measured after one epoch on 1 vs 2 devices:
# one weight of 864 off by 9e-4 relative, the others equal).
TERNARY_RTOL = 1e-2


@functools.cache
def _digits() -> jq.Dataset:
    """64 training and 64 test digits, one object per process (the jitted programs are cached per dataset)."""
    digits = jq.load_digits()
    return jq.Dataset("tiny", digits.train_images[:64], digits.train_labels[:64], digits.test_images[:64],
                      digits.test_labels[:64], digits.mean, digits.std, 10, pad=1, flip=False)


def quant_sweep(devices=None):
    """(parameters, history) of three jaxquant members trained for one epoch on 64 digits."""
    dataset = _digits()
    config = jq.TrainConfig(**{**TINY.__dict__, "epochs": 1})
    members = jq.sweep_grid(regimes=("linear", "log", "exp"))
    result = jq.run_sweep(config, members, dataset=dataset, progress=False, devices=devices)
    return result.state.params, result.history


def dream_sweep(devices=None):
    """`sweep() -> DreamResult` of 3 taus x 2 seeds on a randomly initialised world model."""
    model = MDNRNN(2, 2, 2, WorldModelConfig(hidden=8, mixtures=2))
    wm_params = model.init(jax.random.key(0), model.initial_carry(), jnp.zeros(2), jnp.zeros(2, jnp.int32))
    start = DreamStart(jnp.array([[0.0, 1.0]]), jnp.array([[True, True, True]]), jnp.ones((1, 2, 2), bool))
    config = DreamConfig(ppo=PPOConfig(minibatches=2), hidden=8, num_envs=4, rollout_steps=2, updates=2, horizon=4)
    sweep = make_dream_sweep(config, model, devices)
    keys, taus = jax.random.split(jax.random.key(1), 2), jnp.array([0.5, 1.0, 1.5])
    return lambda: sweep(keys, taus, wm_params, start)


def labelled_problems(count: int):
    """HEFT labels of `count` random DAGs of 8 to 12 tasks on 4 processors."""
    problems = [jaxsched.random_dag(8 + i % 5, 4, seed=i) for i in range(count)]
    return label(problems, padded_shape(problems), chunk=count, progress=False)


def deepsched_training(workdir, devices=None):
    """Parameters of one DeepSched network trained for 2 epochs on 12 instances (minibatches of 6)."""
    config = configs.CONFIGS["test"].replace(train={"epochs": 2, "batch_size": 6, "num_seeds": 1})
    data = labelled_problems(14)
    train_set = jax.tree.map(lambda x: x[:12], data)
    val_set = jax.tree.map(lambda x: x[12:], data)
    return fit(config, train_set, val_set, workdir, progress=False, devices=devices).state.params


PPO_AGENT = dataclasses.replace(tiny_agent(), num_envs=4, rollout_steps=2, epochs=2, max_steps=6)


def ppo_train(devices=None):
    """`train() -> JaxTrainResult` of PPO (`PPO_AGENT`) on the 2-block toy graph with 4 environments, 2 epochs."""
    env = JaxEnv(toy_graph(2).graph, max_locations=PPO_AGENT.max_locations, rules=RULES[:2])
    train = jax.jit(jax_ppo.make_jax_train(PPO_AGENT, env, devices=devices))
    return lambda: train(jax.random.key(0))
