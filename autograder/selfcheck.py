"""What an exercise notebook's self-check cell imports (``from autograder.selfcheck import check``):
the self-check of :mod:`autograder.learner.selfcheck`, under the name every notebook uses."""
from __future__ import annotations

from autograder.learner.selfcheck import *  # noqa: F403
from autograder.learner.selfcheck import (  # noqa: F401
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
    _main,
    add_parser,
    check,
    is_selfcheck_cell,
    read_notebook,
    run_visible_tests,
)
