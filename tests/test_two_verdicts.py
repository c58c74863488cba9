"""Grading v5 end to end: two verdicts on every row, no difference silent (issue 35's named cases).

tests/fixtures/courses/statey (make_statey.py): tests that read a call's arguments afterwards
(a numpy array, a list, a tensor's ``_version``), seed numpy's and torch's global generators,
catch ``ValueError``, capture stdout, read a file the student wrote, set an environment
variable; students who change their arguments in place, use numpy's generator honestly, raise a
fake ``ValueError`` (both verdicts 0), carry 2,100 globals, or reuse a test's name in a later cell. Graded by real
``nbgrader autograde`` and by ``autograder grade``: one kernel's verdict equals stock's on every
row, the score counted is stock's (the default ``AutograderGrade.counts``), and every row where
the judge disagrees says so in grades.csv, review.txt and the report, and shows the student
"under review" and nothing else. ``autograder settle`` closes them, into the gradebook.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from autograder.procs import explain, run
from test_any_course import COURSES, env, grade, rows, stock_scores

AUTOGRADER = str(Path(sys.executable).with_name("autograder"))
pytestmark = pytest.mark.usefixtures("needs_bubblewrap")

# (student, grade_id) -> the difference status (every other row: ok or in-kernel)
DIFFERENCES = {
    # honest: numpy's global generator, seeded by the test in one kernel only
    ("cai", "test_noisy_reproducible"): "unconfirmed",
}
# dan raises a class named builtins.ValueError that is not one: stock 0, and the judge's 0 too
# since it takes "built-in" from the class's identity, not its name (issue 35 item 4)
# ben's functions change their arguments (an array, a list, a tensor): stock 0, and the judge's 0
# too since a call's writes into the test's own containers are carried back (issue 35 item 2)
AGREE = {
    ("dan", "test_parse_rejects"),
    ("ben", "test_center"),
    ("ben", "test_dedupe"),
    ("ben", "test_clip01"),
}
# tests whose solution the judge cannot check (a file, the environment): one kernel alone; captured
# stdout it carries (what a call printed is written to the test's own sys.stdout)
KERNEL_ONLY = {"test_save_lines", "test_data_dir"}


@pytest.fixture(scope="module")
def statey(tmp_path_factory):
    root = tmp_path_factory.mktemp("statey")
    stock, ours = root / "stock", root / "ours"
    shutil.copytree(COURSES / "statey", stock)
    shutil.copytree(COURSES / "statey", ours)
    proc = grade(ours, "--out", ours / "out")
    return {
        "stock": stock_scores(stock, "hw1", memo="course-statey"),
        "proc": proc,
        "ours": ours,
        "out": ours / "out",
    }


def test_one_kernels_verdict_is_stocks_and_counts(statey):
    proc = statey["proc"]
    assert proc.returncode == 0, explain(proc)
    got = rows(statey["out"] / "grades.csv")
    kernel = {(r["student"], r["notebook"], r["grade_id"]): float(r["kernel_score"]) for r in got}
    counted = {(r["student"], r["notebook"], r["grade_id"]): float(r["score"]) for r in got}
    assert kernel == statey["stock"]
    assert counted == statey["stock"]  # AutograderGrade.counts = "kernel" (the default)


def test_every_difference_is_a_status_with_both_scores(statey):
    got = rows(statey["out"] / "grades.csv")
    seen = {}
    for r in got:
        key = (r["student"], r["grade_id"])
        if r["grade_id"] in KERNEL_ONLY:
            assert r["status"] == "in-kernel" and r["judge_status"] == "not-run", r
            continue
        if r["kernel_score"] != r["judge_score"]:
            seen[key] = r["status"]
            assert r["status"] in ("unconfirmed", "contradicted") and r["judge_reason"], r
        else:
            assert r["status"] == "ok", r
    for key, status in DIFFERENCES.items():
        assert seen.get(key) == status, (key, seen.get(key))
    for key in AGREE:
        assert key not in seen, (key, seen[key])
    # the students whose notebook the judge cannot carry (2,100 globals; a later cell reading the
    # test's x): never a silent difference, never a fallback the submission chose
    assert {k for k in seen if k[0] in ("eve", "gus")} <= {
        k for k, s in seen.items() if s == "unconfirmed"
    }
    assert not [k for k in seen if k[0] in ("ada", "fay")], seen  # the solution, the release: none


def test_review_and_report_name_each_difference(statey):
    review = (statey["out"] / "review.txt").read_text()
    for (student, gid), status in DIFFERENCES.items():
        assert f"{student}/hw1/hw1: {gid}: {status}: one kernel" in review, review
    run([AUTOGRADER, "report", str(statey["out"])], env=env())
    page = (statey["out"] / "report" / "report.html").read_text()
    assert "Differences between the two verdicts" in page
    assert page.index("Differences between the two verdicts") < page.index("<h2")


def test_the_student_sees_under_review_and_nothing_of_one_kernel(statey):
    """cai's numpy generator: one kernel passes, the judge cannot confirm it. The page says
    "under review" for it; nothing of the one-kernel run (which ran the test's source beside the
    student's code) reaches the page or the autograded notebook."""
    page = (statey["out"] / "feedback" / "cai" / "hw1" / "hw1.html").read_text()
    row = page[page.index("<code>test_noisy_reproducible</code>") :].split("</tr>")[0]
    assert "under review" in row, row
    import nbformat

    nb = nbformat.read(statey["ours"] / "autograded" / "cai" / "hw1" / "hw1.ipynb", as_version=4)
    outputs = str([c.get("outputs", []) for c in nb.cells if c.cell_type == "code"])
    assert "np.random.seed" not in page + outputs  # (the test's own source)


def test_settle_closes_differences_into_the_gradebook(statey, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(statey["out"], out)
    proc = run(
        [AUTOGRADER, "settle", str(out), "--take", "judge", "--student", "cai"],
        cwd=statey["ours"],
        env=env(),
    )
    assert "cai/hw1/hw1: test_noisy_reproducible: unconfirmed -> settled" in proc.stdout
    got = {(r["student"], r["grade_id"]): r for r in rows(out / "grades.csv")}
    assert got[("cai", "test_noisy_reproducible")]["status"] == "settled"
    assert got[("cai", "test_noisy_reproducible")]["score"] == "0"
    others = {  # the other students' differences: not matched, still open
        (r["student"], r["grade_id"]): r["status"]
        for r in rows(statey["out"] / "grades.csv")
        if r["student"] != "cai" and r["status"] in ("unconfirmed", "contradicted")
    }
    assert others and {k: got[k]["status"] for k in others} == others
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{statey['ours'] / 'gradebook.db'}", "statey") as gb:
        grade = gb.find_grade("test_noisy_reproducible", "hw1", "hw1", "cai")
        assert grade.auto_score == 0.0 and grade.manual_score is None
    again = run(
        [AUTOGRADER, "settle", str(out), "--take", "judge", "--student", "cai"],
        cwd=statey["ours"],
        env=env(),
        expect=1,
    )
    assert "no open difference matches" in again.stderr


def test_counts_lower_takes_the_lower_score(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(COURSES / "statey", course)
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write('c.AutograderGrade.counts = "lower"\n')
    for student in list((course / "submitted").iterdir()):
        if student.name not in ("ben", "cai"):
            shutil.rmtree(student)
    proc = grade(course, "--out", course / "out")
    assert proc.returncode == 0, explain(proc)
    differing = [
        r
        for r in rows(course / "out" / "grades.csv")
        if r["status"] in ("unconfirmed", "contradicted")
    ]
    assert differing  # (cai's)
    for r in differing:
        assert float(r["score"]) == min(float(r["kernel_score"]), float(r["judge_score"])), r
