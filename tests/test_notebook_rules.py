"""House rules for every notebook, checked statically (nbval checks the outputs themselves).

Lessons (course/): every code cell is executed with its outputs committed; a cell with an
error output is tagged `raises-exception` and vice versa; no timings or machine-specific
paths in outputs.
Solutions (solutions/): nbgrader cells follow the grading contract: a solution cell's
grade_id is the name it defines, each test cell is owned by one function
(`test_<name>` / `test_<name>_...`), every function has a visible test cell and hidden tests
(a quiz's answer cell `<name>` sets `<name>_1`, `<name>_2`, ... instead of defining a function).
"""

import re
from pathlib import Path

import nbformat
import pytest

from autograder.course import SOLUTIONS, assignments, graded_cells, notebooks, owner

REPO = Path(__file__).resolve().parents[1]
LESSONS = sorted((REPO / "course").glob("*.ipynb"))
SOURCES = [SOLUTIONS / a / f"{nb}.ipynb" for a in assignments() for nb in notebooks(a)]
VOLATILE = [
    (re.compile(r"\b\d+(\.\d+)?\s?(ms|µs|us|ns)\b"), "a timing"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}"), "a timestamp"),
    (re.compile(r"/(root|home|tmp|work)/"), "a machine-specific path"),
]


def _text_outputs(cell):
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            yield out.text
        elif out.output_type in ("execute_result", "display_data"):
            yield out.get("data", {}).get("text/plain", "")
        elif out.output_type == "error":  # nbval compares ename/evalue, not the traceback
            yield f"{out.ename}: {out.evalue}"


@pytest.mark.parametrize("path", LESSONS + SOURCES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_executed_and_error_cells_tagged(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        assert cell.execution_count is not None, f"cell {i} was not executed: run `make notebooks`"
        has_error = any(o.output_type == "error" for o in cell.outputs)
        tagged = "raises-exception" in cell.metadata.get("tags", [])
        assert has_error == tagged, (
            f"cell {i}: error output {'without' if has_error else 'expected by'} the raises-exception tag"
        )


@pytest.mark.parametrize(
    "path",
    [p for p in LESSONS if not p.name.startswith("00_")],  # (the start pages prompt nothing)
    ids=lambda p: p.relative_to(REPO).as_posix(),
)
def test_a_predict_prompt_does_not_show_its_answer(path):
    """Predictions that are predictions (issue 38, the review's N17): the code cell after each
    "predict, then run" prompt ships with its outputs collapsed (JupyterLab's ``outputs_hidden``),
    so the learner runs it, or opens its output, to see the answer; nbval still compares them."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and re.search(r"\bpredict,\s+then\b", cell.source, re.I):
            j = next(j for j in range(i + 1, len(nb.cells)) if nb.cells[j].cell_type == "code")
            answer = nb.cells[j]
            assert answer.outputs, f"cell {j}: the answer to cell {i}'s prompt has no output"
            assert answer.metadata.get("jupyter", {}).get("outputs_hidden") is True, (
                f"cell {j} answers cell {i}'s 'predict, then run' prompt: collapse its outputs "
                '(metadata {"jupyter": {"outputs_hidden": true}})'
            )


@pytest.mark.parametrize("path", LESSONS + SOURCES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_outputs_have_no_volatile_text(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            continue
        for text in _text_outputs(cell):
            for pattern, what in VOLATILE:
                match = pattern.search(text)
                assert not match, (
                    f"cell {i} prints {what} ({match.group(0)!r}); nbval would compare it"
                )


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_grading_contract_of_source_notebook(path):
    nb = nbformat.read(path, as_version=4)
    names, tests = graded_cells(nb)
    assert names and tests
    cells = {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if "nbgrader" in c.metadata}
    for name in names:
        # a function or class of that name, or (a quiz's answer cell) the numbered values name_1, name_2, ...
        assert re.search(
            rf"^(def|class) {re.escape(name)}\b|^{re.escape(name)}_\d+ = ", cells[name].source, re.M
        ), f"solution cell {name!r} must define {name} (or {name}_1, {name}_2, ...)"
        assert "### BEGIN SOLUTION" in cells[name].source
        owned = [t for t in tests if owner(t, names) == name]
        assert f"test_{name}" in owned, f"{name} needs a visible test cell test_{name}"
        visible = cells[f"test_{name}"].source
        assert "BEGIN HIDDEN TESTS" not in visible.split("\n", 1)[0]
        assert any("### BEGIN HIDDEN TESTS" in cells[t].source for t in owned), (
            f"{name} has no hidden tests"
        )
    for test in tests:
        assert owner(test, names), f"test cell {test!r} is not owned by any graded function"
        meta = cells[test].metadata["nbgrader"]
        assert meta["points"] > 0 and meta["locked"]


CLAUSE_ROW = re.compile(r"^\|\s*([A-Z]\d+)\s*\|[^|]*\|(.*)\|\s*$", re.M)
CLAUSE_ID = re.compile(r"\*\*\[([A-Z]\d+)\]\*\*")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_clause_has_tests_and_every_test_a_clause(path):
    """The `clauses` table maps each specification clause ([M1] ...) to the tests that check it."""
    nb = nbformat.read(path, as_version=4)
    cells = {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if "nbgrader" in c.metadata}
    assert "clauses" in cells, (
        "the solution needs a markdown cell with grade_id 'clauses' (clause -> tests table)"
    )
    _, tests = graded_cells(nb)
    table = {
        cid: set(re.findall(r"`(test_\w+)`", rest))
        for cid, rest in CLAUSE_ROW.findall(cells["clauses"].source)
    }
    specified = {
        cid for c in nb.cells if c.cell_type == "markdown" for cid in CLAUSE_ID.findall(c.source)
    }
    assert specified, "no clause ids (**[X1]**) in the specification cells"
    assert set(table) == specified, (
        f"clauses in the spec but not the table, or the reverse: {set(table) ^ specified}"
    )
    for cid, owned in table.items():
        assert owned, f"clause {cid} has no test"
        assert owned <= set(tests), f"clause {cid} names unknown tests {owned - set(tests)}"
    covered = set().union(*table.values())
    assert covered == set(tests), f"tests that check no clause: {set(tests) - covered}"
    for test in tests:  # each test's first comment line names its clauses, as in the table
        first = next(line for line in cells[test].source.splitlines() if line.startswith("#"))
        named = (
            set(re.findall(r"\b([A-Z]\d+)\b", first.split("[", 1)[1].split("]", 1)[0]))
            if "[" in first
            else set()
        )
        assert named == {cid for cid, owned in table.items() if test in owned}, (
            f"{test}: its first line names {sorted(named)}, the clauses table {sorted(c for c, o in table.items() if test in o)}"
        )
