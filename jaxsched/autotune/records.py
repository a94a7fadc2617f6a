"""The tuning-record database: every measured (workload, configuration, seconds, machine) in one SQLite file.

Autotuning as a service (Stiller 2019, 4.3) keeps what earlier jobs learned: a resubmitted workload
whose best known time already meets its target needs no tuning, and a new workload's cost model
starts from the measurements of similar workloads (same kind, other sizes: the features include
the size) instead of from nothing. The same file keeps each job's progress (rounds finished and its
state after them), so a scheduler killed mid-run resumes without redoing finished rounds.
"""

from __future__ import annotations

import json
import pickle
import sqlite3
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from jaxsched.autotune.workloads import Workload
from jaxsched.common.arguments import number

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    workload TEXT NOT NULL,
    kind TEXT NOT NULL,
    size INTEGER NOT NULL,
    config TEXT NOT NULL,
    seconds REAL NOT NULL,
    machine TEXT NOT NULL,
    recorded REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS by_kind ON records (kind, machine);
CREATE TABLE IF NOT EXISTS progress (
    job TEXT PRIMARY KEY,
    definition TEXT NOT NULL,
    rounds INTEGER NOT NULL,
    state BLOB NOT NULL
);
"""


class Record(NamedTuple):
    """One measurement."""

    workload: Workload
    config: dict[str, int]
    seconds: float
    machine: str


class TuningRecords:
    """A SQLite file of tuning records. Use as a context manager or call `close()`.

    Raises FileNotFoundError when the file's directory does not exist and ValueError naming the path
    when the file is not a tuning-record database.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise FileNotFoundError(f"directory of the tuning-record database does not exist: {self.path.parent}")
        try:
            self.db = sqlite3.connect(self.path, check_same_thread=False)
            # a commit per finished round: in WAL mode without an fsync per commit, it survives a killed
            # process (the fault a resume is for), not a power cut, and costs well under a millisecond
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as error:
            raise ValueError(f"{self.path} is not a tuning-record database: {error}") from None

    def __enter__(self) -> "TuningRecords":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Closes the file."""
        self.db.close()

    def add(self, workload: Workload, config: dict[str, int], seconds: float, machine: str) -> None:
        """Stores one measurement; raises ValueError for a time that is not finite and positive or a
        configuration outside the workload's space."""
        seconds = number("measured seconds", seconds, 0, above=True)
        if config not in workload.space():
            raise ValueError(f"{config} is not a configuration of workload {workload.name!r}")
        with self.db:
            self.db.execute(
                "INSERT INTO records (workload, kind, size, config, seconds, machine, recorded) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    workload.name,
                    workload.kind,
                    workload.size,
                    json.dumps(config, sort_keys=True),
                    seconds,
                    machine,
                    time.time(),
                ),
            )

    def _query(self, where: str, args: tuple, order: str = "id") -> list[Record]:
        rows = self.db.execute(
            f"SELECT kind, size, config, seconds, machine FROM records WHERE {where} ORDER BY {order}", args
        )
        return [
            Record(Workload(kind, size), json.loads(config), seconds, machine)
            for kind, size, config, seconds, machine in rows
        ]

    def records(self, workload: Workload, machine: str) -> list[Record]:
        """Every measurement of `workload` on `machine`, oldest first."""
        return self._query("workload = ? AND machine = ?", (workload.name, machine))

    def best(self, workload: Workload, machine: str) -> Record | None:
        """The fastest known measurement of `workload` on `machine` (None when there is none)."""
        found = self._query("workload = ? AND machine = ?", (workload.name, machine), order="seconds LIMIT 1")
        return found[0] if found else None

    def warm_start(self, workload: Workload, machine: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(features[N, F], log seconds[N]) of every measurement of the same kind of workload on
        `machine` (other sizes, and this one if known), for a cost model; None when there is none."""
        found = self._query("kind = ? AND machine = ?", (workload.kind, machine))
        if not found:
            return None
        return (np.stack([r.workload.features(r.config) for r in found]), np.log([r.seconds for r in found]))

    def save_progress(self, job: str, definition: str, rounds: int, state: Any) -> None:
        """Stores that job `job` (defined by `definition`) finished `rounds` rounds, ending in `state`
        (pickled: a checkpoint for this code, not an exchange format)."""
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO progress (job, definition, rounds, state) VALUES (?, ?, ?, ?)",
                (job, definition, int(rounds), pickle.dumps(state)),
            )

    def progress(self, job: str, definition: str) -> tuple[int, Any] | None:
        """(rounds finished, state after them) of job `job`, None when it never finished a round.
        Raises ValueError when the stored job had another definition (resuming it would mix two jobs)."""
        row = self.db.execute("SELECT definition, rounds, state FROM progress WHERE job = ?", (job,)).fetchone()
        if row is None:
            return None
        if row[0] != definition:
            raise ValueError(
                f"job {job!r} in {self.path} was defined as {row[0]!r}, not {definition!r}; "
                "refusing to resume a different job (use another name or another database)"
            )
        return row[1], pickle.loads(row[2])
