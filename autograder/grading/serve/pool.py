"""Warm sandboxes that stay up for the service's whole life: ``--jobs`` local ones, or Dask workers.

``put(token, task)`` hands a task to the next free worker; results come back on ``done`` as
``(token, result, error)`` (the scheduler's :func:`~autograder.grading.host.scheduler.grade_with_retry`:
a sandbox that dies is restarted and the task retried once; a task that fails twice has
``error`` set, and the service reports a grader failure that does not count as an attempt).
"""

from __future__ import annotations

import queue
import threading
import traceback

from autograder.grading.host.scheduler import grade_task, grade_with_retry
from autograder.grading.host.supervisor import Supervisor
from autograder.wire.types import Options


class ServicePool:
    def __init__(self, jobs: int, options: Options, scheduler: str | None = None):
        self.jobs = max(1, int(jobs))
        self.options = options
        self.scheduler = scheduler
        self.work: queue.Queue = queue.Queue()
        self.done: queue.Queue = queue.Queue()
        self.threads: list[threading.Thread] = []
        self.failed: list[str] = []

    def start(self) -> ServicePool:
        target = self._dask_worker if self.scheduler else self._worker
        self.threads = [
            threading.Thread(target=target, daemon=True, name=f"serve-grader-{i}")
            for i in range(self.jobs)
        ]
        for t in self.threads:
            t.start()
        return self

    def put(self, token, task) -> None:
        self.work.put((token, task))

    def stop(self) -> None:
        for _ in self.threads:
            self.work.put(None)
        for t in self.threads:
            t.join(timeout=30)

    def _worker(self):
        worker = None
        try:  # warm now, not at the first submission
            worker = Supervisor(self.options)
            worker.start()
        except Exception:  # noqa: BLE001 - tried again at the first task, which fails if it fails
            self.failed.append(traceback.format_exc())
            if worker is not None:
                worker.close()
            worker = None
        while True:
            item = self.work.get()
            if item is None:
                break
            token, task = item
            try:
                if worker is None:
                    worker = Supervisor(self.options)
                    worker.start()
                result, error = grade_with_retry(worker, task)
            except Exception:  # noqa: BLE001 - a sandbox that cannot start fails this task only
                result, error = None, traceback.format_exc()
                if worker is not None:
                    worker.close()
                worker = None
            self.done.put((token, result, error))
        if worker is not None:
            worker.close()

    def _dask_worker(self):
        from distributed import Client

        client = Client(self.scheduler, timeout=60)
        try:
            while True:
                item = self.work.get()
                if item is None:
                    break
                token, task = item
                try:
                    out = client.submit(grade_task, task, self.options, pure=False).result()
                    result, error = out["result"], out["error"]
                except Exception:  # noqa: BLE001 - a lost Dask worker: this task failed
                    result, error = None, traceback.format_exc()
                self.done.put((token, result, error))
        finally:
            client.close()
