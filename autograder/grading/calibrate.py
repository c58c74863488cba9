"""Calibrate on the source: which test cells get two verdicts, which one kernel's alone.

Every notebook is graded twice (:mod:`.verdicts`): in one kernel - the student's cells and the
source's test cells in notebook order in one IPython shell in the sandbox
(:func:`kernel_task`), scored by nbgrader's own :func:`nbgrader.utils.determine_grade` from
what the process reports as untrusted data (:func:`kernel_result`) - and in the judge.

Before a class is graded, each notebook's source (the instructor's solution) is graded both
ways. A test cell the solution does not pass even in one kernel is graded by one kernel alone, as
stock grades it (a cell that does not compile: 0 for everyone, as under stock). A test cell the judge cannot run (IPython magics, ``!``, ``get_ipython()``,
``display()``, ``globals()``, ``exec``/``eval``: :func:`.config.judge_cannot_run`), or whose
solution the judge does not give full marks, is graded by one kernel alone for every student
(status ``in-kernel``): decided here, on the source, never by a submission. A notebook with no
test cell left for the judge is not run in the judge at all. Results: printed once per
assignment, and written to ``OUT/calibration.txt``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from autograder.grading.status import OF_CELL
from autograder.grading.verdicts import DEFAULT_COUNTS, merge, not_confirmed
from autograder.wire.types import Limits

SOURCE_STUDENT = "instructor-source"
KERNEL = "in-kernel"
JUDGE = "judge"
REFUSED = "refused"
KERNEL_RUN, JUDGE_RUN = "kernel", "judge"  # the two runs of every notebook (grading.verdicts)


@dataclass
class NotebookMode:
    assignment: str
    notebook: str
    n_tests: int
    mode: str = JUDGE
    reasons: dict = field(default_factory=dict)  # grade_id -> why the judge does not grade it
    problems: list = field(
        default_factory=list
    )  # why the notebook cannot be graded in one kernel either
    broken: dict = field(default_factory=dict)  # grade_id -> why no kernel runs it (0 for all)
    grade_ids: list = field(default_factory=list)  # the notebook's test cells, in order

    def decide(self) -> None:
        """JUDGE while some test cell that compiles is the judge's; KERNEL when none is."""
        judged = [
            gid for gid in self.grade_ids if gid not in self.reasons and gid not in self.broken
        ]
        self.mode = JUDGE if judged else KERNEL

    def lines(self) -> list[str]:
        head = f"{self.assignment}/{self.notebook}: "
        # a test cell no kernel runs scores 0 for every student, as under stock nbgrader
        broken = [
            f"  {gid}: the test cell does not compile ({why}): it fails for every student, the "
            "solution too, as under stock nbgrader"
            for gid, why in self.broken.items()
        ]
        if self.mode == REFUSED:
            return (
                [head + "refused: in one kernel the solution does not get full marks:"]
                + [f"  {p}" for p in self.problems]
                + broken
            )
        n = self.n_tests - len(self.broken)
        if not self.reasons:
            return [
                head + f"two verdicts: the solution gets full marks in one kernel and in the judge "
                f"on all {n} test cells" + (" that compile" if broken else "")
            ] + broken
        judged = n - len(self.reasons)
        if not judged:
            out = [
                head
                + f"one kernel alone on all {n} test cells (status in-kernel, stock nbgrader's "
                "verdict): the judge grades none of them:"
            ]
            out += [f"  {gid}: {why}" for gid, why in self.reasons.items()]
            return out + broken
        out = [
            head
            + f"two verdicts on {judged} of {n} test cells; one kernel alone (status in-kernel, "
            "stock nbgrader's verdict) on these, which the judge does not grade:"
        ]
        out += [f"  {gid}: {why}" for gid, why in self.reasons.items()]
        return out + broken


def source_submission(source_nb):
    """The instructor's source notebook as a submission (its solution cells as the student's)."""
    from autograder.grading.intake.collect import Submission, _extra_files, plan

    items, layout = plan(source_nb, source_nb.nb)
    return Submission(
        SOURCE_STUDENT,
        source_nb.assignment,
        source_nb.name,
        source_nb.path,
        source_nb,
        nb=source_nb.nb,
        items=items,
        layout=layout,
        files=_extra_files(source_nb.path.parent),
    )


def _test_cell_index(sub) -> dict:
    """``{k: cell index}``: the index each test cell of ``sub``'s plan runs as in one kernel's
    run, numbered after the student's cells in the order they run (cell indices are contiguous:
    a test the plan leaves out, status not-in-notebook, takes none)."""
    base = sum(1 for item in sub.items if item[0] == "cell")
    ks = [item[1] for item in sub.items if item[0] == "test"]
    return {k: base + j for j, k in enumerate(ks)}


