"""What a student types: the reference answers of an exercise, and a release notebook filled in.

Shared by the self-check, submission and browser tests. The answers come from the single
source, ``solutions/``: a solution cell without its ``### BEGIN/END SOLUTION`` marker lines.
"""

from __future__ import annotations

import copy

import nbformat

from autograder.course import EXERCISES, SOLUTIONS


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def reference_answers(assignment: str, notebook: str) -> dict:
    """``{grade_id: source}`` of every answer cell, as the instructor's solution writes it."""
    nb = nbformat.read(SOLUTIONS / assignment / f"{notebook}.ipynb", as_version=4)
    return {
        _grade_id(c): "\n".join(
            line
            for line in c.source.splitlines()
            if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")
        )
        for c in nb.cells
        if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
    }


def filled_release(assignment: str, notebook: str, answers: dict):
    """The release notebook with the answer cells named in ``answers`` replaced."""
    nb = copy.deepcopy(nbformat.read(EXERCISES / assignment / f"{notebook}.ipynb", as_version=4))
    for cell in nb.cells:
        if _grade_id(cell) in answers:
            cell.source = answers[_grade_id(cell)]
    return nb
