"""Δ growth regimes (paper Eq. 7): Δ(e) = min(Δ0 + Δ0 · M · f(e), Δ_max).

f is one of `REGIMES`: constant (f = 0, the fixed-Δ setting), linear (e), square (e²), exp (eᵉ) and
log (log e).

Epoch counting: `e` is the 1-based number of the epoch being trained (the first epoch is e = 1).
The paper writes f = log at epoch 0, which is -inf; counting from 1 makes the log regime start
exactly at Δ0 (log 1 = 0) and keeps every regime finite. A concrete epoch below 1 raises
`ValueError`; a traced one (inside jit, where no error can be raised) is read as epoch 1, so Δ is
never -inf or NaN. The same count is used for all regimes, so
the first epoch already trains with Δ0(1 + M) under the linear regime.

The regime kind is stored as an integer index and all five growth functions are evaluated and
selected by it, so members of a vmapped sweep can each follow a different regime.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxsched.common.arguments import number

REGIMES = ("constant", "linear", "square", "exp", "log")


class DeltaRegime(NamedTuple):
    """Parameters of Eq. 7 as arrays (a pytree: stack them to vmap a sweep over regimes)."""

    kind: jax.Array  # int32 index into REGIMES
    delta0: jax.Array  # float32 Δ0
    m: jax.Array  # float32 multiplier M
    delta_max: jax.Array  # float32 cap Δ_f


def delta_regime(kind: str | int, delta0: float, m: float, delta_max: float) -> DeltaRegime:
    """Validated `DeltaRegime` from Python values (kind by name or index)."""
    if isinstance(kind, str):
        if kind not in REGIMES:
            raise ValueError(f"unknown Δ regime {kind!r}; expected one of {REGIMES}")
        kind = REGIMES.index(kind)
    if isinstance(kind, bool) or not isinstance(kind, (int, np.integer)):
        raise ValueError(f"Δ regime kind must be a name from {REGIMES} or an integer index, got {kind!r}")
    if not 0 <= int(kind) < len(REGIMES):
        raise ValueError(f"Δ regime index {kind} out of range [0, {len(REGIMES)})")
    for name, value in (("Δ0", delta0), ("M", m), ("Δ_max", delta_max)):
        number(name, value)
    if delta0 < 0 or m < 0:
        raise ValueError(f"Δ0 and M must be non-negative, got Δ0={delta0}, M={m}")
    if not 0 <= delta_max < 1:
        raise ValueError(f"Δ_max must be in [0, 1) (latent weights live in [-1, 1]), got {delta_max}")
    return DeltaRegime(
        kind=jnp.asarray(kind, jnp.int32),
        delta0=jnp.asarray(delta0, jnp.float32),
        m=jnp.asarray(m, jnp.float32),
        delta_max=jnp.asarray(delta_max, jnp.float32),
    )


def stack_regimes(regimes: list[DeltaRegime]) -> DeltaRegime:
    """Stack regimes along a leading member axis for a vmapped sweep."""
    if not regimes:
        raise ValueError("stack_regimes needs at least one regime")
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *regimes)


def growth(kind: jax.Array, epoch: jax.Array) -> jax.Array:
    """f(epoch) for regime index `kind`, capped at the largest float32 so that M = 0 stays 0."""
    x = jnp.asarray(epoch, jnp.float32)
    values = jnp.stack([jnp.zeros_like(x), x, x * x, jnp.exp(x), jnp.log(x)])
    return jnp.minimum(values[kind], jnp.finfo(jnp.float32).max)


def delta_at(regime: DeltaRegime, epoch: jax.Array | int) -> jax.Array:
    """Δ for the 1-based `epoch` (Eq. 7); traceable in both the regime and the epoch."""
    if not isinstance(epoch, jax.core.Tracer) and np.any(np.asarray(epoch) < 1):
        raise ValueError(f"epochs are counted from 1 (see jaxquant.delta), got {epoch}")
    chex.assert_rank([epoch, *regime], 0)  # unbatched: vmap over members
    f = growth(regime.kind, jnp.maximum(epoch, 1))  # traced epochs below 1 read as 1 (module doc)
    return jnp.minimum(regime.delta0 + regime.delta0 * regime.m * f, regime.delta_max)


def multiplier_reaching_cap(kind: str, delta0: float, delta_max: float, epoch: int) -> float:
    """The M for which regime `kind` reaches Δ_max exactly at `epoch` (Eq. 7 solved for M).

    Regimes parametrized this way ramp from Δ0 to the same cap over the same epochs and differ
    only in the shape of the ramp (the paper's log regime, M = 1.9 with Δ0 = 0.1 and Δ_max = 0.9,
    reaches its cap at epoch 67).
    """
    if kind not in REGIMES or kind == "constant":
        raise ValueError(f"no multiplier makes regime {kind!r} grow; expected one of {REGIMES[1:]}")
    if delta0 <= 0 or not delta0 < delta_max < 1:
        raise ValueError(f"need 0 < Δ0 < Δ_max < 1, got Δ0={delta0}, Δ_max={delta_max}")
    f = float(growth(REGIMES.index(kind), epoch))
    if not 0 < f < float("inf"):
        raise ValueError(f"regime {kind!r} cannot reach its cap at epoch {epoch} (f = {f})")
    return (delta_max / delta0 - 1.0) / f


def delta_schedule(
    kind: str | int, delta0: float, m: float, delta_max: float
) -> Callable[[jax.Array | int], jax.Array]:
    """Eq. 7 as a schedule: returns `epoch -> Δ` for 1-based epochs."""
    regime = delta_regime(kind, delta0, m, delta_max)
    return lambda epoch: delta_at(regime, epoch)
