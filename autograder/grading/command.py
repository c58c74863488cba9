"""``autograder grade``: grade every submission of the course, fast, sandboxed, with honest statuses.

    autograder grade [SUBMISSIONS] --out OUT [--jobs N] [--timeout S] [--memory-limit SIZE]
                     [--scheduler ADDRESS]

SUBMISSIONS holds ``<student>/<assignment>/<notebook>.ipynb`` (nbgrader's ``submitted/``
layout; default: the course's ``submitted/``). Writes ``OUT/grades.csv`` (one row per
student, assignment, notebook and graded test cell), ``OUT/feedback/<student>/<assignment>/``
and records the scores in the course's nbgrader gradebook (``nbgrader export``, formgrader),
with the autograded notebooks under the course's ``autograded/``. Exit status: 0 every
notebook was graded; 2 nothing was graded (no sandbox, no submissions folder, a bad option);
3 the grader failed on some notebooks (status ``grader-error``); 4 some assignments or
submissions were refused and every other one was graded (an assignment: what it uses cannot be
graded as nbgrader would; a submission: an unreadable ``timestamp.txt``, a student folder that
is not a usable id, a student the gradebook lacks under ``Autograde.create_student = False``;
each named on stderr, nothing written for it; stock ``nbgrader autograde`` exits 1 for either).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

from autograder.grading import STATUSES
from autograder.wire.types import MEMORY_LIMIT, Limits, Options

_DEFAULT = Limits()


def _size(n: int) -> str:
    """``2G``, ``32M``: a size as the command line writes it."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def add_parser(subparsers):
    p = subparsers.add_parser(
        "grade",
        help="grade submitted notebooks (sandboxed, parallel) into grades.csv, feedback and the gradebook",
        description=__doc__.split("\n\n")[0]
        + "\n\nstatuses:\n"
        + "\n".join(f"  {k:<17}{v}" for k, v in STATUSES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "submissions",
        nargs="?",
        type=Path,
        help="folder of <student>/<assignment>/<notebook>.ipynb (default: COURSE/submitted)",
    )
    p.add_argument("--out", required=True, type=Path, help="folder for grades.csv and feedback/")
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="sandboxes grading in parallel on this machine, at most: another starts only while "
        "more than 6 tasks per running sandbox wait (default: number of CPUs)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per code cell and per test cell (default: the course's Execute.timeout, "
        "as nbgrader autograde; 120 in this course)",
    )
    p.add_argument(
        "--memory-limit",
        default=_size(MEMORY_LIMIT),
        help="memory a submission may use beyond the warm Python with torch, e.g. 512M, 2G "
        f"(default {_size(MEMORY_LIMIT)})",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="grade on a Dask distributed cluster (e.g. tcp://10.0.0.5:8786) instead of --jobs",
    )
    p.add_argument(
        "--wall-limit",
        type=float,
        default=_DEFAULT.wall,
        help=f"seconds for a whole notebook, cells and tests together (default {_DEFAULT.wall:g})",
    )
    p.add_argument(
        "--output-limit",
        default=_size(_DEFAULT.output),
        help="bytes of output (prints) per cell, and per test's calls into student code, "
        f"e.g. {_size(_DEFAULT.output)} (default); the output kept in the feedback is shorter",
    )
    p.add_argument(
        "--file-size-limit",
        default=_size(_DEFAULT.file_size),
        help="largest file a submission may write (a compiler's temporary files, a saved model), "
        f"e.g. {_size(_DEFAULT.file_size)} (default)",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=_DEFAULT.processes,
        help=f"processes a submission may start (default {_DEFAULT.processes})",
    )
    p.add_argument(
        "--course",
        type=Path,
        default=None,
        help="nbgrader course folder: its nbgrader_config.py is read as nbgrader autograde reads it "
        "(default: the current folder, like nbgrader)",
    )
    p.add_argument(
        "--assignment",
        action="append",
        default=None,
        metavar="NAME",
        help="grade only this assignment (repeatable; default: every assignment submitted)",
    )
    p.add_argument(
        "--student",
        action="append",
        default=None,
        metavar="ID",
        help="grade only the students whose id matches this glob pattern, as nbgrader's --student "
        "(repeatable; default: every student)",
    )
    p.add_argument(
        "--notebook",
        action="append",
        default=None,
        metavar="NAME",
        help="grade only the notebooks whose name matches this glob pattern, as nbgrader's "
        "--notebook (repeatable; default: every notebook)",
    )
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="grade again a submission autograded before (nbgrader's flag; without it, as "
        "nbgrader, a student's assignment with a folder in autograded/ is skipped unless its "
        "timestamp.txt is newer than the autograded copy's)",
    )
    p.add_argument(
        "--no-gradebook",
        action="store_true",
        help="do not write the nbgrader gradebook and autograded/ notebooks",
    )
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run without bubblewrap: NO isolation (student code runs with your rights); "
        "for machines where user namespaces are not allowed",
    )
    p.add_argument(
        "--no-calibration-cache",
        action="store_true",
        help="calibrate every assignment again (default: reuse a calibration of the same source "
        "notebooks by the same grader, kept in ~/.cache/autograder/calibration or $AUTOGRADER_CACHE)",
    )
    p.add_argument(
        "--no-execute",
        action="store_true",
        help="nbgrader's flag, refused: a notebook is always run (scores taken from the outputs "
        "saved in a student's file would be whatever the file says)",
    )
    p.add_argument(
        "--timings",
        type=Path,
        metavar="FILE",
        help="write where the time went to this JSON file: each notebook's runs (one kernel's, "
        "the judge's) with their sandbox seconds and timeouts, and the gradebook's writes "
        "(make bench-scale reads it)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run, nbgrader_options=[])
    p.epilog = (
        "nbgrader's --Class.trait=value options (e.g. --Execute.timeout=60, "
        "--CourseDirectory.student_id_exclude=bob) are read as nbgrader autograde reads them, "
        "over the course's nbgrader_config.py."
    )
    return p


def _unknown_students_refused(subs, config):
    """``Autograde.create_student = False``: a student the gradebook does not know is not graded,
    as nbgrader autograde refuses it ("No student with ID ... exists in the database")."""
    from nbgrader.api import Gradebook

    with Gradebook(config.gradebook_url, config.course_id) as gb:
        known = {s.id for s in gb.students}
    for sub in subs:
        if sub.student not in known and sub.status != "refused":
            sub.status = "refused"
            sub.message = (
                f"no student with ID {sub.student!r} in the gradebook, and the course's "
                "Autograde.create_student is False: not graded (nbgrader autograde refuses it too)"
            )
    return subs


def _course_root(arg):
    return (arg if arg is not None else Path.cwd()).resolve()


def run(args) -> int:
    """The grade run, as its steps (each a method of :class:`GradeRun`, in this order)."""
    if getattr(args, "no_execute", False):
        print(
            "autograder grade: --no-execute is not supported: every notebook is run (scores "
            "taken from the outputs saved in a student's file would be whatever the file says); "
            "use nbgrader autograde --no-execute",
            file=sys.stderr,
        )
        return 2
    grade = GradeRun(args)
    try:
        return _steps(grade)
    finally:
        grade.close()  # the sandboxes (or the Dask client) go, whatever happened


def _steps(grade) -> int:
    from autograder.grading.host.sandbox import SandboxError, WorkerFailure

    grade.start_early()  # a course graded before: its sandboxes start before anything is read
    try:
        grade.read_settings()  # the course's config, the limits and options
        grade.check_sandbox()  # bubblewrap works here (or --no-sandbox, said loudly)
        grade.make_output()  # OUT, and the options every sandbox and judge starts with
        grade.start_sandboxes()  # they warm up while the submissions are read
        grade.collect()  # intake: <student>/<assignment>/<notebook>.ipynb
        grade.calibrate()  # the sources first: judge, one kernel, or refused
        grade.refuse()  # what cannot be graded as nbgrader would, named on stderr
    except (SandboxError, FileNotFoundError, ValueError, WorkerFailure) as exc:
        print(f"autograder grade: {exc}", file=sys.stderr)
        return 2
    grade.open_gradebook()  # every notebook registered before any score
    grade.startup = time.monotonic() - grade.started
    try:
        grade.grade()  # every task, in the sandboxes; feedback as results arrive
    except WorkerFailure as exc:
        print(f"autograder grade: the sandbox could not start:\n{exc}", file=sys.stderr)
        return 2
    grade.write_reports()  # grades.csv, the summary, review.txt
    grade.write_timings()  # --timings FILE
    return grade.exit_status()


def _printable(text: str) -> str:
    """``text`` for a terminal: a folder name is the student's to choose, so each character that
    is not printable (a newline, an escape sequence) is written as Python writes it (``\\n``,
    ``\\x1b``); the rest, an id intake has escaped already among it, as it is."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _whole_notebook(path: Path) -> bool:
    """``path`` is a notebook written to its end (JSON with its cells), as every autograded
    notebook of a finished run is: this grader writes each to a temporary file and renames it."""
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("cells"), list)


def _autograded_before(subs, config, force: bool, whole: bool):
    """The submissions to grade, as nbgrader's ``init_destination`` (converters/base.py) decides
    per student and assignment, with what it removes first (``autograded/<student>/<assignment>``:
    ``dest``): graded when ``dest`` is missing (with ``--notebook``: when a selected notebook is
    missing there); else with ``--force``, after removing ``dest`` (with ``--notebook``: the
    selected notebooks in it); else when the submission's ``timestamp.txt`` is newer than
    ``dest``'s, after the same removal; else skipped, and said so. A refused submission is kept
    (its rows say why). One addition, for a run that was stopped (``kill -9``, a reboot: nbgrader
    #1456): a ``dest`` holding a graded notebook cut short (not :func:`_whole_notebook`) was left
    by a run stopped while writing it, so the submission is graded again (``dest`` removed
    first), and said so; stock would skip it. A notebook *missing* from ``dest`` keeps stock's
    meaning (nbgrader's test_filter_notebook: removed by hand, not graded again): this grader
    makes ``dest`` only once every notebook of the submission is graded and recorded
    (:meth:`GradeRun.finish`), so a stopped run never leaves a submission's notebooks half graded
    behind an existing ``dest`` (tests/test_resume.py). nbgrader's own tests
    (tests/test_nbgrader_suite.py: test_force, test_filter_notebook, test_update_newer ...) pin
    each branch."""
    import shutil

    from autograder.grading.intake.collect import read_timestamp

    groups: dict = {}
    for s in subs:
        groups.setdefault((s.student, s.assignment), []).append(s)
    keep, skipped, resumed = [], [], []
    for (student, assignment), group in groups.items():
        dest = Path(config.autograded) / student / assignment
        present = [s for s in group if s.status is None]
        if any(s.status == "refused" for s in group) or not dest.is_dir():
            keep += group
            continue
        files = [dest / f"{s.notebook}.ipynb" for s in present]
        if not whole and not all(_whole_notebook(f) for f in files):
            keep += group
            continue
        if whole and any(f.exists() and not _whole_notebook(f) for f in files):
            shutil.rmtree(dest)  # a stopped run left a notebook cut short: grade it all again
            resumed.append(f"{student}/{assignment}")
            keep += group
            continue
        newer = False
        if not force:
            new = next((s.timestamp for s in group if s.timestamp is not None), None)
            old = read_timestamp(dest)[0]
            newer = new is not None and old is not None and new > old
        if force or newer:
            if whole:
                shutil.rmtree(dest)
            else:
                for f in files:
                    f.unlink(missing_ok=True)
            keep += group
        else:
            skipped.append(f"{student}/{assignment}")
    for keys, what in (
        (resumed, "grading again {n} submission(s) whose autograded/ folder holds a notebook cut "
         "short (a stopped run's)"),
        (skipped, "skipping {n} submission(s) autograded before (their autograded/ folder exists "
         "and timestamp.txt is not newer; --force grades them again)"),
    ):  # fmt: skip
        if keys:
            names = ", ".join(_printable(k) for k in sorted(keys)[:20])
            more = " ..." if len(keys) > 20 else ""
            print(f"{what.format(n=len(keys))}: {names}{more}", file=sys.stderr)
    return keep


class GradeRun:
    """One ``autograder grade``: what its steps share."""

    def __init__(self, args):
        self.args = args
        self.started = time.monotonic()
        self.course = self.submissions_dir = self.out = None
        self.limits: Limits | None = None
        self.memory: int | None = None
        self.options: Options | None = None
        self.imports: list[str] = []
        self.pool = None
        self.subs: list = []
        self.done_before = 0  # notebooks a run before this one graded (the bar counts from there)
        self.unfinished: collections.Counter = collections.Counter()  # (student, assignment) -> n
        self.to_write: dict = {}  # (student, assignment) -> graded notebooks not yet in autograded/
        self.refused: dict = {}
        self.calibration = None
        self.writer = None
        self.rows: list = []
        self.errors: list = []
        self.jobs_text = ""
        self.startup = 0.0  # seconds before the first notebook could be graded: the gradebook
        # open and a sandbox ready (warm, its judge too)
        self.dropped: dict = {}  # key -> test-owned names the student's code wrote (dropped)
        self.invariant = [0, 0.0]  # the judge's checks after each call: count, seconds
        self.timings: list = []  # --timings: [student, assignment, notebook, run, s, timeouts]
        self.settled: dict = {}  # OUT/settled.csv (verdicts.settled)
        self.graded: list = []  # (student, assignment, notebook) of every notebook graded
        self.refused_subs: list = []  # (student, assignment, notebook) of every one refused

    # -- before grading --------------------------------------------------------------
    def read_settings(self):
        from autograder.grading.host.sandbox import parse_size
        from autograder.grading.intake.collect import Course

        args = self.args
        self.course = course = Course(
            _course_root(args.course), options=getattr(args, "nbgrader_options", None) or ()
        )
        from autograder.grading.nbsettings import enforce

        enforce(course.config, lambda line: print(f"autograder grade: {line}", file=sys.stderr))
        # nbgrader's CourseDirectory.assignment_id / student_id / notebook_id, Autograde.force
        # (its assignment argument, --student, --notebook, --force): the flags win
        cfg = course.config
        if cfg.assignment_id and not args.assignment:
            args.assignment = [cfg.assignment_id]
        if cfg.student_id != "*" and not args.student:
            args.student = [cfg.student_id]
        if cfg.notebook_id != "*" and not args.notebook:
            args.notebook = [cfg.notebook_id]
        args.force = bool(args.force or cfg.force)
        self.submissions_dir = (args.submissions or course.config.submitted).resolve()
        timeout = args.timeout if args.timeout is not None else (course.config.timeout or 600.0)
        self.limits = Limits(
            timeout=float(timeout),
            wall=float(args.wall_limit),
            output=parse_size(args.output_limit),
            file_size=parse_size(args.file_size_limit),
            processes=int(args.processes),
        )
        self.memory = (
            parse_size(args.memory_limit)
            if str(args.memory_limit).lower() not in ("0", "none")
            else None
        )

    def check_sandbox(self):
        from autograder.grading.host.sandbox import check_sandbox

        if self.args.no_sandbox:
            print(
                "WARNING: --no-sandbox: student code runs with your rights, can read solutions/ and "
                "the gradebook, write anywhere you can, use the network, and leave processes behind.",
                file=sys.stderr,
            )
        elif not self.args.scheduler:
            check_sandbox()
        if not self.submissions_dir.is_dir():
            raise FileNotFoundError(f"no submissions folder {self.submissions_dir}")

    def make_output(self):
        from autograder.grading.verdicts import settled

        self.out = self.args.out.resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.settled = settled(self.out)  # autograder settle's decisions of an earlier run
        self.imports = self.course.imports()
        self.options = Options(
            preload=self.imports,
            sandbox=not self.args.no_sandbox,
            memory_limit=self.memory,
            log_dir=str(self.out / "logs"),
        )

    def _cache(self):
        from autograder.grading.calibrate import CalibrationCache

        if getattr(self.args, "no_calibration_cache", False):
            return None
        return CalibrationCache()

    def start_early(self):
        """Start the sandboxes at once with the modules they preloaded last time for this course
        (the cache: :class:`~autograder.grading.calibrate.CalibrationCache`): they warm up while
        the course's configuration and the submissions are read. :meth:`start_sandboxes` keeps
        them if the course still needs exactly those, and starts others if not."""
        args = self.args
        cache = self._cache()
        if cache is None or args.scheduler or args.no_sandbox:
            return
        try:
            from autograder.grading.host.sandbox import parse_size

            preload = cache.load_preload(_course_root(args.course))
            if preload is None:
                return
            memory = (
                parse_size(args.memory_limit)
                if str(args.memory_limit).lower() not in ("0", "none")
                else None
            )
            options = Options(
                preload=preload,
                sandbox=True,
                memory_limit=memory,
                log_dir=str(args.out.resolve() / "logs"),
            )
            from autograder.grading.host.scheduler import LocalExecutor

            self.pool = LocalExecutor(args.jobs, options)
        except Exception:  # noqa: BLE001 - an early start is only a head start
            self.pool = None

    def start_sandboxes(self):
        from autograder.grading.host.scheduler import DaskExecutor, LocalExecutor

        if self.args.scheduler:
            self.pool = DaskExecutor(self.args.scheduler)
            return
        if self.pool is not None and self.pool.options != self.options:
            self.pool.shutdown()  # started early with last run's modules: the course needs others
            self.pool = None
        if self.pool is None:
            self.pool = LocalExecutor(self.args.jobs, self.options)
        cache = self._cache()
        if cache is not None and self.options.sandbox:
            cache.store_preload(_course_root(self.args.course), self.options.preload)

    def close(self):
        if self.pool is not None:
            pool, self.pool = self.pool, None
            pool.shutdown()

    def collect(self):
        from autograder.grading.intake.collect import find_submissions

        course, args = self.course, self.args
        subs = find_submissions(
            self.submissions_dir, course, warn=lambda m: print(m, file=sys.stderr)
        )
        if args.assignment:
            unknown = set(args.assignment) - set(course.assignments())
            if unknown:
                raise ValueError(f"no assignment {', '.join(sorted(unknown))} in {course.source}")
            subs = [s for s in subs if s.assignment in args.assignment]
        excluded = set(course.config.student_id_exclude)  # CourseDirectory.student_id_exclude
        if excluded:
            subs = [s for s in subs if s.student not in excluded]
        if not course.config.create_student:
            subs = _unknown_students_refused(subs, course.config)
        from fnmatch import fnmatchcase

        for flag, of in (("student", lambda s: s.student), ("notebook", lambda s: s.notebook)):
            patterns = getattr(args, flag, None)
            if patterns:
                subs = [s for s in subs if any(fnmatchcase(of(s), p) for p in patterns)]
                if not subs:
                    print(f"no submission matches --{flag} {' '.join(patterns)}", file=sys.stderr)
        if not args.no_gradebook:
            kept = _autograded_before(subs, course.config, args.force, whole=not args.notebook)
            self.done_before = len(subs) - len(kept)
            subs = kept
        self.subs = subs
        refused = {a: course.unsupported(a) for a in sorted({s.assignment for s in subs})}
        self.refused = {a: p for a, p in refused.items() if p}

    def calibrate(self):
        assignments = sorted({s.assignment for s in self.subs} - set(self.refused))
        self.calibration = _calibrate(
            self.course,
            assignments,
            self.args,
            self.pool,
            self.options,
            self.limits,
            self.imports,
            self.out,
        )
        self.refused.update(self.calibration.refused)

    def refuse(self):
        if self.refused:  # per assignment: the others are graded, and the exit status says so
            print(
                "autograder grade: refusing to grade, nothing was written for them: these assignments use what "
                "this grader cannot run the way nbgrader would (grade them with `nbgrader autograde`, or leave "
                "them out with --assignment):\n"
                + "\n".join(
                    f"  {a}: {p}" for a, problems in self.refused.items() for p in problems
                ),
                file=sys.stderr,
            )
            self.subs = [s for s in self.subs if s.assignment not in self.refused]

    def open_gradebook(self):
        if self.args.no_gradebook:
            return
        from autograder.grading.results.gradebook import GradebookWriter

        course = self.course
        self.writer = GradebookWriter(
            course.root,
            course.config.gradebook_url,
            course.config.course_id,
            late_plugin=course.config.late_plugin,
            settings=course.config.settings,
        )
        for a in sorted({s.assignment for s in self.subs}):
            for nb in course.notebooks(a):
                self.writer.register(nb)

    # -- grading ---------------------------------------------------------------------
    def grade(self):
        from autograder.grading.results import report

        subs, args = self.subs, self.args
        by_key = {s.key: s for s in subs}
        self.unfinished = collections.Counter((s.student, s.assignment) for s in subs)
        self.bar = report.progress(
            len(subs) + self.done_before, enabled=not args.quiet, initial=self.done_before
        )
        for sub in subs:
            if sub.status:
                self.finish(sub, {})
        # two runs per notebook (grading.verdicts): one kernel's, then the judge's (ahead of the
        # notebooks waiting: Calibration.after_kernel), merged when both are in
        from autograder.grading.calibrate import JUDGE_RUN, KERNEL_RUN

        runs: dict = {}
        tasks = []
        later: dict = {}  # notebook -> the judge's task, sent when one kernel's result is in
        for s in subs:
            if s.status:
                continue
            kinds = self.calibration.tasks(s, self.limits, self.imports)
            runs[s.key] = (set(kinds), {})
            if JUDGE_RUN in kinds:
                later[s.key] = kinds.pop(JUDGE_RUN)
            tasks.extend(((s.key, kind), task) for kind, task in kinds.items())

        def on_result(key, result, error):
            key, kind = key
            want, got = runs[key]
            got[kind] = (result, error)
            self._time(by_key[key], kind, result)
            if kind == KERNEL_RUN and key in later:
                task = self.calibration.after_kernel(by_key[key], later.pop(key), result)
                return [((key, JUDGE_RUN), task)]
            if set(got) == want:
                self.finish(by_key[key], got)
            return None

        try:
            if tasks:
                from autograder.grading.host.scheduler import run

                run(self.pool, tasks, on_result, self.options)
                if args.scheduler:
                    self.jobs_text = f" on the Dask cluster at {args.scheduler}"
                else:
                    n = getattr(self.pool, "lanes", self.pool.jobs)
                    self.jobs_text = f" with {n} sandbox{'es' if n > 1 else ''}"
                ready = getattr(self.pool, "ready_at", None)
                if ready:  # start-up ends when a sandbox could take the first notebook
                    self.startup = max(self.startup, min(ready) - self.started)
        except BaseException:
            self.bar.close()
            raise
        finally:
            self.close()  # the sandboxes are done: stopped before the reports are written
            if self.writer is not None:
                self.writer.close()
        self.bar.close()

    def _time(self, sub, kind, result):
        """One run's sandbox seconds and timeouts, for ``--timings`` (the host's own clock:
        :meth:`Supervisor.grade` measures it; the test statuses are the run's rows)."""
        if getattr(self.args, "timings", None) is None:
            return
        seconds, timeouts = None, 0
        if isinstance(result, dict):
            if isinstance(result.get("seconds"), (int, float)):
                seconds = float(result["seconds"])
            tests = result.get("tests")
            cells = result.get("cells")
            for t in (tests if isinstance(tests, list) else []) + (
                cells if isinstance(cells, list) else []
            ):
                timeouts += isinstance(t, dict) and t.get("status") == "timeout"
        self.timings.append([sub.student, sub.assignment, sub.notebook, kind, seconds, timeouts])

    def finish(self, sub, runs):
        """One notebook's result (``runs``: run -> ``(result, error)``, the runs of
        :meth:`Calibration.tasks`): its rows, its feedback page, its gradebook entry."""
        from autograder.grading.calibrate import run_error
        from autograder.grading.results import feedback, report
        from autograder.grading.verdicts import apply_settled

        calibration = self.calibration
        result = None
        error = run_error(runs)
        try:
            rows, result = calibration.rows(sub, runs)
            apply_settled(rows, self.settled)  # what the instructor settled stays settled
        except Exception:  # noqa: BLE001 - a result the grader cannot read is its own failure
            import traceback

            error = traceback.format_exc()
            rows = report.rows_for(sub, None, error)
        self.rows.extend(rows)
        if error:
            self.errors.append((sub.key, error))
        if isinstance(result, dict):
            for t in result.get("tests") or ():
                for name in (t.get("dropped") or []) if isinstance(t, dict) else ():
                    self.dropped.setdefault(sub.key, [])
                    if name not in self.dropped[sub.key]:
                        self.dropped[sub.key].append(name)
            inv = result.get("invariant")
            if type(inv) is list and len(inv) == 2:
                self.invariant[0] += int(inv[0])
                self.invariant[1] += float(inv[1])
        if sub.status == "refused":  # not a usable id: no folder, no gradebook entry is made for it
            self.refused_subs.append((sub.student, sub.assignment, sub.notebook))
        else:
            self.graded.append((sub.student, sub.assignment, sub.notebook))
            feedback.write(self.out, sub, rows, result)
            if self.writer is not None:
                self.writer.record(sub, rows)
                self.to_write.setdefault((sub.student, sub.assignment), []).append(
                    (sub, rows, result)
                )
        self._write_when_whole(sub)
        self.bar.update(1)

    def _write_when_whole(self, sub):
        """``autograded/<student>/<assignment>/`` once every notebook of that submission is graded
        and recorded, not before: a run stopped in between leaves no folder, so the next run
        grades the submission again rather than skipping it as stock would skip an existing
        folder (:func:`_autograded_before`)."""
        key = (sub.student, sub.assignment)
        self.unfinished[key] -= 1
        if self.unfinished[key] > 0:
            return
        from autograder.grading.results.gradebook import write_autograded

        for done, rows, result in self.to_write.pop(key, []):
            write_autograded(self.course.config, done, rows, result)

    # -- after grading ---------------------------------------------------------------
    def write_reports(self):
        from autograder.grading.results import report

        out, all_rows = self.out, self.rows
        report.write_csv(out / "grades.csv", all_rows)
        report.write_jsonl(
            out / "results.jsonl", all_rows
        )  # what each test said: autograder report
        print(
            report.summary(
                all_rows,
                time.monotonic() - self.started,
                self.jobs_text,
                startup=self.startup,
                notebooks=self.graded,
            )
        )
        review = out / "review.txt"
        from autograder.grading.verdicts import difference_lines

        late = self.writer.late if self.writer is not None else {}
        report.write_late(out / "late.csv", late)
        if late:
            penalised = sum(1 for _, p in late.values() if p)
            print(
                f"{len(late)} notebook(s) submitted late, {penalised} with a late penalty in the "
                f"gradebook: {out / 'late.csv'}"
            )
        flagged = difference_lines(all_rows, self.course.config.counts)
        flagged += report.review_lines(all_rows)
        flagged += report.late_lines(late)
        flagged += [
            f"{report.safe_cell(key)}: the student's code wrote names the test owns "
            f"({', '.join(names[:10])}): dropped, the test kept its own (not a status: honest "
            "code may reuse a name)"
            for key, names in sorted(self.dropped.items())
        ]
        if self.invariant[0]:
            (out / "logs").mkdir(parents=True, exist_ok=True)
            (out / "logs" / "judge-invariant.txt").write_text(
                f"calls {self.invariant[0]}\nseconds {self.invariant[1]:.6f}\n"
                f"per call {1e6 * self.invariant[1] / self.invariant[0]:.1f} us\n"
            )
        review.write_text("".join(line + "\n" for line in flagged))
        if flagged:
            print(
                f"{len(flagged)} notebook(s) need a human look (a status other than ok): {review}"
            )
        print(
            f"wrote {out / 'grades.csv'} and {out / 'feedback'}"
            + ("" if self.args.no_gradebook else f"; gradebook {self.course.config.gradebook_url}")
        )

    def write_timings(self):
        """``--timings FILE``: where the time went (``make bench-scale``)."""
        import json

        path = getattr(self.args, "timings", None)
        if path is None:
            return
        writer = self.writer
        path.write_text(
            json.dumps(
                {
                    "seconds": round(time.monotonic() - self.started, 3),
                    "startup": round(self.startup, 3),
                    "runs": self.timings,
                    "gradebook": {
                        "writes": getattr(writer, "writes", 0),
                        "seconds": round(getattr(writer, "seconds", 0.0), 3),
                    },
                }
            )
        )

    def exit_status(self) -> int:
        """0, 3 or 4 (the module's docstring): 3 whenever any row says ``grader-error``, whether the
        whole notebook failed (a logged error) or one test did (the judge, a reply it could not use)."""
        failed: dict = {}
        for r in self.rows:
            if r.status == "grader-error":
                failed.setdefault(f"{r.student}/{r.assignment}/{r.notebook}", []).append(r.grade_id)
        logged = dict(self.errors)
        if logged or failed:
            for key, error in self.errors:
                print(f"grader error on {key}:\n{error[-2000:]}", file=sys.stderr)
            for key, ids in sorted(failed.items()):
                if key not in logged:
                    print(f"grader error on {key}: {', '.join(ids)}", file=sys.stderr)
            print(
                f"autograder grade: the grader failed on {len(set(failed) | set(logged))} "
                "notebook(s) (status grader-error)",
                file=sys.stderr,
            )
            return 3
        if self.refused:
            print(
                f"autograder grade: {len(self.refused)} assignment(s) refused, not graded: "
                f"{', '.join(self.refused)}",
                file=sys.stderr,
            )
        if self.refused_subs:  # stock exits 1 when a submission fails (nbgrader's own tests)
            keys = sorted({_printable(f"{k[0]}/{k[1]}") for k in self.refused_subs})
            print(
                f"autograder grade: {len(keys)} submission(s) refused, not graded (their rows "
                f"say why): {', '.join(keys[:20])}" + (" ..." if len(keys) > 20 else ""),
                file=sys.stderr,
            )
        return 4 if self.refused or self.refused_subs else 0


def _calibrate(course, assignments, args, pool, options, limits, imports, out):
    """Grade each assignment's source first (:mod:`.calibrate`): which notebooks the judge grades,
    which are graded in one kernel, which are refused. Printed once per assignment and written to
    ``OUT/calibration.txt``."""
    from autograder.grading.calibrate import Calibration
    from autograder.grading.host.scheduler import run

    def run_tasks(tasks, on_result):
        run(pool, tasks, on_result, options)

    from autograder.grading.calibrate import CalibrationCache

    cache = (
        None if getattr(args, "no_calibration_cache", False) else CalibrationCache(options=options)
    )
    calibration = Calibration(course, cache).calibrate(assignments, run_tasks, limits, imports)
    lines = calibration.lines()
    cached = (
        f"; from the cache in {cache.folder}: {', '.join(calibration.cached)}"
        if cache is not None and calibration.cached
        else ""
    )
    (out / "calibration.txt").write_text(
        f"calibration on the source notebooks ({calibration.seconds:.1f} s with the sandboxes' start; grading the "
        f"sources: {' + '.join(f'{x:.1f}' for x in calibration.grading) or '0'} s of sandbox time{cached}): "
        "which test cells the judge grades, "
        "which are graded in one kernel (status in-kernel), which are refused\n"
        + "".join(f"{x}\n" for x in lines)
    )
    for line in lines:
        print(f"calibration: {line}")
    return calibration
