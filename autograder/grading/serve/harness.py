"""A throwaway course with a real nbgrader exchange and the service as a subprocess (tests, bench).

sc = ServeCourse(tmp / "x", ["01_relu_inplace"], policy={"cooldown": 0})
sc.start()                                  # autograder serve, waits until it serves
sc.submit("alice", "01_relu_inplace", path)  # the real `nbgrader submit`, as alice
sc.wait_released(1)
sc.fetch_feedback("alice", "01_relu_inplace")   # the real `nbgrader fetch_feedback`
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from autograder.course import TempCourse, nbgrader_command

AUTOGRADER = [str(Path(sys.executable).with_name("autograder"))]


class ServeCourse:
    def __init__(self, root, assignments, policy=None, serve_args=(), user=None):
        self.root = Path(root)
        self.user = user  # an autograder.authoring.accounts.Account the service runs as, or None
        self.course = TempCourse(self.root / "course", assignments)
        self.exchange = self.root / "exchange"
        self.exchange.mkdir(parents=True, exist_ok=True)
        self.out = self.root / "serve"
        self.log = self.root / "serve.log"
        self.serve_args = list(serve_args)
        lines = [f"c.Exchange.root = {str(self.exchange)!r}"]
        lines += [f"c.AutograderServe.{k} = {v!r}" for k, v in (policy or {}).items()]
        with open(self.course.root / "nbgrader_config.py", "a") as fh:
            fh.write("\n" + "\n".join(lines) + "\n")
        self.course.generate()
        for a in assignments:
            self.course.nbgrader("release_assignment", a, "--force")
        self.inbound = self.exchange / "autograd-inplace" / "inbound"
        self.proc: subprocess.Popen | None = None
        if user is not None:  # the instructor's: the course, the exchange, the service's output
            subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(self.root)], check=True)

    # -- the service -----------------------------------------------------------------
    def start(self, timeout=300, wait=True):
        log = open(self.log, "ab")
        command = [
            *AUTOGRADER,
            "serve",
            "--course",
            str(self.course.root),
            "--out",
            str(self.out),
            "--poll",
            "0.2",
            *self.serve_args,
        ]
        env = self._env()
        if self.user is not None:
            command = self.user.command(*command)
            env = self.user.env(**{k: v for k, v in env.items() if k.startswith("AUTOGRADER_")})
        self.proc = subprocess.Popen(
            command,
            cwd=self.course.root,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        log.close()
        if not wait:
            return self.proc
        deadline = time.monotonic() + timeout
        mark = self.log.read_text(errors="replace").count("] serving ")
        while time.monotonic() < deadline:
            if self.log.read_text(errors="replace").count("] serving ") > mark:
                return self.proc
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"autograder serve exited {self.proc.returncode}:\n{self.tail()}"
                )
            time.sleep(0.2)
        raise TimeoutError(f"autograder serve did not start in {timeout} s:\n{self.tail()}")

    def stop(self, sig=signal.SIGTERM):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)  # its session: the sandboxes and judges too
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        code, self.proc = self.proc.returncode, None
        return code

    def tail(self, n=4000):
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""

    def _env(self):
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env.pop("JUPYTERHUB_API_TOKEN", None)
        return env

    # -- the ledger ------------------------------------------------------------------
    def rows(self) -> list[dict]:
        path = self.out / "ledger.sqlite"
        if not path.exists():
            return []
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        con.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in con.execute("SELECT * FROM submissions")]
        finally:
            con.close()

    def wait_final(self, n, timeout=300, final=("released", "refused", "replaced"), student=None):
        """Wait until ``n`` ledger rows (of ``student``, if given) are in a final state; returns
        all rows."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.rows()
            mine = [r for r in rows if student is None or r["student"] == student]
            if sum(r["state"] in final for r in mine) >= n:
                return rows
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"autograder serve exited {self.proc.returncode}:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{n} final rows not reached: {[(r['id'], r['state']) for r in rows]}\n{self.tail()}"
                )
            time.sleep(0.1)

    @contextlib.contextmanager
    def paused(self):
        """The service stopped (SIGSTOP), so it reads nothing: what is put into inbound meanwhile
        is seen by one and the same poll once it goes on (SIGCONT)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.proc.send_signal(signal.SIGCONT)

    # -- students --------------------------------------------------------------------
    def home(self, student) -> Path:
        home = self.root / "home" / student
        if not home.exists():
            home.mkdir(parents=True)
            (home / "nbgrader_config.py").write_text(
                "c = get_config()\n"
                f"c.Exchange.root = {str(self.exchange)!r}\n"
                f"c.Exchange.cache = {str(home / '.cache')!r}\n"
                "c.CourseDirectory.course_id = 'autograd-inplace'\n"
                # every student's server runs as this one OS user here: nbgrader's id is the login
                f"c.CourseDirectory.student_id = {student!r}\n"
            )
        return home

    def _student_nbgrader(self, student, *args):
        env = self._env()
        return subprocess.run(
            [*nbgrader_command(), *args, f"--student={student}"],
            cwd=self.home(student),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def submit(self, student, assignment, notebook: Path, name=None) -> subprocess.CompletedProcess:
        """The real ``nbgrader submit`` of ``notebook`` as ``student``."""
        from autograder.course import notebooks

        folder = self.home(student) / assignment
        folder.mkdir(exist_ok=True)
        shutil.copy(notebook, folder / f"{name or notebooks(assignment)[0]}.ipynb")
        proc = self._student_nbgrader(student, "submit", assignment)
        if proc.returncode != 0:
            raise RuntimeError(f"nbgrader submit failed:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def fetch_feedback(self, student, assignment) -> list[Path]:
        """The real ``nbgrader fetch_feedback``: the pages it fetched, newest submission last."""
        proc = self._student_nbgrader(student, "fetch_feedback", assignment)
        if proc.returncode != 0:
            raise RuntimeError(f"nbgrader fetch_feedback failed:\n{proc.stdout}\n{proc.stderr}")
        folder = self.home(student) / assignment / "feedback"
        return sorted(folder.glob("*/*.html")) if folder.is_dir() else []

    def put(self, student, assignment, files: dict, name=None, secret=True, when=None) -> str:
        """What ``nbgrader submit`` writes, written directly into inbound (a student can write
        anything there): ``files`` ``{relative name: bytes}``; returns the entry's name."""
        when = when or dt.datetime.now(dt.UTC)
        stamp = when.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"
        rand = base64.urlsafe_b64encode(os.urandom(9)).decode()
        name = name or f"{student}+{assignment}+{stamp}+{rand}"
        staging = self.inbound.parent / f".staging-{rand}"
        staging.mkdir()
        for rel, data in files.items():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            (staging / rel).write_bytes(data)
        (staging / "timestamp.txt").write_text(stamp)
        if secret:
            (staging / "submission_secret.txt").write_text(secrets.token_hex(64))
        os.rename(staging, self.inbound / name)
        return name
