"""Running the grading tasks on a :mod:`concurrent.futures` executor, local or Dask: one path.

* :class:`LocalExecutor` (``--jobs N``): up to N lanes (threads), each owning one supervisor (a
  sandbox with a warm zygote, and a judge; see :mod:`.supervisor`); the first starts with the
  executor (it warms up while the caller reads the submissions), the others as the tasks waiting
  make them worth their warm-up.
* :class:`DaskExecutor` (``--scheduler ADDRESS``): the Dask client's executor
  (``Client.get_executor``); each Dask worker thread keeps a sandbox of its own (started on
  first use), so a cluster of machines with this environment installed grades in parallel
  (Dask has Kubernetes, Slurm, SSH ... deployments). Tasks are self-contained: the student's
  code, the instructor's tests, the limits.

Either way :func:`run` submits :func:`grade_task` once per task and calls
``on_result(key, result, error)`` in the calling thread as results arrive (and grades what
it returns next: a notebook's judge run once one kernel's is in); the executor stays up for the
next :func:`run` (calibration, then grading) until its ``shutdown()``. A sandbox that dies is restarted and the
task retried once; a task that fails twice gets ``error`` set (rows with status
``grader-error``). A Dask worker that is lost (its machine gone, its process killed) loses
nothing: the scheduler gives its tasks to another worker (``tests/test_grading.py``: a worker
killed mid-task, the rows byte for byte the local run's). By Dask's own rule a task whose
workers die under it more than ``distributed.scheduler.allowed-failures`` times (3 by default)
ends as ``KilledWorker``; Dask counts every task on the dying worker, so one queued beside the
culprit can end so too: :func:`run` runs each such task once more, alone, at the end, and what
kills its worker then is that notebook's ``grader-error``, never the run's failure
(``tests/test_scheduler.py``: a task that kills every worker it lands on). When no local
sandbox can start at all, :func:`run` raises :class:`WorkerFailure`.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import threading
import time
import traceback

from autograder.grading.host.sandbox import WorkerFailure
from autograder.grading.host.supervisor import close_all, thread_supervisor
from autograder.wire.types import Options, TaskFrame

__all__ = [
    "DaskExecutor",
    "LocalExecutor",
    "grade_task",
    "grade_with_retry",
    "run",
    "shutdown_sandboxes",
]


class LocalExecutor(cf.Executor):
    """Up to ``jobs`` *lanes*, each a thread with a sandbox of its own, taking tasks in the order
    they were submitted. The first lane starts with the executor (its sandbox warms up while the
    caller reads the submissions); another starts only while more than :data:`LANE_BACKLOG` tasks
    per running lane wait, so a run of a few notebooks pays for one warm-up, not ``jobs``."""

    # a lane's warm-up costs about what LANE_BACKLOG / 2 tasks cost (torch course, 2026-11-29:
    # 3.5 CPU-s against 0.5-1.5 each): below that backlog a second lane would finish later
    LANE_BACKLOG = 6

    def __init__(self, jobs: int, options: Options):
        self.jobs = max(1, int(jobs))
        self.options = options
        self.supervisors: list = []
        self.ready_at: list[float] = []  # time.monotonic() when each sandbox could take a task
        self.starts: list[cf.Future] = []  # per lane: None once started, or why it could not
        self._lanes: list[threading.Thread] = []
        self._pending: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        with self._cond:
            self._add_lane()

    @property
    def lanes(self) -> int:
        return len(self._lanes)

    def submit(self, fn, /, *args, **kwargs):
        return self._submit(False, fn, args, kwargs)

    def submit_first(self, fn, /, *args, **kwargs):
        """:meth:`submit`, ahead of every task waiting."""
        return self._submit(True, fn, args, kwargs)

    def _submit(self, first, fn, args, kwargs):
        future: cf.Future = cf.Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("cannot submit after shutdown")
            if first:
                self._pending.appendleft((future, fn, args, kwargs))
            else:
                self._pending.append((future, fn, args, kwargs))
            if self.lanes < self.jobs and len(self._pending) > self.LANE_BACKLOG * self.lanes:
                self._add_lane()
            self._cond.notify()
        return future

    def _add_lane(self):
        started: cf.Future = cf.Future()
        lane = threading.Thread(
            target=self._lane, args=(started,), name=f"grader_{self.lanes}", daemon=True
        )
        self._lanes.append(lane)
        self.starts.append(started)
        lane.start()

    def _lane(self, started):
        """This thread's sandbox, started now; then tasks until the executor shuts down (a
        lane whose sandbox failed to start tries again with its next task)."""
        sup = thread_supervisor(self.options)
        with self._cond:
            self.supervisors.append(sup)
        try:
            sup.start()
        except WorkerFailure as exc:
            started.set_result(str(exc))
        else:
            with self._cond:
                self.ready_at.append(time.monotonic())
            started.set_result(None)
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                future, fn, args, kwargs = self._pending.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - the caller's future carries it
                future.set_exception(exc)

    def check_started(self):
        """Raise :class:`WorkerFailure` when no sandbox could start."""
        failures = [f.result() for f in list(self.starts)]
        if all(failures):
            raise WorkerFailure(failures[0])

    def shutdown(self, wait=True, *, cancel_futures=False):
        with self._cond:
            self._closed = True
            if cancel_futures:
                while self._pending:
                    self._pending.popleft()[0].cancel()
            self._cond.notify_all()
            lanes = list(self._lanes)
        if wait:
            for lane in lanes:
                lane.join()
        with self._cond:
            supervisors, self.supervisors = self.supervisors, []
        close_all(supervisors)


class DaskExecutor(cf.Executor):
    """The executor of a Dask client connected to ``address``; ``shutdown()`` closes the
    workers' sandboxes and the client."""

    def __init__(self, address: str, timeout: float = 60):
        from distributed import Client

        self.address = address
        self.client = Client(address, timeout=timeout)
        self._executor = self.client.get_executor(pure=False, retries=0)

    def submit(self, fn, /, *args, **kwargs):
        return self._executor.submit(fn, *args, **kwargs)

    def submit_first(self, fn, /, *args):
        """:meth:`submit`, ahead of the tasks waiting (Dask's ``priority``; the executor passes
        keywords on to ``Client.submit``, so ``fn`` gets positional arguments only)."""
        return self._executor.submit(fn, *args, priority=1)

    def shutdown(self, wait=True, *, cancel_futures=False):
        try:
            self._executor.shutdown(wait=wait)
            try:
                self.client.run(shutdown_sandboxes)
            except Exception:  # noqa: BLE001 - a worker already gone has no sandbox left
                pass
        finally:
            self.client.close()


