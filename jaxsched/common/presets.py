"""Named configurations of an experiment: every experiment names its presets `test` (tiny, for CI), `default`
and `full` (for a GPU), plus any further name it needs, as a dict of frozen config instances."""

from __future__ import annotations

from typing import Mapping, TypeVar

Config = TypeVar("Config")

STANDARD_NAMES = ("test", "default", "full")


def named_config(configs: Mapping[str, Config], name: str) -> Config:
    """The configuration called `name`; ValueError listing the known names when there is none."""
    if name not in configs:
        raise ValueError(f"unknown config {name!r}; choose one of {', '.join(configs)}")
    return configs[name]
