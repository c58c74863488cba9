"""On the host: a worker's supervisor - one sandbox (the zygote) and one judge, and the rules.

For each submission it sends the zygote the student's cells and the places of the tests
(never a test's source), and the judge the tests (never anything from the student but
observations). When the student process reaches a run of tests, the supervisor runs each
test in the judge and carries every call the test makes into student code to the student's
test process, and every observation back - enforcing each test's time limit (it stops the
test process), the notebook's wall limit, and a size limit on everything it carries. It
decides no verdict: the judge does.

The result of a submission (:class:`~autograder.wire.types.ResultFrame`): ``{"cells": [...],
"tests": [...], "main", "garbled", "restored", "seconds"}``, each test ``{"passed", "partial",
"error", "message", "status", "output", "seconds"}`` (status: None, or why the test could not count: timeout, kernel-died,
memory-limit, output-limit, tampered, not-run).
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from autograder.grading.host.sandbox import (
    PROC,
    WorkerFailure,
    _children,
    _vm_size,
    bwrap_command,
    font_cache,
    python_command,
    sandbox_env,
    sandbox_tmp,
)
from autograder.grading.status import CALL_TEXT
from autograder.remote.errors import NEEDS_KERNEL
from autograder.wire.frames import ProtocolError, Timeout, read_frame, wait_readable, write_frame
from autograder.wire.pace import Budget, Pace
from autograder.wire.types import LimitsFrame, Options, ResultFrame, TaskFrame

STARTUP_TIMEOUT = 600
GRACE = 5.0  # seconds the judge gets to finish a test after the student's process was stopped
# a test one kernel ran past its limit (a task's "kernel_timeouts", when the judge's run follows
# one kernel's: autograder grade) gets this share of the limit in the judge, at least
# AFTER_KERNEL_MIN seconds: the judge's verdict there can only reveal a difference (a pass one
# kernel did not give), and a loop would otherwise cost the class its limit twice
AFTER_KERNEL_SHARE = 0.1
AFTER_KERNEL_MIN = 1.0
AFTER_KERNEL_TEXT = (
    "the call into student code ran past the time limit and was stopped (graded in one kernel, "
    "the test ran past its limit; checked again here for {:g} s)"
)


def after_kernel_limit(timeout: float) -> float:
    """The judge's limit for a test one kernel ran past ``timeout`` on."""
    return min(timeout, max(AFTER_KERNEL_MIN, timeout * AFTER_KERNEL_SHARE))


def _log_tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _drop_if_empty(path: Path) -> None:
    """A process's log that nothing was written to is not kept."""
    try:
        if path.stat().st_size == 0:
            path.unlink()
    except OSError:
        pass


class _Process:
    """A child process speaking frames on its stdin/stdout, stderr to a log file."""

    def __init__(self, cmd, log_path, env=None, cwd=None, pass_fds=()):
        log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            pass_fds=pass_fds,
            env=env,
            cwd=cwd,
        )
        log.close()
        self.log_path = Path(log_path)
        self.out = self.proc.stdout.fileno()
        self.inp = self.proc.stdin.fileno()

    @classmethod
    def forked(cls, pid: int, inp: int, out: int, log_path) -> _Process:
        """A process another one forked for us (:class:`JudgeTemplate`): the same interface, with
        the process known by a pidfd (it is not our child: its parent reaps it)."""
        self = cls.__new__(cls)
        self.proc = _NotOurChild(pid)
        self.proc.stdin = os.fdopen(inp, "wb", buffering=0)
        self.proc.stdout = os.fdopen(out, "rb", buffering=0)
        self.log_path = Path(log_path)
        self.out, self.inp = out, inp
        return self

    def send(self, header, body=b""):
        write_frame(self.inp, header, body)

    def read(self, timeout=None):
        return read_frame(self.out, timeout=timeout)

    def alive(self):
        return self.proc.poll() is None

    def wait(self, left) -> bool:
        """Whether a frame starts arriving before ``left()`` (seconds of a limit, re-read as
        time passes: :class:`~autograder.wire.pace.Budget`) runs out."""
        while True:
            remaining = left()
            if remaining <= 0:
                return False
            if wait_readable([self.out], min(remaining, 0.5)):
                return True

    def log_tail(self, n=3000):
        return _log_tail(self.log_path, n)

    def close(self):
        try:
            if self.proc.poll() is None:
                self.send({"op": "quit"})
                self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001
            pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except Exception:  # noqa: BLE001
                pass
        _drop_if_empty(self.log_path)


