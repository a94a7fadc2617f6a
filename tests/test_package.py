"""The project's face as a user first meets it: each package says its version (the distribution's, from
pyproject.toml), and the license file is the one pyproject.toml declares."""

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize("package", ["jaxsched", "jaxquant", "jaxgraph"])
def test_each_package_has_the_distribution_version(package):
    assert __import__(package).__version__ == PROJECT["version"]


def test_license_file_is_the_declared_license():
    assert PROJECT["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
