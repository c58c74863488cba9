"""Scores and statuses per test cell, ``grades.csv``, the progress bar and the summary.

The status of a row says why its score is what it is (:data:`autograder.grading.STATUSES`):

* a test the judge ran to its end is ``ok`` (score: full points, nbgrader's partial credit,
  or 0 if it raised or wrote to stderr);
* a test during which the student's process could not answer says why, with score 0:
  ``timeout`` (stopped at the limit), ``kernel-died``, ``memory-limit``, ``output-limit``,
  or ``tampered`` (it answered with something the honest encoder never produces);
* when the student process wrote garbage on its control channel every row says ``tampered``
  (the scores are still the judge's verdicts on genuine observations: never more);
* a failing row after a cell that hit a limit (time, memory, output) carries that limit's
  status, so the instructor sees why; a test never reached because the student process died
  gets the reason it died.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from autograder.grading.status import LIMITS, MESSAGE, OF_CELL, Status
from autograder.messages import STUB_HINT

FIELDS = [
    "student",
    "assignment",
    "notebook",
    "grade_id",
    "score",
    "max_score",
    "status",
    "kernel_score",  # one kernel's verdict (stock nbgrader's), empty where it did not run
    "judge_score",  # the judge's, empty where it did not grade (in-kernel)
    "judge_status",  # its status, or not-confirmed / not-run
    "judge_reason",  # what the judge said (its message's first line, or why it did not grade)
]

GRADED = (
    "ok",
    "in-kernel",
    "settled",
)  # a test that ran to its end, the verdicts agreeing (or settled: grading.verdicts)
DIFFERENCES = ("unconfirmed", "contradicted")  # the two verdicts differ: grading.verdicts


@dataclass
class Row:
    student: str
    assignment: str
    notebook: str
    grade_id: str
    score: float
    max_score: float
    status: str
    message: str = ""
    hidden: bool = False
    error: str = ""  # the exception's type name, for a test that raised
    failure: dict | None = None  # a failed check's parts (the judge's :func:`failure_parts`)
    kernel_score: float | None = None  # the two verdicts (grading.verdicts.merge)
    judge_score: float | None = None
    judge_status: str = ""
    judge_reason: str = ""

    def csv(self) -> dict:
        return {
            "student": self.student,
            "assignment": self.assignment,
            "notebook": self.notebook,
            "grade_id": self.grade_id,
            "score": _num(self.score),
            "max_score": _num(self.max_score),
            "status": self.status,
            "kernel_score": "" if self.kernel_score is None else _num(self.kernel_score),
            "judge_score": "" if self.judge_score is None else _num(self.judge_score),
            "judge_status": self.judge_status,
            "judge_reason": _one_line(self.judge_reason)[:300],
        }


def _one_line(text: str) -> str:
    return " ".join((text or "").split())


def _num(x: float) -> str:
    return format(float(x), "g")


def _limit_before(sub, result, k):
    """Status of the first cell before test k's place that hit a limit, if any."""
    cells = {c["index"]: c for c in result.get("cells", [])}
    for item in sub.items:
        if item[0] == "test":
            if item[1] == k:
                return None
            continue
        status = cells.get(item[1], {}).get("status")
        if status in LIMITS:
            return LIMITS[status]
    return None


def _died_reason(sub, result):
    """Why the main line stopped before reaching the remaining tests."""
    main = result.get("main")
    if main == "timeout":
        return "timeout"
    cells = result.get("cells", [])
    for c in reversed(cells):
        if c.get("status") in OF_CELL:  # (a limit, or the process died)
            return OF_CELL[c["status"]]
    return "kernel-died"


def rows_for(sub, result=None, error=None) -> list[Row]:
    """One row per test cell of ``sub``'s source notebook."""
    rows = []
    base = (sub.student, sub.assignment, sub.notebook)
    # a test the student's notebook lacks, where the course's OverwriteCells.add_missing_cells is
    # False (collect.plan left it out): not run, for manual grading, as stock leaves it
    placed = {item[1] for item in getattr(sub, "items", None) or () if item[0] == "test"}
    for k, test in enumerate(sub.source.tests):
        row = Row(*base, test.grade_id, 0.0, test.points, "ok", hidden=test.hidden)
        if sub.status:
            row.status, row.message = sub.status, sub.message
        elif k not in placed and not getattr(sub.source, "add_missing", True):
            row.status = Status.NOT_IN_NOTEBOOK.value
            row.message = Status.NOT_IN_NOTEBOOK.message or ""
        elif error is not None or result is None:
            row.status, row.message = (
                "grader-error",
                "the grader failed on this notebook; see the log",
            )
        else:
            _score(row, test, k, sub, result)
        rows.append(row)
    return rows


