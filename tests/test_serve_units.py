"""`autograder serve`'s parts without a sandbox: policy, student view, intake refusals, ledger."""

from __future__ import annotations

import os

import pytest

from autograder.grading.serve import exchange
from autograder.grading.serve.ledger import Ledger
from autograder.grading.serve.policy import Policy, student_rows
from autograder.learner.feedback import as_text

ROWS = [
    {
        "grade_id": "t_vis",
        "score": 0.0,
        "max_score": 1.0,
        "status": "ok",
        "message": "expected 1",
        "hidden": False,
    },
    {
        "grade_id": "t_hid",
        "score": 0.0,
        "max_score": 2.0,
        "status": "ok",
        "message": "expected 42",
        "hidden": True,
    },
]


def test_policy_defaults_and_refusals():
    p = Policy.from_config({})
    assert (p.hidden_before_deadline, p.cooldown, p.max_attempts) == ("pass-fail", 60.0, 20)
    with pytest.raises(ValueError, match="unknown AutograderServe"):
        Policy.from_config({"cooldwn": 3})
    with pytest.raises(ValueError, match="one of"):
        Policy.from_config({"hidden_before_deadline": "all"})
    assert p.hidden_mode(None, 10) == "pass-fail"
    assert p.hidden_mode(5.0, 10) == "everything" and p.hidden_mode(50.0, 10) == "pass-fail"


@pytest.mark.parametrize(
    "mode, keys",
    [
        ("pass-fail", {"test", "kind", "passed"}),
        ("points", {"test", "kind", "passed", "points", "max_points"}),
        ("everything", {"test", "kind", "passed", "points", "max_points", "status", "message"}),
    ],
)
def test_hidden_rows_show_what_the_policy_allows(mode, keys):
    visible, hidden = student_rows(ROWS, mode)
    assert set(hidden) == keys
    assert visible["message"] == "expected 1"  # a visible test always says why
    assert ("expected 42" in str(hidden)) == (mode == "everything")


@pytest.mark.parametrize(
    "name, why",
    [
        ("alice+01+2026-01-01 00:00:00.000000 UTC", "no assignment"),
        ("al ice+A+2026-01-01 00:00:00.000000 UTC+x", "student id"),
        ("alice+A+yesterday+x", "timestamp"),
        ("alice\n+A+2026-01-01 00:00:00.000000 UTC+x", "control character"),
        ("alice+A", "not <student>"),
    ],
)
def test_odd_entry_names_are_refused(name, why):
    with pytest.raises(exchange.Refused, match=why):
        exchange.parse_name(name, ["A"])


def _entry(tmp_path, files, secret="ab" * 32):
    path = tmp_path / "in" / "alice+A+2026-01-01 00:00:00.000000 UTC+r"
    path.mkdir(parents=True)
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    (path / "submission_secret.txt").write_text(secret)
    return path, exchange.parse_name(path.name, ["A"])


def test_take_copies_only_regular_files(tmp_path):
    path, entry = _entry(tmp_path, {"A.ipynb": b"{}", "data/x.csv": b"1", "other.ipynb": b"{}"})
    secret, notes = exchange.take(path, entry, {"A"}, tmp_path / "dest")
    assert secret == "ab" * 32
    target = tmp_path / "dest" / "alice" / "A"
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) == [
        "A.ipynb",
        "data/x.csv",
        "timestamp.txt",
    ]
    assert any("other.ipynb" in n for n in notes)


def test_an_entry_in_another_accounts_name_is_refused(tmp_path, monkeypatch):
    """A student with an account here submits as that account; an entry named for them that
    another account wrote is refused whole (its owner is what `nbgrader submit` cannot fake)."""
    import pwd

    path, entry = _entry(tmp_path, {"A.ipynb": b"{}"})
    me = os.geteuid()
    accounts = {"alice": me + 1}

    def getpwnam(name):
        if name in accounts:
            return pwd.struct_passwd((name, "x", accounts[name], 0, "", "/", "/bin/sh"))
        raise KeyError(name)

    monkeypatch.setattr(pwd, "getpwnam", getpwnam)
    exchange.check_owner(me + 1, "alice")  # alice's own
    exchange.check_owner(me, "alice")  # the service's own user (an instructor's test entry)
    exchange.check_owner(me + 2, "carol")  # no account here: nothing to compare
    with pytest.raises(exchange.Refused, match=f"belongs to uid {me + 2}, not to alice"):
        exchange.check_owner(me + 2, "alice")
    if me == 0:  # the whole entry, as the service takes it
        os.chown(path, me + 2, -1)
        with pytest.raises(exchange.Refused, match="not to alice"):
            exchange.take(path, entry, {"A"}, tmp_path / "dest")
        assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize("kind", ["link", "fifo", "big", "secret", "deep"])
