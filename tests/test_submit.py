"""Handing in: nbgrader's exchange on a JupyterHub, and `autograder submit` without a server.

The JupyterHub instructions of docs/learner.md ("Submitting") are run for real (release, fetch, submit, collect,
autograde through one exchange directory). `autograder submit NOTEBOOK --student ID` is the
no-server way: the zip holds the notebook in nbgrader's submitted/<student>/<assignment>/ layout, so the
instructor unzips it at the course root and runs the real `nbgrader autograde` (proved
below, which also proves the self-check cell is harmless while nbgrader grades). Bad input
gets a clear error, exit status 2, and writes nothing.
"""

import datetime
import getpass
import os
import shutil
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.course import EXERCISES, TempCourse, assignments, graded_cells, notebooks
from autograder.procs import explain, run
from autograder.selfcheck import is_selfcheck_cell
from exercise_answers import filled_release, reference_answers

AUTOGRADER = Path(sys.executable).parent / "autograder"
ASSIGNMENT = assignments()[0]
NOTEBOOK = notebooks(ASSIGNMENT)[0]


def run_submit(*args, cwd):
    command = [str(AUTOGRADER)] if AUTOGRADER.exists() else [sys.executable, "-m", "autograder.cli"]
    # any exit status: the callers check it
    result = run([*command, "submit", *map(str, args)], expect=None, cwd=cwd, timeout=300)
    assert "Traceback" not in result.stdout + result.stderr, explain(result)
    return result


@pytest.fixture
def answered(tmp_path):
    """A student's answered copy, where JupyterLab keeps it: exercises/<assignment>/<notebook>.ipynb."""
    path = tmp_path / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(
        filled_release(ASSIGNMENT, NOTEBOOK, reference_answers(ASSIGNMENT, NOTEBOOK)), path
    )
    return path


def test_zip_has_the_nbgrader_submitted_layout(tmp_path, answered):
    result = run_submit(answered, "--student", "alice", cwd=tmp_path)
    assert result.returncode == 0, explain(result)
    archive = tmp_path / "submissions" / f"alice-{ASSIGNMENT}.zip"
    assert f"Wrote submissions/alice-{ASSIGNMENT}.zip" in result.stdout
    with zipfile.ZipFile(archive) as zf:
        folder = f"submitted/alice/{ASSIGNMENT}"
        assert sorted(zf.namelist()) == [f"{folder}/{NOTEBOOK}.ipynb", f"{folder}/timestamp.txt"]
        assert zf.read(f"{folder}/{NOTEBOOK}.ipynb") == answered.read_bytes()
        stamp = zf.read(f"{folder}/timestamp.txt").decode()
    from nbgrader.utils import parse_utc  # the parser nbgrader applies to timestamp.txt

    age = datetime.datetime.now(datetime.UTC) - parse_utc(stamp).replace(tzinfo=datetime.UTC)
    assert datetime.timedelta(0) <= age < datetime.timedelta(minutes=10)


