"""Bad input gets a named ValueError (with the file's path where there is one), never a silent
wrong answer or an exception from inside another library."""

import dataclasses
import pickle

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxquant as jq
from jaxquant.data import CIFAR10_FILES
from tests.jaxquant.conftest import TINY, fit_killed_after_epoch_two

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("delta0, m, delta_max", [(NAN, 1, 0.5), (0.1, NAN, 0.5), (0.1, 1, NAN), (INF, 1, 0.5),
                                                  (0.1, INF, 0.5), (True, 1, 0.5), ("0.1", 1, 0.5)])
def test_delta_schedule_rejects_non_finite_or_non_numeric_values(delta0, m, delta_max):
    with pytest.raises(ValueError, match="Δ0|M|Δ_max"):
        jq.delta_schedule("log", delta0, m, delta_max)


@pytest.mark.parametrize("kind", [True, 1.5])
def test_delta_regime_kind_must_be_a_name_or_an_integer(kind):
    with pytest.raises(ValueError, match="regime kind"):
        jq.delta_regime(kind, 0.1, 1.0, 0.5)


def test_epoch_zero_is_rejected_when_concrete_and_read_as_epoch_one_when_traced():
    schedule = jq.delta_schedule("log", 0.1, 1.9, 0.9)
    for epoch in (0, np.int32(0), jnp.int32(0), jnp.array([1, 0])):
        with pytest.raises(ValueError, match="counted from 1"):
            schedule(epoch)
    # Inside jit nothing can raise; epoch 0 reads as epoch 1: Δ0 (log 1 = 0), never -inf or NaN.
    traced = jax.jit(schedule)(jnp.int32(0))
    assert float(traced) == pytest.approx(0.1)
    zero_m = jax.jit(jq.delta_schedule("log", 0.1, 0.0, 0.9))(jnp.int32(0))
    assert float(zero_m) == pytest.approx(0.1)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"delta0": NAN}, "Δ0"),
        ({"m": NAN}, "M"),
        ({"delta_max": NAN}, "Δ_max"),
        ({"learning_rates": (NAN,), "lr_epochs": (0,)}, "finite"),
        ({"learning_rates": (INF,), "lr_epochs": (0,)}, "finite"),
        ({"epochs": 2.5}, "epochs"),
        ({"epochs": True}, "epochs"),
        ({"batch_size": NAN}, "batch_size"),
        ({"data_seed": 0.5}, "data_seed"),
    ],
)
def test_train_config_rejects_non_finite_and_non_integer_fields(changes, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(TINY, **changes)


def _random_variables(config):
    images = jnp.zeros((1, 8, 8, 1), jnp.float32)
    shapes = jax.eval_shape(lambda: jq.ResNet(config).init(jax.random.key(0), images, delta=0.5, train=False))
    rng = np.random.default_rng(1)
    return jax.tree.map(lambda leaf: jnp.asarray(rng.uniform(-1, 1, leaf.shape), jnp.float32), shapes)


@pytest.mark.parametrize("delta", [NAN, INF, -0.1, 1.0, True, np.ones(2)])
def test_export_rejects_a_delta_outside_the_unit_interval(tmp_path, delta):
    with pytest.raises(ValueError, match="delta"):
        jq.export_model(tmp_path / "m.npz", _random_variables(TINY.model), TINY.model, delta)
    assert not (tmp_path / "m.npz").exists()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    pytest.importorskip("constriction")  # the "ans" format's coder (extra `compress`)
    path = tmp_path_factory.mktemp("export") / "m.npz"
    jq.export_model(path, _random_variables(TINY.model), TINY.model, 0.5, fmt="ans")
    return path.read_bytes()


@pytest.mark.parametrize("damage", ["empty", "truncated", "bit_flip", "text"])
def test_load_model_on_a_damaged_export_names_the_file(tmp_path, exported, damage):
    data = bytearray(exported)
    if damage == "empty":
        data = b""
    elif damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "bit_flip":
        data[len(data) // 2] ^= 0x10
    else:
        data = b"not a model\n"
    path = tmp_path / "damaged.npz"
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="damaged.npz"):
        jq.load_model(path)


def _write_cifar(directory, damaged_name, content):
    directory.mkdir()
    for name in CIFAR10_FILES:
        data = np.zeros((2, 3 * 32 * 32), np.uint8)
        with open(directory / name, "wb") as handle:
            pickle.dump({b"data": data, b"labels": [0, 1]}, handle)
    (directory / damaged_name).write_bytes(content)


def _pickled(value):
    return pickle.dumps(value)


@pytest.mark.parametrize(
    "content",
    [
        b"",  # empty
        _pickled({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 1]})[:100],  # truncated
        b"\x00garbage that is no pickle",
        _pickled({"data": np.zeros((2, 3072), np.uint8), "labels": [0, 1]}),  # str keys (wrong layout)
        _pickled([1, 2, 3]),  # not a dict
        _pickled({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}),  # wrong image size
    ],
    ids=["empty", "truncated", "garbage", "str_keys", "list", "wrong_size"],
)
def test_damaged_cifar_batch_raises_value_error_with_its_path(tmp_path, content):
    _write_cifar(tmp_path / "cifar", "data_batch_3", content)
    with pytest.raises(ValueError, match="data_batch_3"):
        jq.load_cifar10(tmp_path / "cifar")


