"""`autograder grade` killed with `kill -9` mid-run and started again resumes (issue 40, item 3).

How the run knows what is done: as `nbgrader autograde`, a submission whose `autograded/` folder
holds every notebook it graded, with a `timestamp.txt` not older than the submitted one, is
skipped without `--force`. Each notebook's grades are recorded in the gradebook *before* its
autograded notebook is written, and that notebook is written whole or not at all (a temporary
file renamed), so a kill leaves every submission either recorded and complete, or to be graded
again; never half a notebook the next run would skip.

One course (exercise 1), twelve students (the solution and the fixture submissions in turn),
graded once uninterrupted, and once killed (its whole process group, sandboxes included) after
a few notebooks were written and started again with the same arguments; before the second
start, one student's notebook is cut short, as a kill while writing it in place would leave it.
The two gradebooks hold the same scores for every student and test cell, the second start
grades the rest and that one again (stock would skip it), and every autograded notebook is
whole. A submission of two notebooks killed between them leaves no `autograded/` folder (so it
is graded again), though the first notebook's grades are recorded.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

from autograder.course import FIXTURE_SUBMISSIONS, SOLUTIONS, TempCourse
from autograder.procs import explain_log
from test_any_course import AUTOGRADER, env, grade

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_bubblewrap")]

A = "01_relu_inplace"
PARTIAL = "s04"  # its notebook cut short by hand after the kill
STUDENTS = [f"s{i:02d}" for i in range(12)]
N = len(STUDENTS)


def _gradebook(root: Path) -> dict:
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for sub in gb.assignment_submissions(A):
            for nb in sub.notebooks:
                for g in nb.grades:
                    out[(sub.student.id, nb.name, g.name)] = (g.auto_score, g.max_score)
    return out


def _kill_when(command, cwd, log, ready, settle=0.0):
    """Run ``command`` from ``cwd`` in a session of its own; once ``ready()`` (and ``settle``
    seconds more), kill the whole session with SIGKILL, as an OOM killer or a reboot would."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            command, cwd=cwd, env=env(), stdout=fh, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while not ready():
            assert proc.poll() is None, "it ended before the kill:\n" + explain_log(
                command, proc.poll(), log
            )
            assert time.monotonic() < deadline, explain_log(command, proc.poll(), log)
            time.sleep(0.05)
        time.sleep(settle)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _autograded(root: Path) -> list[Path]:
    return sorted((root / "autograded").glob(f"*/{A}/{A}.ipynb"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("resume")
    course = TempCourse(base / "whole", [A])
    course.generate()
    sources = [SOLUTIONS / A / f"{A}.ipynb", *sorted((FIXTURE_SUBMISSIONS / A).glob("*.ipynb"))]
    for i, student in enumerate(STUDENTS):
        course.submit(student, A, sources[i % len(sources)])
    killed = base / "killed"
    shutil.copytree(course.root, killed)
    whole = grade(course.root, "--out", base / "out-whole", "--jobs", "1")
    assert whole.returncode == 0, whole
    args = ["--out", base / "out-killed", "--jobs", "1", "--quiet"]
    command = [AUTOGRADER, "grade", *map(str, args)]
    _kill_when(command, killed, base / "first.log", lambda: len(_autograded(killed)) >= 3)
    at_kill = len(_autograded(killed))
    # what a kill while writing a notebook in place left (stock, or this grader before it wrote
    # to a temporary file): a notebook cut short
    cut = killed / "autograded" / PARTIAL / A
    if cut.exists():
        shutil.rmtree(cut)
    cut.mkdir(parents=True)
    (cut / f"{A}.ipynb").write_text('{\n "cells": [\n  {\n   "cell_type": "mar')
    complete = len([p for p in _autograded(killed) if p.parent != cut])
    again = grade(killed, *args)
    return {
        "whole": course.root,
        "killed": killed,
        "at_kill": at_kill,
        "complete": complete,
        "again": again,
    }


def test_the_killed_run_was_killed_mid_class(runs):
    assert 3 <= runs["at_kill"] < N, runs["at_kill"]


def test_started_again_it_grades_only_what_was_not_done(runs):
    again = runs["again"]
    assert again.returncode == 0, again
    done = runs["complete"]
    assert f"skipping {done} submission(s) autograded before" in again.stderr, again.stderr
    assert f"graded {N - done} notebook" in again.stdout, again.stdout
    assert (
        f"grading again 1 submission(s) whose autograded/ folder holds a notebook cut short "
        f"(a stopped run's): {PARTIAL}/{A}"
    ) in again.stderr, again.stderr


def test_the_gradebook_equals_an_uninterrupted_runs(runs):
    whole, killed = _gradebook(runs["whole"]), _gradebook(runs["killed"])
    assert len(whole) == N * 15, len(whole)  # every student, every test cell
    assert killed == whole


def test_every_autograded_notebook_is_whole(runs):
    notebooks = _autograded(runs["killed"])
    assert len(notebooks) == N
    for path in notebooks:
        nbformat.validate(nbformat.read(path, as_version=4))
    assert not list((runs["killed"] / "autograded").glob("**/.*.tmp"))


@pytest.fixture(scope="module")
def two_notebooks(tmp_path_factory):
    """A course whose assignment has two notebooks; its one student's second one sleeps 15 s in
    a cell, in each of its two runs (one kernel's, the judge's): the run is killed once the first
    one's feedback page is written. With one sandbox that page comes after the second's first run
    (the first's judge run waits for it), so the kill lands while the second's judge run sleeps:
    a margin of 15 s for the 0.5 s the test waits after the page (a minute's sleep, until
    2026-12-07, cost the suite 45 s more)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "courses"))
    from nbgrader_cells import answer, submit_answers, test, write_notebook

    root = tmp_path_factory.mktemp("two") / "course"
    (root / "source" / "ps1").mkdir(parents=True)
    (root / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.course_id = 'r'\n"
    )
    for name, value in (("fast", 1), ("slow", 2)):
        code = f"def f():\n    ### BEGIN SOLUTION\n    return {value}\n    ### END SOLUTION"
        write_notebook(
            [answer("f", code), test("test_f", 1, f"assert f() == {value}")],
            root / "source" / "ps1" / f"{name}.ipynb",
        )
        late = "import time\ntime.sleep(15)\n" if name == "slow" else ""
        submit_answers(root, "ps1", name, {"stu": {"f": f"{late}def f():\n    return {value}"}})
    grade(root, "--out", root / "warm", "--no-gradebook", "--student", "nobody")  # calibration
    out = root / "out"
    command = [AUTOGRADER, "grade", "--out", str(out), "--jobs", "1", "--timeout", "120"]
    page = out / "feedback" / "stu" / "ps1" / "fast.html"
    _kill_when(command, root, root.parent / "run.log", page.exists, settle=0.5)
    return root


def test_killed_between_two_notebooks_leaves_no_autograded_folder(two_notebooks):
    from nbgrader.api import Gradebook

    root = two_notebooks
    assert not (root / "autograded" / "stu" / "ps1").exists()  # stock's rule grades it again
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        fast = gb.find_submission_notebook("fast", "ps1", "stu")
        assert fast.score == 1  # recorded before the kill: nothing graded was lost
