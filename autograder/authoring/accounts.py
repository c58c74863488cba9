"""Throwaway Unix accounts, for what must run as someone other than root: the multi-user test
of ``autograder serve`` (``tests/test_serve_multiuser.py``: an instructor and two students) and
``make bench-serve`` (the service as an instructor, never root). Making them needs root.

Each account's commands run through ``setpriv`` (its uid, gid and groups, no capabilities).
Where this Python or this checkout lives in a folder other accounts may not enter (pyenv's
under ``/root``, mode 700; a clone under a private temporary folder), they run in a private
mount namespace that shows them those alone, read-only (:func:`reveal`); everything else they
touch is the machine's own.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from autograder.procs import run

BIN = Path(sys.executable).parent
TOOLS = ("useradd", "userdel", "setpriv")


class Unavailable(Exception):
    """Accounts cannot be made or cannot run this Python here; the message says why."""


class Account:
    def __init__(self, name: str, home: Path, enter: list[str]):
        import pwd

        self.name, self.home, self.enter = name, home, enter
        entry = pwd.getpwnam(name)
        self.uid, self.gid = entry.pw_uid, entry.pw_gid

    def env(self, **extra) -> dict[str, str]:
        env = {
            "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "USER": self.name,
            "LOGNAME": self.name,
            "LANG": "C.UTF-8",
            "AUTOGRADER_LOAD": os.environ.get("AUTOGRADER_LOAD", "0"),
        }
        env.update(extra)
        return env

    def command(self, *args) -> list[str]:
        """``args`` run as this account (its uid, gid and groups; never root), after ``enter``
        (the mount namespace that lets it reach this Python; empty where it already can)."""
        return [
            *self.enter,
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--init-groups",
            "--inh-caps=-all",
            *map(str, args),
        ]

    def run(self, *args, cwd=None, expect=0, env=None, timeout=300):
        return run(
            self.command(*args),
            cwd=cwd or self.home,
            env=env or self.env(),
            expect=expect,
            timeout=timeout,
            what=f"as {self.name}",
        )

    def tries(self, code: str) -> dict:
        """Python ``code`` run as this account; it fills ``out`` (a dict), printed as JSON."""
        program = f"import json, os\nout = {{}}\n{code}\nprint(json.dumps(out))"
        return json.loads(self.run(sys.executable, "-c", program).stdout)


def not_usable_by_others() -> list[Path]:
    """Folders on the way to what :func:`python_paths` names that another account may not
    enter."""
    import stat

    blocked = []
    for target in python_paths():
        for folder in [*reversed(target.parents), target]:
            if folder.is_dir() and folder.stat().st_mode & stat.S_IXOTH == 0:
                blocked.append(folder)
                break
    return sorted(set(blocked))


def python_paths() -> set[Path]:
    """What an account needs to run this project's Python: the base installation, the venv, and
    this checkout (the venv's editable install imports ``autograder`` from it)."""
    from autograder.course import REPO

    return {Path(os.path.realpath(p)) for p in (sys.base_prefix, sys.prefix, REPO)}


def reveal(blocked: list[Path], stage: Path) -> list[str]:
    """A command prefix that runs what follows in a private mount namespace where each blocked
    folder is an empty tmpfs (mode 755) holding only what :func:`python_paths` names, bound back
    read-only at its own path. On a machine where the interpreter lives in root's home (pyenv in
    /root, mode 700, as on this project's CI), or the checkout in a private temporary folder (a
    fresh clone under `mkdtemp`), the accounts could not run it otherwise; what the test checks -
    the exchange, the service's output, the homes - is untouched by it, and nothing leaves the
    namespace."""
    if not blocked:
        return []
    q = shlex.quote
    lines = ["set -e"]
    shown = sorted(p for p in python_paths() if any(b in p.parents or b == p for b in blocked))
    for i, path in enumerate(shown):
        (stage / str(i)).mkdir(mode=0o755, exist_ok=True)
        lines.append(f"mount --bind {q(str(path))} {q(str(stage / str(i)))}")
    lines += [f"mount -t tmpfs -o mode=755 tmpfs {q(str(folder))}" for folder in blocked]
    for i, path in enumerate(shown):
        lines += [
            f"mkdir -p {q(str(path))}",
            f"mount --bind {q(str(stage / str(i)))} {q(str(path))}",
            f"mount -o remount,bind,ro {q(str(path))}",
        ]
    lines.append('exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines), "sh"]


def make_account(name: str, home: Path, enter: list[str]) -> Account:
    run(
        ["useradd", "--home-dir", home, "--create-home", "--shell", "/bin/sh", "--user-group", name]
    )
    os.chmod(home, 0o700)  # a multi-user machine: nobody else reads a home
    return Account(name, home, enter)


@contextlib.contextmanager
def accounts(
    base: Path, roles: tuple[str, ...], prefix: str = "ag"
) -> Iterator[dict[str, Account]]:
    """One new account per role (``{prefix}{role}{tag}``, its home under ``base/home``, mode
    700), removed with every process it still runs at the end. Raises :class:`Unavailable`."""
    if os.geteuid() != 0:
        raise Unavailable("making Unix accounts needs root")
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        raise Unavailable(f"needs {', '.join(missing)} (Debian: passwd, util-linux)")
    os.chmod(base, 0o755)
    (base / "home").mkdir(mode=0o755, exist_ok=True)
    (base / "stage").mkdir(mode=0o755, exist_ok=True)
    blocked = not_usable_by_others()
    enter = reveal(blocked, base / "stage")
    if enter:
        probe = subprocess.run([*enter, "true"], capture_output=True, text=True)
        if probe.returncode:  # e.g. a container without CAP_SYS_ADMIN
            raise Unavailable(
                "another account cannot run this Python (it cannot enter "
                + ", ".join(map(str, blocked))
                + ") and a private mount namespace that would show it failed: "
                + probe.stderr.strip()
                + "; build the venv from a Python every account can run, e.g. "
                "`rm -rf .venv && make venv PYTHON=/usr/bin/python3.11`"
            )
    tag = secrets.token_hex(3)
    made: list[Account] = []
    try:
        for role in roles:
            name = f"{prefix}{role}{tag}"
            made.append(make_account(name, base / "home" / name, enter))
        yield dict(zip(roles, made, strict=True))
    finally:
        for account in made:
            subprocess.run(["pkill", "-KILL", "-u", account.name], check=False)
            subprocess.run(["userdel", "--force", account.name], check=False, capture_output=True)
