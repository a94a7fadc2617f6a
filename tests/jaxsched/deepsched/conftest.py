"""Shared fixtures: one tiny HEFT-labelled dataset and one short training run for the whole module."""

import pytest

from jaxsched.deepsched import configs, fit, load_or_build


@pytest.fixture(scope="session")
def test_config():
    return configs.test()


@pytest.fixture(scope="session")
def splits(test_config, tmp_path_factory):
    return load_or_build(test_config.data, tmp_path_factory.mktemp("data"), progress=False)


@pytest.fixture(scope="session")
def trained(test_config, splits, tmp_path_factory):
    """(config, checkpoint directory, FitResult) of a 3-epoch run of the feedback variant."""
    directory = tmp_path_factory.mktemp("checkpoints") / "feedback"
    result = fit(test_config, splits["train"].data, splits["val"].data, directory, progress=False)
    return test_config, directory, result
