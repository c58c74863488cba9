"""The service: poll the exchange's inbound folder, grade, release feedback, keep the ledger.

One thread (:meth:`Service.loop`) does everything but grading: it polls the inbound folder,
takes new entries in (:func:`.exchange.take`), hands tasks to the warm sandboxes
(:class:`.pool.ServicePool`), and when a submission's notebooks are graded records the scores
(gradebook, ``autograded/``, ``submitted/``, ``OUT/grades.csv``, ``OUT/feedback/``), then
releases the student's page into the exchange. The status endpoint (:mod:`.web`) only reads.
A submission that breaks any of this is that submission's failure: the loop goes on.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import hashlib
import importlib
import importlib.util
import json
import os
import queue
import shutil
import stat
import sys
import threading
import time
import traceback
from pathlib import Path

from autograder.grading.serve import exchange, page
from autograder.grading.serve.ledger import FIELDS, Ledger
from autograder.grading.serve.policy import Policy, student_rows

CLASS_REPORT = "autograder.grading.results.class_report"
REPORT_EVERY = 30.0  # seconds: the class report is rewritten at most this often while busy


def _iso(ts) -> str:
    if ts is None:
        return ""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _settled_rows(rows: list[dict], decisions: dict) -> list[dict]:
    """Ledger rows (dicts) with the instructor's settlements applied (:func:`.verdicts.apply_settled`)."""
    if not decisions:
        return rows
    from autograder.grading.results.report import Row
    from autograder.grading.verdicts import apply_settled

    objs = [Row(**r) for r in rows]
    apply_settled(objs, decisions)
    return [dataclasses.asdict(r) for r in objs]


def log(message: str) -> None:
    stamp = dt.datetime.now(dt.UTC).strftime("%H:%M:%S.%f")[:-3]
    print(f"[serve {stamp}] {message}", file=sys.stderr, flush=True)


