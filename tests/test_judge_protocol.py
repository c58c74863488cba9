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
from autograder.wire.frames import read_frame, write_frame


def test_child_frame_always_precedes_ready():
    proc = subprocess.Popen(
        python_command("host.judge"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    to_judge, from_judge = proc.stdin.fileno(), proc.stdout.fileno()
    try:
        write_frame(to_judge, {"preload": []})
        first, _ = read_frame(from_judge, timeout=120)
        assert first.get("ready") is True
        for _ in range(60):
            write_frame(to_judge, {"op": "begin", "tests": []})
            order = [read_frame(from_judge, timeout=60)[0].get("ev") for _ in range(2)]
            assert order == ["child", "ready"], order
            write_frame(to_judge, {"op": "end"})
            assert read_frame(from_judge, timeout=60)[0].get("ev") == "child-exit"
        write_frame(to_judge, {"op": "quit"})
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
