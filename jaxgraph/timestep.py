"""The one return convention of `jaxgraph.env.Env` and its jitted twin `jaxgraph.jax_env.JaxEnv`: Jumanji's
`TimeStep`.

`Env` (host, stateful): `reset() -> TimeStep`, `step(action) -> TimeStep`.
`JaxEnv` (pure): `reset(key, params) -> (EnvState, TimeStep)`, `step(key, state, action, params) ->
(EnvState, TimeStep)`.

A time step carries the observation, the reward of the step that led to it, its `StepType` (FIRST after a reset,
LAST when the episode ended, MID otherwise) and a discount that tells the two ways an episode ends apart: 0 when it
terminated (the NO-OP, or no rewrite applies: nothing follows, no value to bootstrap), 1 when it was truncated after
`max_steps` (the state still has a value). `terminated` and `truncated` read those two back. The fields are Python
scalars in `Env` and arrays in `JaxEnv` (a `TimeStep` is a pytree: it jits, vmaps and scans).
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple


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