def kernel_task(sub, task: dict) -> dict:
    """``task`` with every test cell run in the student process, in place, as one kernel runs it."""
    index = _test_cell_index(sub)
    items = []
    for item in task["items"]:
        if item[0] == "test":
            k = item[1]
            items.append(["cell", index[k], sub.source.tests[k].source, "test"])
        else:
            items.append(item)
    return dict(task, items=items, tests=[])


def kernel_result(sub, result):
    """A result of :func:`kernel_task` in the shape the judge's gives: the test cells' outcomes
    scored by nbgrader's rules, the student's cells alone in ``cells``."""
    if not isinstance(result, dict):
        return result
    base = sum(1 for item in sub.items if item[0] == "cell")
    index = _test_cell_index(sub)
    cells = [c for c in result.get("cells", []) if isinstance(c, dict)]
    by_index = {c.get("index"): c for c in cells}
    tests = [
        _verdict(test, by_index.get(index.get(k, -1))) for k, test in enumerate(sub.source.tests)
    ]
    return dict(
        result,
        cells=[c for c in cells if isinstance(c.get("index"), int) and c["index"] < base],
        tests=tests,
    )


def _verdict(test, c) -> dict:
    """One test cell's outcome (untrusted data from the student's process) scored as nbgrader scores it."""
    from nbformat.v4 import new_code_cell, new_output
    from nbgrader.utils import determine_grade

    if not c or c.get("status") == "not-run":
        return {"passed": False, "status": "not-run"}
    output = c.get("output") if isinstance(c.get("output"), str) else ""
    status = c.get("status")
    if status in OF_CELL:
        return {
            "passed": False,
            "status": OF_CELL[status],
            "output": output,
            "message": {
                "timeout": "the test ran past the time limit and was interrupted",
                "died": "the notebook's process died during the test",
            }.get(status, "")
            or (c.get("error") or "")[:1500],
        }
    error = c.get("error") if isinstance(c.get("error"), str) else None
    value = c.get("value") if isinstance(c.get("value"), str) else None
    outputs = []
    if c.get("stderr") is True:
        outputs.append(new_output("stream", name="stderr", text="(stderr)"))
    if error is None and value is not None:
        outputs.append(new_output("execute_result", data={"text/plain": value}, execution_count=1))
    if error is not None:
        outputs.append(
            new_output("error", ename=error.split(":")[0][:200], evalue=error, traceback=[])
        )
    cell = new_code_cell(
        "",
        outputs=outputs,
        metadata={
            "nbgrader": {
                "grade": True,
                "solution": False,
                "points": test.points,
                "grade_id": test.grade_id,
            }
        },
    )
    try:
        score, _ = determine_grade(cell)
    except (
        ValueError
    ):  # partial credit above the points (nbgrader stops there): the points, as the judge
        score = test.points
    except KeyError:  # an empty text/plain: no partial credit to read
        score = test.points
    score = float(score)
    if error is not None:
        return {
            "passed": False,
            "error": error.split(":")[0][:200],
            "message": error[:1500].rstrip().rstrip(":"),
            "output": output,
        }
    if c.get("stderr") is True and score == 0:
        return {
            "passed": False,
            "error": "",
            "output": output,
            "message": "the test wrote to stderr (nbgrader scores that as a failure)",
        }
    return {"passed": True, "partial": None if score >= test.points else score, "output": output}


