"""The gradebook registration (``GradebookWriter.register``) against nbgrader's own ``SaveCells``.

The rule: registering a source notebook leaves the gradebook holding exactly what ``SaveCells``
leaves (the notebook's kernelspec; its grade, solution, task and source cells with every field
SaveCells sets); it skips SaveCells only when that is already so. Proved on the course's source
notebooks and on edits of them from a seeded generator (``random.Random``, as ``tests/fuzz.py``:
points, sources, checksums, locks, cell types, kernelspecs, cells added and removed), each
compared with stock SaveCells on a gradebook of its own.
"""

from __future__ import annotations

import copy
import os
import random
import shutil
import sys
from types import SimpleNamespace

import nbformat
import pytest

from autograder.course import SOLUTIONS, assignments, notebooks
from autograder.grading.results.gradebook import GradebookWriter

SOURCES = [(a, nb) for a in assignments() for nb in notebooks(a)]


@pytest.fixture(autouse=True)
def _alembic_on_path(monkeypatch):
    """nbgrader's Gradebook runs ``alembic`` from PATH: this environment's (as the writer does)."""
    bindir = os.path.dirname(sys.executable)
    monkeypatch.setenv("PATH", os.pathsep.join([bindir, os.environ.get("PATH", "")]))


@pytest.fixture(scope="module")
def empty_gradebook(tmp_path_factory):
    """An empty gradebook, made once: nbgrader makes a new one with an ``alembic`` subprocess
    (2.5 s); each case copies this file."""
    from nbgrader.api import Gradebook

    bindir = os.path.dirname(sys.executable)
    path = tmp_path_factory.mktemp("gradebook") / "empty.db"
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([bindir, old])
    try:
        Gradebook(f"sqlite:///{path}").close()
    finally:
        os.environ["PATH"] = old
    return path


def fresh(empty, folder, name) -> str:
    path = folder / f"{name}.db"
    shutil.copyfile(empty, path)
    return f"sqlite:///{path}"


def _source(assignment, name, nb=None):
    if nb is None:
        nb = nbformat.read(SOLUTIONS / assignment / f"{name}.ipynb", as_version=4)
    return SimpleNamespace(assignment=assignment, name=name, nb=nb)


def stock_save_cells(db_url, source) -> None:
    """What ``nbgrader generate_assignment`` runs: nbgrader's SaveCells on the source notebook."""
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveCells

    with Gradebook(db_url) as gb:
        gb.update_or_create_assignment(source.assignment)
    pre = SaveCells()
    pre.preprocess(
        copy.deepcopy(source.nb),
        {"nbgrader": {"db_url": db_url, "assignment": source.assignment, "notebook": source.name}},
    )
    pre.gradebook.close()


def contents(db_url, source) -> dict:
    """Everything SaveCells records for the notebook, without row ids."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        nb = gb.find_notebook(source.name, source.assignment)
        return {
            "kernelspec": nb.kernelspec,
            "grade": sorted((c.name, c.max_score, c.cell_type) for c in nb.grade_cells),
            "solution": sorted(c.name for c in nb.solution_cells),
            "task": sorted((c.name, c.max_score, c.cell_type) for c in nb.task_cells),
            "source": sorted(
                (c.name, c.cell_type, c.locked, c.source, c.checksum) for c in nb.source_cells
            ),
        }


def ours(db_url, source, root) -> bool:
    """Register with a fresh writer; True when it skipped SaveCells (found it recorded)."""
    writer = GradebookWriter(root, db_url)
    try:
        skipped = writer._recorded(source)
        writer.register(source)
        return skipped
    finally:
        writer.close()


def test_every_source_notebook_is_recorded_as_stock_and_then_skipped(tmp_path, empty_gradebook):
    for i, (a, name) in enumerate(SOURCES):
        source = _source(a, name)
        stock_url, our_url = (
            fresh(empty_gradebook, tmp_path, f"{k}-{i}") for k in ("stock", "ours")
        )
        stock_save_cells(stock_url, source)
        assert ours(our_url, source, tmp_path) is False  # an empty gradebook: SaveCells runs
        assert contents(our_url, source) == contents(stock_url, source)
        assert ours(our_url, source, tmp_path) is True  # the same notebook again: skipped
        assert contents(our_url, source) == contents(stock_url, source)


def _graded(nb):
    return [c for c in nb.cells if c.get("metadata", {}).get("nbgrader")]


def edit(nb, kind, k, text):
    """One edit of a source notebook: what an instructor changes between two releases."""
    nb = copy.deepcopy(nb)
    cells = _graded(nb)
    cell = cells[k % len(cells)]
    meta = cell.metadata.nbgrader
    if kind == "points" and meta.get("grade"):
        meta["points"] = float(meta.get("points", 0)) + 1
    elif kind == "source":
        cell.source += text
    elif kind == "checksum":
        meta["checksum"] = (meta.get("checksum") or "") + "0"
    elif kind == "lock":
        meta["locked"] = not meta.get("locked", False)
    elif kind == "cell_type" and not meta.get("solution"):
        cell.cell_type = "markdown" if cell.cell_type == "code" else "code"
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    elif kind == "kernelspec":
        nb.metadata["kernelspec"] = dict(nb.metadata.get("kernelspec", {}), display_name=text)
    elif kind == "remove":
        nb.cells.remove(cell)
    elif kind == "add":
        new = nbformat.v4.new_code_cell("assert True" + text)
        new.metadata["nbgrader"] = {
            "grade": True,
            "grade_id": f"added_{k}",
            "locked": True,
            "points": 1,
            "schema_version": 3,
            "solution": False,
            "task": False,
        }
        nb.cells.append(new)
    elif kind == "task":
        new = nbformat.v4.new_markdown_cell("Describe" + text)
        new.metadata["nbgrader"] = {
            "grade": False,
            "grade_id": f"task_{k}",
            "locked": True,
            "points": 2,
            "schema_version": 3,
            "solution": False,
            "task": True,
        }
        nb.cells.append(new)
    return nb


KINDS = ["points", "source", "checksum", "lock", "cell_type", "kernelspec", "remove", "add", "task"]


CASES = 16  # generated edit sequences (about 0.8 s each: SQLite commits)


def _edits(seed):
    rng = random.Random(seed)
    return [
        (rng.choice(KINDS), rng.randrange(50), "".join(rng.choice("xy #\n") for _ in range(3)))
        for _ in range(rng.randrange(4))
    ]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(CASES))
def test_a_changed_source_is_recorded_as_stock_nbgrader_records_it(tmp_path, seed, empty_gradebook):
    """Registered once, then edited and registered again (no submissions yet): the gradebook
    holds what stock SaveCells leaves after the same two steps; skipped exactly when no edit
    changed anything SaveCells records."""
    rng = random.Random(seed)
    a, name = SOURCES[rng.randrange(len(SOURCES))]
    edits = _edits(seed)
    before = _source(a, name)
    nb = before.nb
    for kind, k, text in edits:
        nb = edit(nb, kind, k, text)
    after = _source(a, name, nb)
    stock_url, our_url = (fresh(empty_gradebook, tmp_path, k) for k in ("stock", "ours"))
    stock_save_cells(stock_url, before)
    stock_save_cells(stock_url, after)
    stock_save_cells(our_url, before)
    recorded_before = contents(our_url, before)
    skipped = ours(our_url, after, tmp_path)
    assert contents(our_url, after) == contents(stock_url, after), edits
    assert skipped == (contents(stock_url, after) == recorded_before), edits
