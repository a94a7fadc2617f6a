"""Compressed export of trained ternary models, and the loader that restores them.

The quantized weights of each layer are stored as their codes in {-1, 0, +1} in one of three
formats (`FORMATS`):
  2bit   four codes per byte (2 bits/weight);
  base3  five codes per byte, since 3^5 = 243 <= 256 (1.6 bits/weight);
  ans    an asymmetric-numeral-systems stream (`constriction`, extra "compress") under the layer's
         empirical distribution, whose counts are stored with it: close to the entropy bound.
Everything else (BatchNorm, full-precision layers, TWN/TTQ scales) is stored as float32. The file
is an uncompressed `.npz` with a JSON header. `load_model` rebuilds a full-precision `ResNet`
whose kernels are the dequantized weights, bit-identical to what the trained model computes.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from jaxquant.layers import LATENT_KERNEL
from jaxquant.metrics import entropy
from jaxquant.quantize import QuantConfig, code, ttq_levels, twn_threshold_and_scale
from jaxquant.resnet import ModelConfig, ResNet

FORMATS = ("2bit", "base3", "ans")
_VERSION = 1


def available_formats() -> tuple[str, ...]:
    """The formats of `FORMATS` this install can write: "ans" needs `constriction` (extra "compress")."""
    has_ans = importlib.util.find_spec("constriction") is not None
    return tuple(fmt for fmt in FORMATS if fmt != "ans" or has_ans)


def _symbols(codes) -> np.ndarray:
    """Codes {-1, 0, +1} as symbols {0, 1, 2} (uint8), flattened; rejects anything else."""
    codes = np.asarray(codes).reshape(-1)
    if codes.size and (codes.min() < -1 or codes.max() > 1 or not np.issubdtype(codes.dtype, np.integer)):
        raise ValueError("ternary codes must be integers in {-1, 0, +1}")
    return (codes.astype(np.int16) + 1).astype(np.uint8)


def _codes(symbols: np.ndarray, count: int) -> np.ndarray:
    return symbols[:count].astype(np.int8) - 1


def pack_2bit(codes) -> np.ndarray:
    """Four codes per byte, first code in the lowest bits; returns uint8 [ceil(n / 4)]."""
    symbols = _symbols(codes)
    padded = np.zeros(-(-symbols.size // 4) * 4, np.uint8)
    padded[: symbols.size] = symbols
    groups = padded.reshape(-1, 4)
    return (groups[:, 0] | groups[:, 1] << 2 | groups[:, 2] << 4 | groups[:, 3] << 6).astype(np.uint8)


def unpack_2bit(packed: np.ndarray, count: int) -> np.ndarray:
    """Inverse of `pack_2bit`: the first `count` codes as int8."""
    packed = np.asarray(packed, np.uint8)
    symbols = np.stack([(packed >> shift) & 3 for shift in (0, 2, 4, 6)], axis=1).reshape(-1)
    if count > symbols.size or np.any(symbols[:count] > 2):
        raise ValueError("corrupt 2-bit stream (too short or holds symbol 3)")
    return _codes(symbols, count)


_BASE3_WEIGHTS = np.array([1, 3, 9, 27, 81], np.uint8)


def pack_base3(codes) -> np.ndarray:
    """Five codes per byte as base-3 digits (least significant first); uint8 [ceil(n / 5)]."""
    symbols = _symbols(codes)
    padded = np.zeros(-(-symbols.size // 5) * 5, np.uint8)
    padded[: symbols.size] = symbols
    return (padded.reshape(-1, 5).astype(np.uint16) @ _BASE3_WEIGHTS.astype(np.uint16)).astype(np.uint8)


def unpack_base3(packed: np.ndarray, count: int) -> np.ndarray:
    """Inverse of `pack_base3`: the first `count` codes as int8."""
    packed = np.asarray(packed, np.uint8)
    if np.any(packed > 242) or count > 5 * packed.size:
        raise ValueError("corrupt base-3 stream (byte above 242 or too short)")
    digits = (packed[:, None] // _BASE3_WEIGHTS[None, :]) % 3
    return _codes(digits.reshape(-1), count)


def _constriction():
    try:
        import constriction
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the 'ans' format needs constriction: pip install 'jax-research-systems[compress]'"
        ) from error
    return constriction


def _categorical(counts: np.ndarray):
    counts = np.asarray(counts, np.float64)
    return _constriction().stream.model.Categorical(counts / counts.sum(), perfect=False)


def ans_encode(codes) -> tuple[np.ndarray, np.ndarray]:
    """ANS-code `codes` under their own empirical distribution: (uint32 words, counts [3])."""
    symbols = _symbols(codes).astype(np.int32)
    counts = np.bincount(symbols, minlength=3).astype(np.int64)
    if symbols.size == 0:
        return np.zeros(0, np.uint32), counts
    coder = _constriction().stream.stack.AnsCoder()
    coder.encode_reverse(symbols, _categorical(counts))
    return coder.get_compressed().astype(np.uint32), counts


def ans_decode(words: np.ndarray, counts: np.ndarray, count: int) -> np.ndarray:
    """Inverse of `ans_encode`: `count` codes as int8."""
    if count == 0:
        return np.zeros(0, np.int8)
    if int(np.sum(counts)) != count:
        raise ValueError(f"symbol counts {list(counts)} do not add up to {count} codes")
    coder = _constriction().stream.stack.AnsCoder(np.asarray(words, np.uint32))
    return _codes(np.asarray(coder.decode(_categorical(counts), count)), count)


def encode_codes(codes, fmt: str) -> dict[str, np.ndarray]:
    """Encode codes in format `fmt`; returns the arrays to store (payload, and counts for ans)."""
    if fmt == "2bit":
        return {"payload": pack_2bit(codes)}
    if fmt == "base3":
        return {"payload": pack_base3(codes)}
    if fmt == "ans":
        words, counts = ans_encode(codes)
        return {"payload": words, "counts": counts}
    raise ValueError(f"unknown export format {fmt!r}; expected one of {FORMATS}")


def decode_codes(stored: dict[str, np.ndarray], fmt: str, count: int) -> np.ndarray:
    """Inverse of `encode_codes`."""
    if fmt == "2bit":
        return unpack_2bit(stored["payload"], count)
    if fmt == "base3":
        return unpack_base3(stored["payload"], count)
    if fmt == "ans":
        return ans_decode(stored["payload"], stored["counts"], count)
    raise ValueError(f"unknown export format {fmt!r}; expected one of {FORMATS}")


def payload_bits(stored: dict[str, np.ndarray]) -> int:
    """Size of the encoded codes in bits (the ANS counts are header, reported separately)."""
    return int(stored["payload"].nbytes) * 8


def _dequantize(kind: str, codes: np.ndarray, scales: dict[str, jax.Array]) -> jax.Array:
    """The kernel a trained layer computes with, from its codes and scales (same float ops)."""
    ternary = jnp.asarray(codes, jnp.float32)
    if kind in ("binary", "ternary"):
        return ternary
    if kind == "twn":
        return scales["alpha"] * ternary
    if kind == "ttq":
        return ttq_levels(ternary, scales["w_pos"], scales["w_neg"])
    raise ValueError(f"quantizer kind {kind!r} has no quantized weights to export")


def compression_report(codes: dict[str, Any]) -> dict[str, float]:
    """Bits per weight of every format this install can write (`available_formats`) for {layer: codes}, against
    the entropy.

    `entropy` pools all layers (the paper's metric); `layer_entropy` is the weighted mean of the
    per-layer entropies, the bound for a coder with one distribution per layer as ours.
    """
    weights = sum(int(np.size(layer_codes)) for layer_codes in codes.values())
    if weights == 0:
        raise ValueError("no quantized weights to report on")
    layer_bits = sum(float(entropy(layer_codes)) * np.size(layer_codes) for layer_codes in codes.values())
    report = {"weights": weights, "entropy": float(entropy(codes)), "layer_entropy": layer_bits / weights}
    for fmt in available_formats():
        bits = sum(payload_bits(encode_codes(layer_codes, fmt)) for layer_codes in codes.values())
        report[fmt] = bits / weights
    return report


def export_model(
    path: str | Path,
    variables: dict[str, Any],
    config: ModelConfig,
    delta: float,
    fmt: str = "ans",
) -> dict[str, float]:
    """Write one trained model (`{"params", "batch_stats"}`) to `path` as an .npz archive.

    Returns the number of quantized weights, the bits/weight of their stored codes and the file
    size in bytes.
    """
    kind = config.quant.kind
    if kind == "fp":
        raise ValueError("a full-precision model has no quantized weights to export")
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; expected one of {FORMATS}")
    if isinstance(delta, (bool, str)) or np.ndim(delta) != 0 or not 0 <= float(delta) < 1:
        raise ValueError(f"export delta must be a number in [0, 1) (latent weights live in [-1, 1]), got {delta!r}")
    params = traverse_util.flatten_dict(jax.device_get(variables["params"]), sep="/")
    stats = traverse_util.flatten_dict(jax.device_get(variables["batch_stats"]), sep="/")
    suffix = "/" + LATENT_KERNEL
    arrays = {f"params/{name}": np.asarray(value, np.float32)
              for name, value in params.items() if not name.endswith(suffix)}
    arrays.update({f"batch_stats/{name}": np.asarray(value, np.float32) for name, value in stats.items()})
    layers, weights, bits = [], 0, 0
    for name, latent in params.items():
        if not name.endswith(suffix):
            continue
        layer = name[: -len(suffix)]
        codes = np.asarray(code(kind, jnp.asarray(latent), delta, config.quant.ttq_threshold))
        if kind == "twn":  # alpha is a function of the latent weights, which are not stored
            arrays[f"scales/{layer}/alpha"] = np.asarray(twn_threshold_and_scale(jnp.asarray(latent))[1])
        stored = encode_codes(codes, fmt)
        arrays.update({f"codes/{layer}/{key}": value for key, value in stored.items()})
        layers.append({"layer": layer, "shape": list(latent.shape)})
        weights, bits = weights + codes.size, bits + payload_bits(stored)
    header = {"version": _VERSION, "format": fmt, "model": dataclasses.asdict(config), "layers": layers}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    path = Path(path)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    return {"weights": weights, "bits_per_weight": bits / weights, "file_bytes": path.stat().st_size}


def _stored(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {name[len(prefix):]: value for name, value in arrays.items() if name.startswith(prefix)}


def load_model(path: str | Path) -> tuple[ResNet, dict[str, Any]]:
    """Read an exported model: (full-precision ResNet, variables) ready for `model.apply`.

    The kernels are the dequantized weights, so `model.apply(variables, images, train=False)`
    reproduces the trained model's predictions.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no exported model at {path}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception as error:  # zipfile, zlib and NumPy raise many types for a damaged archive
        raise ValueError(f"{path} is not a readable jaxquant export (damaged or not an .npz): {error}") from error
    if "header" not in arrays:
        raise ValueError(f"{path} is not a jaxquant export (no header)")
    try:
        return _build_model(arrays)
    except Exception as error:  # a damaged header or payload surfaces as many types
        raise ValueError(f"{path} is not a valid jaxquant export: {error!r}") from error


def _build_model(arrays: dict[str, np.ndarray]) -> tuple[ResNet, dict[str, Any]]:
    """The model and variables described by an export's arrays (see `load_model`)."""
    header = json.loads(arrays["header"].tobytes().decode())
    if header.get("version") != _VERSION:
        raise ValueError(f"unsupported export version {header.get('version')}")
    model_fields = dict(header["model"])
    quant = QuantConfig(**model_fields.pop("quant"))
    params = {name: jnp.asarray(value) for name, value in _stored(arrays, "params/").items()}
    for layer in header["layers"]:
        name, shape = layer["layer"], tuple(layer["shape"])
        codes = decode_codes(_stored(arrays, f"codes/{name}/"), header["format"], int(np.prod(shape)))
        scales = {key: jnp.asarray(value) for key, value in _stored(arrays, f"scales/{name}/").items()}
        if quant.kind == "ttq":
            scales = {key: params.pop(f"{name}/{key}") for key in ("w_pos", "w_neg")}
        params[f"{name}/kernel"] = _dequantize(quant.kind, codes.reshape(shape), scales)
    config = ModelConfig(**model_fields, quant=dataclasses.replace(quant, kind="fp"))
    variables = {
        "params": traverse_util.unflatten_dict(params, sep="/"),
        "batch_stats": traverse_util.unflatten_dict(
            {name: jnp.asarray(value) for name, value in _stored(arrays, "batch_stats/").items()}, sep="/"
        ),
    }
    return ResNet(config), variables
