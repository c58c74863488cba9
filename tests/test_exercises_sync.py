"""exercises/ is generated from solutions/ by nbgrader, never edited by hand.

Regenerate every assignment into a temporary course with the real `nbgrader
generate_assignment` and compare with the committed exercises/, ignoring only volatile
metadata. Fix a failure with `make exercises` and commit the result.
"""

import json

import nbformat
import pytest

from autograder.authoring.notebooks import normalized
from autograder.course import EXERCISES, TempCourse, assignments


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    course = TempCourse(tmp_path_factory.mktemp("course"))
    return course.generate(db=False)


def _files(root):
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".ipynb_checkpoints" not in p.parts
    )


@pytest.mark.slow  # nbgrader generate_assignment of every assignment
def test_same_files(regenerated):
    assert _files(EXERCISES) == _files(regenerated), "run `make exercises` and commit exercises/"


@pytest.mark.slow
@pytest.mark.parametrize("assignment", assignments())
def test_exercise_notebooks_equal_generated(regenerated, assignment):
    for generated in sorted((regenerated / assignment).glob("*.ipynb")):
        committed = EXERCISES / assignment / generated.name
        assert committed.exists(), f"{committed} is missing: run `make exercises`"
        a = normalized(nbformat.read(committed, as_version=4))
        b = normalized(nbformat.read(generated, as_version=4))
        assert json.dumps(a, sort_keys=True, indent=1) == json.dumps(b, sort_keys=True, indent=1), (
            f"{committed} differs from what nbgrader generates from solutions/: run `make exercises`"
        )


@pytest.mark.parametrize("assignment", assignments())
def test_release_has_no_solutions_or_hidden_tests(assignment):
    for path in (EXERCISES / assignment).glob("*.ipynb"):
        text = path.read_text()
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            assert marker not in text, f"{path} still contains {marker!r}"
        nb = nbformat.read(path, as_version=4)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
            f"{path} has outputs"
        )
