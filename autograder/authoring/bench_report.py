"""``make bench-report``: how fast ``autograder report`` is on a class of thousands of notebooks.

    python -m autograder.authoring.bench_report [--notebooks 4000] [--seed 0] [--keep DIR]

Writes a synthetic grading output (:func:`synthetic_class`: ``grades.csv`` and ``results.jsonl``
exactly as ``autograder grade`` writes them, through :mod:`.results.report`) - students taking
the course's five assignments with this course's test ids, scores drawn from a latent-ability
model, failing rows spread over a few named causes per test, the release stub, statuses and
stock-style exceptions with varying numbers - then times:

* ``autograder report OUT`` as a command (Python's start, imports, reading, figures, page);
* ``write_report`` in a warm process, once more after one more graded notebook was appended -
  what ``autograder serve`` pays to show a submission in the page.

A benchmark, not a test: the tests check the figures (tests/test_report.py).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

from autograder.procs import explain, run

# (assignment, number of test cells) of this course
COURSE = [
    ("01_relu_inplace", 15),
    ("02_custom_backward", 19),
    ("03_index_assignment", 18),
    ("04_training_loops", 16),
    ("05_diagnosis", 19),
]
STATUSES = ["timeout", "memory-limit", "kernel-died", "output-limit"]


def _tests(assignment: str, n: int, rng: random.Random) -> list[dict]:
    out = []
    for k in range(n):
        difficulty = rng.gauss(-1.2, 1.0)
        out.append(
            {
                "grade_id": f"test_{assignment[3:]}_{k:02d}",
                "points": float(rng.choice([1, 1, 1, 2])),
                "difficulty": difficulty,
                "broken": k == 5,  # a result that does not go with the rest of the notebook
                "hard": k == 7,  # almost nobody passes
                "hidden": k % 3 != 0,
                "causes": [
                    f"cause {'ABCD'[c]} of {assignment} test {k}: write into x.clone(), never into x itself"
                    for c in range(rng.randint(1, 4))
                ],
            }
        )
    return out


def synthetic_rows(notebooks: int = 4000, seed: int = 0, attempt: int | None = None):
    """:class:`~.results.report.Row` objects of a class of ``notebooks`` notebooks (students
    taking the assignments in turn)."""
    from autograder.grading.results.report import Row

    rng = random.Random(seed)
    tests = {a: _tests(a, n, rng) for a, n in COURSE}
    students = math.ceil(notebooks / len(COURSE))
    rows: list = []
    made = 0
    for s in range(students):
        student = f"s{s:05d}"
        ability = rng.gauss(0.0, 2.0)
        for a, _ in COURSE:
            if made == notebooks:
                return rows
            made += 1
            stub = rng.random() < 0.03  # handed in the release untouched
            limit = rng.choice(STATUSES) if rng.random() < 0.01 else None
            for t in tests[a]:
                row = Row(student, a, a, t["grade_id"], 0.0, t["points"], "ok", hidden=t["hidden"])
                if limit:
                    row.status, row.message = limit, f"the test ran past the limit ({limit})"
                elif stub:
                    row.error = "CheckFailure"
                    row.failure = {"kind": "not-implemented", "check": f"{t['grade_id']}(x)"}
                    row.message = f"CheckFailure: {t['grade_id']}(x): not implemented yet"
                else:
                    p = 1 / (1 + math.exp(-(ability - t["difficulty"])))
                    if t["broken"]:
                        p = 0.6
                    if t["hard"]:
                        p = 0.04
                    if rng.random() < p:
                        row.score = t["points"]
                    elif t["points"] > 1 and rng.random() < 0.2:
                        row.score = 1.0  # partial credit
                    else:
                        _failure(row, t, rng)
                rows.append(row)
    return rows


def _failure(row, t, rng):
    roll = rng.random()
    if roll < 0.9:
        cause = rng.choice(t["causes"])
        value = rng.randint(0, 99)
        row.error = "CheckFailure"
        row.failure = {
            "kind": "check",
            "check": f"{row.grade_id}(x, 0, {value}.0) returned the wrong values",
            "expected": f"tensor([{value}., 2., 3.])",
            "found": f"tensor([1., 2., {value}.])",
            "cause": cause,
        }
        row.message = (
            f"CheckFailure: {row.grade_id}(x, 0, {value}.0) returned the wrong values\n"
            f"  expected: tensor([{value}., 2., 3.])\n  found:    tensor([1., 2., {value}.])\n"
            f"  likely cause: {cause}"
        )
    else:  # a stock-style failure: an exception, numbers and addresses in its message
        row.error = rng.choice(["AssertionError", "RuntimeError", "TypeError"])
        row.message = (
            f"{row.error}: value {rng.random():.4f} at <object at 0x{rng.getrandbits(40):x}>"
        )


def synthetic_class(out: Path, notebooks: int = 4000, seed: int = 0) -> Path:
    """A grading output folder of ``notebooks`` synthetic notebooks: grades.csv, results.jsonl."""
    from autograder.grading.results import report

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = synthetic_rows(notebooks, seed)
    report.write_csv(out / "grades.csv", rows)
    report.write_jsonl(out / "results.jsonl", rows)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebooks", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="write the class and report here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp) / "out"
        synthetic_class(out, args.notebooks, args.seed)
        lines = sum(1 for _ in open(out / "results.jsonl"))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = run(
            [str(Path(sys.executable).with_name("autograder")), "report", str(out)],
            expect=None,
            timeout=None,
        )
        cold = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cold_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode:
            print(explain(proc), file=sys.stderr)
            return 1
        from autograder.grading.results import report
        from autograder.grading.results.class_report import write_report

        write_report(out)  # warm: imports done, figures drawn once
        extra = synthetic_rows(len(COURSE), args.seed + 1)[:19]
        for row in extra:
            row.student = "late-student"
        started, cpu = time.perf_counter(), time.process_time()
        report.write_jsonl(out / "results.jsonl", extra, append=True)
        page = write_report(out)
        warm, warm_cpu = time.perf_counter() - started, time.process_time() - cpu
        size = page.stat().st_size
        print(
            f"autograder report: {args.notebooks} notebooks ({lines} test results) in {cold:.2f} s "
            f"as a command, start-up included ({cold_cpu:.2f} s of CPU); page {size / 1e6:.2f} MB\n"
            f"in a warm process (serve): one more graded notebook appended and the page rewritten "
            f"in {warm:.2f} s ({warm_cpu:.2f} s of CPU)\n"
            f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
