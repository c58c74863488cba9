"""Shared pytest configuration.

`pytest` (or `make test`) collects tests/ and, through nbval, every notebook in course/
and solutions/. Fixture notebooks under tests/fixtures are inputs for the grading tests,
not notebooks to validate.
"""

import fcntl
import os
import pickle
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
collect_ignore_glob = ["fixtures/*", "fixtures/**/*"]

if str(REPO) not in sys.path:  # so `import autograder` works even without the editable install
    sys.path.insert(0, str(REPO))


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def pytest_sessionstart(session):
    """The environment every process a test starts inherits, set before any test module is
    imported (so a module that copies ``os.environ`` when it is imported copies these too):

    * ``AUTOGRADER_CACHE``: `autograder grade` keeps its calibrations across runs
      (autograder.grading.calibrate's CalibrationCache, ~/.cache by default); the tests keep
      theirs in the run's temporary folder, one per worker, never the developer's.
    * ``AUTOGRADER_LOAD=0``: the time limits keep the pace of a quiet machine
      (autograder.wire.pace): the tests pin the load at 0, so every limit is the wall clock, as
      stock's, whatever else runs on the machine (tests/test_limits.py pins a high one to test
      the pace). Every limit that honest work must finish within is wide enough on a busy machine:
      at a load average of 8-9 on 2 cores every cell and test cell of the course's 20 correct
      reference notebooks finished within 1 s (within 0.5 s all but 7 of 345), and the tests'
      shortest such limits are 4 s (tests/test_grading.py) and 5 s (tests/test_serve.py):
      a margin of 4x over that load (docs/developer.md, "How CI validates").
    """
    factory = session.config._tmp_path_factory
    os.environ["AUTOGRADER_CACHE"] = str(factory.mktemp("calibration-cache"))
    os.environ["AUTOGRADER_LOAD"] = "0"


@pytest.fixture(scope="session")
def stock_grades(tmp_path_factory):
    """Stock `nbgrader autograde` of every assignment's solution, blank release and fixture
    submissions, run once per test run, or taken from tests/stock_memo.py's record of a run
    with exactly the same inputs (tests/test_autograde.py checks them against
    expected.json; tests/test_grading.py checks that `autograder grade` gives the same scores):
    ``{assignment: {student: {notebook: {grade_id: (score, max_score)}}}}``, made when a test
    first reads it (StockGrades)."""
    return StockGrades(tmp_path_factory)


class StockGrades(Mapping):
    """autograder.course.stock_autograde's result, made when a test first reads it rather than
    when a test that will read it starts: a grading unit (tests/test_grading.py) runs its own
    grading first, while another worker makes these. Each assignment is a stock run of its own
    (own course, gradebook and kernels, so the same scores as in one run), made once per test run
    (shared_result): by whichever asks first, two at a time; the pytest-xdist workers share them
    out (a run another worker has started is waited for, not run twice)."""

    def __init__(self, tmp_path_factory):
        from autograder.course import assignments

        self._factory = tmp_path_factory
        self._names = assignments()
        self._grades: dict = {}

    def _load(self):
        from concurrent.futures import ThreadPoolExecutor

        from stock_memo import stock_autograde

        def run(assignment, wait):
            return shared_result(
                self._factory,
                f"stock-nbgrader-{assignment}",
                lambda folder: stock_autograde(folder, assignment),
                wait=wait,
            )

        # the runs nobody has started, the most notebooks first (the last to start is a short one)
        from autograder.course import fixture_cases, notebooks

        order = sorted(self._names, key=lambda a: -(len(fixture_cases(a)) + 2 * len(notebooks(a))))
        with ThreadPoolExecutor(max_workers=2) as pool:
            started = dict(zip(order, pool.map(lambda a: run(a, False), order), strict=True))
        for a in self._names:  # then wait for the others' runs
            self._grades[a] = run(a, True) if started[a] is NOT_READY else started[a]

    def __getitem__(self, assignment):
        if not self._grades:
            self._load()
        return self._grades[assignment]

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)


NOT_READY = object()


