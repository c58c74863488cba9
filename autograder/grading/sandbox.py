"""Sandboxes: a bubblewrap container around a warm Python (the zygote of :mod:`.harness`).

Each worker is one ``bwrap`` sandbox, started once and reused for many submissions:

* its own user, pid, network (none), IPC, UTS and cgroup namespaces; no further user
  namespaces inside (``--disable-userns``); no capabilities; a new session (no terminal);
  it dies with the grading process (``--die-with-parent``);
* a read-only view of only what Python and torch need: ``/usr`` (and the ``/lib*`` links),
  a few files of ``/etc`` (dynamic linker cache, time zone), the Python installation, the
  virtual environment and the ``autograder`` package directory - not the rest of the
  repository (``solutions/``, ``gradebook.db``, other submissions), not ``/root`` or
  ``/home``, no ``/proc`` or ``/sys``;
* a private ``/tmp`` (tmpfs of limited size) holding the scratch directory of the current
  submission; the zygote wipes it, and ``/dev/shm``, after every submission. (When the
  virtual environment itself lies under ``/tmp``, a clone in ``/tmp``, the host's paths there
  stay read-only and the tmpfs is ``/var/tmp`` instead; ``TMPDIR`` points at it.)

Limits applied per submission by the harness: per-cell and per-test time limit (SIGINT then
SIGKILL from outside the graded process), a wall limit per notebook, address space
(``RLIMIT_AS`` = the warm zygote's size + ``--memory-limit``), output (``RLIMIT_FSIZE`` on
the captured output, so also on any file the submission writes), CPU time, open files, a
ration of processes; and every process of the submission is killed when it is done.
"""
from __future__ import annotations

import functools
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .protocol import ProtocolError, read_message, write_message

ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/nsswitch.conf", "/etc/passwd", "/etc/group")
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# the sandbox's only writable directory (a tmpfs): /tmp, unless the runtime itself lives there
# (a clone in /tmp): a tmpfs over /tmp would hide it, so the next candidate is used instead
TMP_CANDIDATES = ("/tmp", "/var/tmp", "/run/autograder")
STARTUP_TIMEOUT = 600


class SandboxError(RuntimeError):
    """The sandbox cannot be started (bubblewrap missing or not permitted)."""


class WorkerFailure(RuntimeError):
    """The worker died or stopped answering while grading."""


def parse_size(text) -> int:
    """``"2G"``, ``"512M"``, ``"1.5GiB"``, ``"1000000"`` -> bytes."""
    if isinstance(text, (int, float)):
        return int(text)
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kKmMgGtT]?)(i?[bB])?\s*", str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 512M or 2G)")
    factor = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(float(m.group(1)) * factor)


def package_dir() -> Path:
    import autograder

    return Path(autograder.__file__).resolve().parent


def runtime_roots() -> list[str]:
    """Directories the zygote needs read access to: Python, the venv, the autograder package."""
    roots = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), str(package_dir())}
    exe_dir = os.path.dirname(os.path.realpath(sys.executable))
    if not any(exe_dir.startswith(r + os.sep) for r in roots):
        roots.add(exe_dir)
    # drop roots nested in other roots
    return sorted(r for r in roots if not any(r != o and r.startswith(o + os.sep) for o in roots))


@functools.lru_cache(maxsize=None)
def sandbox_tmp() -> str:
    roots = runtime_roots()
    for cand in TMP_CANDIDATES:
        if not any(r == cand or r.startswith(cand + os.sep) or cand.startswith(r + os.sep) for r in roots):
            return cand
    raise SandboxError(f"no place for the sandbox's scratch space outside {', '.join(roots)}")


def bwrap_command(inner: list[str], info_fd: int | None = None, tmp_size: int = 512 << 20) -> list[str]:
    bwrap = shutil.which("bwrap")
    if not bwrap:
        raise SandboxError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap "
                           "(or run with --no-sandbox, which gives up every isolation guarantee)")
    # capabilities inside the sandbox's user namespace: only to put each submission in a pid
    # namespace of its own; the submission's processes drop them all before any of its code runs
    cmd = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
           "--new-session", "--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP",
           "--ro-bind", "/usr", "/usr"]
    for top in TOP_LINKS:
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    for path in ETC_FILES:
        cmd += ["--ro-bind-try", path, path]
    # what torch's CPU feature detection reads (without it torch falls back to scalar kernels,
    # whose rounding differs from what students see); no other part of /proc or /sys
    cmd += ["--dir", "/proc", "--ro-bind-try", "/proc/cpuinfo", "/proc/cpuinfo",
            "--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]
    for root in runtime_roots():
        if not root.startswith("/usr/"):
            cmd += ["--ro-bind", root, root]
    # the sandbox's own root (where bwrap created /work, /root ... to mount into) becomes
    # read-only too: only /tmp and /dev/shm can be written, and the zygote wipes both
    tmp = sandbox_tmp()
    cmd += ["--dev", "/dev", "--size", str(tmp_size), "--tmpfs", tmp, "--remount-ro", "/",
            "--chdir", tmp, "--clearenv"]
    for key, value in sandbox_env(home=f"{tmp}/home", tmp=tmp).items():
        cmd += ["--setenv", key, value]
    if info_fd is not None:
        cmd += ["--info-fd", str(info_fd)]
    return cmd + ["--"] + inner


def sandbox_env(home: str, tmp: str) -> dict:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": tmp, "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
        "PYTHONWARNINGS": "ignore::DeprecationWarning",
        "NBGRADER_EXECUTION": "autograde",  # what nbgrader's kernels see: the self-check cell stands down
    }


def python_command() -> list[str]:
    return [sys.executable, "-s", "-E", "-c", "from autograder.grading.harness import main; main()"]


