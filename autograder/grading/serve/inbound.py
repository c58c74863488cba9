"""Intake: the exchange's ``inbound/`` folder, polled; each new entry taken in once.

An entry is checked by :mod:`.exchange` (its name, its kind, its secret, its owner, its
notebooks) and copied into the service's private ``OUT/intake/`` before anything reads it;
the ledger then holds it as ``queued``. One that fails a check is refused: a row saying why,
and, when the student can fetch one, a page saying so (never an attempt).
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

from autograder.grading.serve import exchange
from autograder.grading.serve.outputs import intake_folder


def secret_of(path: Path) -> str | None:
    """The entry's ``submission_secret.txt`` when it is one nbgrader could have written."""
    try:
        text = exchange._read_regular(path / "submission_secret.txt", exchange.MAX_SMALL)
        secret = text.decode("ascii", "replace").strip()
        return secret if exchange.SECRET.fullmatch(secret) else None
    except (exchange.Refused, OSError):
        return None


class Inbound:
    def __init__(self, inbound: Path, intake: Path, course, ledger, views, guard, log):
        self.inbound, self.intake, self.course, self.ledger = inbound, intake, course, ledger
        self.views, self.guard, self.log = views, guard, log
        self.known: set[str] = set()

    def poll(self):
        try:
            with os.scandir(self.inbound) as it:
                names = sorted(e.name for e in it)
        except OSError as exc:
            self.log(f"cannot read {self.inbound}: {exc}")
            return
        assignments = self.course.assignments()
        for name in names:
            sid = exchange.safe_name(name)
            if sid in self.known or name.startswith("."):
                continue
            self.guard(sid, self.take_in, name, sid, assignments)

    def take_in(self, name, sid, assignments):
        now = time.time()
        path = self.inbound / name
        try:
            entry = exchange.parse_name(name, assignments)
        except exchange.Refused as exc:
            self.refuse(sid, None, f"refused: {exc}", now)
            return
        try:
            kind = os.lstat(path).st_mode
        except OSError:
            return  # gone again
        if stat.S_ISLNK(kind) or not stat.S_ISDIR(kind):
            what = "a symbolic link" if stat.S_ISLNK(kind) else "not a folder"
            self.refuse(
                sid, entry, f"refused: the submission is {what}: nothing of it was read", now
            )
            return
        if not exchange.complete(path):
            try:
                age = now - os.lstat(path).st_mtime
            except OSError:
                return
            if age < exchange.INCOMPLETE_GRACE:
                return  # nbgrader submit is still copying: next poll
            self.refuse(
                sid, entry, "refused: no submission_secret.txt (not made by nbgrader submit?)", now
            )
            return
        dest = intake_folder(self.intake, sid)
        if dest.exists():
            shutil.rmtree(dest)
        notebooks = {nb.name for nb in self.course.notebooks(entry.assignment)}
        try:
            secret, notes = exchange.take(path, entry, notebooks, dest)
        except (exchange.Refused, OSError) as exc:
            shutil.rmtree(dest, ignore_errors=True)
            self.refuse(sid, entry, f"refused: {exc}", now, secret_of(path))
            return
        self.ledger.add(
            id=sid,
            student=entry.student,
            assignment=entry.assignment,
            timestamp=entry.timestamp,
            secret=secret,
            submitted=entry.submitted,
            seen=now,
            state="queued",
            reason="; ".join(notes),
        )
        self.known.add(sid)
        n = self.ledger.replace_older(entry.student, entry.assignment, entry.submitted, sid)
        self.log(f"{sid}: queued" + (f" (replacing {n} older)" if n else ""))

    def refuse(self, sid, entry, reason, now, secret=None):
        """Intake refused it: a page saying why when the student can fetch one, never an attempt."""
        self.log(f"{sid}: {reason}")
        self.known.add(sid)
        row = dict(id=sid, seen=now, state="refused", reason=reason)
        if entry is not None:
            row.update(
                student=entry.student,
                assignment=entry.assignment,
                timestamp=entry.timestamp,
                submitted=entry.submitted,
            )
        if entry is None or not secret:
            self.ledger.add(**row)
            return
        row.update(secret=secret, state="grading", started=now)
        self.ledger.add(**row)
        self.ledger.graded(sid, False, {"notice": reason}, None, None, time.time())
        self.views.release(sid)
