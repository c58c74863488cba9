"""``autograder collect ZIP... [--course DIR]``: zips made by ``autograder submit`` into ``submitted/``.

A zip from ``autograder submit`` holds exactly ``submitted/<student>/<assignment>/<notebook>.ipynb``
(one or more notebooks of that assignment) and ``submitted/<student>/<assignment>/timestamp.txt``.
Each zip is checked whole before anything is written from it, and refused - with a message, and
nothing written - when it holds anything else: a link, a directory entry that is not on that
path, an absolute or ``..`` path, a second student or assignment, a file outside ``submitted/``,
an unknown assignment or notebook, an entry larger than the limits, a student id nbgrader
cannot use, or bytes that are not a zip. Other zips of the same call are still imported.

An accepted zip replaces that student's folder for that assignment as a whole (a resubmission),
written into a new folder next to it and renamed into place; no path under ``submitted/`` is
followed if it is a link. Exit status: 0 when every zip was imported, 1 when one was refused,
2 when the command could not run at all.

Use it instead of ``unzip -o`` at the course root, which follows whatever paths and links a
zip contains.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from autograder.grading.intake.collect import MAX_NOTEBOOK_BYTES, STUDENT_ID

MAX_ENTRY = MAX_NOTEBOOK_BYTES
MAX_TIMESTAMP = 200
MAX_ENTRIES = 50


class Refused(ValueError):
    pass


def check_zip(path: Path, course) -> tuple[str, str, dict]:
    """``(student, assignment, {file name: bytes})`` of an acceptable zip; raises :class:`Refused`."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise Refused(f"not a readable zip ({exc})") from None
    with zf:
        infos = zf.infolist()
        if not infos:
            raise Refused("the zip is empty")
        if len(infos) > MAX_ENTRIES:
            raise Refused(f"the zip has {len(infos)} entries")
        student = assignment = None
        files = {}
        for info in infos:
            name = info.filename
            if any(ord(ch) < 32 or 127 <= ord(ch) < 160 or ch in "\u2028\u2029" for ch in name):
                raise Refused(f"{name!r}: a control character in the path")
            if "\\" in name or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
                raise Refused(f"{name!r}: an absolute or Windows path")
            parts = PurePosixPath(name).parts
            if any(p in ("..", ".", "") for p in name.rstrip("/").split("/")):
                raise Refused(f"{name!r}: a '..' or empty path component")
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise Refused(f"{name!r}: a symbolic link")
            if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise Refused(f"{name!r}: not a regular file")
            if not parts or parts[0] != "submitted":
                raise Refused(f"{name!r}: outside submitted/")
            if info.is_dir():
                if len(parts) > 3:
                    raise Refused(f"{name!r}: a folder inside the assignment folder")
                continue
            if len(parts) != 4:
                raise Refused(f"{name!r}: not submitted/<student>/<assignment>/<file>")
            _, s, a, f = parts
            if not STUDENT_ID.fullmatch(s):
                raise Refused(f"{name!r}: {s!r} is not a usable student id")
            if student is None:
                student, assignment = s, a
            elif s != student:
                raise Refused(f"{name!r}: a second student ({s!r} besides {student!r})")
            elif a != assignment:
                raise Refused(f"{name!r}: a second assignment ({a!r} besides {assignment!r})")
            if a not in course.assignments():
                raise Refused(f"{name!r}: no assignment {a!r} in this course")
            allowed = {f"{nb.name}.ipynb" for nb in course.notebooks(a)} | {"timestamp.txt"}
            if f not in allowed:
                raise Refused(
                    f"{name!r}: not a notebook of {a} (expected {', '.join(sorted(allowed))})"
                )
            limit = MAX_TIMESTAMP if f == "timestamp.txt" else MAX_ENTRY
            if info.file_size > limit:
                raise Refused(f"{name!r}: {info.file_size} bytes (limit {limit})")
            if f in files:
                raise Refused(f"{name!r}: twice in the zip")
            with zf.open(info) as fh:
                data = fh.read(limit + 1)
            if len(data) > limit:
                raise Refused(f"{name!r}: more than {limit} bytes once unpacked")
            files[f] = data
        if student is None:
            raise Refused("the zip holds no submitted notebook")
        if not any(f.endswith(".ipynb") for f in files):
            raise Refused("the zip holds no notebook")
        return student, assignment, files


def _real_dir(path: Path) -> Path:
    """``path`` as a real directory (created if missing); a link there is refused."""
    if os.path.islink(path):
        raise Refused(f"{path} is a symbolic link: refusing to write through it")
    path.mkdir(exist_ok=True)
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        raise Refused(f"{path} is not a directory")
    return path


def install(submitted_dir: Path, student: str, assignment: str, files: dict) -> Path:
    """Write the files as ``<submitted>/<student>/<assignment>/``, replacing what was there."""
    submitted = _real_dir(Path(submitted_dir))
    student_dir = _real_dir(submitted / student)
    target = student_dir / assignment
    staging = Path(tempfile.mkdtemp(prefix=f".{assignment}-", dir=student_dir))
    for name, data in files.items():
        fd = os.open(staging / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    os.chmod(staging, 0o755)
    old = None
    if os.path.lexists(target):
        old = student_dir / f".{assignment}-replaced-{os.getpid()}"
        os.rename(target, old)  # a link is moved, never followed
    os.rename(staging, target)
    if old is not None:
        if os.path.islink(old) or not os.path.isdir(old):
            os.unlink(old)
        else:
            shutil.rmtree(old)
    return target


def collect(zips, course_root: Path, out=print, err=None) -> int:
    from autograder.grading.intake.collect import Course

    err = err or (lambda m: print(m, file=sys.stderr))
    course = Course(course_root)
    refused = 0
    for z in zips:
        try:
            student, assignment, files = check_zip(Path(z), course)
            target = install(course.config.submitted, student, assignment, files)
        except Refused as exc:
            refused += 1
            err(f"refused {z}: {exc} (nothing from it was written)")
            continue
        out(f"imported {z} -> {os.path.relpath(target, course_root)}")
    return 1 if refused else 0


def add_parser(subparsers):
    p = subparsers.add_parser(
        "collect",
        help="import zips made by `autograder submit` into the course's submitted/",
        description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("zips", nargs="+", type=Path, help="zip files made by `autograder submit`")
    p.add_argument(
        "--course",
        type=Path,
        default=None,
        help="nbgrader course folder (default: the current folder); notebooks go to its "
        "CourseDirectory.submitted_directory",
    )
    p.set_defaults(func=_main)
    return p


def _main(args) -> int:
    root = (args.course or Path.cwd()).resolve()
    try:
        return collect(args.zips, root)
    except FileNotFoundError as exc:
        print(f"autograder collect: {exc}", file=sys.stderr)
        return 2
