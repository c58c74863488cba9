"""Calibrate on the source, and grade in one kernel what the judge cannot grade as nbgrader would.

Before a class is graded, each notebook's source (the instructor's solution, nbgrader's
source directory) is graded exactly like a submission: its own cells as the student's, its
test cells in the judge. A test cell the judge cannot run (IPython magics, ``!``,
``get_ipython()``, ``display()``, ``globals()``, ``exec``/``eval``: :func:`.config.judge_cannot_run`),
or whose solution does not get full marks there (status not ``ok``, or fewer points: a test
written for one kernel that the judge's split does not reproduce), makes its notebook
**in-kernel**: every test cell of that notebook is then graded in the sandbox's single-kernel
mode, nbgrader's semantics - the student process runs the student's cells and the source's
test cells in notebook order in one IPython shell (names a test cell defines are visible to
later cells, a test cell's changes stay), with the same time, memory and output limits. The
process reports, per test cell, whether it raised, whether it wrote to stderr and the
``text/plain`` of the value it displayed; the host scores that with nbgrader's own
:func:`nbgrader.utils.determine_grade` (error -> 0, stderr -> 0, else the points or the
partial credit). Those rows get status ``in-kernel``: as trustworthy as stock nbgrader's (the
student's process can forge them, as under ``nbgrader autograde``).

One kernel needs every test cell in it, so the whole notebook switches (the simplest
faithful choice). Its source is then calibrated in one kernel too: if the solution does not
get full marks there either, the assignment is refused with a message naming the cells (a
grader limitation is never a student's 0). Results: printed once per assignment, and written
to ``OUT/calibration.txt``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from autograder.grading.status import OF_CELL
from autograder.wire.types import Limits

SOURCE_STUDENT = "instructor-source"
KERNEL = "in-kernel"
JUDGE = "judge"
REFUSED = "refused"


@dataclass
class NotebookMode:
    assignment: str
    notebook: str
    n_tests: int
    mode: str = JUDGE
    reasons: dict = field(default_factory=dict)  # grade_id -> why the judge does not grade it
    problems: list = field(
        default_factory=list
    )  # why the notebook cannot be graded in one kernel either

    def lines(self) -> list[str]:
        head = f"{self.assignment}/{self.notebook}: "
        if self.mode == JUDGE:
            return [head + f"judge: the solution gets full marks on all {self.n_tests} test cells"]
        if self.mode == KERNEL:
            out = [
                head
                + f"in-kernel: all {self.n_tests} test cells graded in one kernel, as stock nbgrader "
                "(the solution gets full marks there); the judge does not grade:"
            ]
        else:
            out = [head + "refused: the judge does not grade:"]
        out += [f"  {gid}: {why}" for gid, why in self.reasons.items()]
        if self.problems:
            out.append("  and in one kernel the solution does not get full marks either:")
            out += [f"  {p}" for p in self.problems]
        return out


def source_submission(source_nb):
    """The instructor's source notebook as a submission (its solution cells as the student's)."""
    from autograder.grading.intake.collect import Submission, _extra_files, plan

    items, layout = plan(source_nb, source_nb.nb)
    return Submission(
        SOURCE_STUDENT,
        source_nb.assignment,
        source_nb.name,
        source_nb.path,
        source_nb,
        nb=source_nb.nb,
        items=items,
        layout=layout,
        files=_extra_files(source_nb.path.parent),
    )


def kernel_task(sub, task: dict) -> dict:
    """``task`` with every test cell run in the student process, in place, as one kernel runs it."""
    base = sum(1 for item in sub.items if item[0] == "cell")
    items = []
    for item in task["items"]:
        if item[0] == "test":
            k = item[1]
            items.append(["cell", base + k, sub.source.tests[k].source, "test"])
        else:
            items.append(item)
    return dict(task, items=items, tests=[])


def kernel_result(sub, result):
    """A result of :func:`kernel_task` in the shape the judge's gives: the test cells' outcomes
    scored by nbgrader's rules, the student's cells alone in ``cells``."""
    if not isinstance(result, dict):
        return result
    base = sum(1 for item in sub.items if item[0] == "cell")
    cells = [c for c in result.get("cells", []) if isinstance(c, dict)]
    by_index = {c.get("index"): c for c in cells}
    tests = [_verdict(test, by_index.get(base + k)) for k, test in enumerate(sub.source.tests)]
    return dict(
        result,
        cells=[c for c in cells if isinstance(c.get("index"), int) and c["index"] < base],
        tests=tests,
    )


def _verdict(test, c) -> dict:
    """One test cell's outcome (untrusted data from the student's process) scored as nbgrader scores it."""
    from nbformat.v4 import new_code_cell, new_output
    from nbgrader.utils import determine_grade

    if not c or c.get("status") == "not-run":
        return {"passed": False, "status": "not-run"}
    output = c.get("output") if isinstance(c.get("output"), str) else ""
    status = c.get("status")
    if status in OF_CELL:
        return {
            "passed": False,
            "status": OF_CELL[status],
            "output": output,
            "message": {
                "timeout": "the test ran past the time limit and was interrupted",
                "died": "the notebook's process died during the test",
            }.get(status, "")
            or (c.get("error") or "")[:1500],
        }
    error = c.get("error") if isinstance(c.get("error"), str) else None
    value = c.get("value") if isinstance(c.get("value"), str) else None
    outputs = []
    if c.get("stderr") is True:
        outputs.append(new_output("stream", name="stderr", text="(stderr)"))
    if error is None and value is not None:
        outputs.append(new_output("execute_result", data={"text/plain": value}, execution_count=1))
    if error is not None:
        outputs.append(
            new_output("error", ename=error.split(":")[0][:200], evalue=error, traceback=[])
        )
    cell = new_code_cell(
        "",
        outputs=outputs,
        metadata={
            "nbgrader": {
                "grade": True,
                "solution": False,
                "points": test.points,
                "grade_id": test.grade_id,
            }
        },
    )
    try:
        score, _ = determine_grade(cell)
    except (
        ValueError
    ):  # partial credit above the points (nbgrader stops there): the points, as the judge
        score = test.points
    except KeyError:  # an empty text/plain: no partial credit to read
        score = test.points
    score = float(score)
    if error is not None:
        return {
            "passed": False,
            "error": error.split(":")[0][:200],
            "message": error[:1500].rstrip().rstrip(":"),
            "output": output,
        }
    if c.get("stderr") is True and score == 0:
        return {
            "passed": False,
            "error": "",
            "output": output,
            "message": "the test wrote to stderr (nbgrader scores that as a failure)",
        }
    return {"passed": True, "partial": None if score >= test.points else score, "output": output}


class Calibration:
    """Which notebooks are graded in the judge, which in one kernel, which are refused."""

    def __init__(self, course):
        self.course = course
        self.modes: dict = {}  # (assignment, notebook) -> NotebookMode
        self.seconds = 0.0  # wall time of calibrating (includes waiting for the sandboxes to start)
        self.grading = []  # per round, the source notebooks' grading time in the sandboxes, summed

    # -- what the grading pipeline asks ---------------------------------------------
    def mode(self, sub) -> str:
        m = self.modes.get((sub.assignment, sub.notebook))
        return m.mode if m is not None else JUDGE

    def task(self, sub, limits, imports) -> dict:
        task = sub.task(limits, imports)
        return kernel_task(sub, task) if self.mode(sub) == KERNEL else task

    def result(self, sub, result):
        return kernel_result(sub, result) if self.mode(sub) == KERNEL and not sub.status else result

    def rows_for(self, sub, result, error=None):
        """:func:`.report.rows_for` (``result`` already through :meth:`result`); in-kernel rows
        that ran say so."""
        from autograder.grading.results.report import rows_for

        rows = rows_for(sub, result, error)
        if self.mode(sub) == KERNEL and not sub.status:
            for row in rows:
                if row.status == "ok":
                    row.status = KERNEL
        return rows

    @property
    def refused(self) -> dict:
        out: dict = {}
        for m in self.modes.values():
            if m.mode == REFUSED:
                out.setdefault(m.assignment, []).extend(
                    [f"{m.notebook}: test cell {gid!r}: {why}" for gid, why in m.reasons.items()]
                    + [f"{m.notebook}: in one kernel: {p}" for p in m.problems]
                )
        return out

    def lines(self) -> list[str]:
        return [line for key in sorted(self.modes) for line in self.modes[key].lines()]

    # -- calibrating -----------------------------------------------------------------
    def calibrate(self, assignments, run, limits, imports) -> Calibration:
        """Grade every source notebook of ``assignments``; ``run(tasks, on_result)`` grades tasks
        (the pool that grades the class)."""
        from autograder.grading.config import judge_cannot_run

        started = time.monotonic()
        # calibration asks "does the judge grade the solution right?", not "is it fast enough?": a tight
        # --wall-limit or --timeout for the class must not send a notebook to one kernel
        limits = Limits.of(limits)
        limits = limits.replace(
            wall=max(float(limits.wall), 600.0), timeout=max(float(limits.timeout), 120.0)
        )
        first = []
        for a in assignments:
            for nb in self.course.notebooks(a):
                m = NotebookMode(a, nb.name, len(nb.tests), reasons=judge_cannot_run(nb))
                self.modes[(a, nb.name)] = m
                if not nb.tests:
                    continue
                if m.reasons:
                    m.mode = KERNEL
                first.append(source_submission(nb))
        again = []
        for sub, rows in self._grade(first, run, limits, imports):
            m = self.modes[(sub.assignment, sub.notebook)]
            bad = [r for r in rows if r.status not in ("ok", KERNEL) or r.score < r.max_score]
            if not bad:
                continue
            if m.mode == JUDGE:
                m.mode = KERNEL
                m.reasons.update(
                    {r.grade_id: "the solution " + _why(r, "in the judge") for r in bad}
                )
                again.append(sub)
            else:
                m.mode, m.problems = (
                    REFUSED,
                    [f"{r.grade_id}: the solution " + _why(r, "") for r in bad],
                )
        for sub, rows in self._grade(again, run, limits, imports):
            bad = [r for r in rows if r.status not in ("ok", KERNEL) or r.score < r.max_score]
            if bad:
                m = self.modes[(sub.assignment, sub.notebook)]
                m.mode, m.problems = (
                    REFUSED,
                    [f"{r.grade_id}: the solution " + _why(r, "") for r in bad],
                )
        self.seconds = time.monotonic() - started
        return self

    def _grade(self, subs, run, limits, imports):
        if not subs:
            return []
        by_key = {s.key: s for s in subs}
        got = {}
        run(
            [(s.key, self.task(s, limits, imports)) for s in subs],
            lambda key, result, error: got.__setitem__(key, (result, error)),
        )
        out = []
        self.grading.append(sum((r[0] or {}).get("seconds", 0.0) for r in got.values()))
        for key, sub in by_key.items():
            result, error = got.get(key, (None, "no result"))
            out.append((sub, self.rows_for(sub, self.result(sub, result), error)))
        return out


def _why(row, where) -> str:
    text = f"scores {row.score:g} / {row.max_score:g}" + (f" {where}" if where else "")
    if row.status not in ("ok", KERNEL):
        text += f" (status {row.status})"
    first = (row.message or "").strip().splitlines()
    if first:
        text += f": {first[0][:300]}"
    return text
