"""Running the grading tasks: a local pool of sandboxes, or a Dask cluster.

* :class:`LocalPool` (``--jobs N``): N worker threads, each owning one supervisor (a
  sandbox with a warm zygote, and a judge; see :mod:`.supervisor`), taking tasks from a queue.
* :func:`run_dask` (``--scheduler ADDRESS``): the same tasks submitted to a Dask
  distributed scheduler; each Dask worker thread keeps a sandbox of its own (started on
  first use), so a cluster of machines with this environment installed grades in parallel
  (Dask has Kubernetes, Slurm, SSH ... deployments). Tasks are self-contained: the
  student's code, the instructor's tests, the limits.

Either way, ``on_result(key, result, error)`` is called in the calling thread as results
arrive. A worker whose sandbox dies is restarted and the task retried once; a task that
fails twice gets ``error`` set (rows with status ``grader-error``).
"""

from __future__ import annotations

import queue
import threading
import traceback

from autograder.grading.host.sandbox import WorkerFailure
from autograder.grading.host.supervisor import Supervisor, close_all, thread_supervisor
from autograder.wire.types import Options, TaskFrame


class LocalPool:
    """``jobs`` sandboxes, started as soon as the pool is (while the caller collects work)."""

    def __init__(self, jobs: int, options: Options):
        self.jobs = max(1, int(jobs))
        self.options = options
        self.work: queue.Queue = queue.Queue()
        self.done: queue.Queue = queue.Queue()
        self.threads = []

    def start(self, n_tasks=None):
        n = self.jobs if n_tasks is None else min(self.jobs, max(1, n_tasks))
        self.threads = [
            threading.Thread(target=self._worker, daemon=True, name=f"grader-{i}") for i in range(n)
        ]
        for t in self.threads:
            t.start()
        return self

    def run(self, tasks, on_result, final=True):
        """Grade ``tasks``; with ``final=False`` the sandboxes stay up for another call (calibration)."""
        if not self.threads:
            self.start(len(tasks))
        for key, task in tasks:
            self.work.put((key, task))
        if final:
            for _ in self.threads:
                self.work.put(None)
        remaining = len(tasks)
        failures = 0
        while remaining:
            key, result, error = self.done.get()
            if key is None:  # a worker could not start at all
                failures += 1
                if failures == len(self.threads):
                    raise WorkerFailure(error)
                continue
            on_result(key, result, error)
            remaining -= 1
        if final:
            for t in self.threads:
                t.join()

    def stop(self):
        """End the workers (their sandboxes close) without grading anything."""
        for _ in self.threads:
            self.work.put(None)
        for t in self.threads:
            t.join()
        self.threads = []

    def _worker(self):
        worker = None
        try:
            worker = Supervisor(self.options)
            try:
                worker.start()
            except WorkerFailure as exc:
                self.done.put((None, None, str(exc)))
                return
            while True:
                item = self.work.get()
                if item is None:
                    return
                key, task = item
                self.done.put((key, *grade_with_retry(worker, task)))
        finally:
            if worker is not None:
                worker.close()


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


def grade_task(task: TaskFrame, options: Options):
    """Run on a Dask worker: grade one task in this thread's sandbox."""
    worker = thread_supervisor(options)
    result, error = grade_with_retry(worker, task)
    return {"result": result, "error": error}


def shutdown_sandboxes():
    close_all()


def run_dask(address: str, tasks, on_result, options: Options, timeout: float = 60):
    from distributed import Client, as_completed

    client = Client(address, timeout=timeout)
    try:
        futures = {}
        for key, task in tasks:
            fut = client.submit(
                grade_task, task, options, key=f"grade-{key}", pure=False, retries=0
            )
            futures[fut] = key
        for fut in as_completed(list(futures)):
            key = futures[fut]
            try:
                out = fut.result()
                on_result(key, out["result"], out["error"])
            except Exception:  # noqa: BLE001 - a lost Dask worker: the task is reported as failed
                on_result(key, None, traceback.format_exc())
        try:
            client.run(shutdown_sandboxes)
        except Exception:  # noqa: BLE001
            pass
    finally:
        client.close()