class _NotOurChild:
    """What :class:`_Process` uses of a ``Popen``, for a process known by its pidfd."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = self.stdout = None
        try:
            self.fd: int | None = os.pidfd_open(pid)
        except OSError:  # already gone (and reaped)
            self.fd, self.returncode = None, -1

    def poll(self):
        if self.returncode is None and self.fd is not None and wait_readable([self.fd], 0):
            self._gone()
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None and self.fd is not None:
            if not wait_readable([self.fd], timeout):
                raise subprocess.TimeoutExpired("judge", timeout)
            self._gone()
        return self.returncode

    def kill(self):
        if self.returncode is None and self.fd is not None:
            try:
                signal.pidfd_send_signal(self.fd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _gone(self):
        self.returncode = -1  # its parent reaps it and keeps the status
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class JudgeTemplate:
    """One warm judge per process and preload list, which forks a judge for each sandbox
    (:func:`autograder.grading.host.judge.template`): N sandboxes, one judge warm-up."""

    def __init__(self, preload: list[str], log_dir: Path):
        import socket

        self.preload = list(preload)
        self.lock = threading.Lock()
        self.ready = False
        ours, theirs = socket.socketpair()
        fd, log = tempfile.mkstemp(prefix="judge-template-", suffix=".log", dir=log_dir)
        try:
            self.proc = subprocess.Popen(
                python_command("host.judge", "template"),
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=fd,
                env=_judge_env(),
                cwd=tempfile.gettempdir(),
            )
        finally:
            os.close(fd)
            theirs.close()
        self.sock = ours
        self.log_path = Path(log)
        self.send({"preload": self.preload})

    def send(self, header):
        """The template's one frame: its config (a judge's first frame, spec ``judge in preload``)."""
        write_frame(self.sock.fileno(), header)

    def spawn(self, log_path) -> _Process:
        """A judge forked from the warm one, speaking frames on fresh pipes, its log its own."""
        import socket
        import struct

        with self.lock:
            fileno = self.sock.fileno()
            if not self.ready:
                if not wait_readable([fileno], STARTUP_TIMEOUT) or self.sock.recv(1) != b"R":
                    raise WorkerFailure(f"the judge did not start:\n{self.log_tail()}")
                self.ready = True
            in_r, in_w = os.pipe()
            out_r, out_w = os.pipe()
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                socket.send_fds(self.sock, [b"s"], [in_r, out_w, log])
                got = b""
                while len(got) < 8:
                    if not wait_readable([fileno], 60):
                        break
                    more = self.sock.recv(8 - len(got))
                    if not more:
                        break
                    got += more
            finally:
                for fd in (in_r, out_w, log):
                    os.close(fd)
            if len(got) != 8:
                os.close(in_w)
                os.close(out_r)
                raise WorkerFailure(f"the judge did not start:\n{self.log_tail()}")
            (pid,) = struct.unpack("q", got)
        return _Process.forked(pid, in_w, out_r, log_path)

    def log_tail(self, n=3000):
        return _log_tail(self.log_path, n)

    def close(self):
        """Its socket closed, it reaps the judges it forked (each closed by its supervisor) and ends."""
        try:
            self.sock.close()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.proc.kill()
            self.proc.wait()
        _drop_if_empty(self.log_path)


def _judge_env():
    return dict(
        os.environ,
        PYTHONDONTWRITEBYTECODE="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        MPLBACKEND="Agg",
    )


_templates: dict[tuple, JudgeTemplate] = {}
_templates_lock = threading.Lock()


def judge_template(preload: list[str], log_dir: Path) -> JudgeTemplate:
    """This process's warm judge for ``preload`` (started on first use; see :func:`close_all`)."""
    key = tuple(preload)
    with _templates_lock:
        t = _templates.get(key)
        if t is None or t.proc.poll() is not None:
            t = _templates[key] = JudgeTemplate(list(preload), log_dir)
        return t


