"""The model-based agent's real-environment data (`jaxgraph.rl.model_based`): random-agent sequences checked against
the real Env's own bookkeeping."""

import numpy as np

from jaxgraph import Env, cost
from jaxgraph.rl import random_sequences, toy_graph


def test_random_agent_sequences_follow_the_real_env():
    """z = the observation's cost, so the recorded rewards, latents and episode starts can be checked
    against the Env's own bookkeeping."""
    graph = toy_graph(3).graph
    env = Env(graph, max_locations=4, max_steps=5)
    initial = cost(graph)
    data = random_sequences(env, lambda obs: obs.graph.globals[0, :1], 6, 5, 0.2, np.random.default_rng(0))
    assert data.z.shape == (6, 5, 1) and data.action.shape == (6, 5, 2)
    assert data.next_location_mask.shape == (6, 5, env.num_xfers, 4)
    z, next_z = data.z.reshape(-1), data.next_z.reshape(-1)
    first, terminated = data.is_first.reshape(-1), data.terminated.reshape(-1)
    np.testing.assert_allclose(data.reward.reshape(-1) * initial, z - next_z, rtol=1e-4, atol=1e-9)
    assert first[0] and np.allclose(z[first], initial)  # every episode starts from the unmodified graph
    assert (first[1:] >= terminated[:-1]).all()  # a terminated step is followed by a new episode
    inside = ~first[1:]
    np.testing.assert_allclose(z[1:][inside], next_z[:-1][inside])  # within an episode the latents chain
    noop = data.action.reshape(-1, 2)[:, 0] == env.num_xfers
    assert noop.any() and (~noop).any() and (terminated[noop]).all()
    never = random_sequences(env, lambda obs: obs.graph.globals[0, :1], 2, 3, 0.0, np.random.default_rng(1))
    assert (never.action[..., 0] < env.num_xfers).all()  # a random agent that never stops voluntarily
