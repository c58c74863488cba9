"""The files a notebook writes while it runs reach ``autograded/`` as stock nbgrader leaves them
there (issue 36, item 3; nbgrader's ``test_side_effects``), across the trust boundary:

* inside the sandbox, :func:`autograder.grading.inside.zygote.written_files` takes them without
  following a link or blocking on a special file, bounded in count, depth and bytes, leaving out
  the task's own files unchanged;
* on the host, :func:`autograder.grading.host.supervisor.written_files` checks what came back as
  untrusted data (names, sizes, the body) and keeps none of a malformed answer;
* :func:`autograder.grading.results.gradebook._copy_files` writes them, never through a link, and
  a name it cannot write (a folder there, a file in the way) costs only that file.

The end-to-end case (a student's cell writes files; stock and `autograder grade` leave the same
ones in ``autograded/``) is in tests/test_autograde_settings.py.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.grading.host.supervisor import safe_relative
from autograder.grading.host.supervisor import written_files as checked
from autograder.grading.inside.zygote import written_files as taken
from autograder.grading.results.gradebook import _copy_files
from autograder.wire.types import MAX_WRITTEN_DEPTH, MAX_WRITTEN_FILES

MB = 1 << 20


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def test_taken_are_the_regular_files_written_or_changed(tmp_path):
    (tmp_path / "given.csv").write_bytes(b"1,2\n")  # a task file, unchanged: not taken
    (tmp_path / "changed.txt").write_bytes(b"new\n")  # a task file the notebook changed: taken
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "plot.txt").write_bytes(b"x\n")
    (tmp_path / "link").symlink_to("/etc/hostname")  # a link: never followed, never taken
    (tmp_path / "dirlink").symlink_to(tmp_path / "out", target_is_directory=True)
    os.mkfifo(tmp_path / "fifo")  # a special file: not opened (a read would block)
    inputs = {"given.csv": _sha(b"1,2\n"), "changed.txt": _sha(b"old\n")}
    files, notes = taken(str(tmp_path), inputs, MB)
    assert files == [("changed.txt", b"new\n"), ("out/plot.txt", b"x\n")]
    assert notes == []


def test_taken_stops_at_the_byte_bound_and_says_so(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"a" * 600)
    (tmp_path / "b.bin").write_bytes(b"b" * 600)
    files, notes = taken(str(tmp_path), {}, 1000)
    assert files == [("a.bin", b"a" * 600)]
    assert notes and "were not copied" in notes[0]


def test_taken_stops_at_the_count_bound_and_depth(tmp_path):
    for i in range(MAX_WRITTEN_FILES + 5):
        (tmp_path / f"f{i:05d}").write_bytes(b"")
    files, notes = taken(str(tmp_path), {}, MB)
    assert len(files) == MAX_WRITTEN_FILES and notes
    deep = tmp_path / "deep"
    d = deep
    for i in range(MAX_WRITTEN_DEPTH + 3):
        d = d / f"d{i}"
    d.mkdir(parents=True)
    (d / "bottom.txt").write_bytes(b"too deep")
    (deep / "d0" / "top.txt").write_bytes(b"ok")
    files, _ = taken(str(deep), {}, MB)
    assert files == [("d0/top.txt", b"ok")]


def _frame(files):
    return [[n, len(d)] for n, d in files], b"".join(d for _, d in files)


def test_checked_gives_back_what_was_taken(tmp_path):
    files = [("a.txt", b"alpha"), ("sub/b.bin", bytes(range(256))), ("empty", b"")]
    out, bad = checked(*_frame(files))
    assert not bad
    assert [(n, base64.b64decode(d)) for n, d in out] == files
    assert checked(None, b"") == ([], False)  # a run that took none


def test_checked_keeps_nothing_of_a_malformed_answer():
    good = _frame([("a.txt", b"alpha")])
    for spec, body in [
        (good[0], good[1] + b"extra"),  # sizes that do not add up to the body
        ([["a.txt", 9]], b"alpha"),  # a size past the body
        ([["../escape", 5]], b"alpha"),
        ([["/etc/passwd", 5]], b"alpha"),
        ([["a/./b", 5]], b"alpha"),
        ([["a\0b", 5]], b"alpha"),
        ([["a.txt", -1]], b""),
        ([["a.txt", True]], b"alpha"),
        ([["a.txt"]], b"alpha"),
        ({"a.txt": 5}, b"alpha"),
        ([["x", 0]] * (MAX_WRITTEN_FILES + 1), b""),
        ([["/".join(["d"] * (MAX_WRITTEN_DEPTH + 1)), 0]], b""),
    ]:
        assert checked(spec, body) == ([], True), spec


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-5, 10**9) | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
        max_leaves=12,
    ),
    st.binary(max_size=64),
)
def test_checked_never_raises_and_keeps_only_safe_names(spec, body):
    """Whatever the sandbox sends: no exception, and every name kept is a plain relative path
    whose bytes come from the body, all of it."""
    out, bad = checked(spec, body)
    assert isinstance(bad, bool)
    for name, _data in out:
        assert safe_relative(name, MAX_WRITTEN_DEPTH)
        assert not name.startswith("/") and ".." not in name.split("/")
    if out:
        assert b"".join(base64.b64decode(d) for _, d in out) == body


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_a_safe_name_stays_under_its_folder(name):
    if safe_relative(name, MAX_WRITTEN_DEPTH):
        root = Path("/srv/autograded/alice/ps1")
        assert (root / name).resolve().is_relative_to(root)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_copy_never_writes_through_a_link_and_a_clash_costs_one_file(tmp_path, capsys):
    folder, outside = tmp_path / "autograded", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (folder / "via").symlink_to(outside, target_is_directory=True)
    (folder / "adir").mkdir()
    (folder / "afile").write_text("kept")
    _copy_files(
        folder,
        [
            ["via/x.txt", _b64(b"through a link")],
            ["adir", _b64(b"a folder is there")],
            ["afile/y.txt", _b64(b"a file is in the way")],
            ["fine.txt", _b64(b"written")],
        ],
        0o444,
    )
    assert not (outside / "x.txt").exists()
    assert (folder / "adir").is_dir() and (folder / "afile").read_text() == "kept"
    assert (folder / "fine.txt").read_bytes() == b"written"
    assert stat.S_IMODE((folder / "fine.txt").stat().st_mode) == 0o444
    assert capsys.readouterr().err.count("not written") == 3