class Supervisor:
    """One sandbox and one judge; grades one task at a time (:meth:`grade`)."""

    def __init__(self, options: Options):
        self.options = options
        self.preload = sorted(set(options.preload))  # grows when a task imports more (see grade)
        self.log_dir = Path(options.log_dir or tempfile.gettempdir())
        self.zygote = None
        self.judge = None
        self._template: JudgeTemplate | None = None
        self.vm_base = None
        self._tmp = None
        self.seq = _Seq()

    # -- lifecycle -------------------------------------------------------------------
    def start(self):
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError:  # e.g. the host's folder on a remote Dask worker
            self.log_dir = Path(tempfile.gettempdir())
        self._spawn_judge()  # the judge warms up while the sandbox starts
        self._start_zygote()  # (closes both on failure)
        self._await_judge()
        return self

    def _log(self, prefix):
        fd, path = tempfile.mkstemp(prefix=prefix, suffix=".log", dir=self.log_dir)
        os.close(fd)
        return path

    def _start_zygote(self):
        info_r = info_w = None
        if self.options.sandbox:
            info_r, info_w = os.pipe()
            cmd = bwrap_command(python_command("inside.zygote"), info_fd=info_w)
            tmp = sandbox_tmp()
            config = {
                "sandboxed": True,
                "scratch": f"{tmp}/work",
                "outdir": f"{tmp}/out",
                "home": f"{tmp}/home",
                "tmp": tmp,
                "proc": PROC,
            }
            env = cwd = None
        else:
            self._tmp = tempfile.mkdtemp(prefix="autograder-nosandbox-")
            cmd = python_command("inside.zygote")
            config = {
                "sandboxed": False,
                "scratch": f"{self._tmp}/work",
                "outdir": f"{self._tmp}/out",
                "home": f"{self._tmp}/home",
                "tmp": self._tmp,
            }
            env = dict(os.environ, **sandbox_env(home=config["home"], tmp=self._tmp))
            cwd = self._tmp
        config.update(preload=self.preload, fonts=font_cache())
        self.zygote = _Process(
            cmd,
            self._log("zygote-"),
            env=env,
            cwd=cwd,
            pass_fds=(info_w,) if info_w is not None else (),
        )
        zygote_pid = self.zygote.proc.pid
        if info_w is not None:
            os.close(info_w)
            info = _read_info(info_r)
            os.close(info_r)
            init = info.get("child-pid")
            if isinstance(init, int):
                kids = []
                for _ in range(200):
                    kids = _children(init)
                    if kids:
                        break
                    time.sleep(0.01)
                zygote_pid = kids[0] if kids else None
        try:
            self.zygote.send(config)
            ready, _ = self.zygote.read(STARTUP_TIMEOUT)
        except (OSError, EOFError, ProtocolError, Timeout) as exc:
            tail = self.zygote.log_tail()
            self.close()
            raise WorkerFailure(f"the sandbox did not start: {exc}\n{tail}") from None
        if not ready.get("ready"):
            tail = self.zygote.log_tail()
            self.close()
            raise WorkerFailure(f"the sandbox did not start: {ready}\n{tail}")
        self.vm_base = _vm_size(zygote_pid) if zygote_pid else None

    def _spawn_judge(self):
        """The warm judge of this preload list starts (or is running): :meth:`_await_judge` gets
        a fork of it. Without it (it could not start), a judge of its own, warmed up alone."""
        self._template = None
        try:
            self._template = judge_template(self.preload, self.log_dir)
            return
        except (OSError, ValueError):
            pass
        self.judge = _Process(
            python_command("host.judge"),
            self._log("judge-"),
            env=_judge_env(),
            cwd=tempfile.gettempdir(),
        )
        try:
            self.judge.send({"preload": self.preload})
        except OSError:
            pass  # reported by _await_judge

    def _await_judge(self):
        if self.judge is None and self._template is not None:
            try:
                self.judge = self._template.spawn(self._log("judge-"))
            except (OSError, WorkerFailure) as exc:
                self.close()
                raise WorkerFailure(f"the judge did not start: {exc}") from None
        try:
            ready, _ = self.judge.read(STARTUP_TIMEOUT)
        except (OSError, EOFError, ProtocolError, Timeout) as exc:
            tail = self.judge.log_tail()
            self.close()
            raise WorkerFailure(f"the judge did not start: {exc}\n{tail}") from None
        if not ready.get("ready"):
            self.close()
            raise WorkerFailure(f"the judge did not start: {ready}")
        self._limit_judge()

    def _limit_judge(self):
        """The judge decodes what student processes send: it runs under an address-space limit (its
        warm size + the memory limit, inherited by the child it forks per submission), and every
        wait on it has a deadline (a test's time limit + GRACE; it is stopped past it)."""
        base = _vm_size(self.judge.proc.pid)
        if not base:
            return
        import resource

        limit = base + self.options.judge_memory
        try:
            resource.prlimit(self.judge.proc.pid, resource.RLIMIT_AS, (limit, limit))
        except (OSError, ValueError):
            pass

    @property
    def address_space(self):
        if self.vm_base and self.options.memory_limit:
            return self.vm_base + int(self.options.memory_limit)
        return None

    def close(self):
        for p in (self.zygote, self.judge):
            if p is not None:
                p.close()
        self.zygote = self.judge = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def log_tail(self):
        return "\n".join(p.log_tail() for p in (self.zygote, self.judge) if p is not None)

    # -- grading ---------------------------------------------------------------------
    def grade(self, task: TaskFrame) -> ResultFrame:
        """Grade one task: ``{"id", "items", "tests", "files", "limits", "imports"}``."""
        missing = set(task.get("imports", ())) - set(self.preload)
        if (
            self.zygote is None
            or not self.zygote.alive()
            or self.judge is None
            or not self.judge.alive()
            or missing
        ):
            self.close()
            self.preload = sorted(set(self.preload) | missing)
            self.start()
        try:
            return utf8_safe(_NotebookRun(self, task).run())
        except (OSError, EOFError, ProtocolError, Timeout, WorkerFailure) as exc:
            tail = self.log_tail()
            self.close()
            raise WorkerFailure(f"{type(exc).__name__}: {exc}\n{tail}") from None