def test_take_refuses_the_whole_submission(tmp_path, kind):
    path, entry = _entry(
        tmp_path, {"A.ipynb": b"{}"}, secret="../x" if kind == "secret" else "ab" * 32
    )
    if kind == "link":
        os.symlink("/etc/passwd", path / "data.txt")
    elif kind == "fifo":
        os.mkfifo(path / "pipe")
    elif kind == "big":
        (path / "big.bin").write_bytes(b"\0" * (exchange.MAX_FILES_BYTES + 1))
    elif kind == "deep":
        (path / "a/b/c/d/e").mkdir(parents=True)
    with pytest.raises(exchange.Refused):
        exchange.take(path, entry, {"A"}, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


def test_release_is_where_fetch_feedback_looks(tmp_path, monkeypatch):
    from nbgrader.utils import notebook_hash

    seen = []  # the temporary file's mode while the page is written into it
    chmod = os.chmod
    monkeypatch.setattr(
        exchange.os, "chmod", lambda p, m: (seen.append(os.stat(p).st_mode & 0o777), chmod(p, m))
    )
    out = exchange.release(tmp_path / "feedback", "ab" * 32, "A", "<p>hi</p>")
    assert out.name == notebook_hash(secret="ab" * 32, notebook_id="A") + ".html"
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    # a missing feedback folder is made as nbgrader's release_feedback makes it: 0711
    assert oct((tmp_path / "feedback").stat().st_mode & 0o7777) == "0o711"
    assert seen[-1] & 0o077 == 0  # others never read a half-written page


def _nbgrader_course(tmp_path, groupshared=False):
    """The exchange folders `nbgrader release_assignment` makes, with its modes."""
    course = tmp_path / "exchange" / "c"
    for kind in ("course", "outbound", "inbound"):
        path = course if kind == "course" else course / kind
        path.mkdir(parents=True)
        os.chmod(path, exchange.folder_mode(kind, groupshared))
    return course


@pytest.mark.parametrize("groupshared", [False, True])
def test_the_exchange_keeps_nbgraders_modes(tmp_path, groupshared):
    """A fresh exchange: serve makes feedback/ with release_feedback's mode (0711, 2771 for a
    group course): others open a page by its name, never list the folder."""
    course = _nbgrader_course(tmp_path, groupshared)
    assert exchange.check_folders(course, groupshared) == []
    mode = (course / "feedback").stat().st_mode & 0o7777
    assert mode == (0o2771 if groupshared else 0o711)
    assert exchange.check_folders(course, groupshared) == []  # and accepts it next time


@pytest.mark.parametrize(
    "kind, mode, says",
    [
        (
            "feedback",
            0o755,
            "its group and others may list where nbgrader's mode is 711 (fix: chmod 711 ",
        ),
        ("feedback", 0o777, "its group and others may list and write"),
        ("inbound", 0o777, "others may list where nbgrader's mode is 2733 (fix: chmod 2733 "),
        ("inbound", 0o2773, "its group may list"),
        ("course", 0o757, "others may write"),
        ("outbound", 0o775, "its group may write"),
    ],
)
def test_a_folder_wider_than_nbgraders_is_refused_with_the_fix(tmp_path, kind, mode, says):
    course = _nbgrader_course(tmp_path)
    path = course if kind == "course" else course / kind
    path.mkdir(exist_ok=True)
    os.chmod(path, mode)
    problems = exchange.check_folders(course)
    assert len(problems) == 1 and says in problems[0], problems
    assert str(path) in problems[0]


def test_a_narrower_folder_or_a_link_is_what_it_is(tmp_path):
    course = _nbgrader_course(tmp_path)
    os.chmod(course / "outbound", 0o700)  # nothing for a student to see: not a leak
    assert exchange.check_folders(course) == []
    (course / "feedback").rmdir()
    (course / "feedback").symlink_to(tmp_path)
    assert exchange.check_folders(course) == [
        f"{course / 'feedback'} is not a folder (a link or a file): make it a folder"
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a folder's owner needs root")
def test_a_feedback_folder_someone_else_owns_is_refused(tmp_path):
    """Its owner could open it to everyone: nbgrader's release_feedback refuses it too."""
    course = _nbgrader_course(tmp_path)
    (course / "feedback").mkdir(mode=0o711)
    os.chown(course / "feedback", 65534, 65534)
    (problem,) = exchange.check_folders(course)
    assert "belongs to uid 65534" in problem and f"chown {os.geteuid()} " in problem
    assert exchange.check_folders(course, groupshared=True) == []  # a group's: any member's


def test_ledger_recovers_and_counts_attempts(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    for i in range(3):
        led.add(
            id=f"s{i}",
            student="al",
            assignment="A",
            submitted=float(i),
            seen=float(i),
            state="queued",
        )
    led.add(id="s0", student="x", state="queued")  # an entry is added once
    assert led.replace_older("al", "A", 1.0, "s1") == 1  # s0 replaced, s2 (newer) kept
    led.set("s1", state="grading")
    led.graded("s2", True, {}, 1.0, 1.0, 5.0)
    assert Ledger(tmp_path / "l.sqlite").recover() == {"replaced": 1, "queued": 1, "graded": 1}
    led.graded("s1", False, {}, None, None, 6.0)  # a grader failure: no attempt number
    assert [r["id"] for r in led.attempts("al", "A")] == ["s2"]
    led.released("s2")
    led.released("s2")  # released once, whatever the caller does
    assert led.db.execute("SELECT releases FROM submissions WHERE id='s2'").fetchone()[0] == 1


def test_feedback_page_as_text():
    text = as_text(
        "<html><style>x{}</style><h1>T</h1><p>Score: 1 / 2</p><table><tr><td>a</td><td>b &amp; c</td></tr></table>"
    )
    assert text.splitlines() == ["T", "Score: 1 / 2", "a b & c"]


def test_dispatch_holds_a_submission_until_the_cooldown_is_over(tmp_path, monkeypatch):
    """The cooldown, on a clock the test sets: a submission seen inside it stays queued (its
    not_before recorded) and starts at the first dispatch after it; a grader failure is no
    attempt, so it starts no cooldown."""
    from autograder.grading.serve import service as svc

    led = Ledger(tmp_path / "l.sqlite")
    led.add(id="a1", student="al", assignment="A", submitted=100.0, seen=100.0, state="queued")
    led.set("a1", state="grading")
    led.graded("a1", True, {}, 1.0, 1.0, 101.0)  # attempt 1, submitted at 100
    led.add(id="a2", student="al", assignment="A", submitted=102.0, seen=102.0, state="queued")
    led.add(id="b1", student="bo", assignment="A", submitted=102.5, seen=102.5, state="queued")
    led.add(id="b0", student="bo", assignment="A", submitted=90.0, seen=90.0, state="queued")
    led.set("b0", state="grading")
    led.graded("b0", False, {}, None, None, 91.0)  # a grader failure: not an attempt
    started = []
    s = svc.Service.__new__(svc.Service)
    s.ledger, s.policy, s.inflight = led, Policy(cooldown=60.0, max_attempts=5), {}
    s.pool = type("P", (), {"jobs": 2})()
    s.guard = lambda id_, fn, *a: fn(*a)
    s.start_grading = lambda row: started.append(row["id"])
    for now, expect in ((150.0, ["b1"]), (159.99, ["b1"]), (160.0, ["a2", "b1"])):
        monkeypatch.setattr(svc.time, "time", lambda now=now: now)
        started.clear()
        s.dispatch()
        assert started == expect, (now, started)
        if "a2" not in started:
            assert (
                led.db.execute("SELECT not_before FROM submissions WHERE id='a2'").fetchone()[0]
                == 160.0
            )
