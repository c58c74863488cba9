"""Two verdicts for every test cell, and no difference is ever silent (grading v5).

Every notebook is graded twice, from the same submitted cells:

* **one kernel** (stock nbgrader's verdict, by construction): the student's cells and the
  source's test cells run in notebook order in one IPython shell in the sandbox
  (:func:`autograder.grading.calibrate.kernel_task`), scored with nbgrader's own
  ``determine_grade``. Whatever state a test reads after a call - its arguments, a generator,
  captured stdout, a file, a global mode, the working directory - is there, because it is the
  same process. So are the hidden tests: the student's code can read and forge them there.
* **the judge**: the test cells run on the host, in a process that never ran student code, and
  every call into student code is a request answered with data (:mod:`.host.judge`). Where it
  cannot carry something it says so ("not confirmed: <reason>"): there is no fallback and no
  run-time decision a submission could pull.

:func:`merge` makes one row per test cell from the two. The rule it enforces
(:func:`check_rows`, at run time, on every notebook):

1. **Agreement** (the same score) is the judge's row: its status, its message.
2. **A difference is a status**: ``unconfirmed`` when one kernel gave more than the judge
   confirmed (a forged pass, or state the judge cannot carry), ``contradicted`` when the judge
   gave more than one kernel (a function that changed the test's own arguments, an exception
   that only names a built-in). Both scores and the judge's reason travel with the row into
   ``grades.csv``, ``results.jsonl``, ``review.txt``, the report and serve's instructor view.
3. **Which score counts while a difference is open** is the course's ``AutograderGrade.counts``
   (:data:`COUNTS`): ``kernel`` (the default: stock's score; a judge limitation never costs an
   honest student a point), ``judge`` or ``lower``. ``autograder settle`` closes a difference.
4. **Nothing of the one-kernel run reaches a student but pass/fail**: a row's ``message`` (the
   feedback page, the autograded notebook) is the judge's, or a fixed text; what the kernel run
   printed or raised stays in the instructor's columns.

A test cell calibration found the judge cannot grade even for the solution (decided on the
source, the same for every student: ``calibration.txt``) has one verdict, one kernel's, status
``in-kernel``.
"""

from __future__ import annotations

import copy

from autograder.grading.status import Status
from autograder.remote.errors import NEEDS_KERNEL

COUNTS = ("kernel", "judge", "lower")
DEFAULT_COUNTS = "kernel"

UNDER_REVIEW = (
    "under review: this test was graded two ways and the results differ; your instructor "
    "will look at it"
)
KERNEL_FAILED = "the test failed (graded in one kernel with your code: its message is not shown)"
NOT_CONFIRMED = "not confirmed: "


def not_confirmed(judge_result):
    """The judge's result with each test it could not carry (status ``needs-kernel``) turned into
    a failed verdict whose message says why (``not confirmed: <reason>``), and the set of those
    tests: the judge's own word, never a status of a row."""
    if not isinstance(judge_result, dict):
        return judge_result, set()
    tests = judge_result.get("tests")
    if not isinstance(tests, list):
        return judge_result, set()
    out, ks = [], set()
    for k, t in enumerate(tests):
        if isinstance(t, dict) and t.get("status") == NEEDS_KERNEL:
            why = str(t.get("message") or "the judge cannot carry this notebook")
            if why.startswith("not run: "):
                why = why[len("not run: ") :]
            t = {"passed": False, "message": NOT_CONFIRMED + why[:500], "error": ""}
            ks.add(k)
        out.append(t)
    return dict(judge_result, tests=out), ks


def _score_of(counts: str, kernel: float, judge: float) -> float:
    if counts == "judge":
        return judge
    if counts == "lower":
        return min(kernel, judge)
    return kernel


def _judge_reason(j) -> str:
    text = j.message.splitlines()[0][:300] if j.message else ""
    if j.status != "ok":
        return f"{j.status}: {text}" if text else j.status
    return text or ("passed" if j.score >= j.max_score else "failed")


def merge(
    kernel_rows, judge_rows, counts: str = DEFAULT_COUNTS, kernel_only=None, unconfirmable=()
):
    """One row per test cell from one kernel's rows and the judge's (both from
    :func:`~autograder.grading.results.report.rows_for`, in the source's order). ``judge_rows``
    None: the notebook has one verdict (every test cell in ``kernel_only``, or the course's
    ``AutograderGrade.mode = "kernel"``). ``kernel_only``: ``{grade_id: why}``, the cells
    calibration found the judge cannot grade. ``unconfirmable``: the indices of the judge's
    "not confirmed" verdicts (:func:`not_confirmed`)."""
    if counts not in COUNTS:
        raise ValueError(f"AutograderGrade.counts must be one of {COUNTS}, not {counts!r}")
    kernel_only = kernel_only or {}
    out = []
    for k, krow in enumerate(kernel_rows):
        jrow = judge_rows[k] if judge_rows is not None else None
        out.append(_one(krow, jrow, counts, kernel_only, k in unconfirmable))
    check_rows(out, counts)
    return out


