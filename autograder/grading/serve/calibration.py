"""The service's calibration of each assignment (:class:`autograder.grading.calibrate.Calibration`):
done at start, and again when an assignment's source notebooks change; kept in the ledger by
each notebook's hash, so a restart on unchanged sources calibrates nothing.

Calibration grades the instructor's solution in the same warm sandboxes as the students'
submissions: results of submissions that arrive meanwhile wait in :attr:`Calibrator.stash`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time


class Calibrator:
    def __init__(self, course, ledger, pool, gradebook, limits, imports, log):
        from autograder.grading.calibrate import Calibration

        self.course, self.ledger, self.pool, self.gradebook = course, ledger, pool, gradebook
        self.limits, self.imports, self.log = limits, imports, log
        self.calibration = Calibration(course)
        self.sources: dict = {}  # assignment -> its source notebooks' names, times and sizes
        self.stash: list = []

    def _signature(self, assignment):
        folder = self.course.source / assignment
        return tuple(
            (p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(folder.glob("*.ipynb"))
        )

    def changed(self, assignment) -> bool:
        return self._signature(assignment) != self.sources.get(assignment)

    def take_stash(self):
        out, self.stash = self.stash, []
        return out

    def calibrate_all(self):
        for a in self.course.assignments():
            if not self.course.unsupported(a):
                self.calibrate(a)

    def calibrate(self, assignment):
        """The assignment's calibration, from the ledger's cache when its sources are unchanged."""
        from autograder.grading.calibrate import NotebookMode

        self.sources[assignment] = self._signature(assignment)
        self.course._cache.pop(assignment, None)
        self.gradebook._registered = {k for k in self.gradebook._registered if k[0] != assignment}
        notebooks = self.course.notebooks(assignment)
        keys = {nb.name: hashlib.sha256(nb.path.read_bytes()).hexdigest() for nb in notebooks}
        cached = {name: self.ledger.calibration(h) for name, h in keys.items()}
        if all(cached.values()):
            for name, mode in cached.items():
                self.calibration.modes[(assignment, name)] = NotebookMode(**mode)
            return
        started = time.monotonic()
        self.calibration.calibrate([assignment], self._run_now, self.limits, self.imports)
        for nb in notebooks:
            m = self.calibration.modes.get((assignment, nb.name))
            if m is not None:
                self.ledger.save_calibration(keys[nb.name], dataclasses.asdict(m))
        for line in self.calibration.lines():
            if line.startswith(f"{assignment}/"):
                self.log(f"calibration: {line}")
        self.log(f"calibrated {assignment} in {time.monotonic() - started:.1f} s")

    def _run_now(self, tasks, on_result):
        """Grade ``tasks`` now (calibration): other results that arrive meanwhile wait in the stash."""
        waiting = set()
        for key, task in tasks:
            self.pool.put(("\0calibration", key), task)
            waiting.add(key)
        while waiting:
            token, result, error = self.pool.done.get()
            if token[0] == "\0calibration" and token[1] in waiting:
                waiting.discard(token[1])
                on_result(token[1], result, error)
            else:
                self.stash.append((token, result, error))
