"""Δ growth regimes (Eq. 7) against hand-computed values."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxquant import REGIMES, delta_at, delta_regime, delta_schedule, multiplier_reaching_cap, stack_regimes

# (kind, Δ0, M, Δ_max, {epoch: Δ}) worked out by hand from Δ0 + Δ0 M f(e), capped at Δ_max.
CASES = [
    ("constant", 0.1, 5.0, 0.9, {1: 0.1, 7: 0.1, 500: 0.1}),
    ("linear", 0.1, 0.5, 0.9, {1: 0.15, 4: 0.3, 20: 0.9}),
    ("square", 0.1, 0.5, 0.9, {1: 0.15, 3: 0.55, 4: 0.9}),
    # 0.1 + 0.001 e^1 = 0.1027183; 0.1 + 0.001 e^5 = 0.2484132; e^7 term exceeds the cap
    ("exp", 0.1, 0.01, 0.9, {1: 0.1027183, 5: 0.2484132, 7: 0.9}),
    # log 1 = 0 at the first epoch; 0.1 + 0.19 ln 2 = 0.2316980; 0.1 + 0.19 ln 10 = 0.5374912
    ("log", 0.1, 1.9, 0.9, {1: 0.1, 2: 0.2316980, 10: 0.5374912, 100: 0.9}),
]


@pytest.mark.parametrize("kind, delta0, m, delta_max, expected", CASES)
def test_regimes_against_hand_values(kind, delta0, m, delta_max, expected):
    schedule = delta_schedule(kind, delta0, m, delta_max)
    for epoch, value in expected.items():
        np.testing.assert_allclose(schedule(epoch), value, rtol=1e-6, err_msg=f"{kind} epoch {epoch}")


def test_exp_regime_stays_finite_when_exp_overflows():
    np.testing.assert_allclose(delta_schedule("exp", 0.1, 0.0, 0.9)(200), 0.1)  # M = 0: no growth, no NaN
    np.testing.assert_allclose(delta_schedule("exp", 0.1, 1.0, 0.9)(200), 0.9)


def test_vmapped_regimes_select_per_member():
    members = [delta_regime(kind, 0.1, 0.5, 0.9) for kind in REGIMES]
    epoch = 3
    batched = jax.jit(jax.vmap(delta_at, in_axes=(0, None)))(stack_regimes(members), epoch)
    chex.assert_shape(batched, (5,))
    # constant, 0.1 + 0.05 * 3, 0.1 + 0.05 * 9, 0.1 + 0.05 * e^3 -> cap, 0.1 + 0.05 ln 3
    np.testing.assert_allclose(batched, [0.1, 0.25, 0.55, 0.9, 0.1549306], rtol=1e-6)


def test_one_compilation_serves_every_regime_and_epoch():
    @jax.jit
    @chex.assert_max_traces(n=1)
    def delta(regime, epoch):
        return delta_at(regime, epoch)

    for kind in REGIMES:
        for epoch in (1, 2, 50):
            delta(delta_regime(kind, 0.05, 1.0, 0.8), jnp.int32(epoch))


@pytest.mark.parametrize(
    "args, message",
    [
        (("cubic", 0.1, 1.0, 0.9), "unknown Δ regime"),
        ((7, 0.1, 1.0, 0.9), "out of range"),
        (("log", -0.1, 1.0, 0.9), "non-negative"),
        (("log", 0.1, -1.0, 0.9), "non-negative"),
        (("log", 0.1, 1.0, 1.0), "Δ_max"),
    ],
)
def test_invalid_regimes_are_rejected(args, message):
    with pytest.raises(ValueError, match=message):
        delta_regime(*args)


def test_epochs_are_counted_from_one():
    with pytest.raises(ValueError, match="counted from 1"):
        delta_schedule("log", 0.1, 1.9, 0.9)(0)


def test_multiplier_reaching_cap():
    assert multiplier_reaching_cap("linear", 0.1, 0.3, 8) == pytest.approx(0.25)  # 0.1 (1 + 8 M) = 0.3
    assert multiplier_reaching_cap("square", 0.1, 0.3, 8) == pytest.approx(2 / 64)
    # the paper's log regime: 0.1 (1 + M ln 67) = 0.9 -> M = 8 / ln 67 = 1.902636
    assert multiplier_reaching_cap("log", 0.1, 0.9, 67) == pytest.approx(1.902636, rel=1e-6)
    for kind in ("linear", "square", "exp", "log"):
        m = multiplier_reaching_cap(kind, 0.05, 0.5, 6)
        np.testing.assert_allclose(delta_schedule(kind, 0.05, m, 0.5)(6), 0.5, rtol=1e-5)
        assert float(delta_schedule(kind, 0.05, m, 0.5)(5)) < 0.5
    with pytest.raises(ValueError, match="cannot reach"):
        multiplier_reaching_cap("log", 0.1, 0.9, 1)  # log 1 = 0
    with pytest.raises(ValueError, match="no multiplier"):
        multiplier_reaching_cap("constant", 0.1, 0.9, 5)
