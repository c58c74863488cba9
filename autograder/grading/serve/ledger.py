"""The service's ledger: one SQLite row per inbound entry, and its state.

States, in order: ``queued`` (copied from the exchange, waiting: for a sandbox, or for the
cooldown) -> ``grading`` -> ``graded`` (scores in the gradebook, the pages rendered) ->
``released`` (the pages in the exchange). Final states besides ``released``: ``replaced`` (a
newer submission of the same student and assignment arrived while it waited), ``refused``
(intake refused it; released with a page saying why when it had a usable secret).

Nothing lost, nothing twice, also after ``kill -9``: every change is one transaction; at start
``grading`` goes back to ``queued`` (graded again: nobody saw its result), ``graded`` is released
again without grading (writing a page and the gradebook are idempotent), a ``released`` row is
never touched again. ``releases`` counts the releases of each row (1, always: the benchmark
checks it).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    id TEXT PRIMARY KEY,           -- the inbound entry's name (control characters escaped)
    student TEXT, assignment TEXT, timestamp TEXT, secret TEXT,
    submitted REAL, seen REAL, started REAL, finished REAL, released REAL,
    state TEXT NOT NULL,
    not_before REAL,
    attempt INTEGER,               -- graded attempt number (counted ones only)
    counted INTEGER NOT NULL DEFAULT 0,
    reason TEXT NOT NULL DEFAULT '',
    score REAL, max_score REAL,
    result TEXT,                   -- JSON: per notebook, the rows and notes
    gradings INTEGER NOT NULL DEFAULT 0,
    releases INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS by_student ON submissions (student, assignment, state);
CREATE TABLE IF NOT EXISTS calibration (
    source TEXT PRIMARY KEY,       -- sha256 of the source notebook
    mode TEXT NOT NULL             -- JSON of its NotebookMode
);
"""

FIELDS = [
    "id",
    "student",
    "assignment",
    "state",
    "attempt",
    "counted",
    "submitted",
    "seen",
    "started",
    "finished",
    "released",
    "score",
    "max_score",
    "reason",
]


class Ledger:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._local = threading.local()
        with self.db as db:
            db.executescript(SCHEMA)

    @property
    def db(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            con.row_factory = sqlite3.Row
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
            self._local.con = con
        return con

    def _tx(self, sql: str, args=()):
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            cur = db.execute(sql, args)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return cur

    # -- at start ------------------------------------------------------------------
    def recover(self) -> dict:
        """After a stop or a crash: ``grading`` back to ``queued``; returns the counts by state."""
        self._tx("UPDATE submissions SET state='queued', started=NULL WHERE state='grading'")
        return self.counts()

    def known(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT id FROM submissions")}

    # -- intake --------------------------------------------------------------------
    def add(self, **row) -> None:
        """A new entry (``INSERT OR IGNORE``: an entry is added once, whatever happens)."""
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self._tx(
            f"INSERT OR IGNORE INTO submissions ({cols}) VALUES ({marks})", tuple(row.values())
        )

    def replace_older(self, student: str, assignment: str, submitted: float, keep: str) -> int:
        """Queued entries of this student and assignment older than ``keep``: ``replaced``."""
        cur = self._tx(
            "UPDATE submissions SET state='replaced', reason=? WHERE student=? AND assignment=? "
            "AND state='queued' AND id<>? AND submitted<=?",
            (f"replaced by the newer submission {keep}", student, assignment, keep, submitted),
        )
        return cur.rowcount

    # -- grading -------------------------------------------------------------------
    def queued(self) -> list[sqlite3.Row]:
        return list(
            self.db.execute("SELECT * FROM submissions WHERE state='queued' ORDER BY submitted, id")
        )

    def in_state(self, *states: str) -> list[sqlite3.Row]:
        marks = ",".join("?" for _ in states)
        return list(
            self.db.execute(
                f"SELECT * FROM submissions WHERE state IN ({marks}) ORDER BY seen", states
            )
        )

    def set(self, id_: str, **values) -> None:
        sets = ", ".join(f"{k}=?" for k in values)
        self._tx(f"UPDATE submissions SET {sets} WHERE id=?", (*values.values(), id_))

    def graded(self, id_: str, counted: bool, result: dict, score, max_score, finished: float):
        """One transaction: the result, the attempt number (counted ones only), ``graded``."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute(
                "SELECT student, assignment FROM submissions WHERE id=?", (id_,)
            ).fetchone()
            attempt = None
            if counted:
                n = db.execute(
                    "SELECT COUNT(*) FROM submissions WHERE student=? AND assignment=? AND counted=1",
                    (row["student"], row["assignment"]),
                ).fetchone()[0]
                attempt = n + 1
            db.execute(
                "UPDATE submissions SET state='graded', counted=?, attempt=?, result=?, score=?, "
                "max_score=?, finished=?, gradings=gradings+1 WHERE id=?",
                (int(counted), attempt, json.dumps(result), score, max_score, finished, id_),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def released(self, id_: str, when: float | None = None) -> None:
        self._tx(
            "UPDATE submissions SET state='released', released=?, releases=releases+1 "
            "WHERE id=? AND state='graded'",
            (when or time.time(), id_),
        )

    # -- policy --------------------------------------------------------------------
    def attempts(self, student: str, assignment: str) -> list[sqlite3.Row]:
        """Counted attempts, oldest first."""
        return list(
            self.db.execute(
                "SELECT * FROM submissions WHERE student=? AND assignment=? AND counted=1 "
                "ORDER BY attempt",
                (student, assignment),
            )
        )

    def busy(self, student: str, assignment: str) -> bool:
        return (
            self.db.execute(
                "SELECT 1 FROM submissions WHERE student=? AND assignment=? AND state IN "
                "('grading', 'graded') LIMIT 1",
                (student, assignment),
            ).fetchone()
            is not None
        )

    # -- reading -------------------------------------------------------------------
    def counts(self) -> dict:
        return {
            r[0]: r[1]
            for r in self.db.execute("SELECT state, COUNT(*) FROM submissions GROUP BY state")
        }

    def last_results(self, student: str) -> list[sqlite3.Row]:
        """The student's last released submission of each assignment."""
        return list(
            self.db.execute(
                "SELECT * FROM submissions s WHERE student=? AND state='released' AND released = "
                "(SELECT MAX(released) FROM submissions t WHERE t.student=s.student AND "
                "t.assignment=s.assignment AND t.state='released') ORDER BY assignment",
                (student,),
            )
        )

    def all(self) -> list[sqlite3.Row]:
        return list(self.db.execute("SELECT * FROM submissions ORDER BY seen, id"))

    # -- calibration cache -----------------------------------------------------------
    def calibration(self, source: str) -> dict | None:
        row = self.db.execute("SELECT mode FROM calibration WHERE source=?", (source,)).fetchone()
        return json.loads(row[0]) if row else None

    def save_calibration(self, source: str, mode: dict) -> None:
        self._tx(
            "INSERT OR REPLACE INTO calibration (source, mode) VALUES (?, ?)",
            (source, json.dumps(mode)),
        )