def utf8_safe(value, depth=0):
    """Text from the sandbox made safe for UTF-8, once, here at the boundary: a lone surrogate a
    cell printed or raised (``"\\ud800"``) becomes its escape, so no writer downstream fails."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if depth > 50:
        return value
    if isinstance(value, dict):
        return {utf8_safe(k, depth + 1): utf8_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [utf8_safe(v, depth + 1) for v in value]
    return value


def written_files(spec, body: bytes) -> tuple[list, bool]:
    """``([[name, base64 data], ...], malformed)``: the files a notebook wrote (the zygote's
    ``result["written"]``: ``[[name, size], ...]``, their bytes one after another in ``body``),
    checked as untrusted data: at most the zygote's count and byte bounds, each name a relative
    path of plain parts (no ``..``, no ``.`` or empty part, no NUL), sizes that add up to the
    body. Anything else: none of them, and ``malformed`` True."""
    import base64

    from autograder.wire.frames import MAX_FILES_BYTES
    from autograder.wire.types import MAX_WRITTEN_DEPTH, MAX_WRITTEN_FILES

    if spec is None and not body:
        return [], False
    if type(spec) is not list or len(spec) > MAX_WRITTEN_FILES or len(body) > MAX_FILES_BYTES:
        return [], True
    out, at = [], 0
    for entry in spec:
        if type(entry) is not list or len(entry) != 2:
            return [], True
        name, size = entry
        if type(name) is not str or type(size) is not int or not 0 <= size <= len(body) - at:
            return [], True
        if not safe_relative(name, MAX_WRITTEN_DEPTH):
            return [], True
        out.append([name, base64.b64encode(body[at : at + size]).decode()])
        at += size
    if at != len(body):
        return [], True
    return out, False


def safe_relative(name: str, depth: int) -> bool:
    """Whether ``name`` is a relative path of at most ``depth`` plain parts, each a name a folder
    can hold (no ``.`` / ``..`` / empty part, no NUL, at most 255 bytes), as UTF-8."""
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    if not raw or len(raw) > 4096 or b"\0" in raw or name.startswith("/"):
        return False
    parts = name.split("/")
    return len(parts) <= depth and all(
        p not in ("", ".", "..") and len(p.encode("utf-8")) <= 255 for p in parts
    )


class _NotebookRun:
    """One notebook through one supervisor: the zygote's events, each test carried to the judge."""

    def __init__(self, sup: Supervisor, task: TaskFrame):
        self.sup = sup
        self.z = sup.zygote
        self.judge = _JudgeRun(sup, task)
        self.task = task
        self.pace = Pace()  # the limits' pace (wire.pace): seconds of a quiet machine
        self.limits: LimitsFrame = dict(  # type: ignore[assignment]
            task["limits"],
            address_space=sup.address_space,
            memory=sup.options.memory_limit,
            pace_load=self.pace.pinned,
        )
        self.timeout = float(self.limits["timeout"])
        ks = task.get("kernel_timeouts")
        self.after_kernel = {k for k in ks if type(k) is int} if type(ks) is list else set()
        self.start = time.monotonic()
        self.wall = self.start + float(self.limits["wall"])
        self.tests = {}
        self.test_process = False  # a test process is serving
        self.garbled = False
        self.restored = []
        self.done = None
        self.kernel = None  # why the judge cannot carry this notebook (its verdicts: not confirmed)
        self.checks = [0, 0.0]  # the judge's invariant checks: count, seconds

    def run(self):
        from autograder.grading.host.reads import analyse

        tests = self.task["tests"]
        if tests:  # (one kernel's run has none: no judge child for it)
            code = analyse(self.task["items"], [t.get("source", "") for t in tests])
            code["exports"] = list(self.task.get("exports", []))
            self.judge.begin(tests, code)
        # the submission travels in the frame's body (as large as intake accepts, frames.MAX_TASK),
        # which the zygote never reads: the submission's own relay process does
        zy_task = {
            "items": self.task["items"],
            "files": self.task.get("files", []),
            "tests": [{"id": t["id"]} for t in self.task["tests"]],
            "written": self.task.get("written"),
        }
        self.z.send({"op": "grade", "limits": self.limits}, json.dumps(zy_task).encode())
        aborted = False
        while self.done is None:
            left = self.wall - time.monotonic()
            if left <= 0 and not aborted:
                self.z.send({"op": "abort"})
                aborted = True
            ev, body = self.z.read(timeout=30 if aborted else max(left, 0) + 1)
            self._zygote_event(ev, body)
        if tests:
            self.judge.end()
        result = self.done
        if "error" in result:
            raise WorkerFailure(result["error"])
        n = len(self.task["tests"])
        missing = (
            {"passed": False, "status": "not-run"}
            if self.kernel is None
            else {"passed": False, "status": NEEDS_KERNEL, "message": f"not run: {self.kernel}"}
        )
        result["tests"] = [self.tests.get(k, dict(missing)) for k in range(n)]
        result["garbled"] = bool(result.get("garbled")) or self.garbled
        result["restored"] = self.restored
        if self.kernel is not None:
            result["needs_kernel"] = self.kernel
        result["invariant"] = self.checks
        result["seconds"] = round(time.monotonic() - self.start, 3)
        return result

    # -- zygote events ---------------------------------------------------------------
    def _zygote_event(self, ev, body):
        kind = ev.get("ev")
        if kind == "done":
            self.done = (
                ev.get("result") if isinstance(ev.get("result"), dict) else {"error": "no result"}
            )
            if "error" not in self.done:
                # (the relay read them, never the student's code: a malformed list is the
                # grader's fault, so the files are dropped and said, and no row is flagged)
                self.done["written"], bad = written_files(self.done.get("written"), body)
                if bad:
                    notes = self.done.get("notes")
                    self.done["notes"] = [
                        *(notes if isinstance(notes, list) else []),
                        "the files the notebook wrote were not copied: the sandbox's list of "
                        "them was malformed",
                    ]
        elif kind == "tests":
            ks = ev.get("ks")
            if type(ks) is list and all(type(k) is int for k in ks):
                self.test_process = True
                self._run_tests(ks)
            if self.kernel is not None:  # the rest is not confirmed: running it would be wasted
                self.z.send({"op": "abort"})
            else:
                self.z.send({"op": "continue"})
            self.test_process = False
        elif kind == "garbled":
            self.garbled = True
        # replies and test exits outside a test: stale, ignored

    def _run_tests(self, ks):
        n = len(self.task["tests"])
        for k in ks:
            if not 0 <= k < n or k in self.tests:
                self.garbled = True
                continue
            if time.monotonic() >= self.wall:
                self.tests[k] = {
                    "passed": False,
                    "status": "timeout",
                    "message": "not run: the notebook ran past its time limit",
                }
                continue
            if not self.test_process:
                self.z.send({"op": "more-tests"})
                self.test_process = True
            verdict = self._run_test(k)
            if k in self.after_kernel and verdict.get("status") == "timeout":
                verdict["message"] = AFTER_KERNEL_TEXT.format(after_kernel_limit(self.timeout))
            self.tests[k] = verdict

    def _left(self, budget, extra=0.0):
        """Seconds left to a test: its limit at the pace's rate, and the notebook's wall limit."""

        def left():
            now = time.monotonic()
            return min(budget.left(now) + extra, self.wall - now + extra)

        return left

    def _run_test(self, k):
        if self.kernel is not None:  # the judge cannot carry this notebook: not confirmed
            return {"passed": False, "status": NEEDS_KERNEL, "message": self.kernel}
        limit = after_kernel_limit(self.timeout) if k in self.after_kernel else self.timeout
        deadline = Budget(limit, self.pace)
        names, restored, status, dtype, complete = None, [], None, None, True
        seq = next(self.sup.seq)
        self.z.send({"op": "begin", "seq": seq})
        reply, _ = self._reply(seq, deadline)
        if reply.get("status"):
            status = reply["status"]
        else:
            names = reply.get("names")
            complete = reply.get("complete", True) is True
            threads = reply.get("threads")
            if type(threads) is list and threads:
                self.kernel = (
                    "the student's notebook started threads in an earlier cell ("
                    + ", ".join(str(t)[:60] for t in threads[:3])
                    + "), which a forked test process cannot use"
                )
                return {"passed": False, "status": NEEDS_KERNEL, "message": self.kernel}
            dtype = reply.get("dtype") if isinstance(reply.get("dtype"), str) else None
            r = reply.get("restored")
            if type(r) is list:
                restored = [str(x)[:200] for x in r[:20]]
                self.restored.extend(x for x in restored if x not in self.restored)
        if self.judge.lost == "stopped":  # an earlier test of this notebook ran past its limit
            return {
                "passed": False,
                "status": "timeout",
                "message": "not run: an earlier test ran past the time limit and was stopped",
            }
        if self.judge.lost:
            return {"passed": False, "status": "grader-error", "message": "the judge failed"}
        self.judge.send(
            {
                "op": "test",
                "k": k,
                "names": names if status is None else {},
                "dtype": dtype,
                "complete": complete,
            }
        )
        while True:
            try:
                if not self.judge.j.wait(self._left(deadline, GRACE)):
                    raise Timeout("the test's time is up")
                frame, payload = self.judge.read(timeout=GRACE + 30)
            except Timeout:
                self.judge.stop()
                return {
                    "passed": False,
                    "status": "timeout",
                    "message": "the test ran past the time limit and was stopped",
                }
            if frame.get("ev") == "verdict":
                verdict = {
                    key: frame.get(key)
                    for key in (
                        "passed",
                        "partial",
                        "error",
                        "message",
                        "failure",
                        "status",
                        "output",
                        "seconds",
                    )
                }
                dropped = frame.get("dropped")
                if type(dropped) is list:
                    verdict["dropped"] = [str(x)[:100] for x in dropped[:50]]
                checks = frame.get("checks")
                if type(checks) is list and len(checks) == 2:
                    self.checks = checks
                if verdict.get("status") == NEEDS_KERNEL:
                    self.kernel = str(verdict.get("message") or "")[:500] or NEEDS_KERNEL
                if status and not verdict.get("status"):
                    verdict["status"], verdict["passed"] = status, False
                return verdict
            if frame.get("op") == "call":
                header = {
                    "op": "call",
                    "seq": next(self.sup.seq),
                    "quiet": bool(frame.get("quiet")),
                    "rng": frame.get("rng") if isinstance(frame.get("rng"), str) else None,
                }
                if status or not self.test_process:
                    self.judge.send(
                        {
                            "ev": "reply",
                            "status": status or "kernel-died",
                            "message": "the student's process is gone",
                        }
                    )
                    continue
                self.z.send(header, payload)
                reply, body = self._reply(header["seq"], deadline)
                if reply.get("status"):
                    status = reply["status"]
                    self.judge.send(
                        {"ev": "reply", "status": status, "message": CALL_TEXT.get(status, status)}
                    )
                else:
                    self.judge.send({"ev": "reply"}, body)
            elif frame.get("ev") == "child-exit":  # the judge's child crashed: a grader bug
                self.judge.lost = "crashed"
                self.judge.pid = None
                return {
                    "passed": False,
                    "status": "grader-error",
                    "message": "the judge failed on this test",
                }

    def _reply(self, seq, deadline):
        """The student process's answer to request ``seq``, or ``{"status": why not}``."""
        left = self._left(deadline)
        while True:
            if not self.z.wait(left):
                return self._kill_test("timeout")
            try:
                ev, body = self.z.read(timeout=30)  # a frame begun is finished
            except Timeout:
                return self._kill_test("timeout")
            kind = ev.get("ev")
            if kind == "reply" and ev.get("seq") == seq:
                if ev.get("status"):
                    return {"status": "kernel-died"}, b""
                return ev, body
            if kind == "test-exit":
                self.test_process = False
                code = ev.get("status")
                if code == 128 + signal.SIGXFSZ:
                    return {"status": "output-limit"}, b""
                if code == 128 + signal.SIGXCPU:
                    return {"status": "timeout"}, b""
                return {"status": "kernel-died"}, b""
            if kind == "garbled":
                self.garbled = True
                self._kill_test(None)
                return {"status": "tampered"}, b""
            if kind == "done":  # the student process ended while a test waited on it
                self.done = (
                    ev.get("result")
                    if isinstance(ev.get("result"), dict)
                    else {"error": "no result"}
                )
                self.test_process = False
                return {"status": "kernel-died"}, b""
            # a stale reply (an earlier request) or another event: ignored

    def _kill_test(self, status):
        if self.test_process:
            self.z.send({"op": "kill-test"})
            end = time.monotonic() + 30
            while time.monotonic() < end:
                try:
                    ev, _ = self.z.read(timeout=end - time.monotonic())
                except Timeout:
                    break
                if ev.get("ev") == "test-exit":
                    break
                if ev.get("ev") == "done":
                    self.done = ev.get("result")
                    break
            self.test_process = False
        return {"status": status}, b""