def _score(row, test, k, sub, result):
    r = result["tests"][k]
    garbled = bool(result.get("garbled"))
    status = r.get("status")
    if status == "not-run":
        row.status = _died_reason(sub, result)
        row.message = {
            "timeout": "not run: the notebook ran past the time limit before this test",
            "kernel-died": "not run: the notebook's process died before this test",
            "memory-limit": "not run: the notebook ran out of memory before this test",
            "output-limit": "not run: the notebook wrote too much output before this test",
        }.get(row.status, "not run")
        return
    if status:  # the test could not count: why (a status of the table, never another word)
        row.status = Status.of(status).value
        row.message = r.get("message") or MESSAGE.get(row.status, str(status))
        return
    if r.get("passed"):
        partial = r.get("partial")
        row.score = min(float(partial), test.points) if partial is not None else test.points
        row.status = "tampered" if garbled else "ok"
        return
    row.message = r.get("message") or ""
    row.error = r["error"][:200] if isinstance(r.get("error"), str) else ""
    row.failure = _parts(r.get("failure"))
    if r.get("error") and not row.message.startswith(r["error"]):
        row.message = f"{r['error']}: {row.message}" if row.message else r["error"]
    if row.message.strip() in _BARE_STUB:  # the release stub, raised through the test cell
        row.message = f"NotImplementedError: {STUB_HINT}"
    row.status = _limit_before(sub, result, k) or "ok"
    if garbled:
        row.status = "tampered"


_BARE_STUB = ("NotImplementedError", "NotImplementedError:")
PARTS = ("kind", "check", "expected", "found", "cause")


def _parts(value) -> dict | None:
    """A verdict's ``failure`` (the judge's, checked as data: known keys, text values)."""
    if type(value) is not dict:
        return None
    return {k: value[k][:1500] for k in PARTS if type(value.get(k)) is str} or None


def parse_failure(message: str, error: str = "") -> dict | None:
    """A check's parts read back from its message (``what`` then ``  expected: ``, ``  found: ``,
    ``  likely cause: `` lines, :func:`autograder.messages.format_failure`): for rows graded in
    one kernel, whose verdict is the message alone. None for any other message."""
    from autograder.messages import STUB

    text = message or ""
    for prefix in ("CheckFailure: ", "NotImplementedYet: "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    else:
        if text.strip() in _BARE_STUB or (
            error == "NotImplementedError" and text.startswith("NotImplementedError: " + STUB)
        ):
            return {"kind": "not-implemented", "check": STUB}
        return None
    if error not in ("", "CheckFailure", "NotImplementedYet"):
        return None
    lines = text.split("\n")
    labels = {"  expected: ": "expected", "  found:    ": "found", "  likely cause: ": "cause"}
    parts: dict = {"kind": "check", "check": lines[0]}
    for line in lines[1:]:
        for label, key in labels.items():
            if line.startswith(label) and key not in parts:
                parts[key] = line[len(label) :]
                break
        else:
            return None  # not the three-part message
    if lines[0].endswith(f": {STUB_HINT}"):
        return {"kind": "not-implemented", "check": lines[0][: -len(STUB_HINT) - 2]}
    if (
        parts.get("found", "").rstrip().rstrip(":") == "NotImplementedError"
    ):  # the stub's, described
        return {"kind": "not-implemented", "check": lines[0]}
    return parts


def record(row: Row, attempt: int | None = None) -> dict:
    """One line of ``results.jsonl``: the row of ``grades.csv`` with what the test said - the
    exception's type (``error``), its message, and a failed check's parts (``kind``: ``check``
    or ``not-implemented``; ``check``, ``expected``, ``found``, ``cause``; ``parts_from``:
    ``judge`` when the judge kept them, ``message`` when read back from the message of a row
    graded in one kernel)."""
    failed = row.score < row.max_score
    parts, source = (row.failure, "judge") if row.failure else (None, None)
    if failed and parts is None and row.status in GRADED:
        parts = parse_failure(row.message, row.error)
        source = "message" if parts else None
    out = {
        "student": row.student,
        "assignment": row.assignment,
        "notebook": row.notebook,
        "grade_id": row.grade_id,
        "score": float(row.score),
        "max_score": float(row.max_score),
        "status": row.status,
        "kernel_score": row.kernel_score,
        "judge_score": row.judge_score,
        "judge_status": row.judge_status,
        "judge_reason": (row.judge_reason or "")[:500],
        "hidden": bool(row.hidden),
        "error": row.error if failed else "",
        "message": (row.message or "")[:1500] if failed else "",
    }
    for key in PARTS:
        out[key] = (parts or {}).get(key) if failed else None
    out["parts_from"] = source if failed else None
    if attempt is not None:
        out["attempt"] = int(attempt)
    return out


def write_jsonl(path: Path, rows, attempt: int | None = None, append: bool = False) -> None:
    """``results.jsonl`` (one :func:`record` per row, in ``grades.csv``'s order); ``append`` adds
    rows (``autograder serve``: each attempt's rows, with ``attempt``)."""
    rows = sorted(rows, key=lambda r: (r.student, r.assignment, r.notebook))
    with open(path, "a" if append else "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(record(r, attempt)) + "\n" for r in rows)


def safe_cell(value: str) -> str:
    """A CSV cell a spreadsheet will not run: text starting with = + - @ (or a tab or carriage
    return) gets a leading apostrophe, unless it is a number."""
    if value and value[0] in "=+-@\t\r":
        try:
            float(value)
        except ValueError:
            return "'" + value
    return value


def write_csv(path: Path, rows) -> None:
    rows = sorted(rows, key=lambda r: (r.student, r.assignment, r.notebook))
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: safe_cell(v) for k, v in row.csv().items()})


