"""Quiet calls: what student code writes to stderr and the warnings it raises, kept out of the
cell's output (nbgrader scores a test cell 0 as soon as it writes to stderr). The depth counts
the ``quiet()`` blocks open in this process: a call shipped to the student's process from
inside one runs quietly there too."""

from __future__ import annotations

import contextlib
import io
import warnings

_DEPTH = [0]  # quiet() blocks open in this process


def depth() -> int:
    return _DEPTH[0]


@contextlib.contextmanager
def quiet():
    """Run student code without letting warnings or stderr output reach the cell output.

    Yields a ``list`` that collects the warning messages, in case a test wants them.
    """
    caught: list[str] = []
    buffer = io.StringIO()
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        with contextlib.redirect_stderr(buffer), quiet_depth():
            try:
                yield caught
            finally:
                caught.extend(str(r.message) for r in records)


@contextlib.contextmanager
def quiet_depth():
    _DEPTH[0] += 1
    try:
        yield
    finally:
        _DEPTH[0] -= 1
