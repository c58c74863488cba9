"""Hand in an exercise without a JupyterHub: a zip in nbgrader's ``submitted/`` layout.

    autograder submit exercises/01_relu_inplace/01_relu_inplace.ipynb --student alice

writes ``submissions/alice-01_relu_inplace.zip`` containing::

    submitted/alice/01_relu_inplace/01_relu_inplace.ipynb
    submitted/alice/01_relu_inplace/timestamp.txt        (UTC, nbgrader's format)

The instructor imports it with ``autograder collect alice-01_relu_inplace.zip`` (which checks
the zip and never writes outside ``submitted/alice/01_relu_inplace/``) and grades with
``autograder grade`` or ``nbgrader autograde 01_relu_inplace``.

Everything is checked before anything is written, so bad input (a missing file, a renamed
notebook, invalid JSON, an id nbgrader cannot use) gets a clear error and an earlier zip is
never replaced by a broken one.
"""

from __future__ import annotations

import datetime
import os
import re
import sys
import tempfile
import zipfile
from pathlib import Path

from autograder.course import EXERCISES, graded_cells
from autograder.learner.selfcheck import SelfCheckError, read_notebook

__all__ = ["SubmitError", "submit", "add_parser"]

STUDENT_ID = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
)  # fullmatch: `$` matches before a final newline
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"  # nbgrader's Exchange.timestamp_format


class SubmitError(Exception):
    """The notebook cannot be submitted; the message says why and what to do."""


def _release_notebooks(assignment: str, release: Path) -> dict:
    folder = release / assignment
    return {p.name: p for p in sorted(folder.glob("*.ipynb"))} if folder.is_dir() else {}


def submit(
    notebook,
    student: str,
    assignment: str | None = None,
    output: Path | None = None,
    release: Path = EXERCISES,
    now: datetime.datetime | None = None,
) -> Path:
    """Validate ``notebook`` and write the zip; return its path. Raises :class:`SubmitError`."""
    notebook = Path(notebook)
    if not STUDENT_ID.fullmatch(student or ""):
        raise SubmitError(
            f"student id {student!r} cannot be used: use letters, digits, '.', '_' and '-' "
            "only (at most 64, starting with a letter or digit), e.g. the id your instructor gave you"
        )
    try:
        nb = read_notebook(notebook)
    except SelfCheckError as exc:
        raise SubmitError(str(exc)) from None
    assignment = assignment or notebook.resolve().parent.name
    if not release.is_dir():
        raise SubmitError(
            f"cannot find the course's exercises folder ({release}): run `autograder submit` "
            "from the course's own checkout (where `make lab` runs)"
        )
    known = sorted(p.name for p in release.iterdir() if p.is_dir() and not p.name.startswith("."))
    releases = _release_notebooks(assignment, release)
    if not releases:
        raise SubmitError(
            f"unknown assignment {assignment!r} (taken from the notebook's folder): use "
            f"--assignment with one of {', '.join(known) or '(none found)'}"
        )
    if notebook.name not in releases:
        expected = " or ".join(releases)
        raise SubmitError(
            f"nbgrader grades a notebook by its file name, and {notebook.name!r} is not one of "
            f"assignment {assignment}'s notebooks ({expected}). Rename it (File > Rename "
            "Notebook) or submit the right file."
        )
    release_nb = read_notebook(releases[notebook.name])
    expected_answers, _ = graded_cells(release_nb)
    answers, _ = graded_cells(nb)
    if set(answers) != set(expected_answers):
        raise SubmitError(
            f"{notebook.name} does not look like assignment {assignment}: its answer cells are "
            f"{', '.join(answers) or '(none)'}, expected {', '.join(expected_answers)}"
        )

    stamp = (now or datetime.datetime.now(datetime.UTC)).strftime(TIMESTAMP_FORMAT)
    output = Path(output) if output else Path("submissions") / f"{student}-{assignment}.zip"
    folder = f"submitted/{student}/{assignment}"
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".submit-", suffix=".zip", dir=output.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.write(notebook, f"{folder}/{notebook.name}")
            zf.writestr(f"{folder}/timestamp.txt", stamp)
        os.replace(tmp, output)  # an earlier zip is replaced only by a complete new one
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return output


def _not_attempted(notebook: Path) -> list:
    nb = read_notebook(notebook)
    return [
        c.metadata["nbgrader"]["grade_id"]
        for c in nb.cells
        if c.cell_type == "code"
        and c.metadata.get("nbgrader", {}).get("solution")
        and "raise NotImplementedError" in c.source
    ]


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "submit",
        help="zip an exercise notebook for your instructor (nbgrader submitted/ layout)",
        description="Check that NOTEBOOK is an exercise of this course and write a zip with it in "
        "nbgrader's layout submitted/STUDENT/ASSIGNMENT/NOTEBOOK.ipynb (plus timestamp.txt). "
        "Hand the zip to your instructor; with a JupyterHub, use Nbgrader > Assignment List instead.",
    )
    parser.add_argument(
        "notebook", type=Path, help="e.g. exercises/01_relu_inplace/01_relu_inplace.ipynb"
    )
    parser.add_argument(
        "--student", required=True, help="your student id (as your instructor knows you)"
    )
    parser.add_argument(
        "--assignment", help="assignment name (default: the notebook's folder name)"
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="zip file to write (default: submissions/STUDENT-ASSIGNMENT.zip)",
    )
    parser.set_defaults(func=_main)


def _main(args) -> int:
    try:
        path = submit(args.notebook, args.student, args.assignment, args.output)
    except SubmitError as exc:
        print(f"autograder submit: {exc}", file=sys.stderr)
        return 2
    print(f"Wrote {path}")
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            print(f"  {name}")
    todo = _not_attempted(args.notebook)
    if todo:
        print(
            f"Note: {', '.join(todo)} still raise NotImplementedError (not attempted yet); they score 0."
        )
    print(
        "Send this file to your instructor. Run `autograder check` first to see the visible tests pass."
    )
    return 0