def run(executor: cf.Executor, tasks, on_result, options: Options):
    """Grade ``tasks`` (``[(key, task)]``) on ``executor``; ``on_result(key, result, error)``
    in this thread as each arrives. What ``on_result`` returns (``[(key, task)]``, or None) is
    graded too, ahead of the tasks still waiting (a notebook's second run, once its first is in).

    A task that Dask gives up on because workers died under it (``KilledWorker``, after
    ``distributed.scheduler.allowed-failures`` deaths) may only have been queued beside the task
    that killed them: Dask counts every task on a dying worker. So it is run once more, alone,
    after everything else; what kills its worker then is that task's own error.

    On a Dask cluster that holds for *any* exception a task's future raises: :func:`grade_task`
    returns every error of its own (``{"result", "error"}``), so an exception there is the
    cluster's. One seen here: a task finished on a worker that died before its result was
    fetched; Dask computed it again, and distributed's ``ClientExecutor`` (``_cascade_future``,
    2026.8.0) read the future's status after the second fetch, found it no longer "finished" and
    failed unpacking the result: ``ValueError: not enough values to unpack (expected 3, got 2)``
    for a task that had not failed (caught in 1 of 10 runs of that test's scenario in a loop at a
    load of about 8 on 2 cores, 2026-12-07; the test itself failed the same way, an innocent task
    with an error, in 2 of about 60 runs). Such a task, too, runs once more alone; the second
    exception is its row's error."""
    first = getattr(executor, "submit_first", executor.submit)
    dask = isinstance(executor, DaskExecutor)
    futures: dict = {}  # future -> (key, task)

    def submit(key, task, ahead):
        futures[(first if ahead else executor.submit)(grade_task, task, options)] = (key, task)

    for key, task in tasks:
        submit(key, task, False)
    if isinstance(executor, LocalExecutor):
        try:
            executor.check_started()
        except WorkerFailure:
            for f in futures:
                f.cancel()
            raise
    alone: list = []  # tasks workers died under: once more, one at a time, at the end
    tried_alone: set = set()
    while futures or alone:
        if not futures:
            key, task = alone.pop(0)
            tried_alone.add(key)
            submit(key, task, True)
        done, _ = cf.wait(futures, return_when=cf.FIRST_COMPLETED)
        for future in done:
            key, task = futures.pop(future)
            try:
                out = future.result()
            except Exception as exc:  # noqa: BLE001 - a lost Dask worker: the task is reported as failed
                cluster = dask or type(exc).__name__ == "KilledWorker"
                if cluster and key not in tried_alone:
                    alone.append((key, task))
                    continue
                more = on_result(key, None, traceback.format_exc())
            else:
                more = on_result(key, out["result"], out["error"])
            for k, t in more or ():
                submit(k, t, True)


def grade_with_retry(worker, task):
    """``(result, error)``: retry once on a fresh sandbox if the worker fails."""
    error = None
    for _ in range(2):
        try:
            return worker.grade(task), None
        except WorkerFailure as exc:
            error = str(exc)
        except Exception:  # noqa: BLE001 - a bug must not stop the whole class
            error = traceback.format_exc()
    return None, error


def grade_task(task: TaskFrame, options: Options) -> dict:
    """Grade one task in this thread's sandbox (a local executor's thread, or a Dask worker's)."""
    worker = thread_supervisor(options)
    result, error = grade_with_retry(worker, task)
    return {"result": result, "error": error}


def shutdown_sandboxes():
    """Close every sandbox this process's threads started (run on each Dask worker)."""
    close_all()
