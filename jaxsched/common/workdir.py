"""Results folders that a rerun resumes: atomic JSON writes, finished stages kept, another configuration refused.

Every study and long run writes into a workdir opened with `Workdir(path, config)`. The first run records the
configuration in `config.json`; a rerun with the same configuration resumes (each finished stage's JSON is read
back instead of being computed again), and a rerun with another configuration raises `ConfigMismatch` naming
the folder and the differing fields, so results of two configurations are never mixed. Files are written to a
temporary file in the same folder and renamed over the target (`os.replace`), so a kill leaves the old file or
the new one, never half of one. Training loops that resume checkpoint through their workdir too
(`Workdir.checkpointer`: per-epoch orbax checkpoints in the folder, tied to the configuration it records), so every
resumable run refuses another configuration before it computes anything.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from jaxsched.common.checkpoint import EpochCheckpointer

CONFIG_FILE = "config.json"


class ConfigMismatch(ValueError):
    """A workdir or checkpoint holds results of another configuration than the one asked to resume."""

    def __init__(self, directory: str | os.PathLike, fields: list[str]):
        self.directory, self.fields = Path(directory), fields
        shown = ", ".join(fields[:8]) + (f" and {len(fields) - 8} more" if len(fields) > 8 else "")
        super().__init__(f"{directory} holds results of a different run (its configuration differs in {shown}); "
                         "use another workdir or delete it")


def as_json(value: Any) -> Any:
    """`value` (dataclasses, tuples, NumPy scalars...) as it reads back from JSON, for comparisons and writing;
    ValueError when it is not JSON-serialisable."""
    try:
        return json.loads(json.dumps(value, default=_json_default))
    except (TypeError, ValueError) as error:
        raise ValueError(f"not JSON-serialisable: {error}") from error


def _json_default(value: Any) -> Any:
    """Dataclasses as dicts, NumPy and JAX scalars as Python numbers (json's `default` hook)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def differing_fields(saved: Any, wanted: Any, prefix: str = "") -> list[str]:
    """Dotted names of the fields where two JSON values differ (the root is named `config`)."""
    if isinstance(saved, dict) and isinstance(wanted, dict):
        return [name for key in sorted(set(saved) | set(wanted), key=str)
                for name in differing_fields(saved.get(key), wanted.get(key), f"{prefix}.{key}" if prefix else key)]
    return [] if saved == wanted else [prefix or "config"]


def check_same_config(directory: str | os.PathLike, saved: Any, wanted: Any) -> None:
    """ConfigMismatch naming `directory` and the differing fields unless the two configurations are equal."""
    fields = differing_fields(as_json(saved), as_json(wanted))
    if fields:
        raise ConfigMismatch(directory, fields)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` atomically: a temporary file in the same folder, then `os.replace`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, value: Any) -> None:
    """Write `value` as JSON to `path` atomically (see `write_text`)."""
    write_text(path, json.dumps(as_json(value), indent=1))


def read_json(path: str | os.PathLike) -> Any | None:
    """The JSON in `path`, or None when there is no such file."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON ({error}); delete it to recompute it") from error


class Workdir:
    """A results folder tied to one configuration: `stage` computes each named result once.

    Opening creates the folder and records `config` (any JSON-serialisable value or dataclass) in `config.json`,
    or raises `ConfigMismatch` when the folder already records another configuration.
    """

    def __init__(self, path: str | os.PathLike, config: Any):
        self.path = Path(path)
        self.config = as_json(config)
        saved = read_json(self.path / CONFIG_FILE)
        if saved is None:
            write_json(self.path / CONFIG_FILE, self.config)
        else:
            check_same_config(self.path, saved, self.config)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def checkpointer(self, max_to_keep: int = 2) -> EpochCheckpointer:
        """Per-epoch orbax checkpoints of a training loop in this folder (`jaxsched.common.checkpoint`), each step
        recording this workdir's configuration as the identity a resume must match; orbax is imported here, so
        opening a workdir stays light."""
        from jaxsched.common.checkpoint import EpochCheckpointer

        return EpochCheckpointer(self.path, self.config, max_to_keep)

    def stage(self, name: str, compute: Callable[[], Any]) -> Any:
        """The JSON result saved under `name` (a path inside the workdir), or `compute()` saved there first."""
        done = read_json(self.path / name)
        if done is None:
            done = as_json(compute())
            write_json(self.path / name, done)
        return done