def shared_result(tmp_path_factory, name, compute, wait=True):
    """``compute(folder)`` once per test run: an expensive set-up shared by the pytest-xdist
    workers too (each worker has sessions of its own). The first worker to ask runs it in
    ``folder``, under a lock, and pickles the result beside the workers' temporary folders; the
    others wait for it (``wait=False``: NOT_READY at once while another runs it) and read it.
    The result must not depend on which test asked."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's temporary folder: the workers' (popen-gw0, ...) parent
    done = root / f"{name}.pickle"
    with open(root / f"{name}.lock", "w") as lock:  # unlocked when closed, also on an error
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return NOT_READY
        if not done.exists():
            result = compute(root / name)
            partial = done.with_suffix(".partial")
            partial.write_bytes(pickle.dumps(result))
            partial.rename(done)
        return pickle.loads(done.read_bytes())


def require_command(command: str, what: str):
    """Fail (never skip) when a system package's command is missing, with the command that installs it."""
    if shutil.which(command) is None:
        from autograder.fullcheck import install_command

        pytest.fail(
            f"{command} is not installed: {what} needs it (system-packages.txt). `make test` installs it "
            f"when it can (root or passwordless sudo); otherwise run:\n    {install_command(command)}",
            pytrace=False,
        )


def pytest_collection_modifyitems(config, items):
    """Markers that follow from what a test uses (pyproject.toml registers them): `sandbox` on
    every test whose fixtures include needs_bubblewrap; `slow` on every nbval notebook cell and
    every test that reads stock_grades (stock nbgrader autograde of every fixture).
    The test modules mark the rest (`slow`, `browser`) themselves. Each lesson's nbval run is
    also its figure check (tests/nbval_figures.py)."""
    from nbval_figures import add_figure_checks

    items[:] = add_figure_checks(items)
    for item in items:
        if "needs_bubblewrap" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.sandbox)
        if _is_notebook(item) or "stock_grades" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a pytest-xdist worker (make test): see FIRST
        items.sort(key=lambda item: -FIRST.get(item.nodeid.split("::")[0], 0))


def _is_notebook(item):
    return item.nodeid.split("::")[0].endswith(".ipynb")


# make test runs pytest-xdist with --dist loadscope: one worker runs a module whole (its module-scope
# set-ups: each grading run, JupyterLab, the browser session, built once) and a notebook's nbval
# cells whole (one kernel). (--dist loadgroup would allow finer units, but pytest-xdist 3.8.0's
# groups do nothing under pytest 9.2: it renames item._nodeid, which pytest 9 no longer reads.)
# The modules it starts first, longest first (worker-seconds each took, the mean of two full runs
# of 2026-12-07 on 2 cores, ad300cb and 2797d38, stock nbgrader's runs taken from
# tests/stock_memo.py), so that the two workers finish together; the rest keep their order. The
# lessons' nbval runs (each also its figure check, tests/nbval_figures.py) go before the short
# modules, not last.
FIRST = {
    # nbgrader's own autograde tests: 42 runs, each a class of its own (so spread over both workers)
    "tests/test_nbgrader_suite.py": 430,
    "tests/test_grading.py": 418,
    "tests/test_browser.py": 283,  # 193 and 374: its waits stretch when the other worker is busy
    "tests/test_selfcheck.py": 177,
    "tests/test_serve.py": 151,
    "tests/test_resume.py": 123,
    "tests/test_autograde.py": 108,  # the real stock run of every solution and blank release
    "tests/test_any_course.py": 104,
    "tests/test_fullcheck.py": 73,
    "tests/test_limits.py": 57,
    "tests/test_gradebook.py": 51,
    "tests/test_late.py": 47,
    "tests/test_site.py": 43,  # the site built once, searched, every page in chromium
    "tests/test_serve_multiuser.py": 40,
    "tests/test_serve_hub.py": 38,
    "tests/test_nbgrader_settings.py": 37,
    "tests/test_figures.py": 37,  # the checker on throwaway lessons
    "tests/test_fuzz.py": 36,
    "tests/test_submit.py": 34,
    "tests/test_two_verdicts.py": 32,
    "tests/test_autograde_settings.py": 28,
    "tests/test_collect.py": 21,
    "tests/test_doctor.py": 15,
    **{str(lesson.relative_to(REPO)): 11 for lesson in sorted(REPO.glob("course/0[1-9]*.ipynb"))},
}


@pytest.fixture(scope="session")
def needs_bubblewrap():
    """The grading sandbox: a test that grades fails at once without bubblewrap, saying how to install it."""
    require_command("bwrap", "the grading sandbox (autograder grade, autograder check --hidden)")
