"""Throwaway nbgrader course directories, driven through nbgrader's real command line.

Used by the tests (is the solution worth full marks? the blank release 0?) and by the
benchmarks (stock ``nbgrader autograde`` as the baseline)::

    course = TempCourse(tmp_path, ["01_relu_inplace"])     # copies solutions/ + config
    course.generate()                                      # nbgrader generate_assignment
    course.submit("alice", "01_relu_inplace", some_notebook_path)
    course.autograde("01_relu_inplace")                    # nbgrader autograde
    course.scores("01_relu_inplace")   # {"alice": {"01_relu_inplace": {"test_x": (1.0, 1.0)}}}
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autograder.procs import run

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions"
EXERCISES = REPO / "exercises"
FIXTURE_SUBMISSIONS = REPO / "tests" / "fixtures" / "submissions"


def assignments() -> list[str]:
    """Every assignment of the course: the folders of ``solutions/``, sorted."""
    return sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir() and not p.name.startswith("."))


def notebooks(assignment: str) -> list[str]:
    """Notebook names (without ``.ipynb``) of one assignment's source."""
    return sorted(p.stem for p in (SOLUTIONS / assignment).glob("*.ipynb"))


def fixture_cases(assignment: str) -> dict:
    """``{case: [grade_ids that score 0]}`` of ``tests/fixtures/submissions/<assignment>/expected.json``."""
    import json

    expected = FIXTURE_SUBMISSIONS / assignment / "expected.json"
    if not expected.exists():
        return {}
    cases = json.loads(expected.read_text())
    cases.pop("_comment", None)
    return cases


def reference_submissions(assignment: str, fixtures=True) -> dict[tuple[str, str], Path]:
    """The notebooks this course grades against stock nbgrader, ``{(student, notebook): file}``:
    student ``solution`` (the instructor's) and ``blank`` (the untouched release) for every
    notebook, and (``fixtures``) one student per fixture case, its assignment's first notebook."""
    out = {}
    for nb in notebooks(assignment):
        out[("solution", nb)] = SOLUTIONS / assignment / f"{nb}.ipynb"
        out[("blank", nb)] = EXERCISES / assignment / f"{nb}.ipynb"
    if fixtures:
        first = notebooks(assignment)[0]
        for case in fixture_cases(assignment):
            out[(case, first)] = FIXTURE_SUBMISSIONS / assignment / f"{case}.ipynb"
    return out


def stock_autograde(root, assignment_names=None, env=None) -> dict:
    """Stock ``nbgrader autograde`` of each assignment's solution, untouched release and fixture
    submissions (students ``solution``, ``blank`` and one per fixture case) in a TempCourse per
    assignment under ``root``: ``{assignment: {student: {notebook: {grade_id: (score, max)}}}}``
    (``env``: variables added to nbgrader's environment, and so its kernels')."""
    results = {}
    for assignment in assignment_names or assignments():
        course = TempCourse(Path(root) / assignment, [assignment])
        course.env = dict(env or {})
        course.generate()
        for (student, nb), path in reference_submissions(assignment).items():
            course.submit(student, assignment, path, nb)
        course.autograde(assignment)
        results[assignment] = course.scores(assignment)
    return results


# nbgrader subcommands that start kernels
KERNEL_COMMANDS = ("autograde", "validate")


@contextmanager
def stock_kernels() -> Iterator[list[str]]:
    """Options for an ``nbgrader`` command that starts kernels: they talk over unix sockets in a
    folder of this run's own (removed after), not TCP ports on localhost.

    Why (issue 34): jupyter_client picks a kernel's five TCP ports by binding port 0 and closing
    it, and the kernel binds them again later; a process starting kernels at the same moment can
    take one in between, and the kernel dies with ``ZMQError: Address already in use``, which
    nbclient reports as "Kernel died before replying to kernel_info" (seen in the fuzzer's stock
    runs; reproduced with 16 processes starting kernels at once under load: 5 of 480 starts
    failed, each kernel's stderr ending in that ZMQError, whether nbclient then said "died" or
    "didn't respond in 60 seconds": tests/kernel_starts.py). Sockets in a private folder cannot
    collide. What a kernel executes, and so every score, is unchanged. The folder's path is
    absolute (the kernel runs in the notebook's folder, nbgrader in the course's) and short (a
    unix socket's path is at most 107 bytes)."""
    folder = tempfile.mkdtemp(prefix="nbgrader-ipc-")
    try:
        yield [
            "--KernelManager.transport=ipc",
            f"--KernelManager.ip={folder}/kernel",
        ]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def nbgrader_command() -> list[str]:
    """``nbgrader`` of the running interpreter's environment."""
    return [sys.executable, "-m", "nbgrader"]


