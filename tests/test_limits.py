"""Grading v4's limits and start-up (issue 26 items 7, 10-14 and the exit status).

* The exit status: any ``grader-error`` row makes ``autograder grade`` exit 3, and a row's status
  is always one of the README's table (:meth:`Status.of`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from autograder.grading.command import GradeRun
from autograder.grading.results.report import Row
from autograder.grading.status import Status

README = Path(__file__).resolve().parents[1] / "README.md"


# --------------------------------------------------------------------------- exit status


def _run_with(rows, errors=()):
    run = GradeRun(argparse.Namespace())
    run.rows = list(rows)
    run.errors = list(errors)
    return run


def _row(gid, status, student="s"):
    return Row(student, "a", "nb", gid, 0.0, 1.0, status)


def test_one_grader_error_row_makes_the_run_exit_3(capsys):
    assert _run_with([_row("t1", "ok"), _row("t2", "in-kernel")]).exit_status() == 0
    run = _run_with([_row("t1", "ok"), _row("t2", "grader-error"), _row("t3", "timeout")])
    assert run.exit_status() == 3
    err = capsys.readouterr().err
    assert "grader error on s/a/nb: t2" in err and "failed on 1 notebook(s)" in err
    # a notebook that failed whole (a logged error) and another with one failed test: both named
    run = _run_with(
        [_row("t1", "grader-error", "x"), _row("t1", "grader-error", "y")],
        errors=[("x/a/nb", "Traceback ...")],
    )
    assert run.exit_status() == 3
    assert "failed on 2 notebook(s)" in capsys.readouterr().err
    # grader-error outranks a refused assignment (4): the worse news first
    run = _run_with([_row("t1", "grader-error")])
    run.refused = {"b": ["why"]}
    assert run.exit_status() == 3


def test_every_row_status_is_in_the_readme_table():
    """status.py is the one place a row's status comes from: a word a verdict carries that is not
    a status (`observation-error`, `no-process`, anything unknown) becomes one of the table."""
    table = {
        line.split("|")[1].strip().strip("`")
        for line in README.read_text().splitlines()
        if line.startswith("| `") and line.count("|") == 3
    }
    assert {s.value for s in Status} <= table, {s.value for s in Status} - table
    assert Status.of("observation-error") is Status.GRADER_ERROR
    assert Status.of("no-process") is Status.KERNEL_DIED
    assert Status.of("timeout") is Status.TIMEOUT
    for junk in ("no such status", None, 3, ["ok"]):
        assert Status.of(junk) is Status.GRADER_ERROR


def test_a_verdict_status_outside_the_table_is_a_grader_error():
    from types import SimpleNamespace

    from autograder.grading.results.report import _score

    row = _row("t", "ok")
    test = SimpleNamespace(points=1.0)
    sub = SimpleNamespace(items=[["test", 0]])
    result = {"tests": [{"passed": False, "status": "observation-error", "message": "too big"}]}
    _score(row, test, 0, sub, result)
    assert (row.status, row.score, row.message) == ("grader-error", 0.0, "too big")
