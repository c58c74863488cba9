"""``autograder grade``: grade every submission of the course, fast, sandboxed, with honest statuses.

    autograder grade [SUBMISSIONS] --out OUT [--jobs N] [--timeout S] [--memory-limit SIZE]
                     [--scheduler ADDRESS]

SUBMISSIONS holds ``<student>/<assignment>/<notebook>.ipynb`` (nbgrader's ``submitted/``
layout; default: the course's ``submitted/``). Writes ``OUT/grades.csv`` (one row per
student, assignment, notebook and graded test cell), ``OUT/feedback/<student>/<assignment>/``
and records the scores in the course's nbgrader gradebook (``nbgrader export``, formgrader),
with the autograded notebooks under the course's ``autograded/``. Exit status: 0 every
notebook was graded; 2 nothing was graded (no sandbox, no submissions folder, a bad option);
3 the grader failed on some notebooks (status ``grader-error``); 4 some assignments were
refused (what they use cannot be graded as nbgrader would; named on stderr, nothing written for
them) and every other one was graded.
"""
from __future__ import annotations

import argparse
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
        description=__doc__.split("\n\n")[0] + "\n\nstatuses:\n" + "\n".join(
            f"  {k:<17}{v}" for k, v in STATUSES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("submissions", nargs="?", type=Path,
                   help="folder of <student>/<assignment>/<notebook>.ipynb (default: COURSE/submitted)")
    p.add_argument("--out", required=True, type=Path, help="folder for grades.csv and feedback/")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="sandboxes grading in parallel on this machine (default: number of CPUs)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per code cell and per test cell (default: the course's Execute.timeout, "
                        "as nbgrader autograde; 120 in this course)")
    p.add_argument("--memory-limit", default=_size(MEMORY_LIMIT),
                   help="memory a submission may use beyond the warm Python with torch, e.g. 512M, 2G "
                        f"(default {_size(MEMORY_LIMIT)})")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="grade on a Dask distributed cluster (e.g. tcp://10.0.0.5:8786) instead of --jobs")
    p.add_argument("--wall-limit", type=float, default=_DEFAULT.wall,
                   help=f"seconds for a whole notebook, cells and tests together (default {_DEFAULT.wall:g})")
    p.add_argument("--output-limit", default=_size(_DEFAULT.output),
                   help="bytes of output (prints) per cell, and per test's calls into student code, "
                        f"e.g. {_size(_DEFAULT.output)} (default); the output kept in the feedback is shorter")
    p.add_argument("--file-size-limit", default=_size(_DEFAULT.file_size),
                   help="largest file a submission may write (a compiler's temporary files, a saved model), "
                        f"e.g. {_size(_DEFAULT.file_size)} (default)")
    p.add_argument("--processes", type=int, default=_DEFAULT.processes,
                   help=f"processes a submission may start (default {_DEFAULT.processes})")
    p.add_argument("--course", type=Path, default=None,
                   help="nbgrader course folder: its nbgrader_config.py is read as nbgrader autograde reads it "
                        "(default: the current folder, like nbgrader)")
    p.add_argument("--assignment", action="append", default=None, metavar="NAME",
                   help="grade only this assignment (repeatable; default: every assignment submitted)")
    p.add_argument("--no-gradebook", action="store_true",
                   help="do not write the nbgrader gradebook and autograded/ notebooks")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run without bubblewrap: NO isolation (student code runs with your rights); "
                        "for machines where user namespaces are not allowed")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


def _course_root(arg):
    return (arg if arg is not None else Path.cwd()).resolve()


