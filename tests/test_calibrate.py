"""Single-kernel mode, without a sandbox: how a test cell's reported outcome is scored (nbgrader's
``determine_grade``, the report treated as untrusted data) and how a task is turned into one kernel's.
The end-to-end proofs are in tests/test_any_course.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.grading import calibrate
from autograder.grading.intake import collect
from autograder.grading.intake.collect import Submission, read_source

STATS101 = (
    Path(__file__).parent / "fixtures" / "courses" / "stats101" / "instructor" / "hw1" / "hw1.ipynb"
)


def verdict(cell, points=3.0):
    test = collect.TestCell("t", points, "", False, None)
    return calibrate._verdict(test, cell)


@pytest.mark.parametrize(
    "cell, score",
    [
        ({"status": "ok"}, 3.0),  # nothing displayed: the points
        ({"status": "ok", "value": "2"}, 2.0),  # partial credit
        ({"status": "ok", "value": "0"}, 0.0),
        ({"status": "ok", "value": "2.5"}, 2.5),
        ({"status": "ok", "value": "np.float64(1.0)"}, 3.0),  # not a float to nbgrader: the points
        ({"status": "ok", "value": "'hello'"}, 3.0),
        ({"status": "ok", "value": "-1"}, 3.0),  # nbgrader: negative -> the points
        ({"status": "ok", "value": "7"}, 3.0),  # above the points: the points
        ({"status": "ok", "value": ""}, 3.0),
        ({"status": "error", "error": "AssertionError: no"}, 0.0),
        ({"status": "error", "error": "AssertionError: no", "value": "3"}, 0.0),
        ({"status": "ok", "stderr": True}, 0.0),  # wrote to stderr
        ({"status": "ok", "stderr": True, "value": "2"}, 0.0),
        ({"status": "ok", "stderr": "yes"}, 3.0),  # not the report's format: ignored
        ({"status": "ok", "value": ["2"]}, 3.0),
    ],
)
def test_outcomes_are_scored_by_nbgraders_rules(cell, score):
    v = verdict(dict(cell, output=""))
    got = 0.0 if not v["passed"] else (v["partial"] if v["partial"] is not None else 3.0)
    assert got == score


@pytest.mark.parametrize(
    "status, row_status",
    [
        ("timeout", "timeout"),
        ("memory-limit", "memory-limit"),
        ("output-limit", "output-limit"),
        ("died", "kernel-died"),
        ("not-run", "not-run"),
    ],
)
def test_a_test_cell_that_hit_a_limit_says_so(status, row_status):
    v = verdict({"status": status, "value": "3"})
    assert v["passed"] is False and v["status"] == row_status
    assert verdict(None) == {"passed": False, "status": "not-run"}


def test_every_test_cell_runs_in_place_in_the_student_process():
    source = read_source("hw1", STATS101)
    sub = calibrate.source_submission(source)
    task = calibrate.kernel_task(sub, sub.task({"timeout": 5}, []))
    assert task["tests"] == []
    n_cells = sum(1 for item in sub.items if item[0] == "cell")
    tests = [item for item in task["items"] if len(item) > 3]
    assert [item[1] for item in tests] == [n_cells + k for k in range(len(source.tests))]
    assert [item[2] for item in tests] == [t.source for t in source.tests]
    # in the same places as the judge's tests, between the same cells
    assert [i for i, item in enumerate(task["items"]) if len(item) > 3] == [
        i for i, item in enumerate(sub.items) if item[0] == "test"
    ]
    # the result comes back in the judge's shape: test cells out of "cells"
    cells = [{"index": i, "status": "ok"} for i in range(n_cells + len(source.tests))]
    cells[n_cells + 2] = {"index": n_cells + 2, "status": "ok", "value": "1"}
    result = calibrate.kernel_result(sub, {"cells": cells})
    assert [c["index"] for c in result["cells"]] == list(range(n_cells))
    assert result["tests"][2] == {"passed": True, "partial": 1.0, "output": ""}


def test_a_source_with_a_magic_goes_to_one_kernel_and_a_non_python_kernel_is_refused():
    from autograder.grading.config import judge_cannot_run, unsupported

    source = read_source("hw1", STATS101)
    assert judge_cannot_run(source) == {} and unsupported(source) == []
    test = source.tests[0]
    source.tests[0] = collect.TestCell(
        test.grade_id, test.points, "%time 1\n" + test.source, False, None
    )
    assert list(judge_cannot_run(source)) == [test.grade_id] and unsupported(source) == []
    source.nb.metadata["kernelspec"]["language"] = "julia"
    assert "kernel language is 'julia'" in unsupported(source)[0]
    assert isinstance(calibrate.source_submission(source), Submission)


def test_autotest_cells_take_the_gradebooks_record_or_the_assignment_is_refused(tmp_path):
    """A test cell with AUTOTEST directives is graded with the code `generate_assignment`
    recorded (stock's OverwriteCells); with no gradebook, nothing to take: refused, saying why.
    (nbgrader's own autograde tests run the recorded case: tests/test_nbgrader_suite.py.)"""
    import nbformat

    from autograder.grading.config import CourseConfig, unsupported

    root = tmp_path / "course"
    (root / "source" / "hw1").mkdir(parents=True)
    nb = nbformat.read(STATS101, as_version=4)
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
    test.source = "### AUTOTEST mean([1, 2])\n" + test.source
    nbformat.write(nb, root / "source" / "hw1" / "hw1.ipynb")
    course = collect.Course(root, config=CourseConfig(root=root))
    source = course.notebooks("hw1")[0]
    assert not (root / "gradebook.db").exists()  # never created by reading
    (why,) = [p for p in unsupported(source) if "AUTOTEST" in p]
    assert "no record" in why and "generate_assignment" in why
