"""What a student sees and when they may try again: ``AutograderServe.*`` in ``nbgrader_config.py``.

    c.AutograderServe.hidden_before_deadline = "pass-fail"  # or "points", or "everything"
    c.AutograderServe.cooldown = 60        # seconds between two graded attempts
    c.AutograderServe.max_attempts = 20    # graded attempts per student and assignment (0: no limit)

Before the assignment's deadline (its ``duedate`` in the nbgrader gradebook; none: always
before), a hidden test shows its name and passed/failed only (``pass-fail``, the default: the
grader is no oracle for the hidden values), or its points too (``points``), or everything
(``everything``, for self-paced classes). From the deadline on, every message is shown. Visible
tests always show their message. A submission that arrives during the cooldown waits until the
cooldown is over (a newer one of the same student and assignment replaces it while it waits);
one beyond the attempt limit is not graded (the page says so). Grader failures never count.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

HIDDEN_MODES = ("pass-fail", "points", "everything")


@dataclass(frozen=True)
class Policy:
    hidden_before_deadline: str = "pass-fail"
    cooldown: float = 60.0
    max_attempts: int = 20

    @classmethod
    def from_config(cls, section: dict) -> Policy:
        known = {"hidden_before_deadline", "cooldown", "max_attempts"}
        unknown = set(section) - known
        if unknown:
            raise ValueError(
                f"unknown AutograderServe setting(s) {', '.join(sorted(unknown))} in "
                f"nbgrader_config.py (known: {', '.join(sorted(known))})"
            )
        p = cls(
            hidden_before_deadline=str(section.get("hidden_before_deadline", "pass-fail")),
            cooldown=float(section.get("cooldown", 60.0)),
            max_attempts=int(section.get("max_attempts", 20)),
        )
        if p.hidden_before_deadline not in HIDDEN_MODES:
            raise ValueError(
                f"AutograderServe.hidden_before_deadline = {p.hidden_before_deadline!r}: "
                f"one of {', '.join(HIDDEN_MODES)}"
            )
        if p.cooldown < 0 or p.max_attempts < 0:
            raise ValueError("AutograderServe.cooldown and max_attempts must be >= 0")
        return p

    def hidden_mode(self, deadline: float | None, now: float) -> str:
        """How hidden tests are shown at ``now`` (epoch seconds)."""
        if deadline is not None and now >= deadline:
            return "everything"
        return self.hidden_before_deadline


def student_rows(rows: list[dict], mode: str) -> list[dict]:
    """The rows as a student may see them: ``{"test", "kind", "passed", "points"?, "max_points"?,
    "status"?, "message"?}``. Built from scratch (never the instructor's row with fields removed)."""
    from autograder.grading.verdicts import UNDER_REVIEW

    out = []
    for r in rows:
        review = r["status"] in ("unconfirmed", "contradicted")  # the two verdicts differ
        passed = r["score"] >= r["max_score"] and r["status"] in ("ok", "in-kernel", "settled")
        item = {"test": r["grade_id"], "kind": "hidden" if r["hidden"] else "visible"}
        item["passed"] = passed
        if review:  # neither verdict, nor either score: the instructor settles it
            item.update(passed=False, under_review=True, status="under review")
            item["message"] = UNDER_REVIEW
            out.append(item)
            continue
        if not r["hidden"] or mode in ("points", "everything"):
            item["points"] = r["score"]
            item["max_points"] = r["max_score"]
        if not r["hidden"] or mode == "everything":
            item["status"] = r["status"]
            item["message"] = "" if passed else r["message"]
        out.append(item)
    return out


def utc(ts: float | None) -> str:
    if ts is None:
        return ""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
