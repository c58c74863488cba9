"""The gradebook registration (``GradebookWriter.register``) against nbgrader's own ``SaveCells``,
run as ``generate_assignment`` runs it (on the release: solutions cleared, checksums computed).

The rule: registering a source notebook leaves the gradebook holding exactly what ``SaveCells``
leaves (the notebook's kernelspec; its grade, solution, task and source cells with every field
SaveCells sets); it skips SaveCells only when that is already so. Proved on the course's source
notebooks and on edits of them from a seeded generator (``random.Random``, as ``tests/fuzz.py``:
points, sources, checksums, locks, cell types, kernelspecs, cells added and removed), each
compared with stock SaveCells on a gradebook of its own.
"""

from __future__ import annotations

import copy
import random
import shutil
from types import SimpleNamespace

import nbformat
import pytest

from autograder.course import SOLUTIONS, assignments, notebooks
from autograder.grading.results.gradebook import GradebookWriter

SOURCES = [(a, nb) for a in assignments() for nb in notebooks(a)]


@pytest.fixture(scope="module")
def empty_gradebook(tmp_path_factory):
    """An empty gradebook, made once by the writer (nbgrader makes a new one with an ``alembic``
    subprocess, 2.5 s, found on the PATH the writer sets); each case copies this file, and nbgrader
    opens an existing gradebook without alembic."""
    folder = tmp_path_factory.mktemp("gradebook")
    GradebookWriter(folder, f"sqlite:///{folder / 'empty.db'}").close()
    return folder / "empty.db"


def fresh(empty, folder, name) -> str:
    path = folder / f"{name}.db"
    shutil.copyfile(empty, path)
    return f"sqlite:///{path}"


def _source(assignment, name, nb=None):
    if nb is None:
        nb = nbformat.read(SOLUTIONS / assignment / f"{name}.ipynb", as_version=4)
    return SimpleNamespace(assignment=assignment, name=name, nb=nb)


def stock_save_cells(db_url, source) -> None:
    """What ``nbgrader generate_assignment`` records: its preprocessors up to SaveCells, in its
    order (LockCells, ClearSolutions, ClearOutput, ComputeChecksums), then nbgrader's SaveCells on
    the notebook as released (solutions cleared, checksums computed; tests/test_any_course.py
    compares a whole `autograder grade` gradebook with a real generate_assignment's)."""
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import (
        ClearOutput,
        ClearSolutions,
        ComputeChecksums,
        LockCells,
        SaveCells,
    )

    with Gradebook(db_url) as gb:
        gb.update_or_create_assignment(source.assignment)
    nb, resources = copy.deepcopy(source.nb), {}
    for step in (LockCells, ClearSolutions, ClearOutput, ComputeChecksums):
        nb, resources = step().preprocess(nb, resources)
    pre = SaveCells()
    pre.preprocess(
        nb,
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


def _graded_cell(cell, grade_id, points, task=False):
    """``cell`` as nbgrader marks a test cell (or, ``task``, a task cell)."""
    cell.metadata["nbgrader"] = {
        "grade": not task,
        "grade_id": grade_id,
        "locked": True,
        "points": points,
        "schema_version": 3,
        "solution": False,
        "task": task,
    }
    return cell


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
        nb.cells.append(
            _graded_cell(nbformat.v4.new_code_cell("assert True" + text), f"added_{k}", 1)
        )
    elif kind == "task":
        new = nbformat.v4.new_markdown_cell("Describe" + text)
        nb.cells.append(_graded_cell(new, f"task_{k}", 2, task=True))
    return nb


KINDS = ["points", "source", "checksum", "lock", "cell_type", "kernelspec", "remove", "add", "task"]


CASES = 16  # generated edit sequences (about 0.8 s each: SQLite commits)


def _edits(seed):
    rng = random.Random(seed)
    return [
        (rng.choice(KINDS), rng.randrange(50), "".join(rng.choice("xy #\n") for _ in range(3)))
        for _ in range(rng.randrange(4))
    ]


def registered_again(folder, empty, assignment, name, edits) -> tuple[bool, bool]:
    """The source registered as is, then edited and registered again (no submissions yet), by
    stock SaveCells and by the writer, each in a gradebook of its own: the writer's gradebook holds
    what stock's does, and it skipped SaveCells exactly when no edit changed anything SaveCells
    records. Returns (skipped, changed)."""
    before = _source(assignment, name)
    nb = before.nb
    for kind, k, text in edits:
        nb = edit(nb, kind, k, text)
    after = _source(assignment, name, nb)
    stock_url, our_url = (fresh(empty, folder, k) for k in ("stock", "ours"))
    stock_save_cells(stock_url, before)
    stock_save_cells(stock_url, after)
    stock_save_cells(our_url, before)
    recorded_before = contents(our_url, before)
    skipped = ours(our_url, after, folder)
    assert contents(our_url, after) == contents(stock_url, after), edits
    changed = contents(stock_url, after) != recorded_before
    assert skipped == (not changed), edits
    return skipped, changed


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_edit_alone_is_recorded_again(tmp_path, kind, empty_gradebook):
    """Every field SaveCells records, changed on its own, makes the writer run SaveCells (the
    first cell where the edit changes something: a points edit needs a graded cell)."""
    a, name = SOURCES[0]
    if kind == "checksum":  # generate_assignment computes the checksums from the cells
        # (ComputeChecksums): a checksum written into the source changes nothing it records
        skipped, changed = registered_again(tmp_path, empty_gradebook, a, name, [(kind, 0, "x")])
        assert skipped and not changed
        return
    for k in range(len(_graded(_source(a, name).nb))):
        folder = tmp_path / str(k)
        folder.mkdir()
        skipped, changed = registered_again(folder, empty_gradebook, a, name, [(kind, k, "x")])
        if changed:
            assert not skipped
            return
    raise AssertionError(f"no cell where a {kind!r} edit changes what SaveCells records")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(CASES))
def test_a_changed_source_is_recorded_as_stock_nbgrader_records_it(tmp_path, seed, empty_gradebook):
    """Generated sequences of edits (and none): the rule of :func:`registered_again`."""
    rng = random.Random(seed)
    a, name = SOURCES[rng.randrange(len(SOURCES))]
    registered_again(tmp_path, empty_gradebook, a, name, _edits(seed))
