"""A deterministic counter world in latent space, and an MDN-RNN fitted to it (shared by the world-model
and dream tests)."""

import operator

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgraph.rl import MDNRNN, LatentSequence, WorldModelConfig, make_world_model_update

# A deterministic toy: a counter k in 0..4, latent z = [k / 4, 1 - k / 4]. xfer 0 (location 0 or 1) adds
# 1 and earns 0.1 x (1 + location); xfer 1 (location 0) adds 2 and earns 0.3; the NO-OP (2) ends the
# episode with reward 0, reaching k >= 4 ends it too. xfer 0 needs k < 4, xfer 1 needs k <= 2.
X, L, D, T = 2, 2, 2, 8
FIT_STEPS = 2000


def latent(k):
    return np.array([min(k, 4) / 4, 1 - min(k, 4) / 4], np.float32)


def masks(k):
    xfer = np.array([k < 4, k <= 2, True])
    location = np.array([[k < 4, k < 4], [k <= 2, False]])
    return xfer, location


def counter_sequences(rng, batch):
    out = []
    for _ in range(batch):
        rows, k, first = [], 0, True
        for _ in range(T):
            xfer_mask, location_mask = masks(k)
            xfer = rng.choice(np.flatnonzero(xfer_mask), p=None)
            location = 0 if xfer == X else rng.choice(np.flatnonzero(location_mask[xfer]))
            nk = k if xfer == X else k + 1 + xfer
            reward = 0.0 if xfer == X else (0.1 * (1 + location) if xfer == 0 else 0.3)
            terminated = xfer == X or nk >= 4
            nx, nl = masks(nk)
            rows.append((latent(k), [xfer, location], latent(nk), reward, terminated, nx, nl, first))
            k, first = (0, True) if terminated else (nk, False)
        out.append(LatentSequence(*(np.asarray(c) for c in zip(*rows))))
    return jax.tree.map(lambda *xs: np.stack(xs).astype(xs[0].dtype if xs[0].dtype != np.float64 else np.float32),
                        *out)


@pytest.fixture(scope="session")
def counter_world_model():
    """An MDN-RNN trained to convergence (2000 Adam steps with cosine decay, one compilation) on random-agent
    sequences of the counter. The reward weight is raised so that the dream value of the optimal sequence is
    within 1% of the true 0.8: the dream test's threshold needs per-step reward errors well below 0.005."""
    model = MDNRNN(D, X, L, WorldModelConfig(hidden=32, mixtures=2, learning_rate=1e-2, decay_steps=FIT_STEPS,
                                             reward_coef=10.0))
    data = counter_sequences(np.random.default_rng(0), 64)
    params = jax.jit(model.init)(jax.random.key(0), model.initial_carry(), jnp.zeros(D), jnp.zeros(2, jnp.int32))
    optimizer, update = make_world_model_update(model)
    update = jax.jit(chex.assert_max_traces(update, n=1))
    opt_state = optimizer.init(params)
    for step in range(FIT_STEPS):
        batch = jax.tree.map(operator.itemgetter(slice((step * 16) % 64, (step * 16) % 64 + 16)), data)
        params, opt_state, metrics = update(params, opt_state, batch)
    return model, params, metrics
