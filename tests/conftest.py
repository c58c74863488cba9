"""Shared pytest configuration.

`pytest` (or `make test`) collects tests/ and, through nbval, every notebook in course/
and solutions/. Fixture notebooks under tests/fixtures are inputs for the grading tests,
not notebooks to validate.
"""
import shutil
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
    return _StockGrades(tmp_path_factory.mktemp("stock-nbgrader"))


class _StockGrades(dict):
    """``{assignment: {student: ...}}`` of :func:`autograder.course.stock_autograde`, each assignment graded
    the first time it is looked up: ``pytest -k 05_diagnosis`` grades exercise 5 only; iterating grades all."""

    def __init__(self, root):
        super().__init__()
        self.root = Path(root)

    def __missing__(self, assignment):
        from autograder.course import stock_autograde

        self[assignment] = stock_autograde(self.root, [assignment])[assignment]
        return self[assignment]

    def _complete(self):
        from autograder.course import assignments

        for assignment in assignments():
            self[assignment]  # noqa: B018 - grades it if missing
        return self

    def __iter__(self):
        return dict.__iter__(self._complete())

    def __len__(self):
        return dict.__len__(self._complete())

    def keys(self):
        return dict.keys(self._complete())

    def values(self):
        return dict.values(self._complete())

    def items(self):
        return dict.items(self._complete())


def require_command(command: str, what: str):
    """Fail (never skip) when a system package's command is missing, with the command that installs it."""
    if shutil.which(command) is None:
        from autograder.fullcheck import install_command

        pytest.fail(f"{command} is not installed: {what} needs it (system-packages.txt). `make test` installs it "
                    f"when it can (root or passwordless sudo); otherwise run:\n    {install_command(command)}",
                    pytrace=False)


@pytest.fixture(scope="session")
def needs_bubblewrap():
    """The grading sandbox: a test that grades fails at once without bubblewrap, saying how to install it."""
    require_command("bwrap", "the grading sandbox (autograder grade, autograder check --hidden)")
