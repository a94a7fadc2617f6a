"""Shared fixtures: one tiny HEFT-labelled dataset and one short training run for the whole session,
laid out as `train_and_evaluate` lays out its work directory (data/, checkpoints/<variant>/)."""

import pytest

from jaxsched.deepsched import configs, fit, load_or_build


@pytest.fixture(scope="session")
def test_config():
    return configs.CONFIGS["test"]


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("deepsched")


@pytest.fixture(scope="session")
def splits(test_config, workdir):
    return load_or_build(test_config.data, workdir / "data", progress=False)


@pytest.fixture(scope="session")
def trained(test_config, splits, workdir):
    """(config, checkpoint directory, FitResult) of a 3-epoch run of the feedback variant."""
    directory = workdir / "checkpoints" / "feedback"
    result = fit(test_config, splits["train"].data, splits["val"].data, directory, progress=False)
    return test_config, directory, result