def write_late(path: Path, late: dict) -> None:
    """``late.csv``: each notebook submitted after the assignment's due date, how late (seconds,
    from ``timestamp.txt`` as nbgrader reads it) and the penalty the course's
    ``LateSubmissionPlugin`` set in the gradebook (empty: none)."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["student", "assignment", "notebook", "seconds_late", "late_penalty"])
        for (student, assignment, notebook), (seconds, penalty) in sorted(late.items()):
            w.writerow(
                [
                    safe_cell(student),
                    assignment,
                    notebook,
                    f"{seconds:g}",
                    "" if penalty is None else f"{penalty:g}",
                ]
            )


def late_lines(late: dict) -> list[str]:
    """review.txt's line for each late notebook (its score in the gradebook is after the penalty)."""
    return [
        f"{safe_cell(student)}/{assignment}/{notebook}: submitted {seconds:g} s late"
        + (f", late penalty {penalty:g} point(s) in the gradebook" if penalty else ", no penalty")
        for (student, assignment, notebook), (seconds, penalty) in sorted(late.items())
    ]


def review_lines(rows) -> list[str]:
    """One line per notebook with a status other than ok: what happened, for a human look."""
    notebooks: dict = {}
    for r in rows:
        if r.status not in GRADED and r.status not in DIFFERENCES:  # (those: one line per row)
            notebooks.setdefault((r.student, r.assignment, r.notebook), []).append(r)
    lines = []
    for (student, assignment, notebook), rs in sorted(notebooks.items()):
        reasons = []
        for r in rs:
            text = f"{r.status}" + (f" ({r.message.splitlines()[0][:200]})" if r.message else "")
            if text not in reasons:
                reasons.append(text)
        lines.append(f"{safe_cell(student)}/{assignment}/{notebook}: " + "; ".join(reasons[:5]))
    return lines


def progress(total: int, enabled=True, initial: int = 0):
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        unit="notebook",
        desc="grading",
        file=sys.stderr,
        disable=not enabled,
        dynamic_ncols=True,
        mininterval=0.5,
    )


def summary(
    rows, seconds: float, jobs_text: str, startup: float | None = None, notebooks=()
) -> str:
    """The closing lines: notebooks, mean score, time (start-up apart from grading when given:
    the settings, sandboxes, intake and calibration before the first notebook), rows by status.
    ``notebooks``: the ``(student, assignment, notebook)`` of every notebook graded, those with no
    test cell (no row) among them, so that the count is of notebooks, not of notebooks with rows."""
    by_notebook: dict = {}
    for r in rows:
        key = (r.student, r.assignment, r.notebook)
        s, m = by_notebook.get(key, (0.0, 0.0))
        by_notebook[key] = (s + r.score, m + r.max_score)
    for key in notebooks:
        by_notebook.setdefault(tuple(key), (0.0, 0.0))
    statuses = Counter(r.status for r in rows)
    n = len(by_notebook)
    lines = [
        f"graded {n} notebook{'s' if n != 1 else ''} "
        f"({len({k[0] for k in by_notebook})} students) in {seconds:.1f} s{jobs_text}"
    ]
    if n:
        mean = sum(s for s, _ in by_notebook.values()) / n
        mean_max = sum(m for _, m in by_notebook.values()) / n
        pct = f" ({100 * mean / mean_max:.0f}%)" if mean_max else ""
        if startup is None:
            timing = f"{seconds / n:.2f} s per notebook"
        else:
            timing = (
                f"start-up {startup:.1f} s, then {seconds - startup:.1f} s grading: "
                f"{(seconds - startup) / n:.2f} s per notebook"
            )
        lines.append(f"mean score {mean:.2f} / {mean_max:.2f}{pct}; {timing}")
    lines.append(
        "test cells by status: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
    )
    flagged = sorted(
        {(r.student, r.assignment, r.notebook, r.status) for r in rows if r.status not in GRADED}
    )
    if flagged:
        notebooks: dict = {}
        for s, a, nb, st in flagged:
            notebooks.setdefault(f"{s}/{a}/{nb}", []).append(st)
        lines.append("notebooks with a status other than ok:")
        for key, sts in notebooks.items():
            lines.append(f"  {key}: {', '.join(sts)}")
    return "\n".join(lines)
