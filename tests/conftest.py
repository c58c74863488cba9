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


@pytest.fixture(scope="session")
def stock_grades(tmp_path_factory):
    """Stock `nbgrader autograde` of every assignment's solution, blank release and fixture
    submissions, run once per test run (tests/test_autograde.py checks them against
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

        from autograder.course import stock_autograde

        def run(assignment, wait):
            return shared_result(self._factory, f"stock-nbgrader-{assignment}",
                                 lambda folder: stock_autograde(folder, [assignment])[assignment], wait=wait)

        with ThreadPoolExecutor(max_workers=2) as pool:  # the runs nobody has started
            started = dict(zip(self._names, pool.map(lambda a: run(a, False), self._names), strict=True))
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

        pytest.fail(f"{command} is not installed: {what} needs it (system-packages.txt). `make test` installs it "
                    f"when it can (root or passwordless sudo); otherwise run:\n    {install_command(command)}",
                    pytrace=False)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group markers
def pytest_collection_modifyitems(config, items):
    """Markers that follow from what a test uses (pyproject.toml registers them): `sandbox` on
    every test whose fixtures include needs_bubblewrap; `slow` on every nbval notebook cell and
    every test that reads stock_grades (stock nbgrader autograde of every fixture).
    The test modules mark the rest (`slow`, `browser`) themselves. Under `--dist loadgroup`
    (make test), the work units of pytest-xdist: see xdist_group."""
    for item in items:
        if "needs_bubblewrap" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.sandbox)
        if _is_notebook(item) or "stock_grades" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    if config.pluginmanager.hasplugin("xdist") and config.getoption("dist", "no") == "loadgroup":
        groups = xdist_groups(items)
        for item in items:
            item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
        # the longest units first, so that the two workers finish together
        items.sort(key=lambda item: -FIRST.get(groups[item.nodeid], 0))


def _is_notebook(item):
    return item.nodeid.split("::")[0].endswith(".ipynb")


def xdist_groups(items):
    """{nodeid: unit}: the units of work one pytest-xdist worker runs whole. A notebook's cells
    (one kernel); a module's tests that share module-scope fixtures, directly or through one
    another (each fixture built once; test_browser's steps stay in order on one JupyterLab);
    every other test alone. A unit is named after its module and fixtures."""
    groups, parent = {}, {}

    def find(name):
        while parent.setdefault(name, name) != name:
            name = parent[name]
        return name

    shared = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        info = getattr(item, "_fixtureinfo", None)
        names = sorted(f"{path}::{name}" for name, defs in (info.name2fixturedefs.items() if info else ())
                       if defs and defs[-1].scope == "module")
        shared[item.nodeid] = names
        for name in names[1:]:
            parent[find(name)] = find(names[0])
    members = {}
    for names in shared.values():
        for name in names:
            members.setdefault(find(name), set()).add(name.split("::")[1])
    for item in items:
        path, names = item.nodeid.split("::")[0], shared[item.nodeid]
        if _is_notebook(item):
            groups[item.nodeid] = path
        elif names:
            groups[item.nodeid] = f"{path}::{'+'.join(sorted(members[find(names[0])]))}"
        else:
            groups[item.nodeid] = item.nodeid
    return groups


# The units pytest-xdist starts first, longest first (seconds each took in the serial run of
# 2026-11-26, 2055 s in all), so that the two workers finish together; the rest keep their order.
# The grading units come after the others of their size: their tests read stock_grades, which the
# first unit starts making (two assignments at a time) while the other worker runs the ones above.
FIRST = {
    "tests/test_autograde.py::graded": 692,  # stock_grades
    "tests/test_browser.py::browser+chromium+lab": 133,
    "tests/test_any_course.py::test_course_not_written_for_this_grader_gets_exactly_nbgrader_autograde_scores[phys210]": 65,
    "tests/test_any_course.py::test_course_not_written_for_this_grader_gets_exactly_nbgrader_autograde_scores[cs101]": 64,
    "tests/test_figures.py::test_lesson_figures[04_training_loops.ipynb]": 64,
    "tests/test_fidelity_course.py::pyidioms": 58,
    "tests/test_any_course.py::test_test_cells_the_judge_cannot_run_are_graded_in_one_kernel": 56,
    "tests/test_any_course.py::stats101": 40,
    "tests/test_figures.py::test_lesson_figures[01_relu_inplace.ipynb]": 39,
    "tests/test_submit.py::test_jupyterhub_exchange_round_trip": 37,
    # stock_grades
    "tests/test_grading.py::honest": 36,  # 181 s: grade, gradebook, the Dask run
    "tests/test_grading.py::hostile": 35,  # 100 s
    "tests/test_grading.py::sequence": 34,  # 36 s
    "tests/test_fullcheck.py::answered": 30,
    "tests/test_figures.py::test_lesson_figures[01a_relu_inplace_appendix.ipynb]": 25,
    "tests/test_submit.py::test_unzipped_submission_is_graded_by_nbgrader": 21,
    "tests/test_exercises_sync.py::regenerated": 18,
    "tests/test_lab.py::lab": 17,
}


@pytest.fixture(scope="session")
def needs_bubblewrap():
    """The grading sandbox: a test that grades fails at once without bubblewrap, saying how to install it."""
    require_command("bwrap", "the grading sandbox (autograder grade, autograder check --hidden)")
