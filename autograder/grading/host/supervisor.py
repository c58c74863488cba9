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
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

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
        try:
            if self.log_path.stat().st_size == 0:
                self.log_path.unlink()
        except OSError:
            pass


class Supervisor:
    """One sandbox and one judge; grades one task at a time (:meth:`grade`)."""

    def __init__(self, options: Options):
        self.options = options
        self.preload = sorted(set(options.preload))  # grows when a task imports more (see grade)
        self.log_dir = Path(options.log_dir or tempfile.gettempdir())
        self.zygote = None
        self.judge = None
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
        config.update(preload=self.preload)
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
        env = dict(
            os.environ,
            PYTHONDONTWRITEBYTECODE="1",
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            MPLBACKEND="Agg",
        )
        self.judge = _Process(
            python_command("host.judge"), self._log("judge-"), env=env, cwd=tempfile.gettempdir()
        )
        try:
            self.judge.send({"preload": self.preload})
        except OSError:
            pass  # reported by _await_judge

    def _await_judge(self):
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
        self.start = time.monotonic()
        self.wall = self.start + float(self.limits["wall"])
        self.tests = {}
        self.test_process = False  # a test process is serving
        self.garbled = False
        self.restored = []
        self.done = None
        self.kernel = None  # why this notebook must be graded in one kernel (decided while grading)
        self.checks = [0, 0.0]  # the judge's invariant checks: count, seconds

    def run(self):
        from autograder.grading.host.reads import analyse

        tests = self.task["tests"]
        code = analyse(self.task["items"], [t.get("source", "") for t in tests])
        code["exports"] = list(self.task.get("exports", []))
        self.judge.begin(tests, code)
        # the submission travels in the frame's body (as large as intake accepts, frames.MAX_TASK),
        # which the zygote never reads: the submission's own relay process does
        zy_task = {
            "items": self.task["items"],
            "files": self.task.get("files", []),
            "tests": [{"id": t["id"]} for t in self.task["tests"]],
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
        elif kind == "tests":
            ks = ev.get("ks")
            if type(ks) is list and all(type(k) is int for k in ks):
                self.test_process = True
                self._run_tests(ks)
            if self.kernel is not None:  # graded again in one kernel: the rest would be wasted
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
            self.tests[k] = self._run_test(k)

    def _left(self, budget, extra=0.0):
        """Seconds left to a test: its limit at the pace's rate, and the notebook's wall limit."""

        def left():
            now = time.monotonic()
            return min(budget.left(now) + extra, self.wall - now + extra)

        return left

    def _run_test(self, k):
        if self.kernel is not None:  # the judge cannot carry this notebook: graded in one kernel
            return {"passed": False, "status": NEEDS_KERNEL, "message": self.kernel}
        deadline = Budget(self.timeout, self.pace)
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
