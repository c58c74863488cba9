"""Running the grading tasks on a :mod:`concurrent.futures` executor, local or Dask: one path.

* :class:`LocalExecutor` (``--jobs N``): a ``ThreadPoolExecutor`` of N threads, each owning one
  supervisor (a sandbox with a warm zygote, and a judge; see :mod:`.supervisor`), started with
  the executor (they warm up while the caller reads the submissions).
* :class:`DaskExecutor` (``--scheduler ADDRESS``): the Dask client's executor
  (``Client.get_executor``); each Dask worker thread keeps a sandbox of its own (started on
  first use), so a cluster of machines with this environment installed grades in parallel
  (Dask has Kubernetes, Slurm, SSH ... deployments). Tasks are self-contained: the student's
  code, the instructor's tests, the limits.

Either way :func:`run` submits :func:`grade_task` once per task and calls
``on_result(key, result, error)`` in the calling thread as results arrive
(``concurrent.futures.as_completed``); the executor stays up for the next :func:`run`
(calibration, then grading) until its ``shutdown()``. A sandbox that dies is restarted and the
task retried once; a task that fails twice, or whose Dask worker is lost, gets ``error`` set
(rows with status ``grader-error``). When no local sandbox can start at all, :func:`run`
raises :class:`WorkerFailure`.
"""

from __future__ import annotations

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


class LocalExecutor(cf.ThreadPoolExecutor):
    """``jobs`` threads with a sandbox each, started as soon as the executor is."""

    def __init__(self, jobs: int, options: Options):
        self.jobs = max(1, int(jobs))
        self.options = options
        self.supervisors: list = []
        self._lock = threading.Lock()
        super().__init__(max_workers=self.jobs, thread_name_prefix="grader")
        # one start per thread: each waits for the others, so that no thread takes two
        barrier = threading.Barrier(self.jobs)
        self.ready_at: list[float] = []  # time.monotonic() when each sandbox could take a task
        self.starts = [self.submit(self._start, barrier) for _ in range(self.jobs)]

    def _start(self, barrier) -> str | None:
        """This thread's sandbox, started now: None, or why it could not start."""
        barrier.wait()
        sup = thread_supervisor(self.options)
        with self._lock:
            self.supervisors.append(sup)
        try:
            sup.start()
        except WorkerFailure as exc:
            return str(exc)
        with self._lock:
            self.ready_at.append(time.monotonic())
        return None

    def check_started(self):
        """Raise :class:`WorkerFailure` when no sandbox could start (a thread whose sandbox
        failed while another's started tries again with its next task)."""
        failures = [f.result() for f in self.starts]
        if all(failures):
            raise WorkerFailure(failures[0])

    def shutdown(self, wait=True, *, cancel_futures=False):
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        with self._lock:
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
    in this thread as each arrives."""
    futures = {executor.submit(grade_task, task, options): key for key, task in tasks}
    if isinstance(executor, LocalExecutor):
        try:
            executor.check_started()
        except WorkerFailure:
            for f in futures:
                f.cancel()
            raise
    for future in cf.as_completed(futures):
        key = futures[future]
        try:
            out = future.result()
        except Exception:  # noqa: BLE001 - a lost Dask worker: the task is reported as failed
            on_result(key, None, traceback.format_exc())
        else:
            on_result(key, out["result"], out["error"])


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
