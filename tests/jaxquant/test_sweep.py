"""Sweep members, their stacked inputs and the summary rows."""

import jax
import numpy as np
import pytest

import jaxquant as jq


def test_grid_is_the_cartesian_product():
    members = jq.sweep_grid(regimes=("linear", "log"), delta0s=(0.1,), ms=(1.0, 2.0), delta_maxes=(0.5,), seeds=(0, 1))
    assert len(members) == 8
    assert members[0] == jq.SweepMember("linear", 0.1, 1.0, 0.5, 0)
    assert members[-1] == jq.SweepMember("log", 0.1, 2.0, 0.5, 1)


def test_member_inputs_stack_keys_and_regimes():
    members = [jq.SweepMember("exp", 0.1, 0.5, 0.9, seed=3), jq.SweepMember("log", 0.2, 1.9, 0.8, seed=4)]
    keys, regimes = jq.member_inputs(members)
    np.testing.assert_array_equal(jax.random.key_data(keys[1]), jax.random.key_data(jax.random.key(4)))
    np.testing.assert_array_equal(regimes.kind, [3, 4])
    np.testing.assert_allclose(regimes.delta0, [0.1, 0.2])
    np.testing.assert_allclose(regimes.delta_max, [0.9, 0.8])
    with pytest.raises(ValueError, match="at least one member"):
        jq.member_inputs([])
    with pytest.raises(ValueError, match="unknown Δ regime"):
        jq.SweepMember("cubic")


def test_summary_rows_from_a_hand_made_history():
    members = (jq.SweepMember(seed=0), jq.SweepMember("linear", seed=1))
    epochs = 3
    columns = {name: np.zeros((epochs, 2), np.float32) for name in jq.EpochMetrics._fields}
    columns["test_accuracy"][:, 0] = [0.5, 0.9, 0.8]
    columns["test_accuracy"][:, 1] = [0.7, 0.7, 0.6]
    columns["sparsity"][-1] = [0.85, 0.6]
    columns["entropy"][-1] = [0.6, 1.2]
    columns["delta"][-1] = [0.3, 0.9]
    result = jq.SweepResult(members, None, jq.EpochMetrics(**columns))
    first, second = jq.summarize(result)
    assert first["regime"] == "log" and second["regime"] == "linear" and second["seed"] == 1
    assert (first["final_accuracy"], first["peak_epoch"]) == (pytest.approx(0.8), 2)
    assert (second["peak_accuracy"], second["peak_epoch"]) == (pytest.approx(0.7), 1)
    assert (first["sparsity"], second["entropy"], second["final_delta"]) == pytest.approx((0.85, 1.2, 0.9))
