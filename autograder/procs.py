"""Running a command so that its failure explains itself.

Every subprocess the tests and the authoring tools run (stock nbgrader, ``autograder``,
``jupyter``, chromium, npm) goes through :func:`run`. When it fails (an exit status it was not
expected to have, or no exit before its time-out) the error says what ran, where, how it ended,
and the last lines of its stdout and stderr, so a red run on a machine nobody can log in to
can be diagnosed from its log alone. :func:`explain` says the same of a finished process for
tests that check the exit status themselves, and :func:`explain_log` of a server whose output
went to a file.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

__all__ = ["ProcessFailed", "collapse", "explain", "explain_log", "run", "tail"]

TAIL_LINES = 40  # of stdout and of stderr, each
TAIL_CHARS = 4000


def tail(text: str | bytes | None, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last ``lines`` lines of ``text`` (at most ``chars`` characters), marked if cut."""
    if text is None:
        return "(not captured)"
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not text.strip():
        return "(empty)"
    every = collapse(text.rstrip("\n").splitlines())
    out = "\n".join(every[-lines:])
    cut = len(every) > lines
    if len(out) > chars:
        out, cut = out[-chars:], True
    return "[...]\n" + out if cut else out


def collapse(lines: list[str]) -> list[str]:
    """``lines`` with each run of identical lines kept once and counted: a warning that every
    kernel of a stock run repeats must not push a dead kernel's last words out of the tail
    (issue 34: 30 copies of ipykernel's "running over TCP" warning hid a ZMQError)."""
    out: list[str] = []
    k = 0
    while k < len(lines):
        n = 1
        while k + n < len(lines) and lines[k + n] == lines[k]:
            n += 1
        out.append(lines[k])
        if n > 1:
            out.append(f"[... the line above {n - 1} more time{'s' if n > 2 else ''}]")
        k += n
    return out


def _status(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def _command(args) -> str:
    if isinstance(args, (str, bytes)):
        return args if isinstance(args, str) else args.decode()
    return shlex.join(str(a) for a in args)


def explain(
    proc: subprocess.CompletedProcess | subprocess.CalledProcessError | subprocess.TimeoutExpired,
    cwd: str | os.PathLike | None = None,
    what: str | None = None,
) -> str:
    """Command, folder, how it ended and the tails of its output, as one message."""
    if isinstance(proc, subprocess.TimeoutExpired):
        ended = f"no exit after {proc.timeout:g} s (killed)"
        stdout, stderr = proc.stdout, proc.stderr
    else:
        ended = _status(proc.returncode)
        stdout, stderr = proc.stdout, proc.stderr
    lines = [f"{what or 'command'}: {_command(proc.cmd if hasattr(proc, 'cmd') else proc.args)}"]
    if cwd is not None:
        lines.append(f"in: {cwd}")
    lines += [
        f"ended: {ended}",
        "--- stdout (tail) ---",
        tail(stdout),
        "--- stderr (tail) ---",
        tail(stderr),
    ]
    return "\n".join(lines)


def explain_log(
    command: Sequence[str] | str, returncode: int | None, log: str | os.PathLike
) -> str:
    """The same for a server whose stdout and stderr went to the file ``log``."""
    path = Path(log)
    text = path.read_text(errors="replace") if path.exists() else None
    return "\n".join(
        [
            f"command: {_command(command)}",
            f"ended: {_status(returncode)}",
            f"--- output (tail of {path}) ---",
            tail(text),
        ]
    )


class ProcessFailed(subprocess.CalledProcessError):
    """A command ended otherwise than expected; ``str()`` is :func:`explain`'s message."""

    def __init__(self, message: str, returncode: int, cmd, output=None, stderr=None):
        super().__init__(returncode, cmd, output, stderr)
        self.message = message

    def __str__(self) -> str:
        return self.message


def run(
    args: Sequence[str | os.PathLike] | str,
    *,
    expect: int | Collection[int] | None = 0,
    timeout: float | None = 1800,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    what: str | None = None,
    text: bool = True,
    **kwargs,
) -> subprocess.CompletedProcess:
    """``subprocess.run`` with its output captured; raises :class:`ProcessFailed` with the
    command, folder, exit status and output tails when the exit status is not ``expect`` (one
    status or several; ``None``: any) or the command runs past ``timeout`` seconds."""
    try:
        proc = subprocess.run(
            args, capture_output=True, timeout=timeout, cwd=cwd, env=env, text=text, **kwargs
        )
    except subprocess.TimeoutExpired as exc:
        raise ProcessFailed(explain(exc, cwd, what), -9, exc.cmd, exc.stdout, exc.stderr) from None
    if expect is not None:
        allowed = {expect} if isinstance(expect, int) else set(expect)
        if proc.returncode not in allowed:
            message = explain(proc, cwd, what)
            message += f"\nexpected: exit status {' or '.join(map(str, sorted(allowed)))}"
            raise ProcessFailed(message, proc.returncode, proc.args, proc.stdout, proc.stderr)
    return proc
