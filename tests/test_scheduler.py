"""autograder/grading/host/scheduler.py: local and Dask grading share one concurrent.futures path.

Unit tests with stand-in supervisors (no sandbox): every task's result comes back once through
``on_result`` in the calling thread; no sandbox starting is a WorkerFailure; a thread whose
sandbox failed while another's started tries again with its next task; a supervisor that dies
mid-task is retried once, then reported; shutdown closes every sandbox. The real sandboxes, and
a local Dask cluster giving the same CSV, are in tests/test_grading.py.
"""

from __future__ import annotations

import threading

import pytest

from autograder.grading.host import scheduler
from autograder.grading.host.sandbox import WorkerFailure
from autograder.wire.types import Options


class FakeSupervisor:
    def __init__(self, fail_start=0, fail_grade=0):
        self.fail_start, self.fail_grade = fail_start, fail_grade
        self.started = self.closed = 0
        self.graded: list = []

    def start(self):
        if self.fail_start:
            self.fail_start -= 1
            raise WorkerFailure("no sandbox here")
        self.started += 1
        return self

    def grade(self, task):
        if self.fail_grade:
            self.fail_grade -= 1
            raise WorkerFailure("the sandbox died")
        self.graded.append(task["id"])
        return {"id": task["id"], "thread": threading.current_thread().name}

    def close(self):
        self.closed += 1


def _with(monkeypatch, make):
    """Each thread's supervisor from ``make(n)`` (n: the how-many-th thread asks)."""
    local, made, lock = threading.local(), [], threading.Lock()

    def thread_supervisor(options):
        if not hasattr(local, "sup"):
            with lock:
                local.sup = make(len(made))
                made.append(local.sup)
        return local.sup

    monkeypatch.setattr(scheduler, "thread_supervisor", thread_supervisor)
    monkeypatch.setattr(scheduler, "close_all", lambda sups=None: [s.close() for s in sups])
    return made


def _run(executor, n):
    got = []
    caller = threading.current_thread()

    def on_result(key, result, error):
        assert threading.current_thread() is caller
        got.append((key, result, error))

    tasks = [(str(i), {"id": str(i)}) for i in range(n)]
    scheduler.run(executor, tasks, on_result, Options())
    return got


def test_every_task_comes_back_once_and_shutdown_closes_every_sandbox(monkeypatch):
    made = _with(monkeypatch, lambda n: FakeSupervisor())
    with scheduler.LocalExecutor(2, Options()) as pool:
        first = _run(pool, 7)
        second = _run(pool, 3)  # the same sandboxes: calibration, then the class
    assert sorted(k for k, _, _ in first) == [str(i) for i in range(7)]
    assert sorted(k for k, _, _ in second) == ["0", "1", "2"]
    assert all(error is None and result["id"] == key for key, result, error in first + second)
    assert len(made) == 2 and all(s.started == 1 and s.closed == 1 for s in made)
    assert {r["thread"] for _, r, _ in first + second} <= {"grader_0", "grader_1"}


def test_no_sandbox_starting_is_a_worker_failure(monkeypatch):
    _with(monkeypatch, lambda n: FakeSupervisor(fail_start=1))
    with scheduler.LocalExecutor(2, Options()) as pool:
        with pytest.raises(WorkerFailure, match="no sandbox here"):
            _run(pool, 4)


def test_a_thread_whose_sandbox_failed_to_start_tries_again(monkeypatch):
    made = _with(monkeypatch, lambda n: FakeSupervisor(fail_start=1 if n == 0 else 0))
    with scheduler.LocalExecutor(2, Options()) as pool:
        got = _run(pool, 6)
    assert sorted(k for k, _, _ in got) == [str(i) for i in range(6)]
    assert all(error is None for _, _, error in got)
    assert sum(len(s.graded) for s in made) == 6


def test_a_dying_sandbox_is_retried_once_then_reported(monkeypatch):
    _with(monkeypatch, lambda n: FakeSupervisor(fail_grade=3))
    with scheduler.LocalExecutor(1, Options()) as pool:
        got = dict((k, (r, e)) for k, r, e in _run(pool, 2))
    assert got["0"][0] is None and "the sandbox died" in got["0"][1]  # failed twice
    assert got["1"][1] is None and got["1"][0]["id"] == "1"  # the third failure, then a result
