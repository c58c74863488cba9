"""`autograder grade` on nbgrader courses other than this one: a drop-in for `nbgrader autograde`.

* tests/fixtures/courses/stats101: a third-party-style course (its own nbgrader_config.py with
  other folder names and a course id, no torch, partial-credit and manually graded cells, a test
  that deletes a student name) graded from its own folder exactly as real `nbgrader autograde`
  grades the same submissions.
* nbgrader's own user-guide course (shipped inside the installed nbgrader package:
  docs/source/user_guide, `source/ps1`, `submitted/{bitdiddle,hacker}`) gets nbgrader's
  published autograded totals (its grades.csv: bitdiddle 1.5, hacker 3.0).
* A notebook whose tests the judge cannot run as one kernel would (an IPython magic) is graded in
  one kernel (status in-kernel), exactly as stock; other kernels than Python are refused.
"""

from __future__ import annotations

import csv
import os
import shutil
import sys
from pathlib import Path

import nbformat
import nbgrader
import pytest

from autograder.course import stock_kernels
from autograder.procs import explain, run

COURSES = Path(__file__).parent / "fixtures" / "courses"
FIXTURE = COURSES / "stats101"
# courses written as their instructors would, not around this grader (make_<name>.py rebuilds each):
# name -> (assignment, each student's total under stock nbgrader, rows whose status is not ok/in-kernel)
THIRD_PARTY = {
    "phys210": ("ps01", {"ada": 14, "ben": 5, "cai": 0, "dee": 0, "eli": 14, "fay": 11}, {}),
    # bo's countdown returns a list: the hidden laziness test builds a list of 10**12 ints (MemoryError,
    # stock nbgrader scores 0 too)
    "cs101": (
        "lab04",
        {"ana": 15, "bo": 8, "chen": 4, "dan": 1, "eve": 14, "finn": 12, "gil": 11},
        {("bo", "test_countdown_lazy"): "memory-limit"},
    ),
    # grading v4: what the judge cannot carry (a test forbidding a helper the student's code reads,
    # a pool from an earlier cell, 2,100 globals; a generator passed in, a 72 MB array returned);
    # grading v5: dee's 2,100 globals are more than a names report carries: the judge does not
    # confirm dee's passes (unconfirmed, one kernel's score counted), by design of the course
    "contract": (
        "hw1",
        {"ada": 6, "ben": 3, "cai": 0, "dee": 6},
        {
            ("dee", g): "unconfirmed"
            for g in (
                "test_total",
                "test_average_by_hand",
                "test_average_cases",
                "test_average_tolerance",
            )
        },
    ),
}
USER_GUIDE = Path(nbgrader.__file__).parent / "docs" / "source" / "user_guide"
AUTOGRADER = str(Path(sys.executable).with_name("autograder"))


def env() -> dict[str, str]:
    """The test session's environment as it is now (conftest's session fixtures set the grader's
    calibration cache and pace there after this module is imported), with this environment's
    bin first on PATH: nbgrader runs `alembic` from PATH."""
    return dict(
        os.environ,
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )


def grade(cwd, *args):
    """``autograder grade`` from ``cwd``, any exit status: the callers check it."""
    return run(
        [AUTOGRADER, "grade", *map(str, args), "--quiet"],
        expect=None,
        cwd=cwd,
        timeout=900,
        env=env(),
    )


def rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def stock_scores(course_root, assignment, memo=None):
    """Real `nbgrader autograde` from the course's folder: {(student, notebook, grade_id): score}.
    ``memo``: a name under which tests/stock_memo.py keeps the scores with the inputs they came
    from (every file of the folder, the Python, requirements.lock, the autograder modules the
    kernels imported): taken from there when every input hashes the same, run and recorded
    otherwise (for a caller that reads nothing else of stock's run)."""
    if memo is None:
        return _stock_scores(course_root, assignment, {})
    from stock_memo import recorded_run

    return recorded_run(
        memo,
        course_root,
        assignment,
        lambda extra: (_stock_scores(course_root, assignment, extra), True),
    )


