"""Real `nbgrader autograde` of every exercise, in a throwaway course.

For each assignment: the instructor's solution, submitted as a student's notebook, scores
full marks on every graded test cell; the untouched release notebook scores 0 on every one;
each fixture submission under tests/fixtures/submissions/<assignment>/ (one correct
alternative, typical mistakes per function) scores exactly what its expected.json says.
"""

import pytest

from autograder.course import SOLUTIONS, assignments, fixture_cases, graded_cells, notebooks, owner

ALL_CASES = [(a, case) for a in assignments() for case in fixture_cases(a)]


@pytest.fixture(scope="module")
def graded(stock_grades):
    """Stock nbgrader's scores of solution, blank release and every fixture (shared session fixture)."""
    return stock_grades


def _grades(graded, assignment, student):
    per_notebook = graded[assignment][student]
    return {
        (nb, gid): score for nb, grades in per_notebook.items() for gid, score in grades.items()
    }


@pytest.mark.parametrize("assignment", assignments())
def test_solution_scores_full_marks(graded, assignment):
    grades = _grades(graded, assignment, "solution")
    assert grades, "no graded cells found"
    lost = {k: v for k, v in grades.items() if v[0] != v[1]}
    assert not lost, f"the solution loses points on {lost}"


@pytest.mark.parametrize("assignment", assignments())
def test_blank_release_scores_zero_everywhere(graded, assignment):
    grades = _grades(graded, assignment, "blank")
    assert grades
    scored = {k: v for k, v in grades.items() if v[0] != 0}
    assert not scored, f"these tests pass on the untouched release notebook: {scored}"


@pytest.mark.parametrize("assignment,case", ALL_CASES)
def test_fixture_submission_gets_expected_scores(graded, assignment, case):
    zero = set(fixture_cases(assignment)[case])
    grades = _grades(graded, assignment, case)
    known = {gid for _, gid in grades}
    assert zero <= known, f"expected.json names unknown test cells: {zero - known}"
    found = {gid: score for (_, gid), (score, _) in grades.items()}
    expected = {
        gid: (0.0 if gid in zero else max_score) for (_, gid), (_, max_score) in grades.items()
    }
    assert found == expected


def test_the_memo_is_what_stock_nbgrader_gives(graded, tmp_path):
    """The real `nbgrader autograde`, in every run, of every assignment's solution and blank
    release: exactly the grades the session's stock grades hold for them (the memo's, when
    tests/stock_memo.py found one recorded from the same inputs: a memo missing an input that
    changes a grade fails here)."""
    from autograder.course import TempCourse, reference_submissions

    course = TempCourse(tmp_path / "course")
    course.generate()
    for a in assignments():
        for (student, nb), path in reference_submissions(a, fixtures=False).items():
            course.submit(student, a, path, nb)
    for a in assignments():
        course.autograde(a)
        real = course.scores(a)
        for student in ("solution", "blank"):
            assert real[student] == graded[a][student], (a, student)


def test_every_function_has_a_fixture_with_a_mistake():
    """Each graded function of each assignment is the target of at least one wrong fixture."""
    import nbformat

    for assignment in assignments():
        cases = fixture_cases(assignment)
        assert any(not zero for zero in cases.values()), (
            f"{assignment}: no correct alternative fixture"
        )
        for nb in notebooks(assignment):
            source = nbformat.read(SOLUTIONS / assignment / f"{nb}.ipynb", as_version=4)
            names, _ = graded_cells(source)
            for name in names:
                assert any(any(owner(g, names) == name for g in zero) for zero in cases.values()), (
                    f"{assignment}: no fixture with a mistake in {name}"
                )
