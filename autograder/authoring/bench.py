"""``make bench``: throughput of ``autograder grade`` against stock serial ``nbgrader autograde``.

    python -m autograder.authoring.bench [--n 40] [--jobs N]

Builds N synthetic submissions - students cycling through every assignment's honest notebooks
(the instructor's solution, the untouched release, the fixture submissions with typical
mistakes and a correct alternative) - and grades them with stock ``nbgrader autograde``
(serial, one kernel per notebook) and with ``autograder grade --jobs N`` (sandboxed), in
throwaway courses on the same machine. The grader runs before *and* after the stock run, so
both sides see the same load (the machine may be shared); its time is the mean of the two.
The first run starts with an empty calibration cache (its own, under the bench's folder), the
second finds the first's (a second run of the same assignments: calibration and the preload
list cached); each prints its start-up (before the first notebook) and grading time apart.
Then one verdict alone (``AutograderGrade.mode = "kernel"``, cache warm), for what the judge's
verdict costs on top (grading v5 gives every test cell both). Checks the scores are identical
(two verdicts: the score counted is one kernel's, so stock's) and prints the throughputs and ratios. Every timing
covers the whole command (start-up, gradebook and feedback included); preparing the courses
is not timed.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

from autograder.course import (
    EXERCISES,
    FIXTURE_SUBMISSIONS,
    SOLUTIONS,
    TempCourse,
    assignments,
    fixture_cases,
    notebooks,
)
from autograder.procs import explain, run


def pool():
    """(assignment, notebook name, path) of every honest notebook, the assignments taking turns."""
    per = []
    for a in assignments():
        items = []
        for nb in notebooks(a):
            items.append((a, nb, SOLUTIONS / a / f"{nb}.ipynb"))
            items.append((a, nb, EXERCISES / a / f"{nb}.ipynb"))
        names = notebooks(a)
        for case in fixture_cases(a):
            items.append((a, names[0], FIXTURE_SUBMISSIONS / a / f"{case}.ipynb"))
        per.append(items)
    out = []
    for k in range(max(len(items) for items in per)):
        out.extend(items[k] for items in per if k < len(items))
    return out


def grade_command(course: TempCourse, out: Path, jobs: int, *extra: str) -> list[str]:
    """``autograder grade`` of ``course``'s whole class into ``out``, without a progress bar."""
    return [
        str(Path(sys.executable).with_name("autograder")),
        "grade",
        str(course.root / "submitted"),
        "--out",
        str(out),
        "--course",
        str(course.root),
        "--jobs",
        str(jobs),
        *extra,
        "--quiet",
    ]


def grade_scores(out: Path) -> dict:
    """``{(assignment, student, notebook, grade_id): score}`` from ``out/grades.csv``."""
    with open(out / "grades.csv", newline="") as fh:
        return {
            (r["assignment"], r["student"], r["notebook"], r["grade_id"]): float(r["score"])
            for r in csv.DictReader(fh)
        }


def gradebook_scores(course: TempCourse) -> dict:
    """The same keys from ``course``'s nbgrader gradebook (what stock recorded)."""
    return {
        (a, student, nb, gid): score
        for a in course.assignments
        for student, nbs in course.scores(a).items()
        for nb, grades in nbs.items()
        for gid, (score, _) in grades.items()
    }


def populate(course: TempCourse, n: int):
    items = pool()
    for i in range(n):
        a, nb, path = items[i % len(items)]
        course.submit(f"student{i:04d}", a, path, nb)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograder.authoring.bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--n", type=int, default=60, help="number of submissions (default 60)")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="autograder grade --jobs"
    )
    parser.add_argument(
        "--dir", type=Path, help="keep the courses here (default: a temporary folder)"
    )
    args = parser.parse_args(argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="autograder-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"{args.n} submissions, {os.cpu_count()} CPUs; courses in {root}", flush=True)

    stock = TempCourse(root / "stock")
    stock.generate()
    populate(stock, args.n)
    ours_timings = []
    ours = TempCourse(root / "ours")
    ours.generate()
    populate(ours, args.n)
    out = root / "out"
    # --force: each timed run grades every notebook again (nbgrader's skip-if-graded off)
    cmd = grade_command(ours, out, args.jobs, "--force")

    env = dict(os.environ, AUTOGRADER_CACHE=str(root / "cache"))

    def run_ours(label):
        import re

        start = time.perf_counter()
        proc = run(cmd, expect=None, env=env, timeout=None)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            print(explain(proc), file=sys.stderr)
            raise SystemExit(1)
        split = re.search(
            r"start-up [0-9.]+ s, then [0-9.]+ s grading: [0-9.]+ s per notebook", proc.stdout
        )
        print(
            f"autograder grade --jobs {args.jobs} ({label}):  {seconds:7.1f} s"
            + (f" ({split.group(0)})" if split else ""),
            flush=True,
        )
        ours_timings.append(seconds)

    run_ours("before, cache empty, two verdicts")
    start = time.perf_counter()
    for a in sorted(
        {a for a, _, _ in pool()[: args.n]} if args.n < len(pool()) else stock.assignments
    ):
        stock.autograde(a)
    stock_seconds = time.perf_counter() - start
    print(f"stock nbgrader autograde (serial):     {stock_seconds:7.1f} s", flush=True)
    run_ours("after, cache warm, two verdicts")
    our_seconds = sum(ours_timings) / len(ours_timings)
    with open(out / "grades.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    our_scores = grade_scores(out)
    differences = sum(r["status"] in ("unconfirmed", "contradicted") for r in rows)
    # one verdict (one kernel's alone: AutograderGrade.mode = "kernel"), the cache warm, for the
    # cost of the second verdict
    config = ours.root / "nbgrader_config.py"
    text = config.read_text()
    config.write_text(text + '\nc.AutograderGrade.mode = "kernel"\n')
    try:
        run_ours("one verdict: one kernel's alone")
        run_ours("one verdict: one kernel's alone, cache warm")
    finally:
        config.write_text(text)
    one_seconds = ours_timings.pop()
    ours_timings.pop()

    stock_scores = gradebook_scores(stock)
    same = stock_scores == our_scores
    n = args.n
    print(f"scores identical on all {len(stock_scores)} test cells: {'yes' if same else 'NO'}")
    print(f"differences between the two verdicts: {differences} of {len(rows)} rows")
    print(
        f"stock nbgrader:   {stock_seconds / n:6.2f} s per submission, {60 * n / stock_seconds:7.1f} per minute"
    )
    print(
        f"autograder grade: {our_seconds / n:6.2f} s per submission, {60 * n / our_seconds:7.1f} per minute"
    )
    print(
        f"throughput ratio, two verdicts: {stock_seconds / our_seconds:.1f}x (cache empty "
        f"{stock_seconds / ours_timings[0]:.1f}x, cache warm {stock_seconds / ours_timings[1]:.1f}x)"
    )
    print(
        f"throughput ratio, one verdict (one kernel's): {stock_seconds / one_seconds:.1f}x; the "
        f"judge's verdict costs {100 * (ours_timings[1] / one_seconds - 1):.0f}% more (cache warm)"
    )
    if not same:
        diff = sorted(
            k
            for k in stock_scores.keys() | our_scores.keys()
            if stock_scores.get(k) != our_scores.get(k)
        )
        for k in diff[:20]:
            print("  differs:", k, stock_scores.get(k), our_scores.get(k))
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
