"""The learner's full check: a saved exercise notebook graded with the hidden tests too.

From a terminal (JupyterLab's included)::

    autograder check --hidden exercises/01_relu_inplace/01_relu_inplace.ipynb

From a cell of the exercise notebook (save first)::

    from autograder.selfcheck import check
    check(hidden=True)

For self-study. The notebook is graded exactly as ``autograder grade`` grades a class: the
same sandbox (bubblewrap), the same judge, the test cells taken from this copy's
``solutions/`` by ``grade_id``. The report has, per graded function and per test cell, its
name, points and PASS / FAIL / TODO (TODO: the function still raises ``NotImplementedError``)
with the judge's message for a failure (what was expected, what was found, the likely cause),
never a test's source; then ``score: X / Y``. Exit status 0 only on full marks, 1 otherwise,
2 when it cannot run (no ``solutions/`` in this copy of the course, no bubblewrap, not an
exercise notebook).

In a graded class your instructor's hidden tests decide, and ``solutions/`` is not shipped:
use the plain ``autograder check`` (visible tests) there.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .course import REPO, graded_cells, owner
from .learner.selfcheck import FAIL, PASS, TODO, SelfCheckError, read_notebook
from .wire.types import Limits, Options

__all__ = [
    "NO_SOLUTIONS",
    "FullReport",
    "TestResult",
    "grade_notebook",
    "grade_notebooks",
    "install_command",
]

NO_SOLUTIONS = (
    "the hidden tests are not in this copy (a class that releases only exercises/): "
    "ask your instructor / use plain `autograder check`"
)
DEFAULT_TIMEOUT = 120.0  # seconds per cell and per test, as `autograder grade`
STUDENT = "you"


def install_command(*commands: str) -> str:
    """The apt-get command that installs the Debian packages providing ``commands``
    (from the repository's system-packages.txt)."""
    packages = []
    listing = REPO / "system-packages.txt"
    lines = listing.read_text().splitlines() if listing.exists() else []
    for line in lines:
        parts = line.split()
        if parts and not parts[0].startswith("#") and len(parts) >= 2 and parts[1] in commands:
            packages.append(parts[0])
    packages = packages or list(commands)
    return f"sudo apt-get update && sudo apt-get install -y --no-install-recommends {' '.join(packages)}"


@dataclass
class TestResult:
    grade_id: str
    points: float
    max_points: float
    status: str  # PASS / FAIL / TODO
    hidden: bool
    message: str = ""


@dataclass
class FullReport:
    notebook: str
    assignment: str
    functions: dict  # function name -> [TestResult]
    notes: list = field(default_factory=list)

    @property
    def tests(self) -> list:
        return [t for tests in self.functions.values() for t in tests]

    @property
    def score(self) -> float:
        return sum(t.points for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_points for t in self.tests)

    @property
    def full_marks(self) -> bool:
        return bool(self.tests) and all(t.status == PASS for t in self.tests)

    @property
    def visible_pass(self) -> bool:
        return all(t.status == PASS for t in self.tests if not t.hidden)

    def text(self) -> str:
        lines = [
            f"Full check of {self.notebook} ({self.assignment}): every test, the hidden ones included, "
            "graded in the sandbox as `autograder grade` grades a class.",
            "",
        ]
        for name, tests in self.functions.items():
            got, out_of = sum(t.points for t in tests), sum(t.max_points for t in tests)
            lines.append(f"{name}: {_num(got)} / {_num(out_of)}")
            for t in tests:
                kind = "hidden" if t.hidden else "visible"
                lines.append(
                    f"  {t.status:<4}  {t.grade_id} ({kind}): {_num(t.points)} / {_num(t.max_points)}"
                )
                if t.status == FAIL and t.message:
                    lines += [f"        {line}" for line in t.message.splitlines()]
            lines.append("")
        lines += [f"note: {n}" for n in self.notes]
        if self.notes:
            lines.append("")
        lines.append(f"score: {_num(self.score)} / {_num(self.max_score)}")
        todo = sorted(
            {name for name, tests in self.functions.items() if any(t.status == TODO for t in tests)}
        )
        if self.full_marks:
            lines.append("Full marks: your notebook meets every clause the hidden tests check.")
        elif todo:
            lines.append(
                f"Not attempted yet: {', '.join(todo)} (write your code where it says `# YOUR CODE HERE` "
                "and delete the `raise NotImplementedError()` line). Fix what is listed above, save, "
                "and check again."
            )
        else:
            lines.append("Fix what is listed above, save, and check again.")
        return "\n".join(lines)


def _num(x: float) -> str:
    return format(float(x), "g")


# --------------------------------------------------------------------------- grading


def _course(course_root):
    from .grading.intake.collect import Course

    root = Path(course_root) if course_root is not None else REPO
    if not (root / "solutions").is_dir():
        raise SelfCheckError(NO_SOLUTIONS)
    return Course(root)


def _require_sandbox():
    from .grading.host.sandbox import SandboxError, check_sandbox

    if shutil.which("bwrap") is None:
        raise SelfCheckError(
            "bubblewrap (the grading sandbox) is not installed here: install it with\n\n"
            f"    {install_command('bwrap')}\n\n"
            "(or `make lab` / `make test`, which install it when they can), then check again"
        )
    try:
        check_sandbox()
    except SandboxError as exc:
        raise SelfCheckError(str(exc)) from None


def _source_for(course, nb, path: Path):
    """The instructor's notebook this one is a copy of: the same name, else most grade_ids shared."""
    ids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells} - {None}
    best, overlap = None, 0
    for assignment in course.assignments():
        for source in course.notebooks(assignment):
            shared = len(ids & set(source.order))
            if source.name == path.stem and shared:
                return source
            if shared > overlap:
                best, overlap = source, shared
    if best is None:
        raise SelfCheckError(
            f"{path.name} is not a notebook of this course's exercises (no graded cell of "
            f"{course.source} is in it)"
        )
    return best


