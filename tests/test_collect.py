"""`autograder collect ZIP...`: zips made by `autograder submit` into the course's submitted/.

It replaces `unzip -o` at the course root, which writes wherever a zip's paths point: a zip
that holds anything but one student's notebooks of one assignment is refused whole (message,
exit 1, nothing written from it) while the other zips of the call are imported.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from autograder.course import EXERCISES, FIXTURE_SUBMISSIONS, TempCourse
from autograder.procs import explain, run

AUTOGRADER = str(Path(sys.executable).with_name("autograder"))
A = "01_relu_inplace"
NB = f"{A}.ipynb"


def collect(course, *zips):
    """``autograder collect``, any exit status: the callers check it."""
    return run(
        [AUTOGRADER, "collect", *map(str, zips), "--course", str(course.root)],
        expect=None,
        timeout=300,
    )


def make_zip(path, entries, links=()):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
        for name, target in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16  # a symbolic link
            zf.writestr(info, target)
    return path


@pytest.fixture
def course(tmp_path):
    c = TempCourse(tmp_path / "course", [A])
    bob = c.root / "submitted" / "bob" / A
    bob.mkdir(parents=True)
    (bob / NB).write_text("bob's own notebook")
    return c


def notebook_bytes():
    return (FIXTURE_SUBMISSIONS / A / "correct-alternative.ipynb").read_bytes()


def test_a_zip_from_autograder_submit_is_imported(course, tmp_path):
    z = tmp_path / "alice.zip"
    run(
        [AUTOGRADER, "submit", str(EXERCISES / A / NB), "--student", "alice", "--output", str(z)],
        timeout=300,
    )
    proc = collect(course, z)
    assert proc.returncode == 0, explain(proc)
    assert (course.root / "submitted" / "alice" / A / NB).read_bytes() == (
        EXERCISES / A / NB
    ).read_bytes()


def test_zip_overwrites_other_student_is_refused_and_others_still_imported(course, tmp_path):
    evil = make_zip(
        tmp_path / "mallory.zip",
        {
            f"submitted/mallory/{A}/{NB}": notebook_bytes(),
            f"submitted/bob/{A}/{NB}": b"overwritten by mallory",
        },
    )
    good = make_zip(tmp_path / "carol.zip", {f"submitted/carol/{A}/{NB}": notebook_bytes()})
    proc = collect(course, evil, good)
    assert proc.returncode == 1, explain(proc)
    assert (
        "refused" in proc.stderr
        and "mallory.zip" in proc.stderr
        and "nothing from it was written" in proc.stderr
    )
    assert (course.root / "submitted" / "bob" / A / NB).read_text() == "bob's own notebook"
    assert not (course.root / "submitted" / "mallory").exists()
    assert (course.root / "submitted" / "carol" / A / NB).exists()


@pytest.mark.parametrize(
    "entries,links,why",
    [
        (
            {
                f"submitted/eve/{A}/{NB}": b"{}",
                "autograder/__init__.py": b"import os; os.system('id')",
            },
            (),
            "outside submitted/",
        ),
        (
            {
                f"submitted/eve/{A}/{NB}": b"{}",
                f"submitted/eve/{A}/../../../autograder/checks.py": b"x",
            },
            (),
            "'..'",
        ),
        (
            {f"submitted/eve/{A}/{NB}": b"{}", f"solutions/{A}/{NB}": b"{}"},
            (),
            "outside submitted/",
        ),
        ({"/etc/cron.d/x": b"x"}, (), "absolute"),
        ({}, [(f"submitted/eve/{A}/{NB}", f"../../../solutions/{A}/{NB}")], "link"),
        ({f"submitted/eve/no_such_assignment/{NB}": b"{}"}, (), "no assignment"),
        # newline-student-id: `$` matched before the trailing newline and made a second "alice"
        ({f"submitted/alice\n/{A}/{NB}": notebook_bytes()}, (), "control character"),
        ({f"submitted/eve/{A}\r/{NB}": notebook_bytes()}, (), "control character"),
    ],
    ids=[
        "zip-replaces-package",
        "dotdot-path",
        "zip-replaces-solutions",
        "absolute-path",
        "symlink-entry",
        "unknown-assignment",
        "newline-student-id",
        "carriage-return-in-folder",
    ],
)
def test_hostile_zip_is_refused_whole(course, tmp_path, entries, links, why):
    before = sorted(p.relative_to(course.root) for p in course.root.rglob("*"))
    z = make_zip(tmp_path / "eve.zip", entries, links)
    proc = collect(course, z)
    assert proc.returncode == 1, explain(proc)
    assert why in proc.stderr, proc.stderr
    assert sorted(p.relative_to(course.root) for p in course.root.rglob("*")) == before


def test_not_a_zip_is_refused(course, tmp_path):
    z = tmp_path / "x.zip"
    z.write_bytes(b"PK\x03\x04 not really")
    proc = collect(course, z)
    assert proc.returncode == 1 and "not a readable zip" in proc.stderr, explain(proc)


@pytest.mark.parametrize(
    ("source_kernel", "submitted", "refused"),
    [
        ({"name": "python3", "language": "python"}, {"name": "blarg"}, False),  # source's wins
        (None, None, False),  # neither names one: the default kernel, as stock
        (None, {"name": "python3"}, False),
        (None, {"name": "python"}, False),  # jupyter_client's alias of the native kernel
        (None, {"name": "blarg"}, True),  # nbgrader's test_missing_source_kernelspec
        (None, {"name": "../../etc/x"}, True),  # not a kernel name: never looked up
        (None, {"name": "x" * 10_000}, True),
        (None, {"name": 7}, True),
        (None, "not a dict", False),  # no usable kernelspec: the default kernel
    ],
)
def test_a_submission_is_refused_for_its_kernel_exactly_where_stock_fails(
    source_kernel, submitted, refused
):
    """The rule: a submission is graded unless stock would start a kernel that is not installed
    (or not Python) for it - only when the source names no kernel (OverwriteKernelspec)."""
    from types import SimpleNamespace

    from autograder.grading.intake.collect import kernel_refusal

    source = SimpleNamespace(
        nb={"metadata": {"kernelspec": source_kernel} if source_kernel else {}}
    )
    nb = {"metadata": {"kernelspec": submitted}} if submitted is not None else {"metadata": {}}
    why = kernel_refusal(source, nb)
    assert (why is not None) == refused, why
    if why:
        assert "\n" not in why and len(why) < 300