def run(args) -> int:
    from autograder.grading.intake.collect import Course, find_submissions
    from autograder.grading.host.sandbox import SandboxError, WorkerFailure, check_sandbox, parse_size

    started = time.monotonic()
    try:
        course = Course(_course_root(args.course))
        submissions_dir = (args.submissions or course.config.submitted).resolve()
        timeout = args.timeout if args.timeout is not None else (course.config.timeout or 600.0)
        limits = Limits(timeout=float(timeout), wall=float(args.wall_limit), output=parse_size(args.output_limit),
                        file_size=parse_size(args.file_size_limit), processes=int(args.processes))
        memory = parse_size(args.memory_limit) if str(args.memory_limit).lower() not in ("0", "none") else None
        if args.no_sandbox:
            print("WARNING: --no-sandbox: student code runs with your rights, can read solutions/ and "
                  "the gradebook, write anywhere you can, use the network, and leave processes behind.",
                  file=sys.stderr)
        elif not args.scheduler:
            check_sandbox()
        if not submissions_dir.is_dir():
            raise FileNotFoundError(f"no submissions folder {submissions_dir}")
        out = args.out.resolve()
        out.mkdir(parents=True, exist_ok=True)
        imports = course.imports()
        options = Options(preload=imports, sandbox=not args.no_sandbox, memory_limit=memory, log_dir=str(out / "logs"))
        pool = None
        if not args.scheduler:  # the sandboxes warm up while the submissions are read
            from autograder.grading.host.scheduler import LocalPool

            pool = LocalPool(args.jobs, options).start()
        subs = find_submissions(submissions_dir, course, warn=lambda m: print(m, file=sys.stderr))
        if args.assignment:
            unknown = set(args.assignment) - set(course.assignments())
            if unknown:
                raise ValueError(f"no assignment {', '.join(sorted(unknown))} in {course.source}")
            subs = [s for s in subs if s.assignment in args.assignment]
        refused = {a: course.unsupported(a) for a in sorted({s.assignment for s in subs})}
        refused = {a: p for a, p in refused.items() if p}
        calibration = _calibrate(course, sorted({s.assignment for s in subs} - set(refused)), args, pool,
                                 options, limits, imports, out)
        refused.update(calibration.refused)
        if refused:  # per assignment: the others are graded, and the exit status says so
            print("autograder grade: refusing to grade, nothing was written for them: these assignments use what "
                  "this grader cannot run the way nbgrader would (grade them with `nbgrader autograde`, or leave "
                  "them out with --assignment):\n" + "\n".join(
                      f"  {a}: {p}" for a, problems in refused.items() for p in problems), file=sys.stderr)
            subs = [s for s in subs if s.assignment not in refused]
    except (SandboxError, FileNotFoundError, ValueError, WorkerFailure) as exc:
        print(f"autograder grade: {exc}", file=sys.stderr)
        return 2
    from autograder.grading.results import feedback, report

    writer = None
    if not args.no_gradebook:
        from autograder.grading.results.gradebook import GradebookWriter

        writer = GradebookWriter(course.root, course.config.gradebook_url, course.config.course_id)
        for a in sorted({s.assignment for s in subs}):
            for nb in course.notebooks(a):
                writer.register(nb)

    all_rows = []
    errors = []
    by_key = {s.key: s for s in subs}
    bar = report.progress(len(subs), enabled=not args.quiet)

    def finish(sub, result, error):
        try:
            result = calibration.result(sub, result)
            rows = calibration.rows_for(sub, result, error)
        except Exception:  # noqa: BLE001 - a result the grader cannot read is its own failure
            import traceback

            error = traceback.format_exc()
            rows = report.rows_for(sub, None, error)
        all_rows.extend(rows)
        if error:
            errors.append((sub.key, error))
        if sub.status == "refused":  # not a usable id: no folder, no gradebook entry is made for it
            bar.update(1)
            return
        feedback.write(out, sub, rows, result)
        if writer is not None:
            writer.record(sub, rows)
            from autograder.grading.results.gradebook import write_autograded

            write_autograded(course.config.autograded, sub, rows, result)
        bar.update(1)

    for sub in subs:
        if sub.status:
            finish(sub, None, None)
    tasks = [(s.key, calibration.task(s, limits, imports)) for s in subs if not s.status]
    try:
        if tasks:
            if args.scheduler:
                from autograder.grading.host.scheduler import run_dask

                run_dask(args.scheduler, tasks, lambda k, r, e: finish(by_key[k], r, e), options)
                jobs_text = f" on the Dask cluster at {args.scheduler}"
            else:
                pool.run(tasks, lambda k, r, e: finish(by_key[k], r, e))
                jobs_text = f" with {len(pool.threads)} sandbox{'es' if len(pool.threads) > 1 else ''}"
        else:
            jobs_text = ""
            if pool is not None:
                pool.run([], None)
    except WorkerFailure as exc:
        bar.close()
        print(f"autograder grade: the sandbox could not start:\n{exc}", file=sys.stderr)
        return 2
    finally:
        if writer is not None:
            writer.close()
    bar.close()
    report.write_csv(out / "grades.csv", all_rows)
    print(report.summary(all_rows, time.monotonic() - started, jobs_text))
    review = out / "review.txt"
    flagged = report.review_lines(all_rows)
    review.write_text("".join(line + "\n" for line in flagged))
    if flagged:
        print(f"{len(flagged)} notebook(s) need a human look (a status other than ok): {review}")
    print(f"wrote {out / 'grades.csv'} and {out / 'feedback'}"
          + ("" if args.no_gradebook else f"; gradebook {course.config.gradebook_url}"))
    if errors:
        for key, error in errors:
            print(f"grader error on {key}:\n{error[-2000:]}", file=sys.stderr)
        print(f"autograder grade: the grader failed on {len(errors)} notebook(s) (status grader-error)",
              file=sys.stderr)
        return 3
    if refused:
        print(f"autograder grade: {len(refused)} assignment(s) refused, not graded: {', '.join(refused)}",
              file=sys.stderr)
        return 4
    return 0


def _calibrate(course, assignments, args, pool, options, limits, imports, out):
    """Grade each assignment's source first (:mod:`.calibrate`): which notebooks the judge grades,
    which are graded in one kernel, which are refused. Printed once per assignment and written to
    ``OUT/calibration.txt``."""
    from autograder.grading.calibrate import Calibration

    if args.scheduler:
        from autograder.grading.host.scheduler import run_dask

        def run_tasks(tasks, on_result):
            run_dask(args.scheduler, tasks, on_result, options)
    else:
        def run_tasks(tasks, on_result):
            pool.run(tasks, on_result, final=False)

    calibration = Calibration(course).calibrate(assignments, run_tasks, limits, imports)
    lines = calibration.lines()
    (out / "calibration.txt").write_text(
        f"calibration on the source notebooks ({calibration.seconds:.1f} s with the sandboxes' start; grading the "
        f"sources: {' + '.join(f'{x:.1f}' for x in calibration.grading) or '0'} s of sandbox time): which test cells "
        "the judge grades, "
        "which are graded in one kernel (status in-kernel), which are refused\n" + "".join(f"{x}\n" for x in lines))
    for line in lines:
        print(f"calibration: {line}")
    return calibration
