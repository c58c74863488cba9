"""The pace of the time limits: seconds of a quiet machine, on the host's clock.

A limit (a cell's, a test's) is stock nbgrader's ``Execute.timeout``: wall seconds, on a quiet
machine. On a busy one (more runnable work than CPUs: other graders, other users, this grader's
own parallel sandboxes), honest work - a ``torch.compile`` that compiles, a first call that loads
a library - takes longer in wall time for reasons that are not its own. So a limit's time
passes at the rate a quiet machine's would: a second of the host's clock counts
``cpus / load`` of a second when the 1-minute load average is above the CPU count, never less
than ``1 / MAX_STRETCH`` of one. On a quiet machine (load at most the CPU count) it is the wall
clock itself: stock's limits exactly. The load is the kernel's (``getloadavg``, or the
``sysinfo`` system call where no ``/proc`` is mounted, as in the sandbox), never anything the
student's process says; ``AUTOGRADER_LOAD`` (or the sandbox's ``pace_load`` setting) pins it,
for tests. A looping cell on a busy machine thus costs up to ``MAX_STRETCH`` times its limit in
wall time, as it costs a quiet one its limit.
"""

from __future__ import annotations

import os
import time

MAX_STRETCH = 8.0
_CACHE_SECONDS = 0.5


def load_average() -> float | None:
    """The 1-minute load average, or None where it cannot be read."""
    try:
        return os.getloadavg()[0]
    except OSError:
        pass
    try:  # no /proc (the sandbox): the sysinfo system call
        import ctypes

        buf = ctypes.create_string_buffer(256)
        if ctypes.CDLL(None, use_errno=True).sysinfo(buf) != 0:
            return None
        size = ctypes.sizeof(ctypes.c_long)
        loads = ctypes.c_ulong.from_buffer(buf, size).value  # after the uptime, a c_long
        return loads / 65536.0  # SI_LOAD_SHIFT
    except (OSError, AttributeError, ValueError):
        return None


class Pace:
    """The rate at which a limit's time passes now (1.0 on a quiet machine)."""

    def __init__(self, load: float | None = None):
        self.pinned = load
        if load is None and os.environ.get("AUTOGRADER_LOAD"):
            try:
                self.pinned = float(os.environ["AUTOGRADER_LOAD"])
            except ValueError:
                self.pinned = None
        self.cpus = max(1, os.cpu_count() or 1)
        self._rate = 1.0
        self._at = -1e9

    def rate(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        if now - self._at >= _CACHE_SECONDS:
            load = self.pinned if self.pinned is not None else load_average()
            if load is None or load <= self.cpus:
                self._rate = 1.0
            else:
                self._rate = max(self.cpus / load, 1.0 / MAX_STRETCH)
            self._at = now
        return self._rate


class Budget:
    """``seconds`` of a limit, spent at the pace's rate from ``now`` on."""

    def __init__(self, seconds: float, pace: Pace, now: float | None = None):
        self.pace = pace
        self.left_s = float(seconds)
        self.last = time.monotonic() if now is None else now

    def left(self, now: float | None = None) -> float:
        """Seconds of the limit left (spending what passed since the last call)."""
        now = time.monotonic() if now is None else now
        if now > self.last:
            self.left_s -= (now - self.last) * self.pace.rate(now)
            self.last = now
        return self.left_s

    def over(self, now: float | None = None) -> bool:
        return self.left(now) <= 0