def _submission(course, path: Path):
    from .grading.intake.collect import Submission, _extra_files, plan, read_student_notebook

    path = Path(path)
    nb = read_notebook(path)  # clear messages for the learner: missing, not JSON, not an exercise
    source = _source_for(course, nb, path)
    try:
        graded_nb = read_student_notebook(path.resolve())
        items, layout = plan(source, graded_nb)
    except (ValueError, RecursionError) as exc:
        raise SelfCheckError(f"{path.name} cannot be graded: {exc}") from None
    sub = Submission(
        STUDENT,
        source.assignment,
        source.name,
        path,
        source,
        nb=graded_nb,
        items=items,
        layout=layout,
        files=_extra_files(path.resolve().parent),
    )
    return sub, nb


def grade_notebooks(paths, course_root=None, timeout: float = DEFAULT_TIMEOUT) -> list:
    """Grade each saved notebook of ``paths`` with every test; return a :class:`FullReport` each.

    Raises :class:`SelfCheckError` when it cannot run at all (no solutions/, no sandbox, a
    notebook that is not an exercise)."""
    from .grading.calibrate import Calibration
    from .grading.host.sandbox import WorkerFailure, parse_size
    from .grading.host.scheduler import LocalExecutor, run
    from .grading.results import feedback

    course = _course(course_root)
    subs = [_submission(course, Path(p)) for p in paths]
    _require_sandbox()
    imports = course.imports()
    limits = Limits(
        timeout=float(timeout), wall=max(Limits.wall, 5 * float(timeout)), output=parse_size("1M")
    )
    results = {}
    with tempfile.TemporaryDirectory(prefix="autograder-check-") as logs:
        options = Options(preload=imports, log_dir=logs)
        try:  # the source first, as `autograder grade` (calibrate.py): judge, one kernel, or refused
            with LocalExecutor(1, options) as pool:
                calibration = Calibration(course).calibrate(
                    sorted({sub.assignment for sub, _ in subs}),
                    lambda t, cb: run(pool, t, cb, options),
                    limits,
                    imports,
                )
                refused = calibration.refused
                tasks = [  # both runs of each notebook (grading.verdicts)
                    ((str(i), kind), dict(task, id=f"{i}#{kind}"))
                    for i, (sub, _) in enumerate(subs)
                    if sub.assignment not in refused
                    for kind, task in calibration.tasks(sub, limits, imports).items()
                ]
                run(
                    pool,
                    tasks,
                    lambda key, result, error: results.setdefault(key[0], {}).__setitem__(
                        key[1], (result, error)
                    ),
                    options,
                )
        except WorkerFailure as exc:
            raise SelfCheckError(f"the grading sandbox could not start:\n{exc}") from None
    if refused:
        raise SelfCheckError(
            "the grader cannot grade this exercise as nbgrader would:\n"
            + "\n".join(f"  {a}: {p}" for a, problems in refused.items() for p in problems)
        )
    reports = []
    for i, (sub, nb) in enumerate(subs):
        rows, result = calibration.rows(sub, results.get(str(i), {}))
        notes = feedback._cell_notes(sub, result)
        if _stubbed(nb):  # the stubs' own NotImplementedError is reported as TODO
            notes = [n for n in notes if not n.rstrip().endswith("raised: NotImplementedError:")]
        reports.append(_report(sub, nb, rows, result, notes))
    return reports


