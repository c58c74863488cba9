"""`autograder serve` on a machine shared by real users (issue 37 items 1, 2 and 4).

Three Unix accounts made for the test (CI runs as root; elsewhere the module is skipped with
that reason): an instructor, who runs nbgrader's release and the service itself - never root,
its sandboxes in unprivileged user namespaces - and two students, alice and bob, each running
the real `nbgrader fetch_assignment`, `nbgrader submit` and `nbgrader fetch_feedback` as
themselves from a home only they can read. Asserted: each gets their own page within the usual
seconds; neither can list the exchange's `feedback/` or `inbound/`, read the service's output or
the other's home; `api/me` tells nobody anything without the hub's identity; and alice, who
submits in bob's name (`nbgrader submit --student=bob`, which nbgrader allows) and plants a link into
the inbound folder, changes nothing but her own attempts: both entries are refused, bob's one
attempt and page are his.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from autograder.authoring.accounts import Unavailable, accounts
from autograder.course import SOLUTIONS, TempCourse
from autograder.procs import explain_log, run

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_bubblewrap")]

A = "01_relu_inplace"
NB = f"{A}.ipynb"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def machine():
    base = Path(tempfile.mkdtemp(prefix="autograder-multiuser-"))
    try:
        with accounts(base, ("instructor", "alice", "bob")) as users:
            yield base, users
    except Unavailable as exc:
        pytest.skip(f"the multi-user test makes Unix accounts (CI runs as root): {exc}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def served(machine):
    """The instructor releases the assignment and starts the service, as themselves; alice and
    bob fetch and submit as themselves; alice also submits in bob's name and plants a link."""
    base, users = machine
    teach, alice, bob = users["instructor"], users["alice"], users["bob"]
    area = base / "instructor"  # the instructor's own folder: the course, the service's output
    area.mkdir(mode=0o700)
    exchange = base / "exchange"
    exchange.mkdir()
    course = TempCourse(area / "course", [A])
    with open(course.root / "nbgrader_config.py", "a") as fh:
        fh.write(f"\nc.Exchange.root = {str(exchange)!r}\nc.AutograderServe.cooldown = 0\n")
    run(["chown", "-R", f"{teach.name}:{teach.name}", area, exchange])
    nbgrader = [sys.executable, "-m", "nbgrader"]
    teach.run(*nbgrader, "generate_assignment", A, "--force", cwd=course.root)
    teach.run(*nbgrader, "release_assignment", A, "--force", cwd=course.root)
    for student in (alice, bob):
        (student.home / "nbgrader_config.py").write_text(
            "c = get_config()\n"
            f"c.Exchange.root = {str(exchange)!r}\n"
            "c.CourseDirectory.course_id = 'autograd-inplace'\n"
        )
        os.chown(student.home / "nbgrader_config.py", student.uid, student.gid)
        student.run(*nbgrader, "fetch_assignment", A)

    port = _free_port()
    out = area / "serve"
    log = base / "serve.log"
    command = teach.command(
        BIN / "autograder", "serve", "--course", course.root, "--out", out, "--poll", "0.2",
        "--jobs", "1", "--port", port,
    )  # fmt: skip
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            command,
            cwd=course.root,
            env=teach.env(),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    state = {"base": base, "users": users, "out": out, "exchange": exchange, "port": port}
    state.update(course=course, proc=proc, log=log, command=command)
    try:
        deadline = time.monotonic() + 300
        while "] serving " not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, explain_log(
                command, proc.poll(), log
            )
            time.sleep(0.2)
        state["uid"] = _status_uid(proc.pid)
        # alice: the solution, as herself
        shutil.copy(SOLUTIONS / A / NB, alice.home / A / NB)
        os.chown(alice.home / A / NB, alice.uid, alice.gid)
        alice.run(*nbgrader, "submit", A)
        # bob: the untouched release, as himself
        bob.run(*nbgrader, "submit", A)
        # alice again, in bob's name: `nbgrader submit --student` names the entry as asked; the
        # folder it writes is still alice's
        alice.run(*nbgrader, "submit", A, f"--student={bob.name}")
        # alice plants a link in inbound: a folder in her name whose notebook is the solution
        planted = alice.tries(
            f"inbound = {str(exchange / 'autograd-inplace' / 'inbound')!r}\n"
            "import datetime\n"
            "stamp = datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M:%S.%f UTC')\n"
            f"entry = os.path.join(inbound, {alice.name!r} + '+{A}+' + stamp + '+x')\n"
            "os.mkdir(entry)\n"
            f"os.symlink({str(course.root / 'solutions' / A / NB)!r}, os.path.join(entry, '{NB}'))\n"
            "open(os.path.join(entry, 'timestamp.txt'), 'w').write(stamp)\n"
            "open(os.path.join(entry, 'submission_secret.txt'), 'w').write('ab' * 32)\n"
            "out['entry'] = os.path.basename(entry)\n"
        )
        state["planted"] = planted["entry"]
        state["rows"] = _wait_final(out / "ledger.sqlite", 4, proc, log, command)
        state["pages"] = {}
        for student in (alice, bob):
            student.run(*nbgrader, "fetch_feedback", A)
            folder = student.home / A / "feedback"
            state["pages"][student.name] = sorted(folder.glob("*/*.html"))
        yield state
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status_uid(pid: int) -> dict:
    """The real and effective uids of the service and of every process it started."""
    import psutil

    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return {p.pid: tuple(p.uids())[:2] for p in procs if p.is_running()}


