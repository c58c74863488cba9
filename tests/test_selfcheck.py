"""`autograder check NOTEBOOK` and the self-check cell at the end of every exercise.

The real command line runs against notebooks named for the case (tests/fixtures/selfcheck/
<assignment>/<case>.ipynb, expected statuses in expected.json), against every untouched
release notebook (every function "not attempted yet") and against the release filled with the
reference answers (every function passes). The check() cell is executed the way JupyterLab
runs it (a kernel with JPY_SESSION_NAME), under nbgrader (skipped) and with unsaved edits.
"""

import json
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course import EXERCISES, SOLUTIONS, assignments, graded_cells, notebooks
from autograder.procs import explain, run
from autograder.selfcheck import check, is_selfcheck_cell
from exercise_answers import filled_release, reference_answers

FIXTURES = Path(__file__).parent / "fixtures" / "selfcheck"
AUTOGRADER = Path(sys.executable).parent / "autograder"
EXERCISE_NOTEBOOKS = [(a, nb) for a in assignments() for nb in notebooks(a)]
STATUS_LINE = re.compile(r"^(PASS|FAIL|TODO|NOTE)\s+(\w+): ", re.M)


def run_check(path, *extra, cwd=None):
    command = [str(AUTOGRADER)] if AUTOGRADER.exists() else [sys.executable, "-m", "autograder.cli"]
    # any exit status: the callers check it
    result = run([*command, "check", str(path), *extra], expect=None, cwd=cwd, timeout=900)
    assert "Traceback" not in result.stdout + result.stderr, (
        "the report must not show tracebacks\n" + explain(result)
    )
    assert "\x1b[" not in result.stdout, "no terminal colour codes in the report"
    return result


def statuses(text):
    return {name: status for status, name in STATUS_LINE.findall(text)}


def fixture_cases():
    for assignment in sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()):
        cases = json.loads((FIXTURES / assignment / "expected.json").read_text())
        cases.pop("_comment", None)
        for case, expected in cases.items():
            yield pytest.param(assignment, case, expected, id=f"{assignment}/{case}")


@pytest.mark.slow  # `autograder check`: a process per notebook
@pytest.mark.parametrize("assignment,notebook", EXERCISE_NOTEBOOKS)
def test_untouched_release_is_not_attempted(assignment, notebook):
    result = run_check(EXERCISES / assignment / f"{notebook}.ipynb")
    names, _ = graded_cells(
        nbformat.read(EXERCISES / assignment / f"{notebook}.ipynb", as_version=4)
    )
    assert result.returncode == 1, explain(result)
    assert statuses(result.stdout) == {name: "TODO" for name in names}
    assert result.stdout.count("not attempted yet (it still raises NotImplementedError)") == len(
        names
    )
    assert "PASS" not in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("assignment,notebook", EXERCISE_NOTEBOOKS)
def test_reference_answers_pass(tmp_path, assignment, notebook):
    path = tmp_path / f"{notebook}.ipynb"
    nbformat.write(
        filled_release(assignment, notebook, reference_answers(assignment, notebook)), path
    )
    result = run_check(path)
    names, tests = graded_cells(nbformat.read(path, as_version=4))
    assert result.returncode == 0, explain(result)
    assert statuses(result.stdout) == {name: "PASS" for name in names}
    hidden = sum(
        int(n) for n in re.findall(r"hidden tests \((\d+) cells?\) run when graded", result.stdout)
    )
    assert hidden == len(tests) - len(names), (
        "every hidden test cell is reported as run when graded"
    )
    assert f"{len(names)} of {len(names)} functions pass their visible tests" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("assignment,notebook", EXERCISE_NOTEBOOKS)
def test_hidden_tests_of_a_source_notebook_are_not_run(tmp_path, assignment, notebook):
    """On the instructor's notebook, hidden tests are reported, never executed (nor passed)."""
    nb = nbformat.read(SOLUTIONS / assignment / f"{notebook}.ipynb", as_version=4)
    for cell in nb.cells:
        if "### BEGIN HIDDEN TESTS" in cell.source:
            cell.source = cell.source.replace(
                "### BEGIN HIDDEN TESTS",
                "### BEGIN HIDDEN TESTS\nraise RuntimeError('a hidden test ran')",
            )
    path = tmp_path / f"{notebook}.ipynb"
    nbformat.write(nb, path)
    result = run_check(path)
    assert result.returncode == 0, explain(result)
    assert "a hidden test ran" not in result.stdout
    assert set(statuses(result.stdout).values()) == {"PASS"}


