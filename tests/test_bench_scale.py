"""autograder/authoring/bench_scale.py (``make bench-scale``): the looping submissions it makes
really loop in the graded function and nowhere else, and the share of loopers is what was asked.
The benchmark itself is a measurement, run by hand (its figures are in docs/instructor.md, "A class of thousands")."""

from __future__ import annotations

import ast

import nbformat

from autograder.authoring.bench_scale import LOOP, looper, populate
from autograder.course import TempCourse, assignments, notebooks


def test_a_looper_is_the_solution_with_its_first_graded_function_looping():
    made = 0
    for a in assignments():
        for name in notebooks(a):
            nb = looper(a, name)
            if nb is None:
                continue
            made += 1
            cells = [c for c in nb.cells if LOOP.split("\n")[0] in c.source]
            assert len(cells) == 1, (a, name)
            tree = ast.parse(cells[0].source)  # still valid Python
            fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
            first = next(s for s in fn.body if not isinstance(s, ast.Expr))  # after a docstring
            assert isinstance(first, ast.While) and isinstance(first.test, ast.Constant), (a, name)
            assert first.test.value is True
    assert made >= 3  # the assignments whose solution defines a function


def test_populate_makes_the_asked_share_of_loopers(tmp_path):
    course = TempCourse(tmp_path / "course")
    loopers = populate(course, 80, 0.05, tmp_path)
    assert len(loopers) == 4
    submitted = sorted((tmp_path / "course" / "submitted").glob("*/*/*.ipynb"))
    assert len(submitted) == 80
    looping = {
        p.parts[-3]
        for p in submitted
        if LOOP.split("\n")[0] in "".join(c.source for c in nbformat.read(p, as_version=4).cells)
    }
    assert looping == loopers
