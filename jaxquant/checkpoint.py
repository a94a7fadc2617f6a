"""Per-epoch orbax checkpoints that a rerun resumes from.

Each checkpoint step is a finished epoch and holds the training pytree plus a JSON description of
the run. Saves are synchronous, so once `save` returns the epoch survives a kill (orbax writes to
a temporary directory and renames it, so a half-written checkpoint is never restored). Resuming
into a directory written by a different run raises instead of silently mixing runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp


class EpochCheckpointer:
    """Save a pytree after every epoch under `directory`; restore the latest one."""

    def __init__(self, directory: str | Path, identity: dict, max_to_keep: int = 2):
        self.directory = Path(directory).expanduser().resolve()
        # Compare identities after a JSON round trip (tuples become lists, and so on).
        self.identity = json.loads(json.dumps(identity))
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, enable_async_checkpointing=False),
        )

    def restore_latest(self, target: Any) -> tuple[int, Any] | None:
        """(epoch, pytree shaped like `target`) of the latest checkpoint, or None if there is none.

        `target` holds arrays or `jax.ShapeDtypeStruct`s; only shapes, dtypes and structure are used.
        The leaves come back as NumPy arrays: orbax restores device arrays committed to a device,
        and committed inputs would make an already compiled epoch function compile again.
        """
        epoch = self.manager.latest_step()
        if epoch is None:
            return None
        abstract = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(np.shape(leaf), leaf.dtype), target)
        restored = self.manager.restore(
            epoch,
            args=ocp.args.Composite(tree=ocp.args.StandardRestore(abstract), run=ocp.args.JsonRestore()),
        )
        if restored["run"] != self.identity:
            raise ValueError(
                f"{self.directory} holds checkpoints of a different run (config, keys or regimes "
                "differ); use another directory or delete it"
            )
        return epoch, jax.tree.map(np.asarray, restored["tree"])

    def save(self, epoch: int, tree: Any) -> None:
        self.manager.save(
            epoch, args=ocp.args.Composite(tree=ocp.args.StandardSave(tree), run=ocp.args.JsonSave(self.identity))
        )
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.close()
