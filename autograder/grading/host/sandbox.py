"""Sandboxes: a bubblewrap container around a warm Python (the zygote, :mod:`autograder.grading.inside.zygote`).

Each worker (:mod:`.supervisor`) owns one ``bwrap`` sandbox, started once and reused for many
submissions:

* its own user, pid, network (none), IPC, UTS and cgroup namespaces; no further user
  namespaces inside (``--disable-userns``); no capabilities; a new session (no terminal);
  it dies with the grading process (``--die-with-parent``);
* a read-only view of only what Python and torch need: ``/usr`` (and the ``/lib*`` links),
  a few files of ``/etc`` (dynamic linker cache, time zone), the Python installation, the
  virtual environment and the ``autograder`` package directory - not the rest of the
  repository (``solutions/``, ``gradebook.db``, other submissions), not ``/root`` or
  ``/home``, no ``/proc`` or ``/sys``;
* exactly two writable places, both size-capped tmpfs: the scratch space ``/tmp`` (the
  submission's folder, its home, its captured output, ``TMPDIR``) and ``/dev/shm``. ``/dev``
  itself and everything else is read-only. The zygote empties both after every submission.
  (When the virtual environment itself lies under ``/tmp``, a clone in ``/tmp``, the host's
  paths there stay read-only and the scratch tmpfs is ``/var/tmp`` instead.)

Limits applied per submission: per-cell time limit (SIGINT, then the notebook ends), per-test
time limit (the supervisor stops the test process), a wall limit per notebook, address space
(``RLIMIT_AS`` = the warm zygote's size + ``--memory-limit``), output (``RLIMIT_FSIZE`` on the
captured output and on any file the submission writes; the output kept per cell and per
notebook is capped too), CPU time, open files, a ration of processes; and every process of
the submission is killed when it is done.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.wire.types import FONT_LIST_NAME

ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
)
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


@functools.cache
def sandbox_tmp() -> str:
    roots = runtime_roots()
    for cand in TMP_CANDIDATES:
        if not any(
            r == cand or r.startswith(cand + os.sep) or cand.startswith(r + os.sep) for r in roots
        ):
            return cand
    raise SandboxError(f"no place for the sandbox's scratch space outside {', '.join(roots)}")


SHM_SIZE = 64 << 20
PROC = "/.sandbox-proc"  # where bubblewrap mounts a procfs that the zygote takes, then unmounts


def bwrap_command(
    inner: list[str], info_fd: int | None = None, tmp_size: int = 512 << 20
) -> list[str]:
    bwrap = shutil.which("bwrap")
    if not bwrap:
        raise SandboxError(
            "bubblewrap (bwrap) is not installed: apt-get install bubblewrap "
            "(or run with --no-sandbox, which gives up every isolation guarantee)"
        )
    # capabilities inside the sandbox's user namespace: only to put each submission in a pid
    # namespace of its own; the submission's processes drop them all before any of its code runs
    cmd = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--cap-add",
        "CAP_SYS_ADMIN",
        "--cap-add",
        "CAP_SETPCAP",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for top in TOP_LINKS:
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    for path in ETC_FILES:
        cmd += ["--ro-bind-try", path, path]
    # what torch's CPU feature detection reads (without it torch falls back to scalar kernels,
    # whose rounding differs from what students see); no other part of /proc or /sys
    cmd += [
        "--dir",
        "/proc",
        "--ro-bind-try",
        "/proc/cpuinfo",
        "/proc/cpuinfo",
        "--ro-bind-try",
        "/sys/devices/system/cpu",
        "/sys/devices/system/cpu",
    ]
    # the sandbox's procfs, for the zygote alone: it keeps a descriptor of it and unmounts it
    # before any submission runs (it bounds each submission's IPC namespace through it)
    cmd += ["--proc", PROC]
    for root in runtime_roots():
        if not root.startswith("/usr/"):
            cmd += ["--ro-bind", root, root]
    # the sandbox's own root (where bwrap created /work, /root ... to mount into) becomes
    # read-only too, and so does /dev: only the scratch tmpfs and /dev/shm can be written,
    # both capped, and the zygote empties both after every submission
    tmp = sandbox_tmp()
    cmd += [
        "--dev",
        "/dev",
        "--size",
        str(SHM_SIZE),
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--size",
        str(tmp_size),
        "--tmpfs",
        tmp,
        "--remount-ro",
        "/",
        "--chdir",
        tmp,
        "--clearenv",
    ]
    for key, value in sandbox_env(home=f"{tmp}/home", tmp=tmp).items():
        cmd += ["--setenv", key, value]
    if info_fd is not None:
        cmd += ["--info-fd", str(info_fd)]
    return cmd + ["--"] + inner


def sandbox_env(home: str, tmp: str) -> dict:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONWARNINGS": "ignore::DeprecationWarning",
        "NBGRADER_EXECUTION": "autograde",  # what nbgrader's kernels see: the self-check cell stands down
    }


FONT_CACHE_MAX = 1 << 20  # bytes of one font list file passed to a zygote


def font_cache() -> dict[str, str]:
    """``{file name: text}``: matplotlib's font list cache as this user's matplotlib wrote it
    (``fontlist-v*.json`` in its cache folder: ``$MPLCONFIGDIR``, else ``$XDG_CACHE_HOME`` or
    ``~/.cache``, then ``matplotlib``), for the zygote to put in its empty home before matplotlib
    loads. Building the list there (``fc-list``, then every font file read) cost each zygote's
    warm-up 0.1-0.3 s of CPU (2026-12-08, 2 cores). The file is the instructor's own data, read as
    text; matplotlib checks the version it names, and finds a font again itself when the file the
    list names is missing (the sandbox sees ``/usr`` only), so a stale list costs at most the time
    it saves. A list that names a font outside ``/usr`` and matplotlib's own folder (the user's
    fonts, in their home) is not passed: it would tell the sandbox about the host. Empty when
    matplotlib never ran here."""
    folder = os.environ.get("MPLCONFIGDIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "matplotlib"
    )
    out: dict[str, str] = {}
    try:
        names = sorted(n for n in os.listdir(folder) if FONT_LIST_NAME.fullmatch(n))
    except OSError:
        return out
    for name in names[-2:]:
        try:
            with open(os.path.join(folder, name), "rb") as fh:
                data = fh.read(FONT_CACHE_MAX + 1)
            if len(data) <= FONT_CACHE_MAX and _fonts_seen_inside(data):
                out[name] = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            pass
    return out


def _fonts_seen_inside(data: bytes) -> bool:
    """Whether every font a font list names lies where the sandbox sees it: ``/usr``, or
    matplotlib's own data folder (a relative name)."""
    import json

    try:
        fonts = json.loads(data)
        names = [e["fname"] for key in ("ttflist", "afmlist") for e in fonts.get(key, [])]
    except (ValueError, TypeError, KeyError, AttributeError):
        return False
    return all(
        isinstance(n, str)
        and ".." not in n.split("/")
        and (n.startswith("/usr/") or not n.startswith("/"))
        for n in names
    )


