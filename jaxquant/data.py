"""Image classification data: CIFAR-10 from local files, scikit-learn digits as the offline default.

Datasets stay in host memory in their raw dtype (uint8 for CIFAR-10). Normalisation and
augmentation (zero padding plus a random crop, optional horizontal flip) are pure functions that
run on device inside the jitted training step.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np

CIFAR10_ENV = "JAXQUANT_CIFAR10"
CIFAR10_FILES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)
DATASETS = ("digits", "cifar10")


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """A train/test split with per-channel statistics and its augmentation settings."""

    name: str
    train_images: np.ndarray  # [N, H, W, C] raw values
    train_labels: np.ndarray  # [N] int32
    test_images: np.ndarray  # [M, H, W, C]
    test_labels: np.ndarray  # [M] int32
    mean: np.ndarray  # [C] float32, raw units
    std: np.ndarray  # [C] float32, raw units
    num_classes: int
    pad: int  # augmentation: zero padding before the random crop (0: no crop)
    flip: bool  # augmentation: random horizontal flip

    def __post_init__(self):
        for split in ("train", "test"):
            images, labels = getattr(self, f"{split}_images"), getattr(self, f"{split}_labels")
            if images.ndim != 4 or labels.shape != images.shape[:1]:
                raise ValueError(
                    f"{self.name}: {split} images must be [N, H, W, C] with labels [N], "
                    f"got {images.shape} and {labels.shape}"
                )
            if labels.size and (labels.min() < 0 or labels.max() >= self.num_classes):
                raise ValueError(f"{self.name}: {split} labels outside [0, {self.num_classes})")
        if self.train_images.shape[1:] != self.test_images.shape[1:]:
            raise ValueError(
                f"{self.name}: train and test image shapes differ: "
                f"{self.train_images.shape[1:]} vs {self.test_images.shape[1:]}"
            )
        channels = self.train_images.shape[-1]
        if self.mean.shape != (channels,) or self.std.shape != (channels,) or np.any(self.std <= 0):
            raise ValueError(f"{self.name}: mean/std must be [{channels}] with std > 0")

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.train_images.shape[1:])


def _channel_stats(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pixels = images.reshape(-1, images.shape[-1]).astype(np.float64)
    return pixels.mean(0).astype(np.float32), pixels.std(0).astype(np.float32)


def load_digits(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """scikit-learn's 8x8 handwritten digits (1797 images, shipped with the package).

    A stratified split with `test_fraction` of each class held out. Augmentation: pad 1 and crop
    (no flip: a mirrored digit is a different symbol).
    """
    try:
        from sklearn.datasets import load_digits as sklearn_digits
        from sklearn.model_selection import train_test_split
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the digits dataset needs scikit-learn: pip install 'jax-research-systems[data]'"
        ) from error
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    digits = sklearn_digits()
    images = digits.images.astype(np.float32)[..., None]  # [1797, 8, 8, 1], values 0..16
    labels = digits.target.astype(np.int32)
    train_x, test_x, train_y, test_y = train_test_split(
        images, labels, test_size=test_fraction, stratify=labels, random_state=seed
    )
    mean, std = _channel_stats(train_x)
    return Dataset("digits", train_x, train_y, test_x, test_y, mean, std, 10, pad=1, flip=False)


def _cifar10_dir(path: str | os.PathLike | None) -> Path:
    if path is None:
        path = os.environ.get(CIFAR10_ENV)
    if path is None:
        raise ValueError(
            f"CIFAR-10 needs a directory: pass it explicitly (--cifar-dir) or set ${CIFAR10_ENV} to "
            f"the 'cifar-10-batches-py' directory holding {', '.join(CIFAR10_FILES)}"
        )
    root = Path(path).expanduser()
    if (root / "cifar-10-batches-py").is_dir():
        root = root / "cifar-10-batches-py"
    missing = [name for name in CIFAR10_FILES if not (root / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"CIFAR-10 directory {root} lacks {', '.join(missing)}; expected the python version "
            f"of CIFAR-10 ('cifar-10-batches-py' with {', '.join(CIFAR10_FILES)})"
        )
    return root


def _read_cifar_batch(file: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(file, "rb") as handle:
            batch = pickle.load(handle, encoding="bytes")
        data = np.asarray(batch[b"data"], np.uint8)
        labels = np.asarray(batch[b"labels"], np.int32)
    except OSError:
        raise
    except Exception as error:  # pickle raises many types for an empty, truncated or foreign file
        raise ValueError(f"{file}: not a readable CIFAR-10 batch ({error!r})") from error
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or labels.shape != data.shape[:1]:
        raise ValueError(f"{file}: not a CIFAR-10 batch (data {data.shape}, labels {labels.shape})")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


def load_cifar10(path: str | os.PathLike | None = None) -> Dataset:
    """CIFAR-10 from local `cifar-10-batches-py` files (path argument or $JAXQUANT_CIFAR10).

    Augmentation as in the ResNet paper: 4-pixel zero padding, random 32x32 crop, random flip.
    """
    root = _cifar10_dir(path)
    train = [_read_cifar_batch(root / name) for name in CIFAR10_FILES[:-1]]
    train_x = np.concatenate([images for images, _ in train])
    train_y = np.concatenate([labels for _, labels in train])
    test_x, test_y = _read_cifar_batch(root / CIFAR10_FILES[-1])
    mean, std = _channel_stats(train_x)
    return Dataset("cifar10", train_x, train_y, test_x, test_y, mean, std, 10, pad=4, flip=True)


def load_dataset(name: str, path: str | os.PathLike | None = None) -> Dataset:
    """Load a dataset by name ("digits" or "cifar10"; `path` is the CIFAR-10 directory)."""
    if name == "digits":
        return load_digits()
    if name == "cifar10":
        return load_cifar10(path)
    raise ValueError(f"unknown dataset {name!r}; expected one of {DATASETS}")


def normalize(images: jax.Array, mean: jax.Array, std: jax.Array) -> jax.Array:
    """(images - mean) / std per channel, as float32; images [..., C]."""
    shape = (1,) * (images.ndim - 1) + (-1,)
    return (images.astype(jnp.float32) - mean.reshape(shape)) / std.reshape(shape)


def augment(key: jax.Array, images: jax.Array, pad: int, flip: bool) -> jax.Array:
    """Random crop after `pad` pixels of zero padding, and a random horizontal flip if `flip`.

    images: [B, H, W, C]; every image gets its own crop offset and flip.
    """
    chex.assert_rank(images, 4)
    batch, height, width, channels = images.shape
    crop_key, flip_key = jax.random.split(key)
    if pad > 0:
        padded = jnp.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        offsets = jax.random.randint(crop_key, (batch, 2), 0, 2 * pad + 1)
        images = jax.vmap(
            lambda image, offset: jax.lax.dynamic_slice(
                image, (offset[0], offset[1], 0), (height, width, channels)
            )
        )(padded, offsets)
    if flip:
        mirror = jax.random.bernoulli(flip_key, 0.5, (batch, 1, 1, 1))
        images = jnp.where(mirror, images[:, :, ::-1, :], images)
    return images
