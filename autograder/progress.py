"""``autograder progress``: where the learner stands on every exercise of the course.

    autograder progress [EXERCISES_FOLDER]

From a cell (course/00_checking_and_submitting.ipynb has one)::

    from autograder.progress import progress
    progress("../exercises")

For every exercise notebook of the course (the assignments of ``solutions/``; in a copy
without it, the folders of ``exercises/``) it reads the *saved* notebook and says:

* ``not started``: every answer cell still raises ``NotImplementedError`` (nothing is run);
* ``visible tests fail``: started, and a visible test fails;
* ``visible tests pass``: every visible test passes, some hidden test does not;
* ``full marks``: every test passes, the hidden ones included;

with the score, from the full check (:mod:`autograder.fullcheck`: the notebooks are graded
in the sandbox with this copy's ``solutions/``). Without ``solutions/`` or bubblewrap it runs
the visible tests only and says why there is no score.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .course import REPO

__all__ = ["ExerciseProgress", "progress_report", "progress", "add_parser"]

NOT_STARTED = "not started"
VISIBLE_FAIL = "visible tests fail"
VISIBLE_PASS = "visible tests pass"
FULL_MARKS = "full marks"
MISSING = "missing"
UNREADABLE = "cannot be read"


@dataclass
class ExerciseProgress:
    assignment: str
    notebook: str
    path: Path
    status: str
    score: float | None = None
    max_score: float | None = None
    detail: str = ""

    def line(self, width: int) -> str:
        name = (
            self.assignment
            if self.notebook == self.assignment
            else f"{self.assignment}/{self.notebook}"
        )
        score = (
            f"score {_num(self.score)} / {_num(self.max_score)}"
            if self.score is not None
            else f"score ? / {_num(self.max_score)}"
            if self.max_score is not None
            else "score ?"
        )
        status = self.status + (f" ({self.detail})" if self.detail else "")
        return f"  {name:<{width}}  {status:<40}  {score}"


def _num(x) -> str:
    return format(float(x), "g")


def _exercises_folder(folder) -> Path:
    if folder is not None:
        return Path(folder)
    here = Path.cwd() / "exercises"
    return here if here.is_dir() else REPO / "exercises"


def _course_root(course_root) -> Path:
    return Path(course_root) if course_root is not None else REPO


def _exercise_list(exercises: Path, root: Path) -> list:
    """``[(assignment, notebook name)]``: the course's (solutions/), else what exercises/ holds."""
    source = root / "solutions"
    base = source if source.is_dir() else exercises
    out = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
        out += [(folder.name, nb.stem) for nb in sorted(folder.glob("*.ipynb"))]
    return out


def _max_points(nb) -> float:
    return sum(
        float(c.metadata.get("nbgrader", {}).get("points", 0))
        for c in nb.cells
        if c.cell_type == "code"
        and c.metadata.get("nbgrader", {}).get("grade")
        and not c.metadata.get("nbgrader", {}).get("solution")
    )


def _not_started(nb) -> bool:
    answers = [
        c
        for c in nb.cells
        if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
    ]
    return all("raise NotImplementedError" in c.source for c in answers)


def progress_report(exercises=None, course_root=None) -> tuple[list, list]:
    """``(rows, notes)``: an :class:`ExerciseProgress` per exercise notebook, and notes to print."""
    from .fullcheck import NO_SOLUTIONS, grade_notebooks
    from .learner.selfcheck import SelfCheckError, read_notebook, run_visible_tests

    exercises = _exercises_folder(exercises)
    root = _course_root(course_root)
    if not exercises.is_dir():
        raise SelfCheckError(f"no exercises folder {exercises}")
    rows, started, notes = [], [], []
    for assignment, name in _exercise_list(exercises, root):
        path = exercises / assignment / f"{name}.ipynb"
        row = ExerciseProgress(assignment, name, path, NOT_STARTED)
        rows.append(row)
        if not path.exists():
            row.status = MISSING
            continue
        try:
            nb = read_notebook(path)
        except SelfCheckError as exc:
            row.status, row.detail = UNREADABLE, str(exc)
            continue
        row.max_score = _max_points(nb)
        if _not_started(nb):
            row.score = 0.0
        else:
            started.append(row)
    if not started:
        return rows, notes
    try:
        reports = grade_notebooks([r.path for r in started], root)
    except SelfCheckError as exc:  # no solutions/ or no sandbox: the visible tests only
        notes.append(
            "no score: "
            + (str(exc) if str(exc) == NO_SOLUTIONS else f"the full check cannot run: {exc}")
        )
        for row in started:
            try:
                visible = run_visible_tests(row.path)
            except SelfCheckError as error:
                row.status, row.detail = UNREADABLE, str(error)
                continue
            row.status = VISIBLE_PASS if visible.ok else VISIBLE_FAIL
        return rows, notes
    for row, full in zip(started, reports, strict=True):
        row.score, row.max_score = full.score, full.max_score
        row.status = (
            FULL_MARKS if full.full_marks else VISIBLE_PASS if full.visible_pass else VISIBLE_FAIL
        )
    return rows, notes


def progress_text(exercises=None, course_root=None, shown=None) -> str:
    rows, notes = progress_report(exercises, course_root)
    folder = shown if shown is not None else str(_exercises_folder(exercises))
    width = max(
        [
            len(r.assignment if r.notebook == r.assignment else f"{r.assignment}/{r.notebook}")
            for r in rows
        ]
        + [10]
    )
    lines = [f"Progress, from the saved notebooks in {folder}:", ""]
    lines += [r.line(width) for r in rows]
    lines.append("")
    lines += [f"note: {n}" for n in notes]
    done = sum(r.status == FULL_MARKS for r in rows)
    lines.append(f"{done} of {len(rows)} exercises with full marks (hidden tests included).")
    return "\n".join(lines)


def progress(exercises=None, course=None) -> None:
    """Print the progress of the saved exercise notebooks in ``exercises`` (a folder)."""
    from .learner.selfcheck import SelfCheckError

    if os.environ.get("NBGRADER_EXECUTION"):
        print("Progress skipped: nbgrader is running this notebook.")
        return
    try:
        print(
            progress_text(
                exercises, course, shown=str(exercises) if exercises is not None else None
            )
        )
    except SelfCheckError as exc:
        print(f"Cannot show the progress: {exc}")


# --------------------------------------------------------------------------- command line


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "progress",
        help="for every exercise: not started / visible tests fail / visible tests pass / full marks, and the score",
        description="Read the saved exercise notebooks and print, for every exercise of the course, whether it "
        "is not started, its visible tests fail or pass, or it has full marks with the hidden tests, "
        "and its score (the full check: graded in the sandbox with this copy's solutions/).",
    )
    parser.add_argument(
        "exercises",
        nargs="?",
        type=Path,
        default=None,
        help="the folder of exercise notebooks (default: ./exercises, else this course's exercises/)",
    )
    parser.add_argument(
        "--course",
        type=Path,
        default=None,
        help="the course folder whose solutions/ holds the tests (default: this copy of the course)",
    )
    parser.set_defaults(func=_main)


def _main(args) -> int:
    from .learner.selfcheck import SelfCheckError

    try:
        print(
            progress_text(
                args.exercises,
                args.course,
                shown=str(args.exercises) if args.exercises is not None else None,
            )
        )
    except SelfCheckError as exc:
        print(f"autograder progress: {exc}", file=sys.stderr)
        return 2
    return 0
