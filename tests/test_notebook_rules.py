"""House rules for every notebook, checked statically (nbval checks the outputs themselves).

Lessons (course/): every code cell is executed with its outputs committed; a cell with an
error output is tagged `raises-exception` and vice versa; no timings or machine-specific
paths in outputs.
Solutions (solutions/): nbgrader cells follow the grading contract: a solution cell's
grade_id is the name it defines, each test cell is owned by one function
(`test_<name>` / `test_<name>_...`), every function has a visible test cell and hidden tests.
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
            f"cell {i}: error output {'without' if has_error else 'expected by'} the raises-exception tag")


@pytest.mark.parametrize("path", LESSONS + SOURCES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_outputs_have_no_volatile_text(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            continue
        for text in _text_outputs(cell):
            for pattern, what in VOLATILE:
                match = pattern.search(text)
                assert not match, f"cell {i} prints {what} ({match.group(0)!r}); nbval would compare it"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_grading_contract_of_source_notebook(path):
    nb = nbformat.read(path, as_version=4)
    names, tests = graded_cells(nb)
    assert names and tests
    cells = {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if "nbgrader" in c.metadata}
    for name in names:
        assert re.search(rf"^(def|class) {re.escape(name)}\b", cells[name].source, re.M), (
            f"solution cell {name!r} must define {name}")
        assert "### BEGIN SOLUTION" in cells[name].source
        owned = [t for t in tests if owner(t, names) == name]
        assert f"test_{name}" in owned, f"{name} needs a visible test cell test_{name}"
        visible = cells[f"test_{name}"].source
        assert "BEGIN HIDDEN TESTS" not in visible.split("\n", 1)[0]
        assert any("### BEGIN HIDDEN TESTS" in cells[t].source for t in owned), f"{name} has no hidden tests"
    for test in tests:
        assert owner(test, names), f"test cell {test!r} is not owned by any graded function"
        meta = cells[test].metadata["nbgrader"]
        assert meta["points"] > 0 and meta["locked"]
