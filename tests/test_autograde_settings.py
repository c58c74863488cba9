"""nbgrader's autograde settings honoured as `nbgrader autograde` honours them (issue 36, item 2):
``CourseDirectory.student_id_exclude``, ``Autograde.create_student = False`` and
``Autograde.permissions`` (the mode of the files in ``autograded/``).

One course (exercise 1); students alice (in the gradebook), bob (excluded) and carol (not in the
gradebook), each handing in the solution (alice's with a cell that writes files); graded by the real stock command and by
`autograder grade` on two copies of the course.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import nbformat
import pytest

from autograder.course import SOLUTIONS, TempCourse
from autograder.procs import explain
from test_any_course import grade  # `autograder grade` from a folder, any exit status

ASSIGNMENT = NOTEBOOK = "01_relu_inplace"
STUDENTS = ("alice", "bob", "carol")
WRITES = """import os
os.makedirs("results", exist_ok=True)
with open("results/loss.txt", "w") as fh:
    fh.write("0.25\\n")
with open("wrote.txt", "w") as fh:
    fh.write("alice's code wrote this\\n")
with open("data.txt", "a") as fh:
    fh.write("and alice's code added this\\n")
"""


def _graded(root: Path) -> set[str]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return {sub.student.id for sub in gb.assignment_submissions(ASSIGNMENT)}


def _mode(root: Path, student: str) -> int:
    return stat.S_IMODE(
        (root / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb").stat().st_mode
    )


@pytest.fixture(scope="module")
def courses(tmp_path_factory, needs_bubblewrap):
    root = tmp_path_factory.mktemp("settings")
    course = TempCourse(root / "stock", [ASSIGNMENT])
    with open(course.root / "nbgrader_config.py", "a") as fh:
        fh.write('\nc.CourseDirectory.student_id_exclude = "bob"\n')
        fh.write("c.Autograde.create_student = False\n")
    # a data file in the source folder, and two files in alice's submission: one of the same name
    # (the source's overwrites it), one of her own (kept)
    (course.root / "solutions" / ASSIGNMENT / "data.txt").write_text("the instructor's data\n")
    course.generate()
    course.nbgrader("db", "student", "add", "alice")
    solution = SOLUTIONS / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    # alice's notebook writes files while it runs (nbgrader's test_side_effects, in a real course):
    # one new, one in a folder, one over the source's data file
    nb = nbformat.read(solution, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(WRITES))
    alices = root / f"{NOTEBOOK}.ipynb"
    nbformat.write(nb, alices)
    for student in STUDENTS:
        course.submit(student, ASSIGNMENT, alices if student == "alice" else solution)
    folder = course.root / "submitted" / "alice" / ASSIGNMENT
    (folder / "data.txt").write_text("alice's copy\n")
    (folder / "notes").mkdir()
    (folder / "notes" / "alice.md").write_text("my notes\n")
    ours = root / "ours"
    shutil.copytree(course.root, ours)
    stock = course.nbgrader("autograde", ASSIGNMENT, "--force", check=False)
    proc = grade(ours, str(ours / "submitted"), "--out", str(ours / "out"), "--course", str(ours))
    return {"stock": stock, "stock_root": course.root, "ours": proc, "ours_root": ours}


def test_excluded_and_unknown_students_are_not_graded_as_stock(courses):
    # a refused submission fails the command, as stock's (exit 1; here 4: "something refused")
    assert courses["stock"].returncode == 1, explain(courses["stock"])
    assert courses["ours"].returncode == 4 and "carol/01_relu_inplace" in courses["ours"].stderr
    assert _graded(courses["stock_root"]) == {"alice"}, explain(courses["stock"])
    assert _graded(courses["ours_root"]) == {"alice"}, explain(courses["ours"])
    rows = (courses["ours_root"] / "out" / "grades.csv").read_text().splitlines()[1:]
    by_student = {}
    for row in rows:
        by_student.setdefault(row.split(",")[0], set()).add(row.split(",")[6])
    assert "bob" not in by_student  # excluded: not a row, as stock does not look at it
    assert by_student["carol"] == {"refused"}  # not in the gradebook: refused, saying why
    results = (courses["ours_root"] / "out" / "results.jsonl").read_text()
    assert "Autograde.create_student is False" in results


def test_autograded_files_have_stocks_mode(courses):
    assert _mode(courses["stock_root"], "alice") == 0o444
    assert _mode(courses["ours_root"], "alice") == 0o444


def _other_files(root: Path, student: str) -> dict:
    folder = root / "autograded" / student / ASSIGNMENT
    return {
        str(p.relative_to(folder)): (p.read_text(), stat.S_IMODE(p.stat().st_mode))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix != ".ipynb"
    }


def test_the_assignments_other_files_reach_autograded_as_stock_copies_them(courses):
    """Issue 36 item 3: the student's files, then the source folder's over them, then what the
    notebook wrote while it ran (nbgrader's test_side_effects), none of it in submitted/."""
    stock = _other_files(courses["stock_root"], "alice")
    assert stock == {
        "data.txt": ("the instructor's data\nand alice's code added this\n", 0o444),
        "notes/alice.md": ("my notes\n", 0o444),
        "results/loss.txt": ("0.25\n", 0o444),
        "wrote.txt": ("alice's code wrote this\n", 0o444),
    }
    assert _other_files(courses["ours_root"], "alice") == stock
    assert not (courses["ours_root"] / "submitted" / "alice" / ASSIGNMENT / "wrote.txt").exists()


def test_nbgrader_command_line_options_override_the_files(courses, tmp_path):
    """nbgrader's --Class.trait=value form, read over nbgrader_config.py as nbgrader reads it; and
    --no-execute refused at start, naming it."""
    ours = courses["ours_root"]
    proc = grade(
        ours,
        str(ours / "submitted"),
        "--out",
        str(tmp_path / "out"),
        "--course",
        str(ours),
        "--no-gradebook",
        "--CourseDirectory.student_id_exclude=alice",
    )
    # bob and carol are not in the gradebook (Autograde.create_student = False): refused, exit 4
    assert proc.returncode == 4 and "bob/01_relu_inplace" in proc.stderr, explain(proc)
    rows = (tmp_path / "out" / "grades.csv").read_text().splitlines()[1:]
    assert {row.split(",")[0] for row in rows} == {"bob", "carol"}  # alice excluded, not bob
    refused = grade(ours, "--out", str(tmp_path / "x"), "--course", str(ours), "--no-execute")
    assert refused.returncode == 2 and "--no-execute is not supported" in refused.stderr
