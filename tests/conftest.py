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
    from autograder.course import stock_autograde

    return stock_autograde(tmp_path_factory.mktemp("stock-nbgrader"))


def require_command(command: str, what: str):
    """Fail (never skip) when a system package's command is missing, with the command that installs it."""
    if shutil.which(command) is None:
        from autograder.fullcheck import install_command

        pytest.fail(f"{command} is not installed: {what} needs it (system-packages.txt). `make test` installs it "
                    f"when it can (root or passwordless sudo); otherwise run:\n    {install_command(command)}",
                    pytrace=False)


def pytest_collection_modifyitems(config, items):
    """Markers that follow from what a test uses (pyproject.toml registers them): `sandbox` on
    every test whose fixtures include needs_bubblewrap; `slow` on every nbval notebook cell and
    every test that reads stock_grades (stock nbgrader autograde of every fixture).
    The test modules mark the rest (`slow`, `browser`) themselves."""
    for item in items:
        if "needs_bubblewrap" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.sandbox)
        if _is_notebook(item) or "stock_grades" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


def _is_notebook(item):
    return item.nodeid.split("::")[0].endswith(".ipynb")


@pytest.fixture(scope="session")
def needs_bubblewrap():
    """The grading sandbox: a test that grades fails at once without bubblewrap, saying how to install it."""
    require_command("bwrap", "the grading sandbox (autograder grade, autograder check --hidden)")