def python_command(module="inside.zygote", function="main") -> list[str]:
    """The Python command line that runs ``autograder.grading.<module>``'s ``main()`` (the zygote
    under bwrap, the judge on the host; ``function``: another entry point of the module)."""
    return [
        sys.executable,
        "-s",
        "-E",
        "-c",
        f"from autograder.grading.{module} import {function}; {function}()",
    ]


def check_sandbox() -> None:
    """Raise SandboxError with a clear message unless a bubblewrap sandbox can run Python here."""
    try:
        cmd = bwrap_command([sys.executable, "-s", "-E", "-c", "import autograder.wire.frames"])
    except SandboxError:
        raise
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise SandboxError(
            "bubblewrap is installed but cannot create a sandbox here "
            f"(exit {proc.returncode}: {proc.stderr.strip()[-500:]}). Unprivileged user namespaces "
            "must be allowed (sysctl kernel.unprivileged_userns_clone=1, or run as root); "
            "--no-sandbox grades without any isolation."
        )


def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s children (psutil), oldest first; none when it is gone."""
    import psutil

    try:
        kids = psutil.Process(pid).children()
    except psutil.Error:
        return []
    return [p.pid for p in sorted(kids, key=lambda p: (_started(p), p.pid))]


def _started(proc) -> float:
    import psutil

    try:
        return proc.create_time()
    except psutil.Error:
        return 0.0


def _vm_size(pid: int) -> int | None:
    """``pid``'s address space size in bytes (VmSize, psutil's ``vms``), None when it is gone."""
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().vms)
    except psutil.Error:
        return None
