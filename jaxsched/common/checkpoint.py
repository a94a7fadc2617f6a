"""Per-epoch orbax checkpoints that a rerun resumes from, shared by every training loop of the library.

Each checkpoint step is a finished epoch and holds a pytree plus a JSON record of the run: its
`identity` (what a checkpoint must match to be resumed: config, seeds, ...) and free `meta` (for
example the metric history). Saves are synchronous, so once `save` returns the epoch survives a
kill (orbax writes to a temporary directory and renames it). Restoring

* raises `ConfigMismatch` (`jaxsched.common.workdir`) naming the differing fields when the directory was
  written by a different run (never mixes runs);
* falls back to the previous intact step when the latest one is damaged (a truncated file, a
  missing item folder) and deletes the damaged later steps, so training redoes only those epochs;
* raises `ValueError` naming the directory when no step is intact.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
import orbax.checkpoint as ocp

from jaxsched.common.workdir import as_json, check_same_config


class Restored(NamedTuple):
    """A restored checkpoint: the epoch (step) it was saved at, its pytree and its JSON `meta`."""

    epoch: int
    tree: Any
    meta: Any


def _as_json(value: Any, what: str) -> Any:
    """`value` as it reads back from JSON; ValueError naming `what` when it is not JSON-serialisable."""
    try:
        return as_json(value)
    except ValueError as error:
        raise ValueError(f"the checkpoint's {what} must be JSON-serialisable: {error}") from error


def _dtype(leaf: Any) -> np.dtype:
    """The dtype of an array leaf, or the one NumPy gives a Python scalar leaf."""
    return leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype


class EpochCheckpointer:
    """Save a pytree after every epoch under `directory`; restore the latest intact one.

    `identity` is any JSON-serialisable description of the run; `restore_latest` refuses checkpoints
    whose identity differs. Pass `identity=None` to read checkpoints of any run (inference loaders).
    Use as a context manager or call `close()`.
    """

    def __init__(self, directory: str | Path, identity: Any = None, max_to_keep: int = 2):
        if max_to_keep < 1:
            raise ValueError(f"max_to_keep must be at least 1, got {max_to_keep}")
        self.directory = Path(directory).expanduser().resolve()
        self.identity = None if identity is None else _as_json(identity, "identity")
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=max_to_keep, create=True, enable_async_checkpointing=False
            ),
        )

    def __enter__(self) -> "EpochCheckpointer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def restore_latest(self, target: Any = None) -> Restored | None:
        """The latest intact checkpoint, or None when the directory holds none.

        `target` is a pytree of arrays or `jax.ShapeDtypeStruct`s giving the structure, shapes and
        dtypes to restore into (None restores the tree as saved). Leaves come back as NumPy arrays:
        orbax restores device arrays committed to a device, and committed inputs would make an
        already compiled function compile again.
        """
        steps = sorted(self.manager.all_steps(), reverse=True)
        if not steps:
            return None
        abstract = None
        if target is not None:
            abstract = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(np.shape(leaf), _dtype(leaf)), target)
        for position, step in enumerate(steps):
            try:
                restored = self.manager.restore(
                    step,
                    args=ocp.args.Composite(tree=ocp.args.StandardRestore(abstract), run=ocp.args.JsonRestore()),
                )
                run = restored["run"]
                tree = restored["tree"]
                if not isinstance(run, dict) or "identity" not in run or tree is None:
                    raise ValueError("incomplete checkpoint")
            except Exception as error:  # orbax and tensorstore raise many types for a damaged step
                warnings.warn(
                    f"checkpoint step {step} in {self.directory} is damaged ({error!r}); trying an older one",
                    stacklevel=2,
                )
                continue
            if self.identity is not None:
                check_same_config(self.directory, run["identity"], self.identity)
            for damaged in steps[:position]:
                self.manager.delete(damaged)
            return Restored(int(step), jax.tree.map(np.asarray, tree), run.get("meta"))
        raise ValueError(f"{self.directory} holds checkpoint steps {sorted(steps)} but none of them is intact")

    def save(self, epoch: int, tree: Any, meta: Any = None) -> None:
        """Write `tree` (and JSON `meta`) as the checkpoint of finished epoch `epoch`; returns when on disk."""
        if self.identity is None:
            raise ValueError("an EpochCheckpointer opened with identity=None is read-only")
        run = {"identity": self.identity, "meta": _as_json(meta, "meta")}
        self.manager.save(epoch, args=ocp.args.Composite(tree=ocp.args.StandardSave(tree), run=ocp.args.JsonSave(run)))
        self.manager.wait_until_finished()

    def close(self) -> None:
        """Release orbax's resources (waits for nothing: saves are synchronous)."""
        self.manager.close()