def check_sandbox() -> None:
    """Raise SandboxError with a clear message unless a bubblewrap sandbox can run Python here."""
    try:
        cmd = bwrap_command([sys.executable, "-s", "-E", "-c", "import autograder.grading.protocol"])
    except SandboxError:
        raise
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise SandboxError(
            "bubblewrap is installed but cannot create a sandbox here "
            f"(exit {proc.returncode}: {proc.stderr.strip()[-500:]}). Unprivileged user namespaces "
            "must be allowed (sysctl kernel.unprivileged_userns_clone=1, or run as root); "
            "--no-sandbox grades without any isolation.")


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _vm_size(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class Worker:
    """One sandbox with a warm zygote; grades one task at a time."""

    def __init__(self, preload=(), sandbox=True, memory_limit=None, log_dir=None):
        self.preload = sorted(set(preload))
        self.sandbox = sandbox
        self.memory_limit = memory_limit
        self.log_dir = Path(log_dir or tempfile.gettempdir())
        self.proc = None
        self.vm_base = None
        self.protection = None
        self.started = 0.0
        self._tmp = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self):
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError:  # e.g. the host's folder on a remote Dask worker
            self.log_dir = Path(tempfile.gettempdir())
        fd, log = tempfile.mkstemp(prefix="zygote-", suffix=".log", dir=self.log_dir)
        self.log_path = Path(log)
        log_file = os.fdopen(fd, "wb")
        info_r = info_w = None
        if self.sandbox:
            info_r, info_w = os.pipe()
            cmd = bwrap_command(python_command(), info_fd=info_w)
            tmp = sandbox_tmp()
            config = {"sandboxed": True, "scratch": f"{tmp}/work", "outdir": f"{tmp}/out", "home": f"{tmp}/home",
                      "tmp": tmp}
            env, cwd = None, None
        else:
            self._tmp = tempfile.mkdtemp(prefix="autograder-nosandbox-")
            cmd = python_command()
            config = {"sandboxed": False, "scratch": f"{self._tmp}/work", "outdir": f"{self._tmp}/out",
                      "home": f"{self._tmp}/home", "tmp": self._tmp}
            env = dict(os.environ, **sandbox_env(home=config["home"], tmp=self._tmp))
            cwd = self._tmp
        config.update(preload=self.preload, trusted_roots=runtime_roots())
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file,
                                     pass_fds=(info_w,) if info_w is not None else (), env=env, cwd=cwd)
        log_file.close()
        zygote_pid = self.proc.pid
        if info_w is not None:
            os.close(info_w)
            info = self._read_info(info_r)
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
            write_message(self.proc.stdin.fileno(), config)
            ready = self._read(STARTUP_TIMEOUT)
        except (OSError, EOFError, ProtocolError, WorkerFailure) as exc:
            self.close()
            raise WorkerFailure(f"the sandbox did not start: {exc}\n{self.log_tail()}") from None
        if not ready.get("ready"):
            self.close()
            raise WorkerFailure(f"the sandbox did not start: {ready}\n{self.log_tail()}")
        self.protection = ready.get("protection")
        self.vm_base = _vm_size(zygote_pid) if zygote_pid else None
        return self

    @property
    def address_space(self):
        if self.vm_base and self.memory_limit:
            return self.vm_base + int(self.memory_limit)
        return None

    def _read_info(self, fd):
        data = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 1.0)
            if not r:
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

    def _read(self, timeout):
        fd = self.proc.stdout.fileno()
        r, _, _ = select.select([fd], [], [], timeout)
        if not r:
            raise WorkerFailure(f"no answer within {timeout:.0f} s")
        return read_message(fd)

    def log_tail(self, n=3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except (OSError, AttributeError):
            return ""

    def close(self):
        if self.proc is not None:
            try:
                if self.proc.poll() is None:
                    write_message(self.proc.stdin.fileno(), {"op": "quit"})
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
            self.proc = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        try:
            if self.log_path.exists() and self.log_path.stat().st_size == 0:
                self.log_path.unlink()
        except (OSError, AttributeError):
            pass

    # -- grading ---------------------------------------------------------------------
    def grade(self, task: dict) -> dict:
        missing = set(task.get("imports", ())) - set(self.preload)
        if self.proc is None or self.proc.poll() is not None or missing:
            self.close()
            self.preload = sorted(set(self.preload) | missing)
            self.start()
        task = dict(task, limits=dict(task["limits"], address_space=self.address_space))
        limit = float(task["limits"]["wall"]) + 120
        try:
            write_message(self.proc.stdin.fileno(), {"op": "grade", "task": task})
            result = self._read(limit)
        except (OSError, EOFError, ProtocolError, WorkerFailure) as exc:
            tail = self.log_tail()
            self.close()
            raise WorkerFailure(f"{type(exc).__name__}: {exc}\n{tail}") from None
        if "error" in result:
            tail = self.log_tail()
            self.close()
            raise WorkerFailure(result["error"] + "\n" + tail)
        return result


_local = threading.local()
_all_workers: list[Worker] = []
_lock = threading.Lock()


def thread_worker(options: dict) -> Worker:
    """The calling thread's worker (started on first use; used by the Dask tasks)."""
    worker = getattr(_local, "worker", None)
    if worker is None or worker.sandbox != options.get("sandbox", True):
        worker = Worker(preload=options.get("preload", ()), sandbox=options.get("sandbox", True),
                        memory_limit=options.get("memory_limit"), log_dir=options.get("log_dir"))
        _local.worker = worker
        with _lock:
            _all_workers.append(worker)
    worker.memory_limit = options.get("memory_limit")
    return worker


def close_all():
    with _lock:
        workers = list(_all_workers)
        _all_workers.clear()
    for w in workers:
        w.close()