def _one(krow, jrow, counts, kernel_only, unconfirmable):
    if krow.status in _WHOLE or (jrow is not None and jrow.status in _WHOLE):
        row = copy.copy(jrow if jrow is not None and jrow.status in _WHOLE else krow)
        row.kernel_score = krow.score if krow.status not in _WHOLE else None
        row.judge_score = jrow.score if jrow is not None and jrow.status not in _WHOLE else None
        return row
    if jrow is None or krow.grade_id in kernel_only:
        row = copy.copy(krow)
        row.status = Status.IN_KERNEL.value if krow.status == "ok" else krow.status
        row.message, row.error, row.failure = _kernel_text(krow), "", None
        row.kernel_score, row.judge_score = krow.score, None
        row.judge_status = "not-run"
        row.judge_reason = kernel_only.get(krow.grade_id, "the course grades in one kernel")
        return row
    row = copy.copy(jrow)
    row.kernel_score, row.judge_score = krow.score, jrow.score
    row.judge_status = "not-confirmed" if unconfirmable else jrow.status
    row.judge_reason = _judge_reason(jrow)
    if krow.score == jrow.score:
        if unconfirmable:  # both failed: one kernel's outcome, without its message
            row.status, row.error, row.failure = krow.status, "", None
            row.message = _kernel_text(krow)
        return row
    row.status = Status.UNCONFIRMED.value if krow.score > jrow.score else Status.CONTRADICTED.value
    row.score = _score_of(counts, krow.score, jrow.score)
    row.message, row.error, row.failure = UNDER_REVIEW, "", None
    return row


def _kernel_text(krow) -> str:
    """What a student may read of one kernel's outcome: pass/fail, or a limit's fixed text."""
    if krow.score >= krow.max_score:
        return ""
    return (Status.of(krow.status).message if krow.status != "ok" else None) or KERNEL_FAILED


# a whole notebook's status (nothing was graded), or the grader's own failure: one row, no pair
_WHOLE = {"invalid-notebook", "missing-notebook", "refused", "grader-error", "not-in-notebook"}


class DifferenceHidden(AssertionError):
    """A merged row breaks the two-verdicts rule: a grader bug, never a score."""


def check_rows(rows, counts: str) -> None:
    """The rule of this module, checked on every merged notebook: a row whose two scores differ
    has a difference status and counts the setting's score; a row whose scores agree has neither;
    a difference row shows the student only :data:`UNDER_REVIEW`."""
    for r in rows:
        ks, js = getattr(r, "kernel_score", None), getattr(r, "judge_score", None)
        if ks is None or js is None:
            if r.status in (Status.UNCONFIRMED, Status.CONTRADICTED):
                raise DifferenceHidden(f"{r.grade_id}: a difference status without two scores")
            continue
        differs = ks != js
        if r.status == Status.SETTLED:
            continue
        marked = r.status in (Status.UNCONFIRMED, Status.CONTRADICTED)
        if differs != marked:
            raise DifferenceHidden(
                f"{r.grade_id}: one kernel {ks:g}, the judge {js:g}, status {r.status}"
            )
        if differs and (r.score != _score_of(counts, ks, js) or r.message != UNDER_REVIEW):
            raise DifferenceHidden(f"{r.grade_id}: a difference counted or shown wrong")


def difference_lines(rows, counts: str) -> list[str]:
    """``review.txt``'s lines for the differences: one per row, both scores and the judge's reason."""
    from autograder.grading.results.report import safe_cell

    lines = []
    for r in sorted(rows, key=lambda r: (r.student, r.assignment, r.notebook)):
        if r.status not in (Status.UNCONFIRMED, Status.CONTRADICTED):
            continue
        lines.append(
            f"{safe_cell(r.student)}/{r.assignment}/{r.notebook}: {r.grade_id}: {r.status}: "
            f"one kernel {r.kernel_score:g}, the judge {r.judge_score:g} / {r.max_score:g} "
            f"({r.judge_reason[:200]}); counted {r.score:g} (AutograderGrade.counts = {counts!r}; "
            "`autograder settle` to close it)"
        )
    return lines


def settled(out) -> dict:
    """``OUT/settled.csv`` (:mod:`.results.settle`): ``{(student, assignment, notebook, grade_id):
    (kernel_score, judge_score, took, score)}``, the latest entry of each row."""
    import csv
    from pathlib import Path

    path = Path(out) / "settled.csv"
    found: dict = {}
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            for e in csv.DictReader(fh):
                key = (e["student"], e["assignment"], e["notebook"], e["grade_id"])
                found[key] = (e["kernel_score"], e["judge_score"], e["took"], e["score"])
    except (OSError, KeyError, ValueError):
        return {}
    return found


def apply_settled(rows, decisions: dict) -> None:
    """The instructor's settlements on rows graded again (``autograder serve`` writes its grades
    from every attempt's rows; a re-run of ``autograder grade``): a difference whose two scores
    are the ones settled keeps the settlement (status ``settled``); any other stays open."""

    def num(x) -> str:
        return format(float(x), "g")

    for r in rows:
        if r.status not in (Status.UNCONFIRMED, Status.CONTRADICTED):
            continue
        d = decisions.get((r.student, r.assignment, r.notebook, r.grade_id))
        if d is None or r.kernel_score is None or r.judge_score is None:
            continue
        try:
            same = (num(d[0]), num(d[1])) == (num(r.kernel_score), num(r.judge_score))
            score = float(d[3])
        except ValueError:
            continue
        if same:
            r.status, r.score = Status.SETTLED.value, score
            r.judge_reason = f"settled: took {d[2]}'s score; " + r.judge_reason
            r.message = ""