class _JudgeRun:
    """The judge's side of one notebook: the child it forks for it, the end, or the stop."""

    def __init__(self, sup: Supervisor, task: TaskFrame):
        self.sup = sup
        self.j = sup.judge
        self.task_id = task.get("id", "")
        self.pid = None  # the judge's child for this notebook
        self.lost = (
            ""  # "stopped" (a test's time ran out) or "crashed": restarted after this notebook
        )

    def send(self, header, body=b""):
        self.j.send(header, body)

    def read(self, timeout=None):
        return self.j.read(timeout)

    def begin(self, tests, code=None):
        self.j.send({"op": "begin", "tests": tests, "code": code or {}})
        frame, _ = self.j.read(timeout=60)
        if frame.get("ev") != "child":
            raise WorkerFailure(f"the judge did not start a submission: {frame}")
        self.pid = frame.get("pid")
        frame, _ = self.j.read(timeout=60)
        if frame.get("ev") != "ready":
            raise WorkerFailure(f"the judge did not start a submission: {frame}")

    def stop(self):
        """The instructor's test itself ran past the limit: stop the judge's child."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.lost = "stopped"
        # the channel may hold half a frame: the judge is restarted after this submission
        self.sup.judge.close()
        self.sup.judge = None

    def end(self):
        if self.lost or self.sup.judge is None:
            if self.sup.judge is not None:
                self.sup.judge.close()
                self.sup.judge = None
            return
        self.j.send({"op": "end"})
        while True:
            frame, _ = self.j.read(timeout=60)
            if frame.get("ev") == "child-exit":
                self._log_memory(frame.get("peak_rss_kb"))
                return

    def _log_memory(self, peak):
        """``logs/judge-memory.tsv``: task id and the judge's peak resident memory (kB) so far."""
        if type(peak) is not int:
            return
        try:
            with open(self.sup.log_dir / "judge-memory.tsv", "a") as fh:
                fh.write(f"{self.task_id}\t{peak}\n")
        except OSError:
            pass


