"""Self-check: the visible tests of an exercise notebook, run in a fresh kernel.

From a terminal (JupyterLab's included) or CI::

    autograder check exercises/01_relu_inplace/01_relu_inplace.ipynb

From the last cell of every exercise notebook (it checks the *saved* file, so save first)::

    from autograder.selfcheck import check
    check()

The notebook is read from disk and executed top to bottom in a new kernel, as nbgrader
would, except that hidden test cells are not run (a student's copy has only their comment
line; in an instructor's source notebook they are skipped) and the self-check cell itself is
skipped. The report has one line per graded function: its visible tests pass, fail (with the
check's own message: what was expected, what was found, the likely cause) or the function
is not attempted yet (it still raises ``NotImplementedError``). Hidden tests are reported as
"run when graded", never as passed. Exit status: 0 when every function passes its visible
tests, 1 when one does not, 2 when the notebook cannot be checked at all.

Why not ``nbgrader validate``: it exits 0 even when tests fail and prints whole tracebacks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.course import graded_cells, owner

if TYPE_CHECKING:
    import nbformat

__all__ = [
    "SelfCheckError",
    "Report",
    "FunctionResult",
    "read_notebook",
    "run_visible_tests",
    "is_selfcheck_cell",
]

#: set in the kernel that the self-check starts, so a self-check cell never recurses
RUNNING_ENV = "AUTOGRADER_SELFCHECK"
#: marks the self-check cell of an exercise notebook (the cell is skipped by the check)
CELL_MARKER = "autograder.selfcheck"
DEFAULT_TIMEOUT = 120  # seconds per cell, as nbgrader's Execute.timeout in nbgrader_config.py

PASS, FAIL, TODO, NO_VISIBLE = "PASS", "FAIL", "TODO", "NOTE"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MAX_MESSAGE_LINES = 12


class SelfCheckError(Exception):
    """The notebook cannot be checked (missing, not a notebook, no graded cells...)."""


@dataclass
class FunctionResult:
    name: str
    status: str = NO_VISIBLE
    messages: list = field(default_factory=list)
    hidden: int = 0  # hidden test cells, run only when graded

    @property
    def ok(self) -> bool:
        return self.status in (PASS, NO_VISIBLE)


@dataclass
class Report:
    notebook: str
    functions: list
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.functions)

    def text(self) -> str:
        lines = [
            f"Self-check of {self.notebook}: visible tests, run in a fresh kernel on the saved file.",
            "",
        ]
        for f in self.functions:
            head = (
                f"{f.status:<4}  {f.name}: "
                + {
                    PASS: "visible tests pass",
                    FAIL: "visible tests fail",
                    TODO: "not attempted yet (it still raises NotImplementedError): write your code where it "
                    "says `# YOUR CODE HERE` and delete the `raise NotImplementedError()` line",
                    NO_VISIBLE: "no visible test cell to run",
                }[f.status]
            )
            lines.append(head)
            lines += [f"      {line}" for message in f.messages for line in message.splitlines()]
            if f.hidden:
                cells = "cell" if f.hidden == 1 else "cells"
                lines.append(f"      hidden tests ({f.hidden} {cells}) run when graded")
        if self.notes:
            lines.append("")
            lines += [f"note: {n}" for n in self.notes]
        passed = sum(f.status == PASS for f in self.functions)
        total = len(self.functions)
        lines.append("")
        if self.ok:
            lines.append(
                f"{passed} of {total} functions pass their visible tests. The hidden tests check every "
                "clause of each specification when your notebook is graded."
            )
        else:
            lines.append(
                f"{passed} of {total} functions pass their visible tests. Fix what is listed above, "
                "save, and check again."
            )
        return "\n".join(lines)


# --------------------------------------------------------------------------- reading


def read_notebook(path) -> nbformat.NotebookNode:
    """Read ``path`` as an exercise notebook or raise :class:`SelfCheckError` saying why not."""
    import nbformat  # here, not at the top: every graded notebook imports this module (its

    # self-check cell), and nbformat's schema validator costs about 3 s to import
    path = Path(path)
    if not path.exists():
        raise SelfCheckError(f"{path}: no such file")
    if path.is_dir():
        raise SelfCheckError(
            f"{path} is a folder: give the notebook file, e.g. {path / (path.name + '.ipynb')}"
        )
    if path.suffix != ".ipynb":
        raise SelfCheckError(f"{path} is not a notebook (expected a file ending in .ipynb)")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SelfCheckError(
            f"{path} is not valid notebook JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}). "
            "Was it edited outside JupyterLab? Restore it from a checkpoint (File > Revert Notebook "
            "to Checkpoint) or start again from a fresh copy of the exercise."
        ) from None
    try:
        if not isinstance(data, dict) or "cells" not in data:
            raise ValueError("it has no cells")
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # noqa: BLE001 - any schema problem is reported, not traced
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SelfCheckError(f"{path} is not a valid notebook: {first}") from None
    names, tests = graded_cells(nb)
    if not tests:
        raise SelfCheckError(
            f"{path.name} has no graded test cells: give an exercise notebook "
            "(exercises/<assignment>/<assignment>.ipynb), not a lesson or a copy without nbgrader metadata."
        )
    return nb


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _visible_part(source: str) -> str:
    """The code of a test cell that runs before grading: hidden regions removed."""
    return re.sub(r"### BEGIN HIDDEN TESTS.*?(### END HIDDEN TESTS|\Z)", "", source, flags=re.S)


def _has_code(source: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in source.splitlines())


def is_selfcheck_cell(cell) -> bool:
    return cell.cell_type == "code" and CELL_MARKER in cell.source


def _first_line(source: str) -> str:
    line = next((s.strip() for s in source.splitlines() if s.strip()), "")
    return line if len(line) <= 60 else line[:57] + "..."


def _error_text(output) -> str:
    """``ename: evalue`` of an error output, without ANSI colours, bounded in length."""
    ename, evalue = output.get("ename", "Error"), _ANSI.sub("", output.get("evalue", ""))
    if ename in ("CheckFailure", "AssertionError") and evalue:
        text = evalue  # already says what/expected/found/cause
    else:
        text = f"{ename}: {evalue}" if evalue else ename
        # IPython names a cell's code after a random temporary file: say which line of the cell
        text = re.sub(r"\((?:\d+\.py|<[^>]*>), line (\d+)\)", r"(line \1 of that cell)", text)
    lines = text.splitlines() or [ename]
    if len(lines) > _MAX_MESSAGE_LINES:
        lines = lines[:_MAX_MESSAGE_LINES] + ["..."]
    return "\n".join(lines)


def _not_implemented(output) -> bool:
    return output.get("ename") == "NotImplementedError" or "NotImplementedError" in output.get(
        "evalue", ""
    )


# --------------------------------------------------------------------------- running


def _execute(nb, cwd: Path, timeout: int):
    """Execute ``nb`` in a fresh kernel (errors kept as outputs); return a note if it stopped early."""
    import logging

    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    log = logging.getLogger("autograder.selfcheck.nbclient")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=True,
        record_timing=False,
        log=log,
        resources={"metadata": {"path": str(cwd)}},
    )
    env = dict(os.environ, **{RUNNING_ENV: "1"})
    env.pop("JPY_SESSION_NAME", None)
    try:  # the kernel's own log lines (e.g. its TCP warning) are not the student's output
        client.execute(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except DeadKernelError:
        return (
            "the kernel died while running your notebook (did your code call exit() or use too much "
            "memory?); cells after that point were not run"
        )
    return None


def run_visible_tests(path, timeout: int = DEFAULT_TIMEOUT) -> Report:
    """Run the visible tests of the notebook saved at ``path``; return the :class:`Report`."""
    import nbformat

    path = Path(path)
    nb = read_notebook(path)
    names, tests = graded_cells(nb)
    results = {name: FunctionResult(name) for name in names}
    for test in tests:  # a test cell no function owns is reported under its own id
        results.setdefault(owner(test, names) or test, FunctionResult(owner(test, names) or test))

    # the cells to run, in order: everything but hidden tests and the self-check cell
    run_nb = nbformat.v4.new_notebook(metadata=nb.metadata)
    ran = []  # (index in run_nb, original cell)
    for cell in nb.cells:
        if cell.cell_type != "code" or is_selfcheck_cell(cell):
            continue
        meta = cell.metadata.get("nbgrader", {})
        source = cell.source
        if meta.get("grade") and not meta.get("solution"):
            key = owner(meta["grade_id"], names) or meta["grade_id"]
            source = _visible_part(cell.source)
            if "### BEGIN HIDDEN TESTS" in cell.source or not _has_code(source):
                results[key].hidden += 1
            if not _has_code(source):
                continue
        ran.append((len(run_nb.cells), cell))
        run_nb.cells.append(nbformat.v4.new_code_cell(source))

    stopped = _execute(run_nb, path.resolve().parent, timeout)

    # functions whose cell still has nbgrader's stub: a NotImplementedError means "not attempted yet"
    stubs = {
        _grade_id(c)
        for c in nb.cells
        if c.cell_type == "code"
        and c.metadata.get("nbgrader", {}).get("solution")
        and "raise NotImplementedError" in c.source
    }
    notes = []
    broken = {}  # solution grade_id -> message when the cell defining it failed
    for index, cell in ran:
        outputs = run_nb.cells[index].get("outputs", [])
        meta = cell.metadata.get("nbgrader", {})
        errors = [o for o in outputs if o.output_type == "error"]
        if meta.get("solution") and errors:
            error = errors[0]
            if _not_implemented(error):
                continue
            broken[meta["grade_id"]] = (
                f"the cell defining {meta['grade_id']} raised an error, so the function "
                f"may not be defined:\n{_error_text(error)}"
            )
            continue
        if meta.get("grade") and not meta.get("solution"):
            key = owner(meta["grade_id"], names) or meta["grade_id"]
            result = results[key]
            stderr = "".join(
                o.get("text", "")
                for o in outputs
                if o.output_type == "stream" and o.name == "stderr"
            )
            if run_nb.cells[index].get("execution_count") is None and not outputs:
                result.status = FAIL
                result.messages.append(
                    f"the visible test cell {meta['grade_id']} was not run"
                    + (": the kernel died before it" if stopped else "")
                )
            elif errors and _not_implemented(errors[0]) and key in stubs:
                if result.status != FAIL:
                    result.status = TODO
            elif errors:
                result.status = FAIL
                if errors[0].get("ename") == "KeyboardInterrupt":
                    result.messages.append(
                        f"{meta['grade_id']} did not finish within {timeout} s "
                        "(an infinite loop, or a very slow solution?)"
                    )
                else:
                    result.messages.append(_error_text(errors[0]))
            elif stderr.strip():
                result.status = FAIL
                result.messages.append(
                    f"{meta['grade_id']} wrote to stderr, and nbgrader gives 0 points to a test cell that "
                    f"does: {_first_line(stderr)}\nlikely cause: logging, print(..., file=sys.stderr) or a warning "
                    "raised by your code outside the checks"
                )
            elif result.status == NO_VISIBLE:
                result.status = PASS
            continue
        # errors in the student's scratch cells are theirs to see; a locked cell failing is news
        if errors and meta.get("locked"):
            what = (
                f"did not finish within {timeout} s"
                if errors[0].get("ename") == "KeyboardInterrupt"
                else f"raised {_error_text(errors[0]).splitlines()[0]}"
            )
            notes.append(f"the read-only cell starting `{_first_line(cell.source)}` {what}")

    for name, message in broken.items():  # the tests' NameErrors would only repeat it
        result = results[name]
        if result.status != PASS:
            result.status = FAIL
            result.messages = [message]
    if stopped:
        notes.append(stopped)
    return Report(path.name, list(results.values()), notes)


# --------------------------------------------------------------------------- in the notebook


def _find_own_notebook() -> Path | None:
    """The notebook file of the running kernel, or None when it cannot be told.

    JupyterLab starts each notebook's kernel with ``JPY_SESSION_NAME`` = the notebook's path
    (ipykernel also exposes it as ``__session__``). Without it (nbval, nbclient, an older
    server), the only notebook in the working directory (= the notebook's folder) is taken.
    """
    candidates = []
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and shell.user_ns.get("__session__"):
            candidates.append(shell.user_ns["__session__"])
    except ImportError:  # pragma: no cover - IPython ships with ipykernel
        pass
    if os.environ.get("JPY_SESSION_NAME"):
        candidates.append(os.environ["JPY_SESSION_NAME"])
    for candidate in candidates:
        path = Path(candidate)
        if not path.is_absolute():
            path = Path.cwd() / path
        if path.suffix == ".ipynb" and path.is_file():
            return path
        if (
            path.suffix == ".ipynb" and (Path.cwd() / path.name).is_file()
        ):  # relative to the server root
            return Path.cwd() / path.name
    notebooks = sorted(Path.cwd().glob("*.ipynb"))
    return notebooks[0] if len(notebooks) == 1 else None


def _unsaved_cells(nb) -> list:
    """Graded functions whose saved cell differs from the version this kernel last ran.

    Compares each solution cell of the saved file with the last cell run in this kernel that
    defines the same name (IPython's input history). Functions not run in this kernel are
    not reported: there is nothing to compare.
    """
    try:
        from IPython import get_ipython

        shell = get_ipython()
        history = [s for s in shell.history_manager.input_hist_raw if s.strip()] if shell else []
    except Exception:  # noqa: BLE001 - only a hint; never break the check for it
        history = []
    differ = []
    for cell in nb.cells:
        name = (
            cell.metadata.get("nbgrader", {}).get("grade_id") if cell.cell_type == "code" else None
        )
        if not name or not cell.metadata["nbgrader"].get("solution"):
            continue
        defines = re.compile(rf"^(def|class)\s+{re.escape(name)}\b", re.M)
        ran = [s for s in history if defines.search(s)]
        if ran and ran[-1].strip() != cell.source.strip():
            differ.append(name)
    return differ