def test_resume_past_a_truncated_latest_step_equals_an_uninterrupted_run(
    tmp_path, tiny_digits, population_members, trained_population
):
    keys, regimes = jq.member_inputs(population_members)
    seen = fit_killed_after_epoch_two(tmp_path, tiny_digits, population_members, devices=1)
    truncated = 0
    for path in (tmp_path / "2" / "tree").rglob("*"):
        if path.is_file() and path.stat().st_size > 16:
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
            truncated += 1
    assert truncated
    with pytest.warns(UserWarning, match="damaged"):
        resumed = jq.fit(TINY, keys, regimes, workdir=tmp_path, dataset=tiny_digits, progress=False,
                         on_epoch_end=lambda epoch, metrics: seen.append(epoch), devices=1)  # as trained_population
    assert seen == [1, 2, 2, 3, 4]  # epoch 2 is redone from the intact epoch-1 checkpoint
    chex.assert_trees_all_equal(resumed.history, trained_population.history)
    chex.assert_trees_all_equal(resumed.state, trained_population.state)


def test_unbatched_cores_assert_their_ranks_at_entry():
    w = jnp.zeros((3, 3, 2, 4), jnp.float32)
    with pytest.raises(AssertionError, match="rank"):
        jq.conv2d(jnp.zeros((8, 8, 2), jnp.float32), w, 1)  # a missing batch axis
    with pytest.raises(AssertionError, match="rank"):
        jq.ternarize(w, jnp.array([0.1, 0.2]))  # a per-member Δ without vmap
    with pytest.raises(AssertionError, match="rank"):
        jq.accuracy(jnp.zeros((4, 10)), jnp.zeros((4, 1), jnp.int32))  # would broadcast to [4, 4]
    with pytest.raises(AssertionError, match="rank"):
        jq.augment(jax.random.key(0), jnp.zeros((8, 8, 1)), 1, False)
    with pytest.raises(AssertionError, match="rank"):
        jq.delta_at(jq.stack_regimes([jq.delta_regime("log", 0.1, 1.0, 0.5)] * 2), 1)  # stacked: vmap it


@pytest.mark.parametrize("changes", [{"base_width": 2.5}, {"blocks_per_stage": NAN}, {"inflation": True}])
def test_model_config_rejects_non_integer_sizes(changes):
    with pytest.raises(ValueError, match="must be an integer"):
        dataclasses.replace(jq.ModelConfig(), **changes)


@pytest.mark.parametrize("seed", [NAN, 1.5, -1, True])
def test_sweep_member_seed_must_be_a_non_negative_integer(seed):
    with pytest.raises(ValueError, match="seed"):
        jq.SweepMember(seed=seed)