class Calibration:
    """Which test cells the judge grades beside one kernel, which one kernel alone, which
    assignments are refused; and each notebook's tasks and merged rows (:mod:`.verdicts`)."""

    def __init__(self, course, cache=None):
        self.course = course
        self.cache = cache  # a CalibrationCache, or None: calibrate every time
        self.modes: dict = {}  # (assignment, notebook) -> NotebookMode
        self.seconds = 0.0  # wall time of calibrating (includes waiting for the sandboxes to start)
        self.grading = []  # per round, the source notebooks' grading time in the sandboxes, summed
        self.cached: list = []  # the assignments whose calibration came from the cache

    @property
    def counts(self) -> str:
        return getattr(self.course.config, "counts", DEFAULT_COUNTS)

    # -- what the grading pipeline asks ---------------------------------------------
    def mode(self, sub) -> str:
        m = self.modes.get((sub.assignment, sub.notebook))
        return m.mode if m is not None else JUDGE

    def kernel_only(self, sub) -> dict:
        """``{grade_id: why}``: the test cells of ``sub``'s notebook the judge does not grade."""
        m = self.modes.get((sub.assignment, sub.notebook))
        return dict(m.reasons) if m is not None else {}

    def tasks(self, sub, limits, imports) -> dict:
        """The runs of one notebook: ``{"kernel": task}`` (stock's verdict) and, unless no test
        cell of it is the judge's, ``{"judge": task}``."""
        from autograder.grading.intake.collect import assignment_files

        # the notebook runs next to the files stock lays beside it: the student's, the source's
        task = dict(sub.task(limits, imports), files=assignment_files(self.course.config, sub))
        judged = self.mode(sub) != KERNEL
        # the files the notebook writes, for autograded/: from a run where no hidden test ran
        # beside student code (the judge's), or else one kernel's, before its first test cell
        out = {
            KERNEL_RUN: kernel_task(
                sub,
                dict(task, id=f"{sub.key}#kernel", written=None if judged else "before-tests"),
            )
        }
        if judged:
            out[JUDGE_RUN] = dict(task, written="end")
        return out

    def after_kernel(self, sub, judge_task: dict, kernel) -> dict:
        """``judge_task`` (from :meth:`tasks`) to run after one kernel's run of ``sub`` gave
        ``kernel`` (its result, or None): the tests one kernel ran past the time limit on are
        marked (``kernel_timeouts``): the judge runs them under a shorter limit
        (:func:`autograder.grading.host.supervisor.after_kernel_limit`). No score changes: one
        kernel's counts by default, and its 0 stands; the judge's verdict there can only reveal a
        difference, which a shorter run still reveals unless the test needs longer. Untrusted
        data (the student's process) can only shorten the judge's runs of its own tests."""
        if not isinstance(kernel, dict) or self.mode(sub) == KERNEL:
            return judge_task
        tests = kernel_result(sub, kernel).get("tests")
        ks = [
            k
            for k, t in enumerate(tests if isinstance(tests, list) else ())
            if isinstance(t, dict) and t.get("status") == "timeout"
        ]
        return dict(judge_task, kernel_timeouts=ks) if ks else judge_task

    def rows(self, sub, runs: dict):
        """``(rows, shown)``: the merged rows of one notebook (``runs``: run -> ``(result,
        error)``, the runs of :meth:`tasks`), and the result whose cells a student may see (the
        judge's run: no test ran in that process; without one, one kernel's cells before the
        first test)."""
        from autograder.grading.results.report import rows_for

        if sub.status:
            rows = rows_for(sub, None, None)
            return rows, None
        error = run_error(runs)
        results = {kind: result for kind, (result, _) in runs.items()}
        kernel = results.get(KERNEL_RUN)
        judge = results.get(JUDGE_RUN) if self.mode(sub) != KERNEL else None
        if error is not None or kernel is None or (self.mode(sub) != KERNEL and judge is None):
            return rows_for(sub, None, error or "a run gave no result"), None
        kernel = kernel_result(sub, kernel)
        krows = rows_for(sub, kernel, None)
        if judge is None:
            return merge(krows, None, self.counts), _before_first_test(sub, kernel)
        judge, unconfirmable = not_confirmed(judge)
        jrows = rows_for(sub, judge, None)
        rows = merge(krows, jrows, self.counts, self.kernel_only(sub), unconfirmable)
        return rows, judge

    @property
    def refused(self) -> dict:
        out: dict = {}
        for m in self.modes.values():
            if m.mode == REFUSED:
                out.setdefault(m.assignment, []).extend(
                    [f"{m.notebook}: in one kernel: {p}" for p in m.problems]
                )
        return out

    def lines(self) -> list[str]:
        return [line for key in sorted(self.modes) for line in self.modes[key].lines()]

    # -- calibrating -----------------------------------------------------------------
    def calibrate(self, assignments, run, limits, imports) -> Calibration:
        """Grade every source notebook of ``assignments`` both ways; ``run(tasks, on_result)``
        grades tasks (the pool that grades the class). A test cell the solution does not pass in
        one kernel, or in the judge, is graded in one kernel alone (for every student: decided
        here, on the source), as stock grades it."""
        from autograder.grading.config import does_not_compile, judge_cannot_run

        started = time.monotonic()
        # calibration asks "does the judge grade the solution right?", not "is it fast enough?": a tight
        # --wall-limit or --timeout for the class must not send a cell to one kernel
        limits = Limits.of(limits)
        limits = limits.replace(
            wall=max(float(limits.wall), 600.0), timeout=max(float(limits.timeout), 120.0)
        )
        keys = {}
        if self.cache is not None:
            for a in assignments:
                keys[a] = self.cache.key(self.course, a, limits, imports)
                modes = self.cache.load(keys[a])
                if modes is not None:
                    self.modes.update({(m.assignment, m.notebook): m for m in modes})
                    self.cached.append(a)
            assignments = [a for a in assignments if a not in self.cached]
        first = []
        for a in assignments:
            for nb in self.course.notebooks(a):
                m = NotebookMode(
                    a,
                    nb.name,
                    len(nb.tests),
                    reasons=judge_cannot_run(nb),
                    broken=does_not_compile(nb),
                    grade_ids=[t.grade_id for t in nb.tests],
                )
                self.modes[(a, nb.name)] = m
                if not nb.tests:
                    continue
                if getattr(self.course.config, "mode", "judge") == "kernel":
                    m.reasons = {
                        t.grade_id: "the course's AutograderGrade.mode is 'kernel'"
                        for t in nb.tests
                    }
                m.decide()
                first.append(source_submission(nb))
        for sub, rows in self._grade(first, run, limits, imports):
            m = self.modes[(sub.assignment, sub.notebook)]
            for r in rows:
                if r.grade_id in m.broken:
                    continue
                if _kernel_score(r) < r.max_score:
                    # stock grades such a cell all the same (nbgrader's own test courses have
                    # answers that fail their tests): one kernel's verdict is stock's by
                    # construction, and the judge cannot be checked against the solution here, so
                    # one kernel grades it alone, saying why (issue 36: no longer refused)
                    m.reasons[r.grade_id] = (
                        "the solution does not get full marks on it even in one kernel ("
                        + _why(r, "")
                        + "): graded as stock grades it"
                    )
                elif r.grade_id not in m.reasons and _judge_short(r):
                    m.reasons[r.grade_id] = "the solution " + _why_judge(r)
            m.decide()
        if self.cache is not None:
            for a in assignments:
                self.cache.store(keys[a], [m for (x, _), m in self.modes.items() if x == a])
        self.seconds = time.monotonic() - started
        return self

    def _grade(self, subs, run, limits, imports):
        if not subs:
            return []
        by_key = {s.key: s for s in subs}
        got: dict = {}
        tasks = []
        for s in subs:
            for kind, task in self.tasks(s, limits, imports).items():
                tasks.append(((s.key, kind), task))

        def on_result(key, result, error):
            got.setdefault(key[0], {})[key[1]] = (result, error)

        run(tasks, on_result)
        out = []
        self.grading.append(
            sum((r[0] or {}).get("seconds", 0.0) for runs in got.values() for r in runs.values())
        )
        for key, sub in by_key.items():
            rows, _ = self.rows(sub, got.get(key, {}))
            out.append((sub, rows))
        return out


