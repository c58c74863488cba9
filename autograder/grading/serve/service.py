"""The service: poll the exchange's inbound folder, grade, release feedback, keep the ledger.

One thread (:meth:`Service.loop`) does everything but grading, each part its own object:

* :class:`.inbound.Inbound` polls the inbound folder and takes new entries in;
* :class:`.calibration.Calibrator` keeps each assignment's calibration current;
* :class:`Service` (here) hands queued submissions to the warm sandboxes
  (:class:`.pool.ServicePool`) under the policy's cooldown and attempt limit;
* :class:`.record.Recorder` records a graded submission's scores (gradebook, ``autograded/``,
  ``submitted/``, ``OUT/feedback/``, the ledger);
* :class:`.views.Views` releases the student's page into the exchange, and answers ``api/me``;
* :class:`.outputs.Outputs` keeps what the instructor reads in ``OUT`` current.

The status endpoint (:mod:`.web`) only reads. A submission that breaks any of this is that
submission's failure: the loop goes on.
"""

from __future__ import annotations

import datetime as dt
import os
import queue
import sys
import threading
import time
import traceback
from pathlib import Path

from autograder.grading.serve import exchange
from autograder.grading.serve.ledger import Ledger
from autograder.grading.serve.outputs import intake_folder
from autograder.grading.serve.policy import Policy
from autograder.grading.serve.views import LOOP_THREAD


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

    # -- start -----------------------------------------------------------------------
    def setup(self) -> Service:
        """Read the course and policy, open the ledger, start the sandboxes (raises on a bad setup)."""
        from autograder.grading.results.gradebook import GradebookWriter
        from autograder.grading.serve.calibration import Calibrator
        from autograder.grading.serve.inbound import Inbound
        from autograder.grading.serve.outputs import Outputs
        from autograder.grading.serve.pool import ServicePool
        from autograder.grading.serve.record import Recorder
        from autograder.grading.serve.views import Views

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
        course_dir = root / config.course_id
        inbound, feedback = course_dir / "inbound", course_dir / "feedback"
        if not inbound.is_dir():
            raise FileNotFoundError(
                f"no inbound folder {inbound} (Exchange.root = {root}): release an assignment "
                "first (`nbgrader release_assignment`), which makes it"
            )
        problems = exchange.check_folders(course_dir, config.groupshared)
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
        self.ledger = Ledger(self.out / "ledger.sqlite")
        self.limits, self.options, self.imports = run.limits, run.options, run.imports
        self.pool = ServicePool(args.jobs, self.options, args.scheduler).start()
        self.gradebook = GradebookWriter(
            course.root,
            config.gradebook_url,
            config.course_id,
            late_plugin=config.late_plugin,
            settings=config.settings,
        )
        self.outputs = Outputs(self.out, self.ledger, config.counts, log)
        self.outputs.intake.mkdir(exist_ok=True)
        self.views = Views(
            self.ledger, self.policy, course, self.gradebook, self.outputs, feedback, log
        )
        self.inbound = Inbound(
            inbound, self.outputs.intake, course, self.ledger, self.views, self.guard, log
        )
        self.calibrator = Calibrator(
            course, self.ledger, self.pool, self.gradebook, self.limits, self.imports, log
        )
        self.calibration = self.calibrator.calibration
        self.recorder = Recorder(
            course, self.ledger, self.calibration, self.gradebook, self.outputs, self.views, log
        )
        return self

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self._loop_guarded, name=LOOP_THREAD, daemon=True)
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
        self.inbound.known = self.ledger.known()
        outputs = self.outputs
        outputs.load_latest()
        outputs.write_attempts()
        outputs.write_results()
        outputs.report_dirty = True  # the class report once at start (its imports and first read)
        for row in self.ledger.in_state("graded"):  # graded before a stop, not yet released
            self.guard(row["id"], self.views.release, row["id"])
        self.calibrator.calibrate_all()
        self.ready.set()
        log(
            f"serving {self.inbound.inbound} every {self.args.poll:g} s with "
            f"{self.pool.jobs} sandbox(es)"
        )
        next_poll = 0.0
        while not self.stopping.is_set():
            now = time.monotonic()
            if now >= next_poll:
                self.inbound.poll()
                next_poll = now + self.args.poll
            self.dispatch()
            for item in self.calibrator.take_stash():
                self.guard(item[0][0], self.on_result, *item)
            try:
                item = self.pool.done.get(timeout=min(0.05, self.args.poll))
            except queue.Empty:
                outputs.maybe_report(idle=not self.inflight)
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
                self.guard(row["id"], self.views.release, row["id"])
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
        if self.calibrator.changed(a):
            log(f"{a}: the source changed: calibrating again")
            self.calibrator.calibrate(a)
        sid = row["id"]
        folder = intake_folder(self.outputs.intake, sid)
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
        self.recorder.record(sid, self.inflight.pop(sid))

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
        return self.views.student_status(student)