class _Seq:
    """Request numbers nobody can guess in advance (a reply must name the request it answers)."""

    def __next__(self):
        return secrets.randbits(62)


def _read_info(fd):
    data = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not wait_readable([fd], 1.0):
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        try:
            return json.loads(data)
        except ValueError:
            continue
    try:
        return json.loads(data or b"{}")
    except ValueError:
        return {}


_local = threading.local()
_all: list = []
_lock = threading.Lock()


def thread_supervisor(options: Options) -> Supervisor:
    """The calling thread's supervisor (started on first use; see :mod:`.scheduler`)."""
    sup = getattr(_local, "supervisor", None)
    if sup is None or sup.options.sandbox != options.sandbox:
        sup = Supervisor(options)
        _local.supervisor = sup
        with _lock:
            _all.append(sup)
    sup.options = dataclasses.replace(sup.options, memory_limit=options.memory_limit)
    return sup


def close_all(supervisors=None):
    """Close ``supervisors`` (default: every one :func:`thread_supervisor` made) and forget them."""
    with _lock:
        sups = list(_all) if supervisors is None else list(supervisors)
        _all[:] = [s for s in _all if all(s is not t for t in sups)]
    for s in sups:
        s.close()
    with _lock:
        idle = not _all
    if idle:  # no supervisor left to fork a judge for: the warm judges go too
        close_templates()


def close_templates():
    """End this process's warm judges (a judge already forked from one lives on)."""
    with _templates_lock:
        templates = list(_templates.values())
        _templates.clear()
    for t in templates:
        t.close()