@pytest.mark.slow
@pytest.mark.parametrize("assignment,case,expected", list(fixture_cases()))
def test_fixture_case(assignment, case, expected):
    # a fixture's "timeout" is every cell's limit, the setup cell's `import torch` in a fresh
    # kernel included: 1.8-2.7 s on a quiet machine (2026-11-29); 5 s failed once in a quiet
    # `make test` (two workers are load enough), so the looping fixture's is 15 s, 5x that
    extra = ("--timeout", str(expected["timeout"])) if "timeout" in expected else ()
    result = run_check(FIXTURES / assignment / f"{case}.ipynb", *extra)
    assert statuses(result.stdout) == expected["status"], result.stdout
    for text in expected["says"]:
        assert text in result.stdout, f"{text!r} missing from:\n{result.stdout}"
    assert result.returncode == (0 if set(expected["status"].values()) <= {"PASS"} else 1), explain(
        result
    )


def test_bad_input_gets_a_clear_error(tmp_path):
    invalid = tmp_path / "01_relu_inplace.ipynb"
    invalid.write_text('{"cells": [')
    lesson = tmp_path / "lesson.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")]), lesson)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    cases = {
        tmp_path / "missing.ipynb": "missing.ipynb: no such file",
        invalid: "is not valid notebook JSON (line 1, column 12",
        lesson: "has no graded test cells",
        text: "is not a notebook",
        tmp_path: "is a folder",
    }
    for path, message in cases.items():
        result = run_check(path)
        assert result.returncode == 2, explain(result)
        assert message in result.stderr, result.stderr
        assert result.stdout == ""


# ------------------------------------------------------------------ the check() cell


def _selfcheck_output(nb):
    cells = [c for c in nb.cells if is_selfcheck_cell(c)]
    assert len(cells) == 1, "every exercise ends with exactly one self-check cell"
    outputs = cells[0].outputs
    assert all(o.output_type == "stream" and o.name == "stdout" for o in outputs), outputs
    return "".join(o.text for o in outputs)


def _run_in_kernel(nb, folder, env=None, timeout=900):
    from nbclient import NotebookClient

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=False,
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute(env={**os.environ, **(env or {})})
    return nb


@pytest.mark.parametrize("assignment,notebook", EXERCISE_NOTEBOOKS)
def test_every_exercise_ends_with_the_selfcheck_cell(assignment, notebook):
    for root in (SOLUTIONS, EXERCISES):
        nb = nbformat.read(root / assignment / f"{notebook}.ipynb", as_version=4)
        cell = nb.cells[-1]
        assert is_selfcheck_cell(cell), (
            f"{root.name}/{assignment}: the last cell must be the self-check cell"
        )
        assert "check()" in cell.source and cell.metadata["nbgrader"]["locked"]


@pytest.mark.slow  # a kernel
def test_check_cell_finds_its_notebook_like_in_jupyterlab(tmp_path):
    """JupyterLab starts the kernel with JPY_SESSION_NAME = the notebook's path; another
    notebook in the same folder must not confuse the check."""
    assignment, notebook = EXERCISE_NOTEBOOKS[0]
    nb = filled_release(assignment, notebook, reference_answers(assignment, notebook))
    path = tmp_path / f"{notebook}.ipynb"
    nbformat.write(nb, path)
    shutil.copy(EXERCISES / assignment / f"{notebook}.ipynb", tmp_path / "Untitled.ipynb")
    out = _selfcheck_output(_run_in_kernel(nb, tmp_path, env={"JPY_SESSION_NAME": str(path)}))
    assert out.startswith(f"Checking the saved file {notebook}.ipynb (save first with Ctrl+S")
    assert f"Self-check of {notebook}.ipynb" in out
    assert set(statuses(out).values()) == {"PASS"}, out
    assert "Warning" not in out


@pytest.mark.slow  # a kernel
def test_check_cell_warns_when_the_saved_file_is_not_what_ran(tmp_path):
    assignment, notebook = EXERCISE_NOTEBOOKS[0]
    shutil.copy(EXERCISES / assignment / f"{notebook}.ipynb", tmp_path)  # saved: still blank
    nb = filled_release(
        assignment, notebook, reference_answers(assignment, notebook)
    )  # ran: answered
    out = _selfcheck_output(_run_in_kernel(nb, tmp_path))
    names, _ = graded_cells(nb)
    assert f"Warning: the saved {', '.join(names)} differs from the version you last ran" in out
    assert set(statuses(out).values()) == {"TODO"}


def test_check_is_skipped_under_nbgrader(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    check("does-not-matter.ipynb")
    assert capsys.readouterr().out == "Self-check skipped: nbgrader is running this notebook.\n"


def test_check_says_how_to_name_the_notebook_when_it_cannot_tell(tmp_path, monkeypatch, capsys):
    for name in ("a.ipynb", "b.ipynb"):
        shutil.copy(
            EXERCISES / EXERCISE_NOTEBOOKS[0][0] / f"{EXERCISE_NOTEBOOKS[0][1]}.ipynb",
            tmp_path / name,
        )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    check()
    assert "Cannot tell which notebook this is" in capsys.readouterr().out
