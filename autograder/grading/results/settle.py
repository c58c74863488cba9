"""``autograder settle``: close the differences between the two verdicts (:mod:`..verdicts`).

    autograder settle OUT --take kernel|judge [--student S] [--assignment A] [--notebook N]
                          [--test GRADE_ID] [--course DIR] [--dry-run]

Every row of ``OUT/grades.csv`` whose status is ``unconfirmed`` or ``contradicted`` and that
matches the filters takes the chosen verdict's score: status ``settled``, the score, and the
choice in ``judge_reason``. ``results.jsonl`` (``autograder report``) and the course's nbgrader
gradebook (``auto_score``) follow; formgrader's manual override (``manual_score``) is never
touched, so a grade the instructor set by hand still wins there. Each settled row is appended to
``OUT/settled.csv`` (when, which row, both scores, the choice). Exit status: 0 rows were
settled (or would be, ``--dry-run``), 1 no open difference matched, 2 a bad option or folder.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import sys
from pathlib import Path

from autograder.grading.results.report import DIFFERENCES, FIELDS

TAKE = ("kernel", "judge")
LOG_FIELDS = [
    "settled_at",
    "student",
    "assignment",
    "notebook",
    "grade_id",
    "was",
    "kernel_score",
    "judge_score",
    "took",
    "score",
]


def add_parser(subparsers):
    p = subparsers.add_parser(
        "settle",
        help="close differences between one kernel's verdict and the judge's (grades.csv, gradebook)",
        description=(__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n", 2)[2])
        .replace(" (:mod:`..verdicts`)", "")
        .replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out", type=Path, help="the folder `autograder grade --out` wrote")
    p.add_argument(
        "--take",
        required=True,
        choices=TAKE,
        help="the verdict whose score the matching rows keep",
    )
    p.add_argument("--student", action="append", default=[], help="only this student (repeatable)")
    p.add_argument("--assignment", action="append", default=[], help="only this assignment")
    p.add_argument("--notebook", action="append", default=[], help="only this notebook")
    p.add_argument("--test", action="append", default=[], help="only this test cell (grade_id)")
    p.add_argument(
        "--course", type=Path, default=Path("."), help="the course folder (its gradebook)"
    )
    p.add_argument("--no-gradebook", action="store_true", help="leave the gradebook alone")
    p.add_argument(
        "--dry-run", action="store_true", help="print what would be settled, change nothing"
    )
    p.set_defaults(func=main)


def _matches(row: dict, args) -> bool:
    return (
        row.get("status") in DIFFERENCES
        and (not args.student or row["student"] in args.student)
        and (not args.assignment or row["assignment"] in args.assignment)
        and (not args.notebook or row["notebook"] in args.notebook)
        and (not args.test or row["grade_id"] in args.test)
    )


def main(args) -> int:
    out = args.out.resolve()
    grades = out / "grades.csv"
    if not grades.is_file():
        print(f"autograder settle: no {grades}", file=sys.stderr)
        return 2
    with open(grades, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if rows and list(rows[0]) != FIELDS:
        print(f"autograder settle: {grades} has other columns than {FIELDS}", file=sys.stderr)
        return 2
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    settled = []
    for row in rows:
        if not _matches(row, args):
            continue
        score = row[f"{args.take}_score"]
        entry = {
            "settled_at": now,
            "student": row["student"],
            "assignment": row["assignment"],
            "notebook": row["notebook"],
            "grade_id": row["grade_id"],
            "was": row["status"],
            "kernel_score": row["kernel_score"],
            "judge_score": row["judge_score"],
            "took": args.take,
            "score": score,
        }
        settled.append(entry)
        print(
            f"{row['student']}/{row['assignment']}/{row['notebook']}: {row['grade_id']}: "
            f"{row['status']} -> settled, {args.take}'s score {score} / {row['max_score']}"
        )
        if not args.dry_run:
            row["score"], row["status"] = score, "settled"
            row["judge_reason"] = f"settled: took {args.take}'s score; " + row["judge_reason"]
    if not settled:
        print("autograder settle: no open difference matches", file=sys.stderr)
        return 1
    if args.dry_run:
        return 0
    _replace_csv(grades, FIELDS, rows)
    _update_jsonl(out / "results.jsonl", settled)
    _append_log(out / "settled.csv", settled)
    if not args.no_gradebook:
        _update_gradebook(args.course.resolve(), settled)
    print(f"settled {len(settled)} row(s); {out / 'settled.csv'}")
    return 0


def _replace_csv(path: Path, fields, rows) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def _key(d: dict) -> tuple:
    return (d["student"], d["assignment"], d["notebook"], d["grade_id"])


def _update_jsonl(path: Path, settled) -> None:
    if not path.is_file():
        return
    by_key = {_key(e): e for e in settled}
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        e = by_key.get(_key(rec))
        if e is not None and rec.get("status") in DIFFERENCES:
            rec["score"], rec["status"] = float(e["score"]), "settled"
        lines.append(json.dumps(rec) + "\n")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    os.replace(tmp, path)


def _append_log(path: Path, settled) -> None:
    new = not path.exists()
    with open(path, "a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=LOG_FIELDS)
        if new:
            writer.writeheader()
        writer.writerows(settled)


def _update_gradebook(course_root: Path, settled) -> None:
    """``auto_score`` of each settled grade; ``manual_score`` (formgrader's override) untouched."""
    from nbgrader.api import Gradebook

    from autograder.grading.config import load

    config = load(course_root)
    with Gradebook(config.gradebook_url, config.course_id) as gb:
        for e in settled:
            grade = gb.find_grade(e["grade_id"], e["notebook"], e["assignment"], e["student"])
            grade.auto_score = float(e["score"])
        gb.db.commit()
