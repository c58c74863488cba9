"""Late submissions as `nbgrader autograde` handles them (issue 36, item 1): `timestamp.txt` read,
the submission's time and lateness recorded in the gradebook, the `LateSubmissionPlugin` penalty
applied, `timestamp.txt` copied into `autograded/`; an unreadable timestamp refuses the submission.

One course (exercise 1, due 2026-01-01 12:00 UTC, `LateSubmissionPlugin.penalty_method = 'zero'`),
six students handing in the instructor's solution with different `timestamp.txt` files, graded
by the real stock command and by `autograder grade` on two copies; their gradebooks compared.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.course import SOLUTIONS, TempCourse
from autograder.procs import explain
from test_any_course import grade  # `autograder grade` from a folder, any exit status

ASSIGNMENT = NOTEBOOK = "01_relu_inplace"
DUE = "2026-01-01 12:00:00 UTC"
STAMPS = {
    "early": "2026-01-01 11:00:00.000000 UTC",
    "late1h": "2026-01-01 13:00:00.000000 UTC",
    "late4h": "2026-01-01 16:00:00.000000 UTC",
    "nostamp": None,
    "emptystamp": "",
}
BAD = "badstamp"  # "yesterday-ish": no date nbgrader reads


def _gradebook(root: Path) -> dict:
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for sub in gb.assignment_submissions(ASSIGNMENT):
            (nb,) = sub.notebooks
            out[sub.student.id] = {
                "timestamp": sub.timestamp,
                "seconds late": sub.total_seconds_late,
                "score": nb.score,
                "penalty": nb.late_submission_penalty,
            }
    return out


@pytest.fixture(scope="module")
def courses(tmp_path_factory, needs_bubblewrap):
    root = tmp_path_factory.mktemp("late")
    course = TempCourse(root / "stock", [ASSIGNMENT])
    with open(course.root / "nbgrader_config.py", "a") as fh:
        fh.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    course.generate()
    course.nbgrader("db", "assignment", "add", ASSIGNMENT, f"--duedate={DUE}")
    for student, stamp in [*STAMPS.items(), (BAD, "yesterday-ish")]:
        path = course.submit(student, ASSIGNMENT, SOLUTIONS / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
        if stamp is not None:
            (path.parent / "timestamp.txt").write_text(stamp)
    ours = root / "ours"
    shutil.copytree(course.root, ours)
    stock = course.nbgrader("autograde", ASSIGNMENT, "--force", check=False)
    proc = grade(ours, str(ours / "submitted"), "--out", str(ours / "out"), "--course", str(ours))
    return {"stock": stock, "stock_root": course.root, "ours": proc, "ours_root": ours}


def test_lateness_and_penalties_are_stocks(courses):
    stock, ours = _gradebook(courses["stock_root"]), _gradebook(courses["ours_root"])
    assert set(stock) == set(STAMPS), explain(courses["stock"])  # stock refused the bad one
    assert {s: ours[s] for s in STAMPS} == stock, explain(courses["ours"])
    # what the comparison covers: on time, late by 3,600 s and 14,400 s with the 'zero' penalty
    assert stock["early"]["seconds late"] == 0 and stock["early"]["penalty"] is None
    assert stock["late1h"]["seconds late"] == 3600
    assert stock["late4h"]["seconds late"] == 14400
    assert stock["late4h"]["penalty"] == stock["late4h"]["score"] > 0
    assert stock["nostamp"]["timestamp"] is None and stock["emptystamp"]["timestamp"] is None


def test_late_notebooks_show_in_late_csv_review_and_the_class_report(courses):
    """The instructor sees lateness and penalties without opening the gradebook: late.csv,
    review.txt, the run's summary and `autograder report`'s page."""
    out = courses["ours_root"] / "out"
    late = (out / "late.csv").read_text().splitlines()
    assert late[0] == "student,assignment,notebook,seconds_late,late_penalty"
    penalty = _gradebook(courses["ours_root"])["late4h"]["penalty"]
    assert sorted(late[1:]) == [
        f"late1h,{ASSIGNMENT},{NOTEBOOK},3600,{penalty:g}",
        f"late4h,{ASSIGNMENT},{NOTEBOOK},14400,{penalty:g}",
    ]
    review = (out / "review.txt").read_text()
    assert f"late4h/{ASSIGNMENT}/{NOTEBOOK}: submitted 14400 s late, late penalty" in review
    assert "2 notebook(s) submitted late, 2 with a late penalty" in courses["ours"].stdout
    from autograder.grading.results.class_report import write_report

    page = write_report(out, out / "report", with_students=True).read_text()
    assert "Late submissions: 2 notebook(s)" in page and "late4h" in page


def test_timestamp_is_copied_to_autograded(courses):
    for key in ("stock_root", "ours_root"):
        folder = courses[key] / "autograded"
        for student, stamp in STAMPS.items():
            copied = folder / student / ASSIGNMENT / "timestamp.txt"
            if stamp:
                assert copied.read_text() == stamp, (key, student)
            else:
                assert not copied.exists() or copied.read_text() == stamp, (key, student)


def test_an_unreadable_timestamp_refuses_that_submission_and_says_why(courses):
    stock = courses["stock"]
    # stock: exit 1, the traceback through CourseDirectory.get_existing_timestamp
    assert stock.returncode != 0 and "get_existing_timestamp" in stock.stderr
    rows = [
        line
        for line in (courses["ours_root"] / "out" / "grades.csv").read_text().splitlines()
        if line.startswith(f"{BAD},")
    ]
    assert rows and all(",refused," in row for row in rows), rows
    assert BAD not in _gradebook(courses["ours_root"])  # as stock: nothing recorded for it
    assert "timestamp.txt holds 'yesterday-ish'" in courses["ours"].stdout + courses["ours"].stderr
    # and the command fails as stock's does (exit 4: something was refused, the rest graded)
    assert courses["ours"].returncode == 4 and f"{BAD}/" in courses["ours"].stderr


def test_student_and_notebook_patterns_select_as_nbgraders(courses, tmp_path):
    """nbgrader's --student and --notebook (glob patterns), and its --force, on `autograder grade`."""
    ours = courses["ours_root"]
    proc = grade(
        ours,
        str(ours / "submitted"),
        "--out",
        str(tmp_path / "out"),
        "--course",
        str(ours),
        "--student",
        "late*",
        "--notebook",
        NOTEBOOK,
        "--force",
        "--no-gradebook",
    )
    assert proc.returncode == 0, explain(proc)
    lines = (tmp_path / "out" / "grades.csv").read_text().splitlines()[1:]
    assert {line.split(",")[0] for line in lines} == {"late1h", "late4h"}
