"""The learner's full check (`autograder check --hidden`, `check(hidden=True)`) and
`autograder progress`, through their real command lines.

Exercise 1 (the exercise the grading tests are built on): a fixture with one typical mistake
(tests/fixtures/submissions/01_relu_inplace/mip-version-only.ipynb: one hidden test fails),
the release filled with the reference answers (full marks) and the untouched release (TODO
everywhere). No report ever shows a test's source. Where it cannot run it says why: no
solutions/ in this copy, no bubblewrap.
"""

import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course import EXERCISES, FIXTURE_SUBMISSIONS, SOLUTIONS, assignments
from autograder.fullcheck import NO_SOLUTIONS
from autograder.grading.intake.collect import read_source
from autograder.procs import explain, run
from autograder.selfcheck import check
from exercise_answers import filled_release, reference_answers

pytestmark = pytest.mark.usefixtures("needs_bubblewrap")

EXERCISE = "01_relu_inplace"
WRONG = FIXTURE_SUBMISSIONS / EXERCISE / "mip-version-only.ipynb"
BIN = Path(sys.executable).parent
AUTOGRADER = BIN / "autograder"
TEST_LINE = re.compile(r"^  (PASS|FAIL|TODO)  (\w+) \((visible|hidden)\): (\S+) / (\S+)$", re.M)
SOURCE = read_source(EXERCISE, SOLUTIONS / EXERCISE / f"{EXERCISE}.ipynb")


def autograder(*args, env=None, cwd=None):
    """``autograder ARGS``, any exit status: the callers check it."""
    result = run([str(AUTOGRADER), *map(str, args)], expect=None, timeout=900, env=env, cwd=cwd)
    assert "Traceback" not in result.stdout + result.stderr, explain(result)
    return result


def statuses_of(text):
    return {name: status for status, name, *_ in TEST_LINE.findall(text)}


def assert_no_test_source(text):
    assert "BEGIN HIDDEN TESTS" not in text
    for test in SOURCE.tests:
        for line in test.source.splitlines():
            line = line.strip()
            if len(line) > 25 and any(ch in line for ch in "=(") and not line.startswith("#"):
                assert line not in text, f"test source in the report: {line}"


@pytest.fixture(scope="module")
def answered(tmp_path_factory):
    """The release of exercise 1 filled with the reference answers, saved as the learner would."""
    path = tmp_path_factory.mktemp("answered") / f"{EXERCISE}.ipynb"
    nbformat.write(filled_release(EXERCISE, EXERCISE, reference_answers(EXERCISE, EXERCISE)), path)
    return path


def test_a_wrong_answer_gets_fail_lines_with_the_checks_messages():
    result = autograder("check", "--hidden", WRONG)
    assert result.returncode == 1, explain(result)
    statuses = statuses_of(result.stdout)
    assert set(statuses) == {t.grade_id for t in SOURCE.tests}
    assert {k for k, v in statuses.items() if v != "PASS"} == {"test_modifies_in_place_data"}
    assert "  FAIL  test_modifies_in_place_data (hidden): 0 / 1" in result.stdout
    failure = result.stdout.split("test_modifies_in_place_data (hidden)")[1].split("\n  PASS")[0]
    for part in ("expected: True", "found:    False", "likely cause:"):
        assert part in failure
    assert "modifies_in_place: 7 / 8" in result.stdout
    assert f"score: 14 / {SOURCE.max_score:g}" in result.stdout
    assert_no_test_source(result.stdout + result.stderr)


def test_the_reference_answers_get_full_marks(answered):
    result = autograder("check", "--hidden", answered)
    assert result.returncode == 0, explain(result)
    assert set(statuses_of(result.stdout).values()) == {"PASS"}
    assert len(statuses_of(result.stdout)) == len(SOURCE.tests)
    assert f"score: {SOURCE.max_score:g} / {SOURCE.max_score:g}" in result.stdout
    assert "Full marks" in result.stdout
    assert_no_test_source(result.stdout)


def test_the_untouched_release_is_todo_everywhere():
    result = autograder("check", "--hidden", EXERCISES / EXERCISE / f"{EXERCISE}.ipynb")
    assert result.returncode == 1, explain(result)
    assert set(statuses_of(result.stdout).values()) == {"TODO"}
    assert f"score: 0 / {SOURCE.max_score:g}" in result.stdout
    assert "Not attempted yet: inplace_relu_is_safe, modifies_in_place" in result.stdout
    assert "note:" not in result.stdout  # the stubs' NotImplementedError is the TODO, not a note