def _stock_scores(course_root, assignment, extra_env):
    """stock_scores' real run, with ``extra_env`` added to the environment (run raises on a
    failure, so nothing is recorded)."""
    run(
        [
            sys.executable,
            "-m",
            "nbgrader",
            "generate_assignment",
            assignment,
            "--force",
            "--log-level=ERROR",
        ],
        cwd=course_root,
        timeout=None,
        env={**env(), **extra_env},
    )
    with stock_kernels() as kernels:  # (issue 34: no TCP port race between kernels)
        run(
            [
                sys.executable,
                "-m",
                "nbgrader",
                "autograde",
                assignment,
                "--force",
                "--log-level=ERROR",
            ]
            + kernels,
            cwd=course_root,
            timeout=None,
            env={**env(), **extra_env},
        )
    from nbgrader.api import Gradebook

    from autograder.grading.config import load

    config = load(course_root)
    scores = {}
    with Gradebook(config.gradebook_url, config.course_id) as gb:
        for sub in gb.assignment_submissions(assignment):
            for nb in sub.notebooks:
                for g in nb.grades:
                    if g.cell_type == "code" and not _is_solution(
                        course_root, config, assignment, nb.name, g.name
                    ):
                        scores[(sub.student.id, nb.name, g.name)] = float(g.auto_score or 0.0)
    return scores


def _is_solution(course_root, config, assignment, notebook, grade_id):
    nb = nbformat.read(
        Path(course_root) / config.source_directory / assignment / f"{notebook}.ipynb", as_version=4
    )
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == grade_id:
            return bool(meta.get("solution"))
    return False


def manual_cells(course_root, assignment):
    """What the gradebook holds for the cells a person grades: each manually graded answer's
    ``(auto_score, needs_manual_grade)``, and each answer cell's automatic comment."""
    from nbgrader.api import Gradebook

    from autograder.grading.config import load

    config = load(course_root)
    grades, comments = {}, {}
    with Gradebook(config.gradebook_url, config.course_id) as gb:
        for sub in gb.assignment_submissions(assignment):
            for nb in sub.notebooks:
                for g in nb.grades:
                    if _is_solution(course_root, config, assignment, nb.name, g.name):
                        grades[(sub.student.id, nb.name, g.name)] = (
                            g.auto_score,
                            g.needs_manual_grade,
                        )
                for c in nb.comments:
                    comments[(sub.student.id, nb.name, c.name)] = c.auto_comment
    return grades, comments


@pytest.fixture(scope="module")
def stats101(tmp_path_factory, needs_bubblewrap):
    root = tmp_path_factory.mktemp("stats101")
    stock, ours = root / "stock", root / "ours"
    shutil.copytree(FIXTURE, stock)
    shutil.copytree(FIXTURE, ours)
    proc = grade(ours, "--out", ours / "out")  # no --course: the current folder, like nbgrader
    return {
        "stock": stock_scores(stock, "hw1"),
        "proc": proc,
        "ours": ours,
        "stock_manual": manual_cells(stock, "hw1"),
        "stock_source": source_cells(stock, "hw1"),
    }


def source_cells(course_root, assignment):
    """The gradebook's source cells: what formgrader shows and compares answers with."""
    from nbgrader.api import Gradebook

    from autograder.grading.config import load

    config = load(course_root)
    with Gradebook(config.gradebook_url, config.course_id) as gb:
        return {
            (nb.name, c.name): (c.cell_type, c.locked, c.source, c.checksum)
            for nb in gb.find_assignment(assignment).notebooks
            for c in nb.source_cells
        }


def test_the_gradebook_records_the_release_as_generate_assignment_does(stats101):
    """`autograder grade` on a course whose gradebook nbgrader never wrote (ours: no
    generate_assignment ran) records each notebook's cells as released, sources and checksums,
    as stock's `generate_assignment` + `autograde` do (the stock copy)."""
    ours = source_cells(stats101["ours"], "hw1")
    assert ours == stats101["stock_source"]
    assert any("YOUR CODE HERE" in src for (_, _, src, _) in ours.values())  # the release's


def test_manually_graded_cells_are_recorded_as_stock_records_them(stats101):
    """Issue 36 item 5: an unanswered manually graded cell gets 0 and "No response.", as stock
    gives it; an answered one waits for formgrader; the answer cells' comments are stock's."""
    grades, comments = manual_cells(stats101["ours"], "hw1")
    stock_grades, stock_comments = stats101["stock_manual"]
    assert grades == stock_grades
    assert comments == stock_comments
    # what the fixture covers: at least one unanswered and one answered manual cell
    assert (0.0, False) in stock_grades.values() and (None, True) in stock_grades.values()
    assert "No response." in stock_comments.values()


def test_config_is_read_through_nbgrader():
    from autograder.grading.config import load

    config = load(FIXTURE)
    assert (
        config.course_id,
        config.source_directory,
        config.submitted_directory,
        config.autograded_directory,
    ) == ("stats101", "instructor", "inbox", "marked")
    assert config.timeout == 30.0
    assert config.begin_hidden == "BEGIN HIDDEN TESTS"


