"""Packing formats (exact round trips, known bytes), ANS size, and export/load of whole models."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxquant as jq
from jaxquant.export import decode_codes, encode_codes
from tests.jaxquant.conftest import TINY

ternary_arrays = st.lists(st.sampled_from([-1, 0, 1]), max_size=300).map(lambda c: np.array(c, np.int8))


def test_2bit_and_base3_known_bytes():
    codes = np.array([-1, 0, 1, 1, 0, -1, 1], np.int8)  # symbols 0 1 2 2 1 0 2
    # 2-bit, first symbol lowest: 0 | 1<<2 | 2<<4 | 2<<6 = 164; then 1 | 0<<2 | 2<<4 = 33
    np.testing.assert_array_equal(jq.pack_2bit(codes), [164, 33])
    # base 3, least significant first: 0 + 3 + 18 + 54 + 81 = 156; then 0 + 6 = 6
    np.testing.assert_array_equal(jq.pack_base3(codes), [156, 6])


@settings(max_examples=60, deadline=None)
@given(ternary_arrays)
def test_packing_round_trips_exactly(codes):
    np.testing.assert_array_equal(jq.unpack_2bit(jq.pack_2bit(codes), codes.size), codes)
    np.testing.assert_array_equal(jq.unpack_base3(jq.pack_base3(codes), codes.size), codes)
    assert jq.pack_2bit(codes).size == -(-codes.size // 4) and jq.pack_base3(codes).size == -(-codes.size // 5)


@settings(max_examples=30, deadline=None)
@given(ternary_arrays)
def test_ans_round_trips_exactly(codes):
    pytest.importorskip("constriction")  # the "ans" format's coder (extra `compress`)
    words, counts = jq.ans_encode(codes)
    np.testing.assert_array_equal(jq.ans_decode(words, counts, codes.size), codes)
    for fmt in jq.FORMATS:
        np.testing.assert_array_equal(decode_codes(encode_codes(codes, fmt), fmt, codes.size), codes)


def test_ans_size_approaches_the_entropy():
    pytest.importorskip("constriction")
    rng = np.random.default_rng(0)
    codes = rng.choice(np.array([-1, 0, 1], np.int8), size=200_000, p=[0.05, 0.9, 0.05])
    words, counts = jq.ans_encode(codes)
    p = counts / counts.sum()
    entropy_bits = -np.sum(p * np.log2(p)) * codes.size
    assert entropy_bits <= words.size * 32 <= 1.01 * entropy_bits + 64


def test_invalid_codes_and_streams_are_rejected():
    with pytest.raises(ValueError, match="integers in"):
        jq.pack_2bit(np.array([0, 2]))
    with pytest.raises(ValueError, match="corrupt base-3"):
        jq.unpack_base3(np.array([255], np.uint8), 5)
    with pytest.raises(ValueError, match="do not add up"):
        jq.ans_decode(np.zeros(1, np.uint32), np.array([1, 1, 1]), 4)
    with pytest.raises(ValueError, match="unknown export format"):
        encode_codes(np.zeros(3, np.int8), "zip")


def test_compression_report_against_hand_counts():
    pytest.importorskip("constriction")  # the report sizes the "ans" format too
    codes = {"a": np.array([0, 0, 0, 0, 0, 0, 1, -1], np.int8), "b": np.array([1, -1] * 4, np.int8)}
    report = jq.compression_report(codes)
    # pooled p = (5/16, 6/16, 5/16); layer entropies: a = 1.061278 (1/8, 6/8, 1/8), b = 1
    pooled = -(2 * 5 / 16 * np.log2(5 / 16) + 6 / 16 * np.log2(6 / 16))
    np.testing.assert_allclose([report["entropy"], report["layer_entropy"]], [pooled, (1.0612781 + 1) / 2], rtol=1e-6)
    assert report["weights"] == 16 and report["2bit"] == 2.0 and report["base3"] == 16 * 2 / 16


def test_without_constriction_the_report_sizes_the_packed_formats_only(monkeypatch):
    """A plain install (no extra `compress`): "ans" is left out, the packed formats are still sized by hand."""
    import importlib.util

    find_spec = importlib.util.find_spec
    hidden = lambda name, *args: None if name == "constriction" else find_spec(name, *args)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", hidden)
    assert jq.available_formats() == ("2bit", "base3")
    report = jq.compression_report({"a": np.array([1, 0, -1, 0, 0], np.int8)})  # 5 weights: 2 bytes, 1 byte
    assert "ans" not in report and report["2bit"] == 16 / 5 and report["base3"] == 8 / 5


def test_exported_model_reproduces_the_trained_accuracy(tmp_path, tiny_digits, trained_population):
    member = 1
    variables = jax.tree.map(
        lambda leaf: leaf[member], {"params": trained_population.state.params,
                                    "batch_stats": trained_population.state.batch_stats}
    )
    delta = float(trained_population.history.delta[-1, member])
    pytest.importorskip("constriction")  # the "ans" format's coder (extra `compress`)
    report = jq.export_model(tmp_path / "model.npz", variables, TINY.model, delta, fmt="ans")
    model, loaded = jq.load_model(tmp_path / "model.npz")
    mean, std = jnp.asarray(tiny_digits.mean), jnp.asarray(tiny_digits.std)
    images = jq.normalize(jnp.asarray(tiny_digits.test_images), mean, std)
    logits = jax.jit(lambda v, x: model.apply(v, x, train=False))(loaded, images)
    accuracy = float(jq.accuracy(logits, jnp.asarray(tiny_digits.test_labels)))
    assert accuracy == float(trained_population.history.test_accuracy[-1, member])
    codes = jq.quantized_codes(variables["params"], TINY.model.quant, delta)
    assert report["weights"] == sum(c.size for c in codes.values())
    assert report["bits_per_weight"] <= 1.05 * float(jq.compression_report(codes)["layer_entropy"]) + 0.05


QUANTIZED_KERNEL = {
    "binary": lambda latent, layer: jq.binarize(latent),
    "ternary": lambda latent, layer: jq.ternarize(latent, 0.5),
    "twn": lambda latent, layer: jq.twn_ternarize(latent),
    "ttq": lambda latent, layer: jq.ttq_ternarize(latent, layer["w_pos"], layer["w_neg"], 0.2),
}


@pytest.mark.parametrize("kind, fmt", [("binary", "2bit"), ("ternary", "base3"), ("twn", "ans"), ("ttq", "2bit")])
def test_load_model_restores_the_kernels_every_quantizer_computes_with(tmp_path, kind, fmt):
    if fmt == "ans":
        pytest.importorskip("constriction")  # the "ans" format's coder (extra `compress`)
    config = dataclasses.replace(TINY.model, quant=jq.QuantConfig(kind, ttq_threshold=0.2))
    images = jnp.zeros((1, 8, 8, 1), jnp.float32)
    shapes = jax.eval_shape(lambda: jq.ResNet(config).init(jax.random.key(0), images, delta=0.5, train=False))
    rng = np.random.default_rng(1)
    variables = jax.tree.map(lambda leaf: jnp.asarray(rng.uniform(-1, 1, leaf.shape), jnp.float32), shapes)
    jq.export_model(tmp_path / "m.npz", variables, config, 0.5, fmt=fmt)
    loaded_model, loaded = jq.load_model(tmp_path / "m.npz")
    assert loaded_model.config == dataclasses.replace(config, quant=dataclasses.replace(config.quant, kind="fp"))
    flat = jax.tree_util.tree_flatten_with_path(variables["params"])[0]
    restored = {
        jax.tree_util.keystr(path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(loaded["params"])[0]
    }
    for path, leaf in flat:
        name = jax.tree_util.keystr(path)
        if name.endswith("['latent_kernel']"):
            layer = variables["params"]
            for entry in path[:-1]:
                layer = layer[entry.key]
            expected = QUANTIZED_KERNEL[kind](leaf, layer)
            np.testing.assert_array_equal(restored[name.replace("latent_kernel", "kernel")], expected, err_msg=name)
        elif not name.endswith(("['w_pos']", "['w_neg']")):
            np.testing.assert_array_equal(restored[name], leaf, err_msg=name)
    chex.assert_trees_all_equal(loaded["batch_stats"], variables["batch_stats"])


def test_export_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no exported model"):
        jq.load_model(tmp_path / "missing.npz")
    fp = dataclasses.replace(TINY.model, quant=jq.QuantConfig("fp"))
    with pytest.raises(ValueError, match="full-precision"):
        jq.export_model(tmp_path / "fp.npz", {"params": {}, "batch_stats": {}}, fp, 0.1)
