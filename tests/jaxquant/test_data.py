"""Datasets (digits, CIFAR-10 files, validation) and on-device augmentation."""

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxquant import Dataset, augment, load_cifar10, load_dataset, load_digits, normalize
from jaxquant.data import CIFAR10_FILES


def test_normalize_per_channel():
    images = jnp.array([[[[0.0, 10.0], [2.0, 30.0]]]], jnp.float32)  # [1, 1, 2, 2]
    out = normalize(images, jnp.array([1.0, 10.0], jnp.float32), jnp.array([1.0, 10.0], jnp.float32))
    np.testing.assert_allclose(out, [[[[-1.0, 0.0], [1.0, 2.0]]]])


def test_augment_without_padding_or_flip_is_identity():
    images = jnp.arange(2 * 3 * 3 * 1, dtype=jnp.float32).reshape(2, 3, 3, 1)
    np.testing.assert_array_equal(augment(jax.random.key(0), images, 0, False), images)


def test_random_crops_are_windows_of_the_zero_padded_image():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(16, 4, 4, 2)).astype(np.float32)
    out = np.asarray(augment(jax.random.key(1), jnp.asarray(images), 2, False))
    padded = np.pad(images, ((0, 0), (2, 2), (2, 2), (0, 0)))
    offsets = set()
    for image, crop in zip(padded, out):
        matches = [(i, j) for i in range(5) for j in range(5) if np.array_equal(image[i:i + 4, j:j + 4], crop)]
        assert matches, "crop is not a window of the padded image"
        offsets.add(matches[0])
    assert len(offsets) > 3  # offsets vary across the batch


def test_random_flips_mirror_some_images():
    images = np.random.default_rng(0).normal(size=(32, 3, 3, 1)).astype(np.float32)
    out = np.asarray(augment(jax.random.key(2), jnp.asarray(images), 0, True))
    flipped = [np.array_equal(o, i[:, ::-1]) for o, i in zip(out, images)]
    kept = [np.array_equal(o, i) for o, i in zip(out, images)]
    assert all(f or k for f, k in zip(flipped, kept)) and 0 < sum(flipped) < 32


def test_digits_split_is_stratified():
    digits = load_digits()
    assert digits.train_images.shape == (1437, 8, 8, 1) and digits.test_images.shape == (360, 8, 8, 1)
    assert digits.train_images.dtype == np.float32 and digits.train_labels.dtype == np.int32
    assert set(np.bincount(digits.test_labels, minlength=10)) <= {35, 36, 37}
    assert (digits.pad, digits.flip, digits.num_classes) == (1, False, 10)
    assert load_dataset("digits").train_labels.tolist() == digits.train_labels.tolist()


def write_fake_cifar(directory, images_per_batch=2):
    directory.mkdir()
    for index, name in enumerate(CIFAR10_FILES):
        # pixel value = channel * 100 + row (so the NHWC transpose can be checked)
        rows = np.arange(32, dtype=np.uint8)[:, None]
        channel_planes = [np.full((32, 32), 100 * c, np.uint8) + rows for c in range(3)]
        data = np.stack([np.stack(channel_planes).reshape(-1)] * images_per_batch)
        with open(directory / name, "wb") as handle:
            pickle.dump({b"data": data, b"labels": [index % 10] * images_per_batch}, handle)


def test_cifar10_loader_reads_the_python_batches(tmp_path):
    write_fake_cifar(tmp_path / "cifar-10-batches-py")
    cifar = load_cifar10(tmp_path)  # the parent directory is accepted too
    assert cifar.train_images.shape == (10, 32, 32, 3) and cifar.test_images.shape == (2, 32, 32, 3)
    assert cifar.train_images[0, 5, 7].tolist() == [5, 105, 205]
    assert cifar.test_labels.tolist() == [5, 5] and (cifar.pad, cifar.flip) == (4, True)


def test_cifar10_without_a_path_names_the_environment_variable(monkeypatch):
    monkeypatch.delenv("JAXQUANT_CIFAR10", raising=False)
    with pytest.raises(ValueError, match="JAXQUANT_CIFAR10"):
        load_cifar10()


def test_cifar10_missing_files_are_named(tmp_path, monkeypatch):
    (tmp_path / "data_batch_1").write_bytes(b"")
    monkeypatch.setenv("JAXQUANT_CIFAR10", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"lacks data_batch_2.*test_batch") as error:
        load_cifar10()
    assert str(tmp_path) in str(error.value)


def test_dataset_validation():
    images = np.zeros((4, 2, 2, 1), np.float32)
    labels = np.array([0, 1, 2, 3], np.int32)
    ones = np.ones(1, np.float32)
    with pytest.raises(ValueError, match="labels outside"):
        Dataset("toy", images, labels, images, labels, ones, ones, num_classes=3, pad=0, flip=False)
    with pytest.raises(ValueError, match=r"\[N, H, W, C\]"):
        Dataset("toy", images[..., 0], labels, images, labels, ones, ones, num_classes=4, pad=0, flip=False)
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset("mnist")