def test_blank_notebook_is_submitted_with_a_note(tmp_path):
    result = run_submit(
        EXERCISES / ASSIGNMENT / f"{NOTEBOOK}.ipynb", "--student", "bob", cwd=tmp_path
    )
    assert result.returncode == 0, explain(result)
    names, _ = graded_cells(
        nbformat.read(EXERCISES / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    )
    assert (
        f"Note: {', '.join(names)} still raise NotImplementedError (not attempted yet)"
        in result.stdout
    )


@pytest.mark.slow  # nbgrader autograde
def test_unzipped_submission_is_graded_by_nbgrader(tmp_path, answered):
    out = tmp_path / "alice.zip"
    result = run_submit(answered, "--student", "alice", "--output", out, cwd=tmp_path)
    assert result.returncode == 0, explain(result)
    course = TempCourse(tmp_path / "course", [ASSIGNMENT])
    course.generate()
    with zipfile.ZipFile(out) as zf:  # what the instructor does: unzip at the course root
        zf.extractall(course.root)
    course.autograde(ASSIGNMENT)
    grades = course.scores(ASSIGNMENT)["alice"][NOTEBOOK]
    assert grades and all(score == max_score for score, max_score in grades.values()), grades
    graded = nbformat.read(
        course.root / "autograded" / "alice" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4
    )
    cell = next(c for c in graded.cells if is_selfcheck_cell(c))
    # one print, but the kernel may send it as two stream messages (its output is flushed on a
    # timer: on a busy machine the line and its "\n" came apart once), and nbgrader keeps both
    assert {o.output_type for o in cell.outputs} == {"stream"}, cell.outputs
    assert "".join(o.text for o in cell.outputs) == (
        "Self-check skipped: nbgrader is running this notebook.\n"
    )


def test_bad_input_gets_a_clear_error_and_writes_nothing(tmp_path, answered):
    earlier = tmp_path / "submissions" / f"alice-{ASSIGNMENT}.zip"
    earlier.parent.mkdir()
    earlier.write_bytes(b"an earlier submission")
    renamed = answered.with_name(f"{NOTEBOOK}-Copy1.ipynb")
    shutil.copy(answered, renamed)
    invalid = tmp_path / "exercises" / ASSIGNMENT / "broken" / f"{NOTEBOOK}.ipynb"
    invalid.parent.mkdir()
    invalid.write_text('{"cells": [}')
    lesson = tmp_path / "exercises" / ASSIGNMENT / "lesson" / f"{NOTEBOOK}.ipynb"
    lesson.parent.mkdir()
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# a lesson")]), lesson
    )
    other = tmp_path / "exercises" / ASSIGNMENT / "other" / f"{NOTEBOOK}.ipynb"
    other.parent.mkdir()
    nb = nbformat.read(answered, as_version=4)  # another exercise's answer cells, same file name
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.metadata.nbgrader.grade_id = "some_other_function"
    nbformat.write(nb, other)
    cases = [
        (
            (other, "--student", "alice", "--assignment", ASSIGNMENT),
            f"does not look like assignment {ASSIGNMENT}",
        ),
        ((tmp_path / "nowhere.ipynb", "--student", "alice"), "nowhere.ipynb: no such file"),
        (
            (renamed, "--student", "alice"),
            f"nbgrader grades a notebook by its file name, and '{NOTEBOOK}-Copy1.ipynb'",
        ),
        (
            (invalid, "--student", "alice", "--assignment", ASSIGNMENT),
            "is not valid notebook JSON (line 1, column 12",
        ),
        ((lesson, "--student", "alice", "--assignment", ASSIGNMENT), "has no graded test cells"),
        ((answered, "--student", "alice smith"), "student id 'alice smith' cannot be used"),
        ((answered, "--student", "../alice"), "student id '../alice' cannot be used"),
        (
            (answered, "--student", "alice", "--assignment", "99_nothing"),
            "unknown assignment '99_nothing'",
        ),
    ]
    for args, message in cases:
        result = run_submit(*args, cwd=tmp_path)
        assert result.returncode == 2, explain(result)
        assert message in result.stderr, result.stderr
        assert result.stdout == ""
    assert earlier.read_bytes() == b"an earlier submission", (
        "a failed submit must not touch an earlier zip"
    )
    assert sorted(p.name for p in earlier.parent.iterdir()) == [earlier.name], "no partial files"


def test_missing_student_id_is_a_usage_error(tmp_path, answered):
    result = run_submit(answered, cwd=tmp_path)
    assert result.returncode == 2 and "--student" in result.stderr, explain(result)


def _student_nbgrader(cwd, *args):
    env = dict(
        os.environ,
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    return run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env, timeout=600)


@pytest.mark.slow  # nbgrader release, fetch, submit, collect, autograde
def test_jupyterhub_exchange_round_trip(tmp_path):
    """What docs/learner.md tells an instructor and the students of a JupyterHub class to do."""
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)
    course = TempCourse(tmp_path / "instructor", [ASSIGNMENT])
    with open(course.root / "nbgrader_config.py", "a") as config:  # the instructor's addition
        config.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
    course.generate()
    course.nbgrader("release_assignment", ASSIGNMENT)

    home = tmp_path / "student-home"  # a student's config: the course id and the same exchange
    home.mkdir()
    (home / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.course_id = 'autograd-inplace'\nc.Exchange.root = {str(exchange)!r}\n"
    )
    listed = _student_nbgrader(home, "list")
    assert ASSIGNMENT in listed.stdout + listed.stderr
    _student_nbgrader(home, "fetch_assignment", ASSIGNMENT)  # Assignment List > Fetch
    fetched = home / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    assert nbformat.read(fetched, as_version=4) == nbformat.read(
        EXERCISES / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4
    )
    nbformat.write(
        filled_release(ASSIGNMENT, NOTEBOOK, reference_answers(ASSIGNMENT, NOTEBOOK)), fetched
    )
    _student_nbgrader(home, "submit", ASSIGNMENT)  # Assignment List > Submit

    course.nbgrader("collect", ASSIGNMENT)
    student = getpass.getuser()  # the exchange knows students by their login
    assert (course.root / "submitted" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb").exists()
    course.autograde(ASSIGNMENT)
    grades = course.scores(ASSIGNMENT)[student][NOTEBOOK]
    assert grades and all(score == max_score for score, max_score in grades.values()), grades
