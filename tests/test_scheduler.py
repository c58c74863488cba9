"""autograder/grading/host/scheduler.py: local and Dask grading share one concurrent.futures path.

Unit tests with stand-in supervisors (no sandbox): every task's result comes back once through
``on_result`` in the calling thread; a second sandbox starts only for a backlog, never more than
``--jobs``; no sandbox starting is a WorkerFailure; a thread whose sandbox failed while another's
started tries again with its next task; a supervisor that dies
mid-task is retried once, then reported; shutdown closes every sandbox. The real sandboxes, and
a local Dask cluster giving the same CSV, are in tests/test_grading.py.
"""

from __future__ import annotations

import threading
import time

import pytest

from autograder.grading.host import scheduler
from autograder.grading.host.sandbox import WorkerFailure
from autograder.wire.types import Options


class FakeSupervisor:
    def __init__(self, fail_start=0, fail_grade=0, gate=None):
        self.fail_start, self.fail_grade = fail_start, fail_grade
        self.gate = gate  # a start waits for it (a sandbox warming up)
        self.started = self.closed = 0
        self.graded: list = []

    def start(self):
        if self.gate is not None:
            self.gate.wait()
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


def _open_when(pool, gate, lanes):
    """Let the sandboxes finish starting once ``pool`` has ``lanes`` lanes (the tasks submitted
    while they warm up wait: the backlog that starts a second lane)."""

    def watch():
        while pool.lanes < lanes:
            time.sleep(0.01)
        gate.set()

    threading.Thread(target=watch, daemon=True).start()


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
    gate = threading.Event()
    made = _with(monkeypatch, lambda n: FakeSupervisor(gate=gate))
    with scheduler.LocalExecutor(2, Options()) as pool:
        _open_when(pool, gate, 2)
        first = _run(pool, 13)
        second = _run(pool, 3)  # the same sandboxes: calibration, then the class
    assert sorted(k for k, _, _ in first) == sorted(str(i) for i in range(13))
    assert sorted(k for k, _, _ in second) == ["0", "1", "2"]
    assert all(error is None and result["id"] == key for key, result, error in first + second)
    assert len(made) == 2 and all(s.started == 1 and s.closed == 1 for s in made)
    assert {r["thread"] for _, r, _ in first + second} <= {"grader_0", "grader_1"}


def test_a_second_lane_starts_only_for_a_backlog_and_never_more_than_jobs(monkeypatch):
    """A run of a few notebooks warms one sandbox up, not ``--jobs`` of them; a class fills them."""
    gate = threading.Event()
    made = _with(monkeypatch, lambda n: FakeSupervisor(gate=gate))
    backlog = scheduler.LocalExecutor.LANE_BACKLOG
    with scheduler.LocalExecutor(3, Options()) as pool:
        futures = [pool.submit(lambda: 1) for _ in range(backlog)]
        assert pool.lanes == 1  # the first sandbox is still warming up, `backlog` tasks wait
        futures.append(pool.submit(lambda: 1))
        assert pool.lanes == 2
        futures += [pool.submit(lambda: 1) for _ in range(10 * backlog)]
        assert pool.lanes == 3  # --jobs 3: no more
        gate.set()
        assert sum(f.result() for f in futures) == len(futures)
    assert len(made) == 3 and all(s.closed == 1 for s in made)


def test_one_notebook_warms_one_sandbox(monkeypatch):
    made = _with(monkeypatch, lambda n: FakeSupervisor())
    with scheduler.LocalExecutor(4, Options()) as pool:
        got = _run(pool, 2)  # a notebook: one kernel's run and the judge's
    assert sorted(k for k, _, _ in got) == ["0", "1"] and len(made) == 1


def test_a_follow_up_task_runs_ahead_of_the_tasks_waiting(monkeypatch):
    """What ``on_result`` returns (a notebook's judge run, once one kernel's is in) is graded
    next, before the notebooks still waiting, and comes back through ``on_result`` too."""

    class Slow(FakeSupervisor):  # a task takes long enough for its result to come back first
        def grade(self, task):
            time.sleep(0.2)
            return super().grade(task)

    gate = threading.Event()
    made = _with(monkeypatch, lambda n: Slow(gate=gate))
    got = []

    def on_result(key, result, error):
        got.append(key)
        return [(key + "+judge", {"id": key + "+judge"})] if "+" not in key else None

    with scheduler.LocalExecutor(1, Options()) as pool:
        tasks = [(str(i), {"id": str(i)}) for i in range(4)]
        gate.set()
        scheduler.run(pool, tasks, on_result, Options())
    assert sorted(got) == sorted([*"0123", *(f"{i}+judge" for i in range(4))])
    order = made[0].graded
    # one lane: each notebook's second run right after its first, once its first came back (the
    # next notebook may already have been taken by then: at most one ahead)
    for i in range(4):
        assert order.index(f"{i}+judge") <= order.index(str(i)) + 2, order


