"""Shared pytest configuration.

`pytest` (or `make test`) collects tests/ and, through nbval, every notebook in course/
and solutions/. Fixture notebooks under tests/fixtures are inputs for the grading tests,
not notebooks to validate.
"""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
collect_ignore_glob = ["fixtures/*", "fixtures/**/*"]

if str(REPO) not in sys.path:  # so `import autograder` works even without the editable install
    sys.path.insert(0, str(REPO))


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def stock_grades(tmp_path_factory):
    """Stock `nbgrader autograde` of every assignment's solution, blank release and fixture
    submissions, run once per session (tests/test_autograde.py checks them against
    expected.json; tests/test_grading.py checks that `autograder grade` gives the same scores)."""
    from autograder.course import stock_autograde

    return stock_autograde(tmp_path_factory.mktemp("stock-nbgrader"))