class TempCourse:
    """An nbgrader course rooted at ``root`` with this repository's config and sources."""

    def __init__(self, root, assignment_names=None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.assignments = list(assignment_names or assignments())
        self.env: dict[str, str] = {}  # added to nbgrader's environment
        shutil.copy(REPO / "nbgrader_config.py", self.root / "nbgrader_config.py")
        for name in self.assignments:
            shutil.copytree(SOLUTIONS / name, self.root / "solutions" / name, dirs_exist_ok=True)

    # -- running nbgrader -----------------------------------------------------------

    def nbgrader(self, *args, check=True, timeout=1800) -> subprocess.CompletedProcess:
        """Run ``nbgrader ARGS`` from the course root. ``check``: a non-zero exit raises
        :class:`~autograder.procs.ProcessFailed` (command, exit status, output tails); otherwise
        the finished process is returned, whatever its status."""
        env = dict(os.environ, **self.env)
        # nbgrader runs `alembic` (and kernels) from PATH: put this environment's bin first
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        with stock_kernels() as kernels:
            return run(
                [
                    *nbgrader_command(),
                    *args,
                    *(kernels if args and args[0] in KERNEL_COMMANDS else []),
                ],
                expect=0 if check else None,
                cwd=self.root,
                env=env,
                timeout=timeout,
                what="nbgrader",
            )

    def generate(self, db=True):
        """``nbgrader generate_assignment`` for every assignment (writes ``exercises/``).

        When the course's source folder holds exactly its assignments, one command generates
        them all: nbgrader takes a glob for the assignment, and ``"*"`` gives the same release
        files and, up to its random ids, the same gradebook records as one command per
        assignment (compared file by file and row by row on 2026-12-07); it pays nbgrader's
        start-up (1.5-2 CPU-s a process) once instead of once per assignment."""
        extra = () if db else ("--no-db",)
        source = self.root / "solutions"
        held = sorted(p.name for p in source.iterdir() if p.is_dir()) if source.is_dir() else []
        if len(self.assignments) > 1 and held == sorted(self.assignments):
            self.nbgrader("generate_assignment", "*", "--force", *extra)
            missing = [a for a in self.assignments if not (self.root / "exercises" / a).is_dir()]
            if missing:
                raise RuntimeError(f"generate_assignment '*' released no {', '.join(missing)}")
        else:
            for name in self.assignments:
                self.nbgrader("generate_assignment", name, "--force", *extra)
        return self.root / "exercises"

    def submit(
        self, student: str, assignment: str, notebook: Path, name: str | None = None
    ) -> Path:
        """Copy ``notebook`` to ``submitted/<student>/<assignment>/<name>.ipynb``."""
        name = name or notebooks(assignment)[0]
        target = self.root / "submitted" / student / assignment / f"{name}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(notebook, target)
        return target

    def autograde(self, assignment: str, *extra) -> subprocess.CompletedProcess:
        """Stock ``nbgrader autograde`` of every submission of ``assignment``."""
        return self.nbgrader("autograde", assignment, "--force", *extra)

    # -- reading results ------------------------------------------------------------

    def scores(self, assignment: str) -> dict:
        """``{student: {notebook: {grade_id: (score, max_score)}}}`` from the gradebook."""
        from nbgrader.api import Gradebook

        out: dict = {}
        with Gradebook(f"sqlite:///{self.root / 'gradebook.db'}") as gb:
            for submission in gb.assignment_submissions(assignment):
                per_nb = out.setdefault(submission.student.id, {})
                for nb in submission.notebooks:
                    per_nb[nb.name] = {g.name: (g.score, g.max_score) for g in nb.grades}
        return out


def owner(test_grade_id: str, function_names) -> str | None:
    """The graded function a test cell belongs to.

    A test cell ``test_<name>`` or ``test_<name>_...`` grades ``<name>``; when several names
    match (``test_MyReLUInplace_leaf`` vs ``MyReLU``), the longest matching name owns it.
    """
    matches = [
        n
        for n in function_names
        if test_grade_id == f"test_{n}" or test_grade_id.startswith(f"test_{n}_")
    ]
    return max(matches, key=len) if matches else None


def graded_cells(nb):
    """``(solution_ids, test_ids)`` of an nbgrader notebook, in notebook order."""
    solutions, tests = [], []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("solution"):
            solutions.append(meta["grade_id"])
        elif meta.get("grade"):
            tests.append(meta["grade_id"])
    return solutions, tests
