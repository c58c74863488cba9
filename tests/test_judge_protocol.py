"""The judge's channel keeps its documented order (autograder/grading/host/judge.py): after "begin",
the parent's {"ev": "child"} comes before its forked child's {"ev": "ready"}.

Both processes write into one channel. A submission with no tests for the judge (a notebook
graded in one kernel, calibrate.py) makes the child start at once; before the fix, its "ready"
could arrive first and the supervisor failed that notebook ("the judge did not start a
submission: {'ev': 'ready'}", status grader-error), on about one notebook in seven.
"""

from __future__ import annotations

import subprocess

from autograder.grading.host.sandbox import python_command
from autograder.procs import explain_log
from autograder.wire.frames import read_frame, write_frame


def test_child_frame_always_precedes_ready(tmp_path):
    command, log = python_command("host.judge"), tmp_path / "judge.log"
    with open(log, "wb") as stderr:  # the judge's stderr: shown if it does not start or end well
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
        )
    to_judge, from_judge = proc.stdin.fileno(), proc.stdout.fileno()
    try:
        try:
            write_frame(to_judge, {"preload": []})
            first, _ = read_frame(from_judge, timeout=120)
        except (EOFError, RuntimeError, OSError) as exc:  # closed, Timeout, ProtocolError, pipe
            raise AssertionError(
                f"the judge did not start ({exc!r})\n" + explain_log(command, proc.poll(), log)
            ) from exc
        assert first.get("ready") is True, explain_log(command, proc.poll(), log)
        for _ in range(60):
            write_frame(to_judge, {"op": "begin", "tests": []})
            order = [read_frame(from_judge, timeout=60)[0].get("ev") for _ in range(2)]
            assert order == ["child", "ready"], order
            write_frame(to_judge, {"op": "end"})
            assert read_frame(from_judge, timeout=60)[0].get("ev") == "child-exit"
        write_frame(to_judge, {"op": "quit"})
        assert proc.wait(timeout=60) == 0, explain_log(command, proc.returncode, log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_judges_are_forked_from_one_warm_template(tmp_path):
    """N sandboxes, one judge warm-up: the judges of supervisors with the same preload list are
    forks of one template (each with its own channel and log, each ending on its own), a second
    preload list gets a template of its own, and the last close ends every template."""
    import psutil

    from autograder.grading.host import supervisor as sv

    sv.close_templates()
    t = sv.judge_template([], tmp_path)
    assert sv.judge_template([], tmp_path) is t
    judges = [t.spawn(tmp_path / f"judge-{k}.log") for k in range(3)]
    try:
        for j in judges:
            ready, _ = j.read(timeout=120)
            assert ready == {"ready": True, "pid": j.proc.pid}
            assert psutil.Process(j.proc.pid).ppid() == t.proc.pid
        assert len({j.proc.pid for j in judges}) == 3
        # each judge grades on its own channel: a submission with no tests, begun and ended
        for j in judges:
            j.send({"op": "begin", "tests": []})
            assert [j.read(timeout=60)[0].get("ev") for _ in range(2)] == ["child", "ready"]
            j.send({"op": "end"})
            assert j.read(timeout=60)[0].get("ev") == "child-exit"
        judges[0].close()  # quits; the others go on
        assert judges[0].proc.poll() is not None and judges[1].alive()
        judges[1].proc.kill()  # killed by pidfd: gone, and reaped by the template
        assert judges[1].proc.wait(timeout=10) is not None
        other = sv.judge_template(["math"], tmp_path)
        assert other is not t and other.proc.pid != t.proc.pid
    finally:
        for j in judges:
            j.close()
    procs = [psutil.Process(x.proc.pid) for x in (t, other)]
    sv.close_templates()
    for p in procs:
        assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    assert sv._templates == {}


def test_a_test_is_compiled_once_per_judge():
    """The judge compiles each test cell once, before it forks (``_serve``); every submission's
    child finds the code objects there: the same objects for the same cell, and a cell's grade id
    stays in its code (tracebacks name ``<test ID>``)."""
    from autograder.grading.host.judge import compile_test

    source = "x = [1, 2]\nassert len(x) == 2\nx"
    first = compile_test(source, "test_a")
    assert compile_test(source, "test_a") is first
    again = compile_test(source, "test_b")
    assert again is not first and again[0].co_filename == "<test test_b>"
    assert compile_test("def broken(:\n", "test_c") is None
