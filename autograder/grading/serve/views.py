"""What a student sees of a graded submission: the page released into the exchange's
``feedback/`` (where ``nbgrader fetch_feedback`` looks) and the status endpoint's ``api/me``.

Both are built here, from the ledger's stored rows, by the course's policy (what hidden tests
show before the deadline, the cooldown, the attempt limit) and the instructor's settlements; a
test cell's source never reaches them (:mod:`.page`, :func:`.policy.student_rows`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import threading
import time
import traceback

from autograder.grading.serve import exchange, page
from autograder.grading.serve.policy import student_rows

LOOP_THREAD = "serve-loop"  # the one thread that may read the gradebook


def _settled_rows(rows: list[dict], decisions: dict) -> list[dict]:
    """Ledger rows (dicts) with the instructor's settlements applied (:func:`.verdicts.apply_settled`)."""
    if not decisions:
        return rows
    from autograder.grading.results.report import Row
    from autograder.grading.verdicts import apply_settled

    objs = [Row(**r) for r in rows]
    apply_settled(objs, decisions)
    return [dataclasses.asdict(r) for r in objs]


class Views:
    def __init__(self, ledger, policy, course, gradebook, outputs, feedback_dir, log):
        self.ledger, self.policy, self.course = ledger, policy, course
        self.gradebook, self.outputs = gradebook, outputs
        self.feedback_dir, self.log = feedback_dir, log
        self.deadlines: dict = {}

    def deadline(self, student, assignment) -> float | None:
        """The due date from the gradebook (with the student's extension), cached for 30 s."""
        key = (student, assignment)
        cached = self.deadlines.get(key)
        if threading.current_thread().name != LOOP_THREAD:  # the gradebook is the loop's
            return cached[0] if cached else None
        if cached and time.monotonic() - cached[1] < 30:
            return cached[0]
        from nbgrader.api import MissingEntry

        gb = self.gradebook.gb
        due = None
        try:
            try:
                due = gb.find_submission(assignment, student).duedate
            except MissingEntry:
                due = gb.find_assignment(assignment).duedate
        except MissingEntry:
            due = None
        except Exception:  # noqa: BLE001
            gb.db.rollback()
            self.log(traceback.format_exc())
        value = due.replace(tzinfo=dt.UTC).timestamp() if due is not None else None
        self.deadlines[key] = (value, time.monotonic())
        return value

    def _next_attempt(self, row) -> tuple[str, float | None]:
        attempts = self.ledger.attempts(row["student"], row["assignment"])
        if self.policy.max_attempts and len(attempts) >= self.policy.max_attempts:
            return "You have no graded attempts left at this assignment.", None
        next_at = None
        if self.policy.cooldown and attempts:
            next_at = max(a["submitted"] for a in attempts) + self.policy.cooldown
        if next_at and next_at > row["finished"]:
            return f"Your next submission is graded from {page.utc(next_at)} on.", next_at
        return "You may submit again now.", next_at

    def views(self, row) -> list[dict]:
        """What the student may see of a graded row, one dict per notebook (the page, the JSON)."""
        from autograder.grading.verdicts import settled

        result = json.loads(row["result"] or "{}")
        deadline = self.deadline(row["student"], row["assignment"])
        mode = self.policy.hidden_mode(deadline, time.time())
        next_text, next_at = self._next_attempt(row)
        base = {
            "student": row["student"],
            "assignment": row["assignment"],
            "submitted_at": row["submitted"],
            "graded_at": row["finished"],
            "seconds_after_submit": max(0.0, row["finished"] - row["submitted"]),
            "attempt": row["attempt"],
            "max_attempts": self.policy.max_attempts or None,
            "next_attempt": next_text,
            "next_attempt_at": next_at,
            "deadline": deadline,
            "hidden_mode": mode,
        }
        notice = [result["notice"]] if result.get("notice") else []
        if not result.get("notebooks"):
            return [
                dict(base, notebook=nb.name, notes=notice, tests=[])
                for nb in self.course.notebooks(row["assignment"])
            ]
        decisions = settled(self.outputs.out)  # a settled difference is no longer under review
        return [
            dict(
                base,
                notebook=nb["notebook"],
                notes=notice + nb["notes"],
                tests=student_rows(_settled_rows(nb["rows"], decisions), mode),
            )
            for nb in result["notebooks"]
        ]

    def release(self, sid):
        """Graded submission ``sid``'s pages into the exchange; the ledger says released."""
        row = next((r for r in self.ledger.in_state("graded") if r["id"] == sid), None)
        if row is None:
            return
        for view in self.views(row):
            exchange.release(
                self.feedback_dir,
                row["secret"],
                view["notebook"],
                page.render(view),
                self.course.config.groupshared,
            )
        self.ledger.released(sid)
        self.outputs.released()
        done = self.ledger.db.execute("SELECT * FROM submissions WHERE id=?", (sid,)).fetchone()
        self.log(
            f"{sid}: released {done['released'] - done['submitted']:.2f} s after submit"
            + (f", attempt {done['attempt']}" if done["attempt"] else ", not counted")
        )

    def student_status(self, student: str) -> dict:
        """``api/me``: the student's last result per assignment, and what still waits."""
        out = []
        for row in self.ledger.last_results(student):
            out.extend(self.views(row))
        waiting = [
            {"assignment": r["assignment"], "state": r["state"], "submitted_at": r["submitted"]}
            for r in self.ledger.in_state("queued", "grading")
            if r["student"] == student
        ]
        return {"student": student, "last": out, "waiting": waiting}