def _wait_final(ledger: Path, n: int, proc, log, command, timeout=300) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        rows = []
        if ledger.exists():
            con = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=30)
            con.row_factory = sqlite3.Row
            try:
                rows = [dict(r) for r in con.execute("SELECT * FROM submissions")]
            finally:
                con.close()
        if sum(r["state"] in ("released", "refused", "replaced") for r in rows) >= n:
            return rows
        assert proc.poll() is None, explain_log(command, proc.poll(), log)
        assert time.monotonic() < deadline, (
            f"{n} final rows not reached: {[(r['student'], r['state']) for r in rows]}\n"
            + explain_log(command, proc.poll(), log)
        )
        time.sleep(0.1)


def test_the_service_and_its_sandboxes_run_as_the_instructor(served):
    teach = served["users"]["instructor"]
    uids = served["uid"]
    assert uids and all(real == teach.uid and eff == teach.uid for real, eff in uids.values()), uids


def test_each_student_gets_their_own_page_in_seconds(served):
    users, rows = served["users"], served["rows"]
    alice, bob = users["alice"], users["bob"]
    attempts = [r for r in rows if r["counted"]]  # graded attempts (a refusal never is one)
    assert sorted(r["student"] for r in attempts) == sorted([alice.name, bob.name]), rows
    for r in attempts:
        assert r["state"] == "released" and r["released"] - r["submitted"] < 60, r
    # alice fetches her graded page and the refusal of what she submitted in bob's name (her
    # secret, her cache); bob fetches his one page
    alice_pages = [_text(p) for p in served["pages"][alice.name]]
    (bob_page,) = served["pages"][bob.name]
    assert bob_page.stat().st_uid == bob.uid
    assert len(alice_pages) == 2 and any("hidden tests: 13 of 13 passed" in t for t in alice_pages)
    assert any(f"not to {bob.name}" in t for t in alice_pages), alice_pages
    assert "hidden tests: 0 of 13 passed" in _text(bob_page)


def test_alice_in_bobs_name_and_a_planted_link_change_only_her_attempts(served):
    users, rows = served["users"], served["rows"]
    alice, bob = users["alice"], users["bob"]
    refused = {r["id"]: r for r in rows if r["reason"].startswith("refused")}
    assert len(refused) == 2 and not any(r["counted"] for r in refused.values()), rows
    (in_bobs_name,) = [r for r in refused.values() if r["student"] == bob.name]
    assert f"belongs to uid {alice.uid}, not to {bob.name}" in in_bobs_name["reason"]
    assert "symbolic link" in refused[served["planted"]]["reason"]
    # bob's one real attempt is the only one of his, and it scores the release's 0
    bobs = [r for r in rows if r["student"] == bob.name and r["counted"]]
    assert len(bobs) == 1 and bobs[0]["attempt"] == 1 and bobs[0]["score"] == 0, bobs


def test_no_student_lists_or_reads_what_is_not_theirs(served):
    users, exchange = served["users"], served["exchange"]
    alice, bob = users["alice"], users["bob"]
    course = exchange / "autograd-inplace"
    (bob_page,) = served["pages"][bob.name]
    seen = alice.tries(
        "def attempt(what, f):\n"
        "    try:\n"
        "        f()\n"
        "        out[what] = 'allowed'\n"
        "    except PermissionError:\n"
        "        out[what] = 'denied'\n"
        f"attempt('list feedback', lambda: os.listdir({str(course / 'feedback')!r}))\n"
        f"attempt('list inbound', lambda: os.listdir({str(course / 'inbound')!r}))\n"
        f"attempt('list the service output', lambda: os.listdir({str(served['out'])!r}))\n"
        f"attempt('read the gradebook', lambda: open({str(served['course'].root / 'gradebook.db')!r}).read(1))\n"
        f"attempt('list bob home', lambda: os.listdir({str(bob.home)!r}))\n"
        f"attempt('read bob page', lambda: open({str(bob_page)!r}).read(1))\n"
        f"attempt('write feedback', lambda: open({str(course / 'feedback' / 'x.html')!r}, 'w'))\n"
    )
    assert seen == {
        "list feedback": "denied",
        "list inbound": "denied",
        "list the service output": "denied",
        "read the gradebook": "denied",
        "list bob home": "denied",
        "read bob page": "denied",
        "write feedback": "denied",
    }


def test_the_status_endpoint_tells_nobody_without_the_hub(served):
    base = f"http://127.0.0.1:{served['port']}"
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{base}/api/me", timeout=30)
    assert info.value.code == 403
    with urllib.request.urlopen(f"{base}/api/queue", timeout=30) as r:
        body = json.loads(r.read())
    users = served["users"]
    assert users["alice"].name not in json.dumps(body) and users["bob"].name not in json.dumps(body)


def _text(page: Path) -> str:
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))
