"""Every nbgrader setting `nbgrader autograde` reads is honoured, named as changing nothing, or
refused at start (issue 36, item 2: none is silently ignored; autograder/grading/nbsettings.py).

The two settings whose default changes which cells run are proved against the real stock command
on one course (exercise 1) with nbgrader's defaults, graded by both on two copies:

* ``OverwriteCells.add_missing_cells = False`` (nbgrader's default; this course sets True): a
  test cell the student deleted (alice), or whose nbgrader metadata they removed (bob), is not
  run, scores 0 and waits for manual grading (``auto_score`` None, ``needs_manual_grade``);
* ``Execute.skip_cells_with_tag = "skip-execution"``: alice's cell so tagged, which would end her
  kernel, is not run.

carol hands in the solution as it is. dave hands in the blank release with one test cell tagged
``skip-execution``: stock skips that test and so gives its points (the tag survives nbgrader's
OverwriteCells), a forged pass `autograder grade` does not copy (the one difference, by design).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.course import SOLUTIONS, TempCourse
from autograder.grading.config import load
from autograder.grading.nbsettings import HONOURED, NO_EFFECT
from autograder.procs import explain
from test_any_course import grade, rows

ASSIGNMENT = NOTEBOOK = "01_relu_inplace"
EXIT = "import os\nos._exit(1)  # would end the kernel: tagged skip-execution, never run\n"


def _test_cells(nb):
    return [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        and c.metadata.get("nbgrader", {}).get("grade")
        and not c.metadata.get("nbgrader", {}).get("solution")
    ]


def _grades(root: Path) -> dict:
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student in ("alice", "bob", "carol", "dave"):
            nb = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
            for g in nb.grades:
                out[(student, g.name)] = (g.auto_score, g.needs_manual_grade)
    return out


@pytest.fixture(scope="module")
def defaults(tmp_path_factory, needs_bubblewrap):
    root = tmp_path_factory.mktemp("defaults")
    course = TempCourse(root / "stock", [ASSIGNMENT])
    config = course.root / "nbgrader_config.py"
    config.write_text(
        config.read_text().replace("add_missing_cells = True", "add_missing_cells = False")
    )
    exercises = course.generate()
    solution = nbformat.read(SOLUTIONS / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    tests = _test_cells(solution)
    alice = nbformat.from_dict(solution)
    gone = alice.cells[tests[0]].metadata.nbgrader["grade_id"]
    del alice.cells[tests[0]]
    cell = nbformat.v4.new_code_cell(EXIT)
    cell.metadata["tags"] = ["skip-execution"]
    alice.cells.insert(1, cell)
    bob = nbformat.from_dict(solution)
    stripped = bob.cells[tests[1]].metadata.pop("nbgrader")["grade_id"]
    release = nbformat.read(exercises / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    dave = nbformat.from_dict(release)
    tagged = dave.cells[_test_cells(dave)[0]]
    tagged.metadata["tags"] = ["skip-execution"]
    for name, nb in (("alice", alice), ("bob", bob), ("carol", solution), ("dave", dave)):
        path = root / f"{name}.ipynb"
        nbformat.write(nb, path)
        course.submit(name, ASSIGNMENT, path)
    ours = root / "ours"
    shutil.copytree(course.root, ours)
    stock = course.nbgrader("autograde", ASSIGNMENT, "--force", check=False)
    proc = grade(ours, str(ours / "submitted"), "--out", str(ours / "out"), "--course", str(ours))
    return {
        "stock": stock,
        "ours": proc,
        "stock_root": course.root,
        "ours_root": ours,
        "gone": gone,
        "stripped": stripped,
        "tagged": tagged.metadata.nbgrader["grade_id"],
        "n": len(tests),
    }


def test_missing_test_cells_and_skipped_cells_are_graded_as_stock(defaults):
    assert defaults["stock"].returncode == 0, explain(defaults["stock"])
    assert defaults["ours"].returncode == 0, explain(defaults["ours"])
    stock, ours = _grades(defaults["stock_root"]), _grades(defaults["ours_root"])
    # what stock does with nbgrader's defaults: the two cells wait for a person, alice's kernel
    # lived (the tagged cell never ran), every other test passed
    assert stock[("alice", defaults["gone"])] == (None, True)
    assert stock[("bob", defaults["stripped"])] == (None, True)
    waiting = {k for k, (score, manual) in stock.items() if manual}
    assert waiting == {("alice", defaults["gone"]), ("bob", defaults["stripped"])}
    assert all(
        score == 1.0 for k, (score, _) in stock.items() if k not in waiting and k[0] != "dave"
    )
    assert len(stock) == 4 * defaults["n"]
    # dave's blank release: every test fails, but the one he tagged, which stock skips and credits
    dave = {k[1]: v for k, v in stock.items() if k[0] == "dave"}
    assert dave.pop(defaults["tagged"]) == (1.0, False)
    assert all(v == (0.0, False) for v in dave.values())
    assert ours.pop(("dave", defaults["tagged"])) == (0.0, False)  # run: the forged pass not copied
    del stock[("dave", defaults["tagged"])]
    assert ours == stock


def test_the_instructor_and_the_student_see_why(defaults):
    out = defaults["ours_root"] / "out"
    by = {(r["student"], r["grade_id"]): r for r in rows(out / "grades.csv")}
    row = by[("alice", defaults["gone"])]
    assert row["status"] == "not-in-notebook" and float(row["score"]) == 0.0
    assert by[("bob", defaults["stripped"])]["status"] == "not-in-notebook"
    assert f"alice/{ASSIGNMENT}/{NOTEBOOK}" in (out / "review.txt").read_text()
    page = (out / "feedback" / "alice" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    assert "is not in your notebook" in page


def test_this_courses_settings_are_all_honoured():
    config = load(Path(__file__).resolve().parent.parent)
    assert config.refused_settings == [] and config.no_effect_settings == []
    assert config.add_missing_cells is True and config.skip_tag == "skip-execution"


def test_a_setting_is_honoured_named_or_refused_never_ignored(tmp_path):
    """Each trait set to a non-default value is in exactly one kind; the kinds are disjoint."""
    assert not set(HONOURED) & set(NO_EFFECT)
    course = TempCourse(tmp_path / "c", [ASSIGNMENT])
    with open(course.root / "nbgrader_config.py", "a") as fh:
        fh.write(
            "\nc.Execute.timeout = 50\n"  # honoured
            f"c.NbGrader.logfile = '{tmp_path / 'x.log'}'\n"  # no effect here
            "c.ExecutePreprocessor.iopub_timeout = 10\n"  # no effect (set on the parent class)
            "c.LimitOutput.max_lines = 10\n"  # no effect here
            "c.Execute.interrupt_on_timeout = False\n"  # refused
            "c.ExecutePreprocessor.kernel_name = 'python3'\n"  # refused (set on the parent class)
            "c.Autograde.sanitize_preprocessors = []\n"  # refused
            "c.CheckCellMetadata.enabled = False\n"  # refused
            "c.CourseDirectory.max_file_size = 5\n"  # the exchange's: autograde never reads it
        )
    options = ["--CourseDirectory.student_id=alice"]  # honoured, as --student
    config = load(course.root, options)
    assert config.timeout == 50 and config.student_id == "alice"
    refused = "\n".join(config.refused_settings)
    for name in ("interrupt_on_timeout", "Execute.kernel_name", "sanitize_preprocessors"):
        assert name in refused
    assert "CheckCellMetadata.enabled" in refused and len(config.refused_settings) == 4
    said = "\n".join(config.no_effect_settings)
    for name in ("logfile", "Execute.iopub_timeout", "LimitOutput.max_lines"):
        assert name in said
    assert len(config.no_effect_settings) == 3


def test_a_refused_setting_stops_the_run_naming_it(tmp_path, needs_bubblewrap):
    course = TempCourse(tmp_path / "c", [ASSIGNMENT])
    with open(course.root / "nbgrader_config.py", "a") as fh:
        fh.write("\nc.Execute.interrupt_on_timeout = False\nc.NbGrader.logfile = 'grading.log'\n")
    (course.root / "submitted").mkdir()
    proc = grade(course.root, "--out", str(tmp_path / "out"), "--course", str(course.root))
    assert proc.returncode == 2, explain(proc)
    assert "Execute.interrupt_on_timeout = False" in proc.stderr
    assert "NbGrader.logfile" not in proc.stderr.split("refused:")[1].split("(remove")[0]