def run_error(runs: dict) -> str | None:
    """The grader's failure on either run of a notebook (``runs``: run -> ``(result, error)``)."""
    return next((error for _, error in runs.values() if error), None)


def _kernel_score(row) -> float:
    if row.kernel_score is not None:
        return row.kernel_score
    return row.score if row.status in ("ok", KERNEL) else -1.0


def _judge_short(row) -> bool:
    """Whether the judge did not give the solution what one kernel gave it (full marks)."""
    return row.judge_score is not None and (
        row.judge_score < row.max_score or row.judge_status != "ok"
    )


def _why_judge(row) -> str:
    text = f"scores {row.judge_score:g} / {row.max_score:g} in the judge"
    if row.judge_status not in ("ok", ""):
        text += f" (status {row.judge_status})"
    if row.judge_reason:
        text += f": {row.judge_reason.splitlines()[0][:300]}"
    return text


def _before_first_test(sub, result):
    """One kernel's result with the outputs of every student cell after the first test cell
    dropped: a hidden test ran in that process before them (only its pass/fail leaves)."""
    if not isinstance(result, dict):
        return result
    first = next((i for i, item in enumerate(sub.items) if item[0] == "test"), len(sub.items))
    before = {item[1] for item in sub.items[:first] if item[0] == "cell"}
    cells = []
    for c in result.get("cells", []):
        if isinstance(c, dict) and c.get("index") not in before:
            c = {k: v for k, v in c.items() if k in ("index", "status")}
        cells.append(c)
    return dict(result, cells=cells, tests=[{} for _ in result.get("tests", [])])


