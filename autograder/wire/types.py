"""What crosses between the grader's processes, typed: the options, the limits, a task, a result.

Each option and each limit has one default, here. The host builds them; the frames carry their
JSON form (:class:`LimitsFrame`, :class:`TaskFrame`, :class:`ResultFrame`), which the code
inside the sandbox reads as the host wrote it; a result the host reads back from the sandbox is
untrusted data (every field is checked where it is used).

    Options    the host's settings of one grading run: which modules the warm processes import,
               whether bwrap isolates them, the memory limit, where the logs go (a dataclass;
               it travels to a Dask worker pickled, never into the sandbox)
    Limits     one notebook's limits (a dataclass on the host; :meth:`Limits.frame` is what
               crosses: a :class:`LimitsFrame`)
    TaskFrame  one notebook to grade: the student's cells, the tests, the extra files, the limits
    ResultFrame what the supervisor returns for one task
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, TypedDict

from .frames import MAX_FILES_BYTES

GiB = 1 << 30
MiB = 1 << 20

# the files a notebook wrote that come back from the sandbox (a result's "written"): at most this
# many, this many folders deep, MAX_FILES_BYTES together
MAX_WRITTEN_FILES = 1000
MAX_WRITTEN_DEPTH = 16
# the only files of the host a zygote gets in its home: matplotlib's font lists (config["fonts"])
FONT_LIST_NAME = re.compile(r"fontlist-v[\w.]+\.json")

# the memory a submission may use beyond the warm Python (and the judge beyond its own warm
# size, which gets this much even when the students' limit is off)
MEMORY_LIMIT = 2 * GiB


@dataclass
class Options:
    """The settings of one grading run, shared by every sandbox and judge it starts."""

    preload: list[str] = field(default_factory=list)  # modules the warm zygote and judge import
    sandbox: bool = True  # False: no bubblewrap (--no-sandbox), NO isolation
    memory_limit: int | None = MEMORY_LIMIT  # bytes beyond the warm size; None: no limit
    log_dir: str | None = None  # the processes' logs (default: the temporary folder)

    @property
    def judge_memory(self) -> int:
        """The judge's address space beyond its warm size: the students' limit, or the default."""
        return int(self.memory_limit or MEMORY_LIMIT)


class LimitsFrame(TypedDict, total=False):
    """The limits as they cross to the zygote (``{"op": "grade", "limits": ...}``)."""

    timeout: float  # seconds per cell and per test
    wall: float  # seconds for the whole notebook
    output: int  # bytes of output per cell, and per test's calls
    file_size: int  # RLIMIT_FSIZE: the largest file the submission may write
    processes: int  # processes the submission may start
    files: int  # bytes of extra files copied next to the notebook
    address_space: (
        int | None
    )  # RLIMIT_AS (the zygote's warm size + the memory limit), set by the supervisor
    memory: int | None  # the memory limit itself: what the submission's IPC objects may hold
    pace_load: float | None  # the load average the limits' pace assumes (pinned: AUTOGRADER_LOAD)


@dataclass(frozen=True)
class Limits:
    """One notebook's limits, with their defaults (the command line's)."""

    timeout: float = 120.0
    wall: float = 600.0
    output: int = 32 * MiB
    file_size: int = 256 * MiB
    processes: int = 32
    files: int = MAX_FILES_BYTES

    def replace(self, **changes) -> Limits:
        return dataclasses.replace(self, **changes)

    def frame(self, address_space: int | None = None) -> LimitsFrame:
        out: LimitsFrame = {
            "timeout": float(self.timeout),
            "wall": float(self.wall),
            "output": int(self.output),
            "file_size": int(self.file_size),
            "processes": int(self.processes),
            "files": int(self.files),
        }
        if address_space is not None:
            out["address_space"] = int(address_space)
        return out

    @classmethod
    def of(cls, limits: Limits | dict[str, Any]) -> Limits:
        """A :class:`Limits` from itself or from a (partial) dict of its fields."""
        if isinstance(limits, Limits):
            return limits
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in limits.items() if k in names})


class TestSpec(TypedDict):
    """An instructor's test cell, as the judge gets it (the zygote gets only its id)."""

    id: str
    source: str
    points: float


class TaskFrame(TypedDict, total=False):
    """One notebook to grade. ``items``: ``["cell", index, source]`` and ``["test", k, ...]`` in
    notebook order; ``files``: ``[name, base64]``."""

    id: str
    items: list
    tests: list[TestSpec]
    files: list
    limits: LimitsFrame
    imports: list[str]
    exports: list[str]  # builtin names the assignment asks the student to define
    written: str | None  # when to take the files the notebook wrote: "end", "before-tests", None
    # the judge's run after one kernel's (autograder grade): the tests one kernel ran past the
    # time limit on, which the judge runs under a shorter one (host.supervisor.after_kernel_limit)
    kernel_timeouts: list[int]


class TestResult(TypedDict, total=False):
    """One test's verdict (status None, or why the test could not count)."""

    passed: bool
    partial: float | None
    error: str | None
    message: str | None
    status: str | None
    output: str | None
    seconds: float | None


class ResultFrame(TypedDict, total=False):
    """What grading one task returns."""

    cells: list
    tests: list[TestResult]
    main: Any
    garbled: bool
    restored: list[str]
    seconds: float
    error: str
    needs_kernel: (
        str  # why the judge could not carry the notebook (its later verdicts: not confirmed)
    )
    invariant: list  # the judge's checks after each call: [count, seconds]
    written: list  # files the notebook wrote, [name, base64] (checked: supervisor.written_files)
