"""What an exercise notebook's self-check cell imports (``from autograder.selfcheck import check``),
and ``autograder check``: the visible tests (:mod:`autograder.learner.selfcheck`) or, with
``hidden=True`` / ``--hidden``, the full check (:mod:`autograder.fullcheck`, which grades with
the grader: the reason this module sits above both).

Every graded notebook imports this module (every zygote and judge preloads it): the full check
is imported only when asked for.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from autograder.learner.selfcheck import (
    CELL_MARKER,
    DEFAULT_TIMEOUT,
    FAIL,
    NO_VISIBLE,
    PASS,
    RUNNING_ENV,
    TODO,
    FunctionResult,
    Report,
    SelfCheckError,
    _find_own_notebook,
    _unsaved_cells,
    is_selfcheck_cell,
    read_notebook,
    run_visible_tests,
)

__all__ = [
    "check",
    "add_parser",
    # the learner's self-check (autograder.learner.selfcheck), named here too: notebooks and
    # tests import them from here
    "CELL_MARKER",
    "DEFAULT_TIMEOUT",
    "FAIL",
    "NO_VISIBLE",
    "PASS",
    "RUNNING_ENV",
    "TODO",
    "FunctionResult",
    "Report",
    "SelfCheckError",
    "is_selfcheck_cell",
    "read_notebook",
    "run_visible_tests",
]


def check(notebook=None, timeout: int = DEFAULT_TIMEOUT, hidden: bool = False, course=None) -> None:
    """Self-check the saved notebook this is called from (or ``notebook``) and print the report.

    ``hidden=True``: the full check (:mod:`autograder.fullcheck`), every test, the hidden ones
    included, graded in the sandbox with the tests of ``course``'s solutions/ (default: this
    copy of the course); for self-study.

    Harmless where it must be: under ``nbgrader autograde``/``validate`` (``NBGRADER_EXECUTION``
    is set) it only says it was skipped; inside a self-check it does nothing.
    """
    if os.environ.get("NBGRADER_EXECUTION"):
        print("Self-check skipped: nbgrader is running this notebook.")
        return
    if os.environ.get(RUNNING_ENV):
        return
    path = Path(notebook) if notebook else _find_own_notebook()
    if path is None:
        print(
            "Cannot tell which notebook this is. Pass its file name, for example:\n"
            '    check("01_relu_inplace.ipynb")'
        )
        return
    print(
        f"Checking the saved file {path.name} (save first with Ctrl+S: unsaved edits are not checked)."
    )
    try:
        nb = read_notebook(path)
    except SelfCheckError as exc:
        print(f"Cannot check: {exc}")
        return
    unsaved = _unsaved_cells(nb)
    if unsaved:
        print(
            f"Warning: the saved {', '.join(unsaved)} differs from the version you last ran. The check "
            "uses the saved file: save (Ctrl+S) and run this cell again."
        )
    print()
    if hidden:
        from autograder.fullcheck import grade_notebook

        try:
            print(grade_notebook(path, course, timeout).text())
        except SelfCheckError as exc:
            print(f"Cannot run the full check: {exc}")
        return
    print(run_visible_tests(path, timeout=timeout).text())


# --------------------------------------------------------------------------- command line


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "check",
        help="run the visible tests of an exercise notebook (as saved) and say what to fix",
        description="Run the visible tests of a saved exercise notebook in a fresh kernel and print, per "
        "graded function, PASS or what was expected, what was found and the likely cause. "
        "Hidden tests run only when the notebook is graded (or with --hidden, for self-study). Exit status 0: every function "
        "passes its visible tests; 1: some do not; 2: the notebook cannot be checked.",
    )
    parser.add_argument(
        "notebook",
        type=Path,
        help="the exercise notebook, e.g. exercises/01_relu_inplace/01_relu_inplace.ipynb",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=DEFAULT_TIMEOUT,
        help="seconds allowed per cell (default %(default)s)",
    )
    parser.add_argument(
        "--hidden",
        action="store_true",
        help="the full check, for self-study: grade the notebook with the hidden tests too, in the "
        "sandbox of `autograder grade`, and print every test's verdict and the score (exit "
        "status 0 only on full marks); needs this copy's solutions/ and bubblewrap",
    )
    parser.add_argument(
        "--course",
        type=Path,
        default=None,
        help="with --hidden: the course folder whose solutions/ holds the tests (default: this "
        "copy of the course)",
    )
    parser.set_defaults(func=_main)


def _main(args) -> int:
    if args.hidden:
        from autograder.fullcheck import print_full_check

        return print_full_check(args.notebook, args.course, args.timeout)
    try:
        report = run_visible_tests(args.notebook, timeout=args.timeout)
    except SelfCheckError as exc:
        print(f"autograder check: {exc}", file=sys.stderr)
        return 2
    print(report.text())
    return 0 if report.ok else 1