def test_third_party_course_gets_exactly_nbgrader_autograde_scores(stats101):
    proc = stats101["proc"]
    assert proc.returncode == 0, explain(proc)
    assert "Warning" not in proc.stdout + proc.stderr, (
        proc.stdout + proc.stderr
    )  # no SAWarning, no other
    got = rows(stats101["ours"] / "out" / "grades.csv")
    assert {r["status"] for r in got} == {"ok"}
    ours = {(r["student"], r["notebook"], r["grade_id"]): float(r["score"]) for r in got}
    assert ours == stats101["stock"]
    # what the fixture exercises: partial credit, a deleted student name, a wrong exception type
    assert ours[("carol", "hw1", "test_variance_partial")] == 2.0
    assert ours[("alice", "hw1", "test_variance_uses_mean")] == 1.0
    assert ours[("bob", "hw1", "test_mean_empty")] == 0.0
    # written where the course's config says
    assert (stats101["ours"] / "marked" / "alice" / "hw1" / "hw1.ipynb").exists()
    assert (stats101["ours"] / "gradebook.db").exists()


@pytest.mark.usefixtures("needs_bubblewrap")  # grades: the sandbox
@pytest.mark.parametrize("name", sorted(THIRD_PARTY))
def test_course_not_written_for_this_grader_gets_exactly_nbgrader_autograde_scores(name, tmp_path):
    """phys210: numpy arrays, np.testing, a matplotlib Axes returned, partial credit, a warning on stderr;
    cs101: classes and instances, generators, closures, a helper a test cell defines and a later answer uses,
    `globals()`, printed output captured, a magic; contract: what the judge cannot carry (issue 26).
    Every cell's score is stock nbgrader's; the notebooks whose tests the judge cannot run as one
    kernel would are graded in one kernel (calibration.txt, or decided while grading: review.txt)."""
    assignment, totals, other_status = THIRD_PARTY[name]
    stock, ours = tmp_path / "stock", tmp_path / "ours"
    shutil.copytree(COURSES / name, stock)
    shutil.copytree(COURSES / name, ours)
    proc = grade(ours, "--out", ours / "out")
    assert proc.returncode == 0, explain(proc)
    got = rows(ours / "out" / "grades.csv")
    expected = stock_scores(stock, assignment, memo=f"course-{name}")
    assert {
        (r["student"], r["notebook"], r["grade_id"]): float(r["score"]) for r in got
    } == expected
    for r in got:  # two verdicts (grading v5): no difference but the ones the course is built for
        assert r["status"] == other_status.get((r["student"], r["grade_id"]), r["status"])
        assert (
            r["status"] in ("ok", "in-kernel") or (r["student"], r["grade_id"]) in other_status
        ), r
        assert float(r["kernel_score"]) == float(r["score"]), r
    got_totals = {}
    for r in got:
        got_totals[r["student"]] = got_totals.get(r["student"], 0) + float(r["score"])
    assert got_totals == totals
    calibration = (ours / "out" / "calibration.txt").read_text()
    assert f"{assignment}/" in calibration and "calibration:" in proc.stdout
    if name == "contract":  # dee's differences named in review.txt, with the judge's reason
        review = (ours / "out" / "review.txt").read_text()
        assert (
            "dee/hw1/basics: test_total: unconfirmed: one kernel 1, the judge 0 / 1 (not confirmed: "
            "the student's notebook defines more names than a names report carries)" in review
        ), review
        status = {(r["student"], r["notebook"]): r["status"] for r in got}
        assert status[("ada", "basics")] == status[("ben", "basics")] == "ok"
        assert "hw1/carry: one kernel alone on all 2 test cells" in calibration


@pytest.mark.usefixtures("needs_bubblewrap")  # grades: the sandbox
def test_user_guide_course_gets_nbgrader_published_totals(tmp_path):
    course = tmp_path / "user_guide"
    shutil.copytree(USER_GUIDE / "source", course / "source")
    shutil.copytree(USER_GUIDE / "submitted", course / "submitted")
    proc = grade(course, "--out", tmp_path / "out")
    assert proc.returncode == 0, explain(proc)
    assert "Warning" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    totals = {}
    for r in rows(tmp_path / "out" / "grades.csv"):
        assert r["status"] == "ok", r
        totals[r["student"]] = totals.get(r["student"], 0.0) + float(r["score"])
    published = {r["student_id"]: float(r["score"]) for r in rows(USER_GUIDE / "grades.csv")}
    assert published == {"bitdiddle": 1.5, "hacker": 3.0}
    assert totals == published


