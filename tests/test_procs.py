"""autograder.procs: a command that fails says what ran, how it ended and the tails of its output.

A real stock nbgrader run that fails (an assignment that does not exist); ``TempCourse.nbgrader``
raising or returning (a stand-in for nbgrader: one real run is enough, each costs seconds); a
command past its time-out; ``tail``'s cuts; several allowed exit statuses; the messages of
``explain`` and ``explain_log``.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.course import TempCourse
from autograder.procs import ProcessFailed, collapse, explain, explain_log, run, tail

NBGRADER_SAYS = "No notebooks were matched by"  # nbgrader's own line on stderr


def _python(code):
    return [sys.executable, "-c", code]


def _stderr_part(message):
    return message.split("--- stderr (tail) ---", 1)[1]


def test_a_failed_stock_nbgrader_run_shows_command_status_and_stderr(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.course_id = 'procs'\n"
    )
    command = [sys.executable, "-m", "nbgrader", "autograde", "nosuchassignment"]
    with pytest.raises(ProcessFailed) as info:
        run(command, cwd=tmp_path, timeout=300)
    message = str(info.value)
    assert f"command: {sys.executable} -m nbgrader autograde nosuchassignment" in message
    assert f"in: {tmp_path}" in message
    assert "ended: exit status 1\n" in message
    assert "expected: exit status 0" in message
    assert NBGRADER_SAYS in _stderr_part(message), message
    # still a CalledProcessError, with what it captured
    assert isinstance(info.value, subprocess.CalledProcessError)
    assert info.value.returncode == 1 and NBGRADER_SAYS in info.value.stderr


def test_temp_course_nbgrader_raises_process_failed_or_returns(tmp_path, monkeypatch):
    import autograder.course

    says_no = "import sys; print('refused:', *sys.argv[1:], file=sys.stderr); sys.exit(1)"
    monkeypatch.setattr(autograder.course, "nbgrader_command", lambda: _python(says_no))
    course = TempCourse(tmp_path / "course", ["01_relu_inplace"])
    with pytest.raises(ProcessFailed) as info:  # check=True
        course.nbgrader("autograde", "nosuchassignment")
    message = str(info.value)
    # the command as run: nbgrader's arguments, then the private kernel sockets every stock run
    # the tests make gets (autograder.course.stock_kernels: issue 34)
    assert re.fullmatch(
        r"nbgrader: .* autograde nosuchassignment --KernelManager\.transport=ipc "
        r"--KernelManager\.ip=/\S+/kernel",
        message.splitlines()[0],
    ), message.splitlines()[0]
    assert f"in: {course.root}" in message and "ended: exit status 1\n" in message
    assert "refused: autograde nosuchassignment --KernelManager" in _stderr_part(message), message
    proc = course.nbgrader("autograde", "nosuchassignment", check=False)  # the process, as it ended
    assert proc.returncode == 1 and "refused: autograde nosuchassignment" in proc.stderr
    # a command that starts no kernel gets none of them
    proc = course.nbgrader("collect", "nosuchassignment", check=False)
    assert "refused: collect nosuchassignment\n" in proc.stderr
    assert "ended: exit status 1" in explain(proc)


def test_a_command_past_its_timeout_is_killed_and_says_so():
    # the child prints at once, then sleeps: 5 s is 10x its start-up under a load of 4 on 2 cores
    code = "import sys, time; print('started', flush=True); print('warn', file=sys.stderr, flush=True); time.sleep(120)"
    with pytest.raises(ProcessFailed) as info:
        run(_python(code), timeout=5)
    message = str(info.value)
    assert "ended: no exit after 5 s (killed)" in message
    assert "started" in message.split("--- stdout (tail) ---", 1)[1]
    assert "warn" in _stderr_part(message)
    assert info.value.returncode == -9


def test_tail_keeps_the_last_lines_and_marks_a_cut():
    text = "".join(f"line {k}\n" for k in range(100))
    kept = tail(text, lines=5)
    assert kept.splitlines() == ["[...]", "line 95", "line 96", "line 97", "line 98", "line 99"]
    assert tail("x" * 10_000, chars=100) == "[...]\n" + "x" * 100
    assert tail("a\nb\n") == "a\nb"  # nothing cut, nothing marked
    assert tail(b"caf\xc3\xa9\n") == "café"
    assert tail("  \n") == "(empty)" and tail(None) == "(not captured)"


def test_a_repeated_warning_does_not_push_the_real_error_out_of_the_tail():
    """Issue 34: every kernel of a stock run printed ipykernel's TCP warning; 30 copies filled
    the tail and cut the dead kernel's ZMQError. Runs of one line are kept once, counted."""
    warning = "[IPKernelApp] WARNING | Kernel is running over TCP without encryption."
    text = "Traceback\nzmq.error.ZMQError: Address already in use\n" + (warning + "\n") * 60
    kept = tail(text, lines=5)
    assert kept.splitlines() == [
        "Traceback",
        "zmq.error.ZMQError: Address already in use",
        warning,
        "[... the line above 59 more times]",
    ]
    assert tail("a\na\n") == "a\n[... the line above 1 more time]"  # collapsed, nothing cut


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "", "[... x]"]), max_size=40))
def test_collapse_loses_no_line_and_keeps_the_order(lines):
    """The rule: expanding each counted run gives back exactly the lines it was given."""
    out = collapse(lines)
    back: list[str] = []
    for line in out:
        m = re.fullmatch(r"\[\.\.\. the line above (\d+) more times?\]", line)
        if m and back:
            back += [back[-1]] * int(m.group(1))
        else:
            back.append(line)
    assert back == lines
    assert all(a != b for a, b in zip(out, out[1:], strict=False))  # no run is left uncollapsed


def test_expect_takes_one_status_several_or_any():
    three = _python("raise SystemExit(3)")
    assert run(three, expect=3).returncode == 3
    assert run(three, expect=(0, 3)).returncode == 3
    assert run(three, expect=None).returncode == 3
    with pytest.raises(ProcessFailed) as info:
        run(three, expect={0, 1})
    assert "ended: exit status 3" in str(info.value)
    assert "expected: exit status 0 or 1" in str(info.value)
    assert info.value.returncode == 3


def test_explain_names_a_signal_and_explain_log_a_servers_log(tmp_path):
    proc = run(_python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"), expect=None)
    assert "ended: killed by SIGKILL" in explain(proc, cwd=tmp_path, what="a killed child")
    assert explain(proc, what="a killed child").startswith("a killed child: ")
    log = tmp_path / "server.log"
    log.write_text("".join(f"request {k}\n" for k in range(100)) + "Traceback: it broke\n")
    message = explain_log(["server", "--port", "1"], 2, log)
    assert message.startswith("command: server --port 1\nended: exit status 2\n")
    assert message.endswith("request 99\nTraceback: it broke") and "request 59\n" not in message
    assert "ended: still running" in explain_log("server", None, tmp_path / "none.log")
    assert "(not captured)" in explain_log("server", None, tmp_path / "none.log")