def test_check_hidden_from_a_cell(answered, capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    check(str(answered), hidden=True)
    out = capsys.readouterr().out
    assert out.startswith(f"Checking the saved file {EXERCISE}.ipynb")
    assert f"score: {SOURCE.max_score:g} / {SOURCE.max_score:g}" in out


def test_a_copy_without_solutions_says_so(tmp_path, capsys):
    (tmp_path / "exercises").mkdir()
    result = autograder("check", "--hidden", WRONG, "--course", tmp_path)
    assert result.returncode == 2, explain(result)
    assert result.stdout == ""
    assert result.stderr.strip() == f"autograder check --hidden: {NO_SOLUTIONS}"
    check(str(WRONG), hidden=True, course=tmp_path)
    assert f"Cannot run the full check: {NO_SOLUTIONS}" in capsys.readouterr().out


def test_without_bubblewrap_it_gives_the_install_command():
    env = dict(os.environ, PATH=str(BIN))  # the venv's commands, no bwrap
    assert shutil.which("bwrap", path=env["PATH"]) is None
    result = autograder("check", "--hidden", WRONG, env=env)
    assert result.returncode == 2, explain(result)
    assert "bubblewrap (the grading sandbox) is not installed" in result.stderr
    assert (
        "sudo apt-get update && sudo apt-get install -y --no-install-recommends bubblewrap\n"
        in result.stderr
    )


def test_plain_check_is_unchanged_by_the_full_check():
    """The visible tests alone pass this notebook: only the full check finds its mistake."""
    result = autograder("check", WRONG)
    assert result.returncode == 0, explain(result)
    assert "2 of 2 functions pass their visible tests" in result.stdout
    assert "run when graded" in result.stdout
    assert "score:" not in result.stdout


# --------------------------------------------------------------------------- progress


def progress_lines(text):
    return {
        m[0]: (m[1].strip(), m[2])
        for m in re.findall(r"^  (\S+)\s+(.+?)\s+score (.+)$", text, re.M)
    }


def test_progress_of_the_committed_exercises_is_not_started():
    result = autograder("progress", EXERCISES)
    assert result.returncode == 0, explain(result)
    rows = progress_lines(result.stdout)
    assert list(rows) == assignments()
    assert {status for status, _ in rows.values()} == {"not started"}
    assert rows[EXERCISE][1] == f"0 / {SOURCE.max_score:g}"
    assert f"0 of {len(assignments())} exercises with full marks" in result.stdout


def test_progress_after_work(tmp_path, answered):
    exercises = tmp_path / "exercises"
    shutil.copytree(EXERCISES, exercises)
    shutil.copy(answered, exercises / EXERCISE / f"{EXERCISE}.ipynb")
    result = autograder("progress", exercises)
    rows = progress_lines(result.stdout)
    assert rows[EXERCISE] == ("full marks", f"{SOURCE.max_score:g} / {SOURCE.max_score:g}")
    assert [status for a, (status, _) in rows.items() if a != EXERCISE] == ["not started"] * (
        len(rows) - 1
    )
    assert f"1 of {len(rows)} exercises with full marks" in result.stdout

    shutil.copy(WRONG, exercises / EXERCISE / f"{EXERCISE}.ipynb")
    result = autograder("progress", exercises)
    assert progress_lines(result.stdout)[EXERCISE] == (
        "visible tests pass",
        f"14 / {SOURCE.max_score:g}",
    )
    assert_no_test_source(result.stdout)


def test_progress_without_solutions_runs_the_visible_tests(tmp_path):
    exercises = tmp_path / "exercises"
    shutil.copytree(EXERCISES, exercises)
    shutil.copy(WRONG, exercises / EXERCISE / f"{EXERCISE}.ipynb")
    result = autograder("progress", exercises, "--course", tmp_path)
    assert result.returncode == 0, explain(result)
    rows = progress_lines(result.stdout)
    assert rows[EXERCISE][0] == "visible tests pass" and rows[EXERCISE][1].startswith("? / ")
    assert f"note: no score: {NO_SOLUTIONS}" in result.stdout
