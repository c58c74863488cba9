"""nbgrader's exchange, read and written as stock nbgrader does, trusting nothing a student wrote.

* ``EXCHANGE/COURSE/inbound/<student>+<assignment>+<timestamp>[+<random>]/``: what ``nbgrader
  submit`` writes (the notebooks and other files of the assignment folder, ``timestamp.txt``,
  then ``submission_secret.txt``). Every student can write there, so :func:`take` copies an
  entry into the service's private folder with the refusals of ``autograder collect``: no
  link is followed (the entry, or anything in it), no special file, no control character in a
  name, an unusable student id or unknown assignment, too many entries, a file over the limits
  - the whole submission is refused with the reason and nothing of it is graded. Only the
  private copy is graded (a student rewriting the entry later changes nothing).
* ``EXCHANGE/COURSE/feedback/<md5(secret + notebook)>.html``: where ``nbgrader fetch_feedback``
  looks (nbgrader's ``notebook_hash(secret=..., notebook_id=...)``, as ``nbgrader
  release_feedback`` names it), written atomically (a temporary file only the service can read,
  renamed into place).

The folders keep nbgrader's permission model (:data:`NBGRADER_MODES`, from nbgrader's
``release_assignment`` and ``release_feedback``): a student may open a feedback page whose name
they know (``fetch_feedback``), never list ``feedback/`` or ``inbound/``, never write into
``feedback/``. :func:`check_folders` is run before the service starts: it makes ``feedback/``
with nbgrader's mode when it is missing, and refuses (with the ``chmod`` / ``chown`` that fixes
it) a course, inbound or feedback folder that lets others list or write more than nbgrader
would, or that somebody else owns.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from autograder.grading.intake.collect import STUDENT_ID
from autograder.wire.frames import MAX_FILES_BYTES, MAX_NOTEBOOK_BYTES

MAX_ENTRIES = 200  # files and folders in one submission
MAX_DEPTH = 4
MAX_SMALL = 200  # timestamp.txt, submission_secret.txt
SECRET = re.compile(r"[0-9a-f]{16,256}")
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"  # nbgrader's Exchange.timestamp_format
INCOMPLETE_GRACE = 120.0  # seconds an entry may stay without submission_secret.txt


class Refused(ValueError):
    pass


@dataclass
class Entry:
    """One inbound entry, as named (nothing read yet)."""

    name: str
    student: str
    assignment: str
    timestamp: str
    submitted: float  # epoch seconds, from the name's timestamp


def safe_name(name: str) -> str:
    """A printable form of an entry name (the ledger's key): control characters escaped."""
    if name.isprintable():
        return name
    return name.encode("unicode_escape", "backslashreplace").decode("ascii")


def parse_timestamp(text: str) -> float:
    text = text.strip()
    for fmt in (TIMESTAMP_FORMAT, "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            t = dt.datetime.strptime(text.replace(" UTC", "").strip(), fmt.replace(" %Z", ""))
            return t.replace(tzinfo=dt.UTC).timestamp()
        except ValueError:
            continue
    raise Refused(f"{text[:60]!r} is not a timestamp nbgrader writes")


def parse_name(name: str, assignments) -> Entry:
    if not name.isprintable() or "/" in name:
        raise Refused("a control character in the folder name")
    parts = name.split("+")
    if len(parts) not in (3, 4):
        raise Refused("not <student>+<assignment>+<timestamp>[+<random>]")
    student, assignment, timestamp = parts[:3]
    if not STUDENT_ID.fullmatch(student):
        raise Refused(f"{student!r} is not a usable student id")
    if assignment not in assignments:
        raise Refused(f"no assignment {assignment!r} in this course")
    return Entry(name, student, assignment, timestamp, parse_timestamp(timestamp))


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, never following a link or blocking; Refused past ``limit``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise Refused(f"{path.name!r} cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{path.name!r} is not a regular file")
        if info.st_size > limit:
            raise Refused(f"{path.name!r}: {info.st_size} bytes (limit {limit})")
        data = os.read(fd, limit + 1)
        while len(data) <= limit:
            more = os.read(fd, limit + 1 - len(data))
            if not more:
                break
            data += more
    finally:
        os.close(fd)
    if len(data) > limit:
        raise Refused(f"{path.name!r}: more than {limit} bytes")
    return data


def check_owner(uid: int, student: str) -> None:
    """An entry named for a student who has an account on this machine must be that account's
    (``nbgrader submit`` writes it as the student): another student's entry in their name is
    refused whole. Where students have no account here (a hub whose servers all run as one
    user), an entry's owner tells nothing and nothing is checked, as under stock nbgrader."""
    import pwd

    try:
        account = pwd.getpwnam(student).pw_uid
    except KeyError:
        return
    if uid not in (account, os.geteuid()):
        raise Refused(
            f"the submission folder belongs to uid {uid}, not to {student} (uid {account}): "
            "nothing in it was read"
        )


def complete(path: Path) -> bool:
    """``nbgrader submit`` writes submission_secret.txt last: the entry is complete once it is there."""
    try:
        return stat.S_ISREG(os.lstat(path / "submission_secret.txt").st_mode)
    except OSError:
        return False


def take(path: Path, entry: Entry, notebooks: set[str], dest: Path) -> tuple[str, list[str]]:
    """Copy the entry at ``path`` into ``dest/<student>/<assignment>/``; ``(secret, notes)``.

    Raises :class:`Refused` (nothing kept) for anything ``autograder collect`` refuses."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise Refused("the submission folder is a symbolic link: nothing behind it was read")
    if not stat.S_ISDIR(info.st_mode):
        raise Refused("the submission is not a folder")
    check_owner(info.st_uid, entry.student)
    secret = _read_regular(path / "submission_secret.txt", MAX_SMALL).decode("ascii", "replace")
    secret = secret.strip()
    if not SECRET.fullmatch(secret):
        raise Refused("submission_secret.txt is not the hexadecimal secret nbgrader submit writes")
    files: dict[str, bytes] = {}
    total = 0
    count = 0
    notes: list[str] = []

    def walk(folder: Path, rel: tuple, depth: int):
        nonlocal total, count
        with os.scandir(folder) as it:
            children = sorted(it, key=lambda e: e.name)
        for e in children:
            count += 1
            if count > MAX_ENTRIES:
                raise Refused(f"more than {MAX_ENTRIES} files and folders")
            name = e.name
            shown = "/".join((*rel, safe_name(name)))
            if not name.isprintable() or "\\" in name:
                raise Refused(f"{shown!r}: a control character or backslash in a name")
            if e.is_symlink():
                raise Refused(f"{shown!r}: a symbolic link (the grader follows none)")
            if e.is_dir(follow_symlinks=False):
                if depth >= MAX_DEPTH:
                    raise Refused(f"{shown!r}: folders nested more than {MAX_DEPTH} deep")
                walk(Path(e.path), (*rel, name), depth + 1)
                continue
            if not e.is_file(follow_symlinks=False):
                raise Refused(f"{shown!r}: not a regular file")
            if not rel and name in ("timestamp.txt", "submission_secret.txt"):
                continue
            if name.endswith(".ipynb"):
                if rel or name[:-6] not in notebooks:
                    notes.append(f"ignored {shown}: not a notebook of the assignment")
                    continue
                data = _read_regular(Path(e.path), MAX_NOTEBOOK_BYTES)
            else:
                data = _read_regular(Path(e.path), MAX_FILES_BYTES)
                total += len(data)
                if total > MAX_FILES_BYTES:
                    raise Refused(f"the files besides the notebooks exceed {MAX_FILES_BYTES} bytes")
            files["/".join((*rel, name))] = data

    walk(path, (), 0)
    if not any(k.endswith(".ipynb") for k in files):
        notes.append("no notebook of the assignment in the submission")
    target = dest / entry.student / entry.assignment
    target.mkdir(parents=True, exist_ok=True)
    for rel_name, data in files.items():
        out = target / rel_name
        out.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    (target / "timestamp.txt").write_text(entry.timestamp)
    return secret, notes


# nbgrader's modes of the course's exchange folders (nbgrader/exchange/default/release_assignment.py
# and release_feedback.py), without and with CourseDirectory.groupshared
NBGRADER_MODES = {
    "course": (0o755, 0o2775),  # the course's folder
    "outbound": (0o755, 0o2775),  # released assignments: everyone reads
    "inbound": (0o2733, 0o2773),  # submissions: everyone writes and enters, nobody else lists
    "feedback": (0o711, 0o2771),  # pages: everyone opens a page by name, nobody else lists
}
PAGE_MODE = 0o644  # a released page (nbgrader's copy of the instructor's 0644 html)
_OTHERS_RW = 0o066  # read and write, for the group and for others


def folder_mode(kind: str, groupshared: bool) -> int:
    return NBGRADER_MODES[kind][1 if groupshared else 0]


def check_folders(course_dir: Path, groupshared: bool = False) -> list[str]:
    """What in ``course_dir`` lets students list or write more than nbgrader lets them, each
    with its fix; ``[]`` when nothing does. Makes ``feedback/`` with nbgrader's mode when missing."""
    problems = []
    me = os.geteuid()
    feedback = course_dir / "feedback"
    if not os.path.lexists(feedback):
        feedback.mkdir()
        os.chmod(feedback, folder_mode("feedback", groupshared))  # mkdir's mode passes umask
    for kind in NBGRADER_MODES:
        path = course_dir if kind == "course" else course_dir / kind
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue  # outbound: made by release_assignment; inbound: checked by the caller
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            problems.append(f"{path} is not a folder (a link or a file): make it a folder")
            continue
        wanted = folder_mode(kind, groupshared)
        extra = stat.S_IMODE(info.st_mode) & _OTHERS_RW & ~wanted
        if extra:
            fix = f"chmod {wanted:o} {path}"
            who = (
                "its group and others"
                if extra & 0o060 and extra & 0o006
                else ("its group" if extra & 0o060 else "others")
            )
            problems.append(
                f"{path} has mode {stat.S_IMODE(info.st_mode):o}: {who} may "
                + " and ".join(w for w, bit in (("list", 0o044), ("write", 0o022)) if extra & bit)
                + f" where nbgrader's mode is {wanted:o} (fix: {fix})"
            )
        owners = {me} if kind == "feedback" else {me, 0}
        if not groupshared and info.st_uid not in owners:
            problems.append(
                f"{path} belongs to uid {info.st_uid}, not to the service's user (uid {me}), who "
                f"could change its mode (fix: chown {me} {path}, or run the service as its owner)"
            )
    return problems


def feedback_name(secret: str, notebook: str) -> str:
    from nbgrader.utils import notebook_hash

    return f"{notebook_hash(secret=secret, notebook_id=notebook)}.html"


def release(
    feedback_dir: Path, secret: str, notebook: str, html: str, groupshared: bool = False
) -> Path:
    """Write a page where ``nbgrader fetch_feedback`` finds it, atomically: written unreadable to
    others, then made readable (as nbgrader's pages are) and renamed into place."""
    if os.path.islink(feedback_dir):
        raise OSError(f"{feedback_dir} is a symbolic link: refusing to write through it")
    if not feedback_dir.is_dir():  # removed while the service runs: made again as nbgrader makes it
        feedback_dir.mkdir(parents=True)
        os.chmod(feedback_dir, folder_mode("feedback", groupshared))
    name = feedback_name(secret, notebook)
    tmp = feedback_dir / f".{name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(html)
    os.chmod(tmp, PAGE_MODE)
    os.replace(tmp, feedback_dir / name)
    return feedback_dir / name
