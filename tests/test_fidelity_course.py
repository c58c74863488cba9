"""Fidelity of values and the proxy (grading v3, issue 17 item 4): a course of Python and numpy
idioms (tests/fixtures/courses/pyidioms, built by make_pyidioms.py) graded by `autograder grade`
exactly as a real `nbgrader autograde` run grades it, every row `ok`.

Its test cells are written for one kernel and use, on the student's objects: numpy arrays and
scalars (np.testing.assert_allclose, np.isclose, dtype, shape, indexing, slicing, a global
array), classes and instances (attributes, methods, isinstance against the student's classes,
repr, ==, the student's exceptions), a subclass, generators (infinite with islice and next,
finite with sum and list), returned closures and a callable object, dict and list results, a global list and a global counter a student's function
updates, a container class (len, in, indexing, iteration), partial credit. Measured on main before this
change: 30 of its first 48 cells (students alice to dave) identical to stock (the instructor's own answers: 6/16 points).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.procs import explain
from test_any_course import grade, rows, stock_scores

FIXTURE = Path(__file__).parent / "fixtures" / "courses" / "pyidioms"
pytestmark = pytest.mark.usefixtures("needs_bubblewrap")


@pytest.fixture(scope="module")
def pyidioms(tmp_path_factory):
    root = tmp_path_factory.mktemp("pyidioms")
    stock, ours = root / "stock", root / "ours"
    shutil.copytree(FIXTURE, stock)
    shutil.copytree(FIXTURE, ours)
    proc = grade(ours, "--out", ours / "out")
    return {"stock": stock_scores(stock, "ps1", memo="course-pyidioms"), "proc": proc, "ours": ours}


def test_idioms_course_gets_exactly_nbgrader_autograde_scores(pyidioms):
    proc = pyidioms["proc"]
    assert proc.returncode == 0, explain(proc)
    got = rows(pyidioms["ours"] / "out" / "grades.csv")
    assert {r["status"] for r in got} == {"ok"}, [r for r in got if r["status"] != "ok"]
    ours = {(r["student"], r["notebook"], r["grade_id"]): float(r["score"]) for r in got}
    assert ours == pyidioms["stock"]
    assert len(ours) == 65
    # the instructor's answers get full marks, the release nothing, and the wrong answers lose
    # points where stock nbgrader takes them
    assert sum(v for (s, _, _), v in ours.items() if s == "alice") == 17
    assert sum(v for (s, _, _), v in ours.items() if s == "dave") == 0
    assert ours[("bob", "ps1", "test_stats_partial")] == 1.0
    assert ours[("bob", "ps1", "test_account_rejects")] == 0.0
    assert (
        ours[("bob", "ps1", "test_inventory")] == 0.0
        and ours[("carol", "ps1", "test_inventory")] == 1.0
    )


def test_feedback_shows_the_student_exception_as_one_kernel_would(pyidioms):
    """erin's Deck has a length but no indexing: `d[0]` fails with the message one kernel shows
    (TypeError: 'Deck' object is not subscriptable); no grader internals (Remote, handles,
    pickling) in any feedback page."""
    for student in ("alice", "bob", "carol", "dave", "erin"):
        page = (pyidioms["ours"] / "out" / "feedback" / student / "ps1" / "ps1.html").read_text()
        for word in ("Remote", "Foreign", "Pickl", "$kept", "$op", "observation"):
            assert word not in page, (student, word)
    page = (pyidioms["ours"] / "out" / "feedback" / "dave" / "ps1" / "ps1.html").read_text()
    assert "NotImplementedError" in page
    page = (pyidioms["ours"] / "out" / "feedback" / "erin" / "ps1" / "ps1.html").read_text()
    assert "TypeError" in page and "&#x27;Deck&#x27; object is not subscriptable" in page.replace(
        "&#39;", "&#x27;"
    )