class Service:
    def __init__(self, args):
        from autograder.grading.command import GradeRun

        self.args = args
        self.run = GradeRun(args)
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.inflight: dict[str, dict] = {}
        self.stash: list = []
        self.deadlines: dict = {}
        self.sources: dict = {}
        self.latest_rows: dict = {}
        self.result_lines: dict = {}  # (ledger id, gradings) -> results.jsonl lines of that attempt
        self.report_due = 0.0
        self.report_dirty = False

    # -- start -----------------------------------------------------------------------
    def setup(self) -> Service:
        """Read the course and policy, open the ledger, start the sandboxes (raises on a bad setup)."""
        from autograder.grading.calibrate import Calibration
        from autograder.grading.results.gradebook import GradebookWriter
        from autograder.grading.serve.pool import ServicePool

        run, args = self.run, self.args
        run.read_settings()
        self.course = course = run.course
        config = course.config
        if not config.course_id:
            raise ValueError(
                "no CourseDirectory.course_id in nbgrader_config.py: the exchange needs one"
            )
        self.policy = Policy.from_config(config.serve)
        root = Path(args.exchange or config.exchange_root)
        self.course_dir = root / config.course_id
        self.inbound = self.course_dir / "inbound"
        self.feedback_dir = self.course_dir / "feedback"
        if not self.inbound.is_dir():
            raise FileNotFoundError(
                f"no inbound folder {self.inbound} (Exchange.root = {root}): release an assignment "
                "first (`nbgrader release_assignment`), which makes it"
            )
        problems = exchange.check_folders(self.course_dir, config.groupshared)
        if problems:
            raise ValueError(
                "the exchange lets students list or write what nbgrader would not:\n  "
                + "\n  ".join(problems)
            )
        config.submitted.mkdir(parents=True, exist_ok=True)
        run.check_sandbox()
        run.make_output()  # OUT (args.out), the options
        self.out = run.out
        os.chmod(self.out, 0o700)  # results, logs and intake copies: the instructor's only
        self.intake = self.out / "intake"
        self.intake.mkdir(exist_ok=True)
        self.attempts_csv = self.out / "attempts.csv"
        self.ledger = Ledger(self.out / "ledger.sqlite")
        self.limits, self.options, self.imports = run.limits, run.options, run.imports
        self.pool = ServicePool(args.jobs, self.options, args.scheduler).start()
        self.calibration = Calibration(course)
        self.gradebook = GradebookWriter(
            course.root,
            config.gradebook_url,
            config.course_id,
            late_plugin=config.late_plugin,
            settings=config.settings,
        )
        return self

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self._loop_guarded, name="serve-loop", daemon=True)
        t.start()
        return t

    def stop(self) -> None:
        self.stopping.set()

    # -- the loop --------------------------------------------------------------------
    def _loop_guarded(self):
        try:
            self.loop()
        except BaseException:  # noqa: BLE001 - said, and the process ends (a supervisor restarts it)
            log("the service stopped on an error:\n" + traceback.format_exc())
            os._exit(70)

    def loop(self):
        counts = self.ledger.recover()
        log(f"ledger {self.ledger.path}: {counts or 'empty'}")
        self.known = self.ledger.known()
        self.load_latest()
        self.write_attempts()
        self.write_results()
        self.report_dirty = True  # the class report once at start (its imports and first read)
        for row in self.ledger.in_state("graded"):  # graded before a stop, not yet released
            self.guard(row["id"], self.release, row["id"])
        self.calibrate_all()
        self.ready.set()
        log(f"serving {self.inbound} every {self.args.poll:g} s with {self.pool.jobs} sandbox(es)")
        next_poll = 0.0
        while not self.stopping.is_set():
            now = time.monotonic()
            if now >= next_poll:
                self.poll()
                next_poll = now + self.args.poll
            self.dispatch()
            for item in self.take_stash():
                self.guard(item[0][0], self.on_result, *item)
            try:
                item = self.pool.done.get(timeout=min(0.05, self.args.poll))
            except queue.Empty:
                self.maybe_report(idle=not self.inflight)
                continue
            self.guard(item[0][0], self.on_result, *item)
        self.pool.stop()
        self.gradebook.close()
        log("stopped")

    def guard(self, id_, fn, *args):
        """``fn(*args)``; an exception fails submission ``id_`` (reported), never the service."""
        try:
            fn(*args)
        except Exception:  # noqa: BLE001
            error = traceback.format_exc()
            log(f"{id_}: the service failed on it:\n{error}")
            self.inflight.pop(id_, None)
            try:
                self.ledger.set(
                    id_, state="refused", reason="the grading service failed on it; see its log"
                )
            except Exception:  # noqa: BLE001
                log(traceback.format_exc())

    def take_stash(self):
        out, self.stash = self.stash, []
        return out

    # -- calibration -----------------------------------------------------------------
    def _signature(self, assignment):
        folder = self.course.source / assignment
        return tuple(
            (p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(folder.glob("*.ipynb"))
        )

    def calibrate_all(self):
        for a in self.course.assignments():
            if not self.course.unsupported(a):
                self.calibrate(a)

    def calibrate(self, assignment):
        """The assignment's calibration, from the ledger's cache when its sources are unchanged."""
        from autograder.grading.calibrate import NotebookMode

        self.sources[assignment] = self._signature(assignment)
        self.course._cache.pop(assignment, None)
        self.gradebook._registered = {k for k in self.gradebook._registered if k[0] != assignment}
        notebooks = self.course.notebooks(assignment)
        keys = {nb.name: hashlib.sha256(nb.path.read_bytes()).hexdigest() for nb in notebooks}
        cached = {name: self.ledger.calibration(h) for name, h in keys.items()}
        if all(cached.values()):
            for name, mode in cached.items():
                self.calibration.modes[(assignment, name)] = NotebookMode(**mode)
            return
        started = time.monotonic()
        self.calibration.calibrate([assignment], self._run_now, self.limits, self.imports)
        for nb in notebooks:
            m = self.calibration.modes.get((assignment, nb.name))
            if m is not None:
                self.ledger.save_calibration(keys[nb.name], dataclasses.asdict(m))
        for line in self.calibration.lines():
            if line.startswith(f"{assignment}/"):
                log(f"calibration: {line}")
        log(f"calibrated {assignment} in {time.monotonic() - started:.1f} s")

    def _run_now(self, tasks, on_result):
        """Grade ``tasks`` now (calibration): other results that arrive meanwhile wait in the stash."""
        waiting = set()
        for key, task in tasks:
            self.pool.put(("\0calibration", key), task)
            waiting.add(key)
        while waiting:
            token, result, error = self.pool.done.get()
            if token[0] == "\0calibration" and token[1] in waiting:
                waiting.discard(token[1])
                on_result(token[1], result, error)
            else:
                self.stash.append((token, result, error))

    # -- intake ----------------------------------------------------------------------
    def poll(self):
        try:
            with os.scandir(self.inbound) as it:
                names = sorted(e.name for e in it)
        except OSError as exc:
            log(f"cannot read {self.inbound}: {exc}")
            return
        assignments = self.course.assignments()
        for name in names:
            sid = exchange.safe_name(name)
            if sid in self.known or name.startswith("."):
                continue
            self.guard(sid, self.take_in, name, sid, assignments)

    def take_in(self, name, sid, assignments):
        now = time.time()
        path = self.inbound / name
        try:
            entry = exchange.parse_name(name, assignments)
        except exchange.Refused as exc:
            self.refuse(sid, None, f"refused: {exc}", now)
            return
        try:
            kind = os.lstat(path).st_mode
        except OSError:
            return  # gone again
        if stat.S_ISLNK(kind) or not stat.S_ISDIR(kind):
            what = "a symbolic link" if stat.S_ISLNK(kind) else "not a folder"
            self.refuse(
                sid, entry, f"refused: the submission is {what}: nothing of it was read", now
            )
            return
        if not exchange.complete(path):
            try:
                age = now - os.lstat(path).st_mtime
            except OSError:
                return
            if age < exchange.INCOMPLETE_GRACE:
                return  # nbgrader submit is still copying: next poll
            self.refuse(
                sid, entry, "refused: no submission_secret.txt (not made by nbgrader submit?)", now
            )
            return
        dest = self.intake / hashlib.sha256(sid.encode()).hexdigest()[:20]
        if dest.exists():
            shutil.rmtree(dest)
        notebooks = {nb.name for nb in self.course.notebooks(entry.assignment)}
        try:
            secret, notes = exchange.take(path, entry, notebooks, dest)
        except (exchange.Refused, OSError) as exc:
            shutil.rmtree(dest, ignore_errors=True)
            secret = self._secret_of(path)
            self.refuse(sid, entry, f"refused: {exc}", now, secret)
            return
        self.ledger.add(
            id=sid,
            student=entry.student,
            assignment=entry.assignment,
            timestamp=entry.timestamp,
            secret=secret,
            submitted=entry.submitted,
            seen=now,
            state="queued",
            reason="; ".join(notes),
        )
        self.known.add(sid)
        n = self.ledger.replace_older(entry.student, entry.assignment, entry.submitted, sid)
        log(f"{sid}: queued" + (f" (replacing {n} older)" if n else ""))

    @staticmethod
    def _secret_of(path):
        try:
            text = exchange._read_regular(path / "submission_secret.txt", exchange.MAX_SMALL)
            secret = text.decode("ascii", "replace").strip()
            return secret if exchange.SECRET.fullmatch(secret) else None
        except (exchange.Refused, OSError):
            return None

    def refuse(self, sid, entry, reason, now, secret=None):
        """Intake refused it: a page saying why when the student can fetch one, never an attempt."""
        log(f"{sid}: {reason}")
        self.known.add(sid)
        row = dict(id=sid, seen=now, state="refused", reason=reason)
        if entry is not None:
            row.update(
                student=entry.student,
                assignment=entry.assignment,
                timestamp=entry.timestamp,
                submitted=entry.submitted,
            )
        if entry is None or not secret:
            self.ledger.add(**row)
            return
        row.update(secret=secret, state="grading", started=now)
        self.ledger.add(**row)
        self.ledger.graded(sid, False, {"notice": reason}, None, None, time.time())
        self.release(sid)

    # -- grading ---------------------------------------------------------------------
    def dispatch(self):
        if len(self.inflight) >= 2 * self.pool.jobs:
            return
        busy = {(v["student"], v["assignment"]) for v in self.inflight.values()}
        now = time.time()
        for row in self.ledger.queued():
            if len(self.inflight) >= 2 * self.pool.jobs:
                return
            pair = (row["student"], row["assignment"])
            if pair in busy:
                continue
            attempts = self.ledger.attempts(*pair)
            if self.policy.max_attempts and len(attempts) >= self.policy.max_attempts:
                self.ledger.set(row["id"], state="grading", started=now)
                notice = (
                    f"You have used all {self.policy.max_attempts} graded attempts at this assignment: "
                    "this submission was not graded automatically (your instructor still has it)."
                )
                self.ledger.graded(row["id"], False, {"notice": notice}, None, None, time.time())
                self.guard(row["id"], self.release, row["id"])
                continue
            if attempts and self.policy.cooldown:
                not_before = max(a["submitted"] for a in attempts) + self.policy.cooldown
                if now < not_before:
                    if row["not_before"] != not_before:
                        self.ledger.set(row["id"], not_before=not_before)
                    continue
            busy.add(pair)
            self.guard(row["id"], self.start_grading, row)

    def start_grading(self, row):
        from autograder.grading.intake.collect import find_submissions

        a = row["assignment"]
        if self._signature(a) != self.sources.get(a):
            log(f"{a}: the source changed: calibrating again")
            self.calibrate(a)
        sid = row["id"]
        folder = self.intake / hashlib.sha256(sid.encode()).hexdigest()[:20]
        subs = [
            s
            for s in find_submissions(folder, self.course, warn=lambda m: log(f"{sid}: {m}"))
            if s.assignment == a and s.student == row["student"]
        ]
        problems = self.course.unsupported(a) + self.calibration.refused.get(a, [])
        self.ledger.set(sid, state="grading", started=time.time())
        self.inflight[sid] = {
            "student": row["student"],
            "assignment": a,
            "subs": {s.key: s for s in subs},
            "results": {},
            "want": {},
            "problems": problems,
        }
        tasks = [] if problems else [s for s in subs if not s.status]
        for s in tasks:  # one kernel's run and the judge's (grading.verdicts)
            runs = self.calibration.tasks(s, self.limits, self.imports)
            self.inflight[sid]["want"][s.key] = set(runs)
            for kind, task in runs.items():
                self.pool.put((sid, (s.key, kind)), task)
        if not tasks:
            self.finish(sid)

    def on_result(self, token, result, error):
        sid, key = token
        if sid == "\0calibration" or sid not in self.inflight:
            return
        job = self.inflight[sid]
        key, kind = key
        job["results"].setdefault(key, {})[kind] = (result, error)
        if all(
            s.status or set(job["results"].get(k, {})) == job["want"].get(k)
            for k, s in job["subs"].items()
        ):
            self.finish(sid)

    def finish(self, sid):
        from autograder.grading.calibrate import run_error
        from autograder.grading.results import feedback, report
        from autograder.grading.results.gradebook import write_autograded
        from autograder.grading.verdicts import apply_settled, settled

        job = self.inflight.pop(sid)
        if job["problems"]:
            notice = (
                "This assignment cannot be graded automatically here (your instructor grades it "
                "with nbgrader); this submission does not count as an attempt."
            )
            self.ledger.graded(sid, False, {"notice": notice}, None, None, time.time())
            log(f"{sid}: not graded: " + "; ".join(job["problems"]))
            self.release(sid)
            return
        notebooks, errors, all_rows = [], 0, []
        for key, sub in job["subs"].items():
            runs = job["results"].get(key, {})
            error = run_error(runs)
            result = None
            try:
                rows, result = self.calibration.rows(sub, runs)
                apply_settled(rows, settled(self.out))
            except Exception:  # noqa: BLE001 - a result the grader cannot read is its own failure
                error = traceback.format_exc()
                rows = report.rows_for(sub, None, error)
            if error:
                errors += 1
                log(f"{sid}: grader error on {key}:\n{error[-2000:]}")
            all_rows.extend(rows)
            if sub.status != "refused":
                feedback.write(self.out, sub, rows, result)
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
            self.latest_rows[(sub.student, sub.assignment, sub.notebook)] = rows
        counted = errors == 0 and any(s.status != "refused" for s in job["subs"].values())
        self._install_submitted(sid, job)
        self.write_grades()
        score = sum(r.score for r in all_rows)
        maximum = sum(r.max_score for r in all_rows)
        result_json = {"notebooks": notebooks}
        if not counted and errors:
            result_json["notice"] = (
                "The grader failed on this submission (not your fault): it does not count as an "
                "attempt; submit again, or tell your instructor."
            )
        self.ledger.graded(sid, counted, result_json, score, maximum, time.time())
        self.release(sid)

    def _install_submitted(self, sid, job):
        """The submission into the course's ``submitted/`` (formgrader, manual grading), and its
        timestamp into the gradebook (late penalties), as ``nbgrader collect`` would."""
        from autograder.grading.intake.zipcollect import install

        student, a = job["student"], job["assignment"]
        folder = self.intake / hashlib.sha256(sid.encode()).hexdigest()[:20] / student / a
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

    # -- release ---------------------------------------------------------------------
    def deadline(self, student, assignment) -> float | None:
        """The due date from the gradebook (with the student's extension), cached for 30 s."""
        key = (student, assignment)
        cached = self.deadlines.get(key)
        if threading.current_thread().name != "serve-loop":  # the gradebook is the loop's
            return cached[0] if cached else None
        if cached and time.monotonic() - cached[1] < 30:
            return cached[0]
        from nbgrader.api import MissingEntry

        gb = self.gradebook.gb
        due = None
        try:
            try:
                due = gb.find_submission(assignment, student).duedate
            except MissingEntry:
                due = gb.find_assignment(assignment).duedate
        except MissingEntry:
            due = None
        except Exception:  # noqa: BLE001
            gb.db.rollback()
            log(traceback.format_exc())
        value = due.replace(tzinfo=dt.UTC).timestamp() if due is not None else None
        self.deadlines[key] = (value, time.monotonic())
        return value

    def views(self, row) -> list[dict]:
        """What the student may see of a graded row, one dict per notebook (the page, the JSON)."""
        from autograder.grading.verdicts import settled

        result = json.loads(row["result"] or "{}")
        now = time.time()
        deadline = self.deadline(row["student"], row["assignment"])
        mode = self.policy.hidden_mode(deadline, now)
        attempts = self.ledger.attempts(row["student"], row["assignment"])
        next_at = None
        if self.policy.max_attempts and len(attempts) >= self.policy.max_attempts:
            next_text = "You have no graded attempts left at this assignment."
        else:
            if self.policy.cooldown and attempts:
                next_at = max(a["submitted"] for a in attempts) + self.policy.cooldown
            next_text = (
                f"Your next submission is graded from {page.utc(next_at)} on."
                if next_at and next_at > row["finished"]
                else "You may submit again now."
            )
        base = {
            "student": row["student"],
            "assignment": row["assignment"],
            "submitted_at": row["submitted"],
            "graded_at": row["finished"],
            "seconds_after_submit": max(0.0, row["finished"] - row["submitted"]),
            "attempt": row["attempt"],
            "max_attempts": self.policy.max_attempts or None,
            "next_attempt": next_text,
            "next_attempt_at": next_at,
            "deadline": deadline,
            "hidden_mode": mode,
        }
        notice = [result["notice"]] if result.get("notice") else []
        if not result.get("notebooks"):
            return [
                dict(base, notebook=nb.name, notes=notice, tests=[])
                for nb in self.course.notebooks(row["assignment"])
            ]
        decisions = settled(
            self.out
        )  # a difference the instructor settled is no longer under review
        return [
            dict(
                base,
                notebook=nb["notebook"],
                notes=notice + nb["notes"],
                tests=student_rows(_settled_rows(nb["rows"], decisions), mode),
            )
            for nb in result["notebooks"]
        ]

    def release(self, sid):
        row = next((r for r in self.ledger.in_state("graded") if r["id"] == sid), None)
        if row is None:
            return
        for view in self.views(row):
            exchange.release(
                self.feedback_dir,
                row["secret"],
                view["notebook"],
                page.render(view),
                self.course.config.groupshared,
            )
        self.ledger.released(sid)
        self.sweep_intake()
        self.write_attempts()
        self.write_results()
        self.report_dirty = True
        done = self.ledger.db.execute("SELECT * FROM submissions WHERE id=?", (sid,)).fetchone()
        log(
            f"{sid}: released {done['released'] - done['submitted']:.2f} s after submit"
            + (f", attempt {done['attempt']}" if done["attempt"] else ", not counted")
        )

    # -- what the instructor reads ---------------------------------------------------
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
        lines = difference_lines(rows, self.course.config.counts) + report.review_lines(rows)
        tmp = self.out / ".review.txt.tmp"
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.replace(tmp, self.out / "review.txt")

    def sweep_intake(self):
        """Remove the private copies of submissions in a final state (released, refused,
        replaced): only those still queued, grading or graded (a restart needs them) stay."""
        keep = {
            hashlib.sha256(r["id"].encode()).hexdigest()[:20]
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
        tmp = self.attempts_csv.with_name(".attempts.csv.tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(FIELDS)
            for r in self.ledger.all():
                w.writerow(
                    [
                        _iso(r[f])
                        if f in ("submitted", "seen", "started", "finished", "released")
                        else (
                            ""
                            if r[f] is None
                            else (format(r[f], "g") if isinstance(r[f], float) else r[f])
                        )
                        for f in FIELDS
                    ]
                )
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
            log("the class report failed (the service goes on):\n" + traceback.format_exc())

    # -- the status endpoint ---------------------------------------------------------
    def queue_status(self) -> dict:
        counts = self.ledger.counts()
        return {
            "queued": counts.get("queued", 0),
            "grading": counts.get("grading", 0),
            "released": counts.get("released", 0),
            "ready": self.ready.is_set(),
        }

    def student_status(self, student: str) -> dict:
        out = []
        for row in self.ledger.last_results(student):
            out.extend(self.views(row))
        waiting = [
            {"assignment": r["assignment"], "state": r["state"], "submitted_at": r["submitted"]}
            for r in self.ledger.in_state("queued", "grading")
            if r["student"] == student
        ]
        return {"student": student, "last": out, "waiting": waiting}
