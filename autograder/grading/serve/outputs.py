"""What the instructor reads in the service's ``OUT``: ``grades.csv`` and ``review.txt`` (the
newest rows of every student's notebook), ``results.jsonl`` (every counted attempt, for
``autograder report``), ``attempts.csv`` (the ledger as a table), the class report; and the
private intake copies, swept once their submission is final.

Each file is rebuilt whole from the ledger and replaced atomically (a temporary file renamed),
so a restart, or a release made again after one, never writes anything twice.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import time
import traceback
from pathlib import Path

from autograder.grading.serve.ledger import FIELDS, Ledger

CLASS_REPORT = "autograder.grading.results.class_report"
REPORT_EVERY = 30.0  # seconds: the class report is rewritten at most this often while busy
TIMES = ("submitted", "seen", "started", "finished", "released")


def _iso(ts) -> str:
    if ts is None:
        return ""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def intake_folder(intake: Path, sid: str) -> Path:
    """The private copy of submission ``sid`` (a name no entry in inbound chooses)."""
    return intake / hashlib.sha256(sid.encode()).hexdigest()[:20]


class Outputs:
    def __init__(self, out: Path, ledger: Ledger, counts: str, log):
        self.out, self.ledger, self.counts, self.log = out, ledger, counts, log
        self.intake = out / "intake"
        self.attempts_csv = out / "attempts.csv"
        self.latest_rows: dict = {}  # (student, assignment, notebook) -> its newest rows
        self.result_lines: dict = {}  # (ledger id, gradings) -> results.jsonl lines of that attempt
        self.report_due = 0.0
        self.report_dirty = False

    def load_latest(self):
        from autograder.grading.results.report import Row

        for row in self.ledger.all():
            if not row["result"]:
                continue
            for nb in json.loads(row["result"]).get("notebooks", []):
                rows = [Row(**r) for r in nb["rows"]]
                self.latest_rows[(row["student"], row["assignment"], nb["notebook"])] = rows

    def write_grades(self):
        from autograder.grading.results import report
        from autograder.grading.verdicts import apply_settled, difference_lines, settled

        rows = [r for key in sorted(self.latest_rows) for r in self.latest_rows[key]]
        apply_settled(rows, settled(self.out))  # autograder settle, since these rows were graded
        tmp = self.out / ".grades.csv.tmp"
        report.write_csv(tmp, rows)
        os.replace(tmp, self.out / "grades.csv")
        # the instructor's view of what needs a look: the open differences first (grading.verdicts)
        lines = difference_lines(rows, self.counts) + report.review_lines(rows)
        tmp = self.out / ".review.txt.tmp"
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.replace(tmp, self.out / "review.txt")

    def released(self):
        """A submission reached a final state: sweep, rewrite the tables, the report is due."""
        self.sweep_intake()
        self.write_attempts()
        self.write_results()
        self.report_dirty = True

    def sweep_intake(self):
        """Remove the private copies of submissions in a final state (released, refused,
        replaced): only those still queued, grading or graded (a restart needs them) stay."""
        keep = {
            intake_folder(self.intake, r["id"]).name
            for r in self.ledger.in_state("queued", "grading", "graded")
        }
        for path in self.intake.iterdir():
            if path.name not in keep:
                shutil.rmtree(path, ignore_errors=True)

    def write_results(self):
        """``OUT/results.jsonl`` for ``autograder report``: every counted attempt's rows with its
        attempt number, rebuilt from the ledger and replaced whole (a restart, or a release made
        again after one, never writes an attempt's rows twice)."""
        from autograder.grading.results.report import Row, record

        lines = []
        for r in self.ledger.all():
            if not r["result"] or not r["counted"] or r["attempt"] is None:
                continue
            key = (r["id"], r["gradings"])
            if key not in self.result_lines:
                self.result_lines[key] = [
                    json.dumps(record(Row(**row), r["attempt"])) + "\n"
                    for nb in json.loads(r["result"]).get("notebooks", [])
                    for row in nb["rows"]
                ]
            lines.extend(self.result_lines[key])
        tmp = self.out / ".results.jsonl.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(lines)
        os.replace(tmp, self.out / "results.jsonl")

    def write_attempts(self):
        def cell(field, value):
            if field in TIMES:
                return _iso(value)
            if value is None:
                return ""
            return format(value, "g") if isinstance(value, float) else value

        tmp = self.attempts_csv.with_name(".attempts.csv.tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(FIELDS)
            for r in self.ledger.all():
                w.writerow([cell(f, r[f]) for f in FIELDS])
        os.replace(tmp, self.attempts_csv)

    def maybe_report(self, idle: bool):
        """The class report (issue 29's module, when present), after graded submissions: when the
        queue is idle, or every REPORT_EVERY seconds while busy. Its failure is logged, never fatal."""
        if not self.report_dirty or (not idle and time.monotonic() < self.report_due):
            return
        self.report_dirty = False
        self.report_due = time.monotonic() + REPORT_EVERY
        try:
            if importlib.util.find_spec(CLASS_REPORT) is None:
                return
            module = importlib.import_module(CLASS_REPORT)
            module.write_report(
                self.out, dest=None, with_students=False, attempts=self.attempts_csv
            )
        except Exception:  # noqa: BLE001
            self.log("the class report failed (the service goes on):\n" + traceback.format_exc())