def grade_notebook(path, course_root=None, timeout: float = DEFAULT_TIMEOUT) -> FullReport:
    return grade_notebooks([path], course_root, timeout)[0]


def _stubbed(nb) -> set:
    """Graded functions whose answer cell still has nbgrader's ``raise NotImplementedError``."""
    return {
        c.metadata["nbgrader"]["grade_id"]
        for c in nb.cells
        if c.cell_type == "code"
        and c.metadata.get("nbgrader", {}).get("solution")
        and "raise NotImplementedError" in c.source
    }


def _report(sub, nb, rows, result, notes) -> FullReport:
    names, _ = graded_cells(sub.source.nb)
    stubs = _stubbed(nb)
    functions: dict = {name: [] for name in names}
    for row in rows:
        key = owner(row.grade_id, names) or row.grade_id
        passed = row.status in ("ok", "in-kernel") and row.score >= row.max_score
        message = row.message or ""
        for prefix in ("CheckFailure: ", "AssertionError: "):  # the check's message says it all
            if message.startswith(prefix):
                message = message[len(prefix) :]
        if row.status not in ("ok", "in-kernel"):
            from .grading import STATUSES

            message = f"{row.status}: {message or STATUSES.get(row.status, '')}"
        elif not passed and row.score > 0:
            message = (message + "\n" if message else "") + "partial credit"
        if passed:
            status = PASS
        elif (
            key in stubs
            and row.status in ("ok", "in-kernel")
            and "NotImplementedError" in (message or "")
        ):
            status = TODO
        else:
            status = FAIL
        functions.setdefault(key, []).append(
            TestResult(
                row.grade_id, float(row.score), float(row.max_score), status, row.hidden, message
            )
        )
    functions = {k: v for k, v in functions.items() if v}
    return FullReport(Path(sub.path).name, sub.assignment, functions, notes)


# --------------------------------------------------------------------------- entry points


def print_full_check(path, course_root=None, timeout: float = DEFAULT_TIMEOUT) -> int:
    """Print the full check's report (or why it cannot run); return the exit status."""
    try:
        full = grade_notebook(path, course_root, timeout)
    except SelfCheckError as exc:
        print(f"autograder check --hidden: {exc}", file=sys.stderr)
        return 2
    print(full.text())
    return 0 if full.full_marks else 1