def _why(row, where) -> str:
    text = f"scores {row.score:g} / {row.max_score:g}" + (f" {where}" if where else "")
    if row.status not in ("ok", KERNEL):
        text += f" (status {row.status})"
    first = (row.message or "").strip().splitlines()
    if first:
        text += f": {first[0][:300]}"
    return text


class CalibrationCache:
    """Calibrations kept across runs, one file per assignment, under ``folder`` (default
    ``$XDG_CACHE_HOME/autograder/calibration``, else ``~/.cache/autograder/calibration``; the
    setting ``AUTOGRADER_CACHE`` moves it). Safe to keep there: the folder is the instructor's
    (created 0700; a file in it is used only if the instructor owns it and no one else can write
    it), it is never inside a sandbox (a sandbox sees no home folder), and a file is only ever
    written from the host's own calibration of the *source* notebooks.

    A file is named by the key of everything calibration depends on (:meth:`key`): the grader's
    version (the hash of the ``autograder`` package's source), Python's and the grading
    libraries' versions, and for each source notebook of the assignment the whole task the
    sandbox grades (its cells, tests, files beside it, limits, preloads). Change any of them and
    the assignment is calibrated again."""

    LIBRARIES = ("torch", "numpy", "nbgrader", "ipython", "nbformat", "matplotlib", "psutil")

    def __init__(self, folder=None, options=None):
        import os
        from pathlib import Path

        if folder is None:
            env = os.environ.get("AUTOGRADER_CACHE")
            base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
            folder = Path(env) if env else Path(base) / "autograder" / "calibration"
        self.folder = Path(folder)
        self.options = options

    @staticmethod
    def grader_version() -> str:
        import hashlib
        import sys
        from importlib import metadata
        from pathlib import Path

        import autograder

        h = hashlib.sha256(sys.version.encode())
        root = Path(autograder.__file__).resolve().parent
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
        for name in CalibrationCache.LIBRARIES:
            try:
                h.update(f"{name}={metadata.version(name)}".encode())
            except metadata.PackageNotFoundError:
                h.update(f"{name}=none".encode())
        return h.hexdigest()

    def key(self, course, assignment, limits, imports) -> str:
        import hashlib
        import json

        h = hashlib.sha256(_version().encode())
        opts = self.options
        h.update(
            json.dumps(
                [
                    getattr(opts, "sandbox", True),
                    getattr(opts, "memory_limit", None),
                    sorted(getattr(opts, "preload", []) or []),
                    # the course's AutograderGrade.mode decides every cell's mode (a cache made
                    # with two verdicts must not answer for "kernel", nor the reverse)
                    getattr(course.config, "mode", "judge"),
                ]
            ).encode()
        )
        for nb in course.notebooks(assignment):
            task = source_submission(nb).task(limits, imports) if nb.tests else {"tests": []}
            task.pop("id", None)
            h.update(json.dumps([nb.name, task], sort_keys=True, default=str).encode())
        return f"{assignment}-{h.hexdigest()[:32]}"

    def load_preload(self, course_root) -> list | None:
        """The modules the sandboxes preloaded for this course last time: a run starts its
        sandboxes with them before it reads the course (nbgrader's configuration and the notebooks
        take seconds); if the course now needs others, the sandboxes start again."""
        data = self._read(f"preload-{_digest(str(course_root))}")
        if isinstance(data, dict) and isinstance(data.get("preload"), list):
            if all(isinstance(m, str) for m in data["preload"]):
                return data["preload"]
        return None

    def store_preload(self, course_root, preload) -> None:
        self._write(f"preload-{_digest(str(course_root))}", {"preload": list(preload)})

    def load(self, key) -> list | None:
        data = self._read(key)
        try:
            return [NotebookMode(**m) for m in data["modes"]]
        except (TypeError, KeyError):
            return None

    def store(self, key, modes) -> None:
        import dataclasses

        self._write(key, {"modes": [dataclasses.asdict(m) for m in modes]})

    def _read(self, key):
        import json
        import os

        path = self.folder / f"{key}.json"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if info.st_uid != os.getuid() or info.st_mode & 0o022:
                return None  # not the instructor's own, or writable by others: not trusted
            with os.fdopen(fd, "rb", closefd=False) as fh:
                return json.loads(fh.read(1 << 20))
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)

    def _write(self, key, data) -> None:
        import json
        import os
        import tempfile

        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.folder / f"{key}.json")
        except OSError:
            pass  # no cache: the next run calibrates again


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:32]


_VERSION: list = []


def _version() -> str:
    """:meth:`CalibrationCache.grader_version`, once per process."""
    if not _VERSION:
        _VERSION.append(CalibrationCache.grader_version())
    return _VERSION[0]
