"""The one return convention of `jaxgraph.env.Env` and its jitted twin `jaxgraph.jax_env.JaxEnv`: Jumanji's
`TimeStep`.

`Env` (host, stateful): `reset() -> TimeStep`, `step(action) -> TimeStep`.
`JaxEnv` (pure): `reset(key, params) -> (EnvState, TimeStep)`, `step(key, state, action, params) ->
(EnvState, TimeStep)`.

A time step carries the observation, the reward of the step that led to it, its `StepType` (FIRST after a reset,
LAST when the episode ended, MID otherwise) and a discount that tells the two ways an episode ends apart: 0 when it
terminated (the NO-OP, or no rewrite applies: nothing follows, no value to bootstrap), 1 when it was truncated after
`max_steps` (the state still has a value). `terminated` and `truncated` read those two back. The fields are Python
scalars in `Env` and arrays in `JaxEnv` and `jaxgraph.rl.EnvPool` (a `TimeStep` is a pytree: it jits, vmaps and
scans).

Every time step is made by one of Jumanji's constructors: `restart` (FIRST), `transition` (MID), `termination`
(LAST, discount 0) and `truncation` (LAST, discount 1), or by `outcome`, which picks among the last three per
element from `terminated` and `truncated` (what a step knows; arrays where they are traced or batched).
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class StepType(enum.IntEnum):
    """Where a time step lies in its episode (Jumanji's values)."""

    FIRST = 0
    MID = 1
    LAST = 2


class TimeStep(NamedTuple):
    """What `reset` and `step` return besides the state."""

    step_type: Any  # StepType (int8 array in JaxEnv)
    reward: Any  # float: cost before - cost after (0 at FIRST and for the NO-OP; JaxEnv: -penalty if invalid)
    discount: Any  # float: 0 when the episode terminated, 1 otherwise
    observation: Any  # jaxgraph.env.Observation
    extras: dict[str, Any]  # "cost": the graph's cost now; Env adds "rule" and "location", JaxEnv "invalid"

    def first(self) -> Any:
        """True right after a reset."""
        return self.step_type == StepType.FIRST

    def mid(self) -> Any:
        """True inside an episode."""
        return self.step_type == StepType.MID

    def last(self) -> Any:
        """True when the episode ended (terminated or truncated): the caller resets."""
        return self.step_type == StepType.LAST

    @property
    def terminated(self) -> Any:
        """The episode ended for good (NO-OP, or no rewrite left): no value to bootstrap."""
        return self.last() & (self.discount == 0)

    @property
    def truncated(self) -> Any:
        """The episode was cut after `max_steps`: its final state still has a value."""
        return self.last() & (self.discount != 0)


def _timestep(step_type: Any, reward: Any, discount: Any, observation: Any, extras: dict[str, Any] | None) -> TimeStep:
    """Python scalars for a Python reward and step type (a host environment); else arrays of the broadcast shape,
    JAX where any field is a JAX array and NumPy otherwise: int8 step type, float32 reward and discount."""
    extras = {} if extras is None else extras
    if isinstance(reward, (int, float)) and isinstance(step_type, StepType):
        return TimeStep(step_type, float(reward), float(discount), observation, extras)
    xp = jnp if any(isinstance(value, jax.Array) for value in (step_type, reward, discount)) else np
    shape = np.broadcast_shapes(np.shape(step_type), np.shape(reward), np.shape(discount))
    step_type, reward, discount = (xp.broadcast_to(xp.asarray(value, dtype), shape) for value, dtype in
                                   ((step_type, xp.int8), (reward, xp.float32), (discount, xp.float32)))
    return TimeStep(step_type, reward, discount, observation, extras)


def restart(observation: Any, extras: dict[str, Any] | None = None, shape: tuple[int, ...] | None = None
            ) -> TimeStep:
    """The FIRST time step of an episode: reward 0, discount 1. `shape` None: Python scalars; a tuple: JAX arrays of
    that shape (() for one jitted environment)."""
    reward = 0.0 if shape is None else jnp.zeros(shape, jnp.float32)
    return _timestep(StepType.FIRST, reward, 1.0, observation, extras)


def transition(reward: Any, observation: Any, extras: dict[str, Any] | None = None) -> TimeStep:
    """A MID time step: the episode goes on (discount 1)."""
    return _timestep(StepType.MID, reward, 1.0, observation, extras)


def termination(reward: Any, observation: Any, extras: dict[str, Any] | None = None) -> TimeStep:
    """A LAST time step of an episode that ended for good: discount 0, nothing to bootstrap."""
    return _timestep(StepType.LAST, reward, 0.0, observation, extras)


def truncation(reward: Any, observation: Any, extras: dict[str, Any] | None = None) -> TimeStep:
    """A LAST time step of an episode cut short: discount 1, its final state still has a value."""
    return _timestep(StepType.LAST, reward, 1.0, observation, extras)


def outcome(reward: Any, observation: Any, terminated: Any, truncated: Any,
            extras: dict[str, Any] | None = None) -> TimeStep:
    """The time step a step returns: `termination` where `terminated`, else `truncation` where `truncated`, else
    `transition`. Python bools pick the constructor; arrays (NumPy or traced) pick per element."""
    if isinstance(terminated, (bool, np.bool_)) and isinstance(truncated, (bool, np.bool_)):
        make = termination if terminated else truncation if truncated else transition
        return make(reward, observation, extras)
    xp = jnp if any(isinstance(value, jax.Array) for value in (reward, terminated, truncated)) else np
    return _timestep(xp.where(terminated | truncated, StepType.LAST, StepType.MID), reward,
                     xp.where(terminated, 0.0, 1.0), observation, extras)