@pytest.mark.usefixtures("needs_bubblewrap")  # grades: the sandbox
def test_test_cells_the_judge_cannot_run_are_graded_in_one_kernel(tmp_path):
    """A magic in a test cell: that cell is graded by one kernel alone (status in-kernel), the others
    get two verdicts that agree; every score exactly stock's."""
    course = tmp_path / "magic"
    shutil.copytree(FIXTURE, course)
    path = course / "instructor" / "hw1" / "hw1.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_mean":
            cell.source = "%time mean([1, 2])\n" + cell.source
    nbformat.write(nb, path)
    stock = tmp_path / "stock"
    shutil.copytree(course, stock)
    proc = grade(course, "--out", tmp_path / "out")
    assert proc.returncode == 0, explain(proc)
    got = rows(tmp_path / "out" / "grades.csv")
    assert {r["status"] for r in got if r["grade_id"] == "test_mean"} == {"in-kernel"}
    assert {r["status"] for r in got if r["grade_id"] != "test_mean"} == {"ok"}
    assert {
        (r["student"], r["notebook"], r["grade_id"]): float(r["score"]) for r in got
    } == stock_scores(stock, "hw1", memo="course-stats101-magic")
    calibration = (tmp_path / "out" / "calibration.txt").read_text()
    assert "test_mean: it uses IPython syntax" in calibration
    assert "calibration: hw1/hw1: two verdicts on" in proc.stdout


@pytest.mark.usefixtures("needs_bubblewrap")  # grades: the sandbox
def test_a_source_whose_solution_fails_a_test_is_graded_as_stock(tmp_path):
    """Issue 36: nbgrader grades a course whose own answers fail a test (its test suite's courses
    do); so does `autograder grade`: that cell in one kernel alone (stock's verdict by
    construction, calibration.txt says why), the others with two verdicts; every score stock's."""
    course = tmp_path / "failing"
    shutil.copytree(FIXTURE, course)
    path = course / "instructor" / "hw1" / "hw1.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_mean":
            cell.source += "\nassert False, 'the instructor fails this cell'"
    nbformat.write(nb, path)
    stock = tmp_path / "stock"
    shutil.copytree(course, stock)
    proc = grade(course, "--out", tmp_path / "out")
    assert proc.returncode == 0, explain(proc)
    got = rows(tmp_path / "out" / "grades.csv")
    assert {r["status"] for r in got if r["grade_id"] == "test_mean"} == {"in-kernel"}
    assert {r["status"] for r in got if r["grade_id"] != "test_mean"} == {"ok"}
    assert {
        (r["student"], r["notebook"], r["grade_id"]): float(r["score"]) for r in got
    } == stock_scores(stock, "hw1", memo="course-stats101-failing")
    calibration = (tmp_path / "out" / "calibration.txt").read_text()
    assert "test_mean: the solution does not get full marks on it even in one kernel" in calibration


@pytest.mark.usefixtures("needs_bubblewrap")  # grades: the sandbox
def test_other_kernels_and_autotest_are_refused(tmp_path):
    course = tmp_path / "other"
    shutil.copytree(FIXTURE, course)
    # refusals are per assignment: hw2 (hw1 as it was) is graded, hw1 refused, the exit status says so
    shutil.copytree(FIXTURE / "instructor" / "hw1", course / "instructor" / "hw2")
    (course / "instructor" / "hw2" / "hw1.ipynb").rename(
        course / "instructor" / "hw2" / "hw2.ipynb"
    )
    for student in (course / "inbox").iterdir():
        shutil.copytree(student / "hw1", student / "hw2")
        (student / "hw2" / "hw1.ipynb").rename(student / "hw2" / "hw2.ipynb")
    path = course / "instructor" / "hw1" / "hw1.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"]["language"] = "R"
    nbformat.write(nb, path)
    proc = grade(course, "--out", tmp_path / "out")
    assert proc.returncode == 4, explain(proc)
    assert "refusing to grade" in proc.stderr and "kernel language is 'r'" in proc.stderr
    assert "1 assignment(s) refused, not graded: hw1" in proc.stderr
    got = rows(tmp_path / "out" / "grades.csv")
    assert (
        got and {r["assignment"] for r in got} == {"hw2"} and {r["status"] for r in got} == {"ok"}
    )