def test_no_sandbox_starting_is_a_worker_failure(monkeypatch):
    _with(monkeypatch, lambda n: FakeSupervisor(fail_start=1))
    with scheduler.LocalExecutor(2, Options()) as pool:
        with pytest.raises(WorkerFailure, match="no sandbox here"):
            _run(pool, 4)


def test_a_thread_whose_sandbox_failed_to_start_tries_again(monkeypatch):
    gate = threading.Event()
    made = _with(monkeypatch, lambda n: FakeSupervisor(fail_start=1 if n == 0 else 0, gate=gate))
    with scheduler.LocalExecutor(2, Options()) as pool:
        _open_when(pool, gate, 2)
        got = _run(pool, 13)
    assert sorted(k for k, _, _ in got) == sorted(str(i) for i in range(13))
    assert all(error is None for _, _, error in got)
    assert sum(len(s.graded) for s in made) == 13


def test_a_dying_sandbox_is_retried_once_then_reported(monkeypatch):
    _with(monkeypatch, lambda n: FakeSupervisor(fail_grade=3))
    with scheduler.LocalExecutor(1, Options()) as pool:
        got = dict((k, (r, e)) for k, r, e in _run(pool, 2))
    assert got["0"][0] is None and "the sandbox died" in got["0"][1]  # failed twice
    assert got["1"][1] is None and got["1"][0]["id"] == "1"  # the third failure, then a result


@pytest.mark.slow
def test_a_task_that_kills_every_worker_it_lands_on_ends_as_its_own_error(monkeypatch):
    """A task whose worker dies under it every time (``os._exit`` in the worker: what a notebook
    that could kill its worker would do; the sandbox keeps real ones from it) ends as that
    task's error (``KilledWorker``: the notebook's ``grader-error``) after a bounded number of
    deaths; every other task comes back graded, those Dask gave up on only because they were
    queued on a dying worker beside it included (run again alone), and the run does not fail."""
    import os

    import dask
    from distributed import LocalCluster

    def grade_task(task, options):  # (pickled by value: it runs in the workers' processes)
        if task["id"] == "killer":
            os._exit(1)
        return {"result": {"id": task["id"]}, "error": None}

    monkeypatch.setattr(scheduler, "grade_task", grade_task)
    tries = 1
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": tries}),
        LocalCluster(
            n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=":0"
        ) as cluster,
    ):
        pool = scheduler.DaskExecutor(cluster.scheduler_address)
        try:
            got = {}

            def on_result(key, result, error):
                got[key] = (result, error)

            tasks = [(k, {"id": k}) for k in ("a", "killer", "b", "c")]
            scheduler.run(pool, tasks, on_result, Options())
            pool.client.wait_for_workers(2, timeout=60)  # the nannies' restarts done: then close
        finally:
            pool.client.close()
    assert {k: r for k, (r, e) in got.items() if e is None} == {
        k: {"id": k} for k in ("a", "b", "c")
    }
    result, error = got["killer"]
    assert result is None and "KilledWorker" in error, error
    assert f"on {tries + 1} different workers" in error, error  # Dask's count, then not again


def test_an_exception_from_a_dask_future_is_the_clusters_and_the_task_runs_again_alone():
    """On a cluster, grade_task returns every error of its own, so an exception its future raises
    is the cluster's: distributed's ClientExecutor failed unpacking the result of a task Dask had
    to compute twice (a worker died before the result was fetched) with a ValueError, for a task
    that had not failed. Such a task runs once more, alone, after the others (and comes back
    graded); one that raises again gets that exception as its error, and the run goes on."""
    import concurrent.futures as cf

    class Flaky(scheduler.DaskExecutor):
        def __init__(self):  # no cluster: the futures are made here
            self.submitted: list = []

        def submit(self, fn, /, *args, **kwargs):
            key = args[0]["id"]
            self.submitted.append(key)
            future: cf.Future = cf.Future()
            if key == "broken" or (key == "lost" and self.submitted.count(key) == 1):
                future.set_exception(ValueError("not enough values to unpack (expected 3, got 2)"))
            else:
                future.set_result({"result": {"id": key}, "error": None})
            return future

        submit_first = submit

    pool = Flaky()
    got = {}
    tasks = [(k, {"id": k}) for k in ("lost", "broken", "a")]
    scheduler.run(pool, tasks, lambda k, r, e: got.__setitem__(k, (r, e)), Options())
    assert got["a"] == ({"id": "a"}, None) and got["lost"] == ({"id": "lost"}, None), got
    result, error = got["broken"]
    assert result is None and "ValueError: not enough values to unpack" in error, error
    assert pool.submitted[:3] == ["lost", "broken", "a"]  # then each again, one at a time
    assert sorted(pool.submitted[3:]) == ["broken", "lost"], pool.submitted
