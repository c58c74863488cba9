"""A graded submission, recorded: each notebook's two verdicts read into rows
(:meth:`autograder.grading.calibrate.Calibration.rows`, the instructor's settlements applied),
then written where nbgrader keeps them (the gradebook, ``autograded/``, ``submitted/`` with its
timestamp for late penalties) and where the service's readers look (``OUT/feedback/``,
``grades.csv``, the ledger); then the student's page is released (:class:`.views.Views`).

A grader failure on a notebook is the grader's, never the student's: the submission then does
not count as an attempt, and the page says so.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
import traceback

from autograder.grading.serve.outputs import intake_folder


class Recorder:
    def __init__(self, course, ledger, calibration, gradebook, outputs, views, log):
        self.course, self.ledger, self.calibration = course, ledger, calibration
        self.gradebook, self.outputs, self.views, self.log = gradebook, outputs, views, log

    def record(self, sid, job):
        """Graded submission ``sid`` (its job: the notebooks, their runs) recorded and released."""
        from autograder.grading.calibrate import run_error
        from autograder.grading.results import feedback, report
        from autograder.grading.results.gradebook import write_autograded
        from autograder.grading.verdicts import apply_settled, settled

        if job["problems"]:
            notice = (
                "This assignment cannot be graded automatically here (your instructor grades it "
                "with nbgrader); this submission does not count as an attempt."
            )
            self.ledger.graded(sid, False, {"notice": notice}, None, None, time.time())
            self.log(f"{sid}: not graded: " + "; ".join(job["problems"]))
            self.views.release(sid)
            return
        notebooks, errors, all_rows = [], 0, []
        for key, sub in job["subs"].items():
            runs = job["results"].get(key, {})
            error = run_error(runs)
            result = None
            try:
                rows, result = self.calibration.rows(sub, runs)
                apply_settled(rows, settled(self.outputs.out))
            except Exception:  # noqa: BLE001 - a result the grader cannot read is its own failure
                error = traceback.format_exc()
                rows = report.rows_for(sub, None, error)
            if error:
                errors += 1
                self.log(f"{sid}: grader error on {key}:\n{error[-2000:]}")
            all_rows.extend(rows)
            if sub.status != "refused":
                feedback.write(self.outputs.out, sub, rows, result)
                self.gradebook.record(sub, rows)
                write_autograded(self.course.config, sub, rows, result)
            notes = feedback._cell_notes(sub, result)
            if sub.status:
                notes.insert(0, f"{sub.status}: {sub.message}")
            notebooks.append(
                {
                    "notebook": sub.notebook,
                    "rows": [dataclasses.asdict(r) for r in rows],
                    "notes": notes,
                }
            )
            self.outputs.latest_rows[(sub.student, sub.assignment, sub.notebook)] = rows
        counted = errors == 0 and any(s.status != "refused" for s in job["subs"].values())
        self._install_submitted(sid, job)
        self.outputs.write_grades()
        score = sum(r.score for r in all_rows)
        maximum = sum(r.max_score for r in all_rows)
        result_json = {"notebooks": notebooks}
        if not counted and errors:
            result_json["notice"] = (
                "The grader failed on this submission (not your fault): it does not count as an "
                "attempt; submit again, or tell your instructor."
            )
        self.ledger.graded(sid, counted, result_json, score, maximum, time.time())
        self.views.release(sid)

    def _install_submitted(self, sid, job):
        """The submission into the course's ``submitted/`` (formgrader, manual grading), and its
        timestamp into the gradebook (late penalties), as ``nbgrader collect`` would."""
        from autograder.grading.intake.zipcollect import install

        student, a = job["student"], job["assignment"]
        folder = intake_folder(self.outputs.intake, sid) / student / a
        if not folder.is_dir():
            return
        files = {
            p.name: p.read_bytes()
            for p in sorted(folder.iterdir())
            if p.is_file() and not p.is_symlink()
        }
        install(self.course.config.submitted, student, a, files)
        row = next(r for r in self.ledger.in_state("grading") if r["id"] == sid)
        try:
            s = self.gradebook.gb.find_submission(a, student)
            s.timestamp = dt.datetime.fromtimestamp(row["submitted"], dt.UTC).replace(tzinfo=None)
            self.gradebook.gb.db.commit()
        except Exception:  # noqa: BLE001 - no gradebook entry (nothing graded): nothing to date
            self.gradebook.gb.db.rollback()
