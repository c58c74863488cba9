"""`autograder serve`: the real `nbgrader submit` -> graded -> the real `nbgrader fetch_feedback`.

One service (a subprocess, as an instructor starts it) serves the whole module: the traffic is
submitted up front - honest notebooks with known scores, the hostile fixtures of
tests/fixtures/grading/ and hostile exchange entries (links, odd names, fifos, sizes) written
straight into inbound as any student can - then the tests read what came out: the ledger, the
pages `nbgrader fetch_feedback` fetches, the gradebook, attempts.csv, the status endpoint. The
last test kills the service with SIGKILL in the middle of a burst and restarts it: nothing lost,
nothing released twice.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from fnmatch import fnmatch
from pathlib import Path

import pytest

from autograder.course import EXERCISES, FIXTURE_SUBMISSIONS, SOLUTIONS, fixture_cases
from autograder.grading.serve.harness import ServeCourse
from autograder.procs import run

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_bubblewrap")]

A = "01_relu_inplace"
NB = f"{A}.ipynb"
GRADING = Path(__file__).parent / "fixtures" / "grading"
HOSTILE = [
    "leaks-hidden-tests",
    "reads-solutions",
    "kill-grader",
    "forged-result",
    "fork-bomb",
    "infinite-loop",
    "output-flood",
    "writes-outside",
    "not-a-notebook",
]
HONEST = ["correct-alternative", "mip-values-only"]
COOLDOWN = 4.0


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    port = _free_port()
    sc = ServeCourse(
        tmp_path_factory.mktemp("serve"),
        [A],
        policy={"cooldown": COOLDOWN, "max_attempts": 3},
        serve_args=[
            "--jobs",
            "2",
            "--timeout",
            "5",
            "--memory-limit",
            "512M",
            "--output-limit",
            "1M",
            "--port",
            str(port),
        ],
    )
    sc.port = port
    sc.start()
    expected = 0
    try:
        # carol first: graded in the service's first batch, so her next two submissions (put
        # while the service is paused, so one poll sees both) land inside her cooldown: the newer
        # replaces the older and is graded once the cooldown is over
        sc.submit("carol", A, EXERCISES / A / NB)
        sc.submit("alice", A, SOLUTIONS / A / NB)  # the real nbgrader submit
        sc.submit("bob", A, EXERCISES / A / NB)
        expected += 3
        for case in HONEST:
            sc.put(
                f"honest-{case}", A, {NB: (FIXTURE_SUBMISSIONS / A / f"{case}.ipynb").read_bytes()}
            )
        for case in HOSTILE:
            sc.put(f"h-{case}", A, {NB: (GRADING / f"{case}.ipynb").read_bytes()})
        expected += len(HONEST) + len(HOSTILE)
        expected += _hostile_entries(sc)
        sc.expected_refused = 7
        sc.wait_final(1, timeout=300, student="carol")
        with sc.paused():
            sc.put("carol", A, {NB: (EXERCISES / A / NB).read_bytes()})
            time.sleep(0.05)
            sc.put("carol", A, {NB: (SOLUTIONS / A / NB).read_bytes()})
        expected += 2
        # dave: four attempts, one after the other's feedback; the limit is 3
        for k in range(1, 5):
            sc.put("dave", A, {NB: (SOLUTIONS / A / NB).read_bytes()})
            expected += 1
            sc.wait_final(k, timeout=300, student="dave")
        sc.rows_all = sc.wait_final(expected, timeout=300)
        sc.queue = _get(f"http://127.0.0.1:{port}/api/queue")
        sc.me = _get(f"http://127.0.0.1:{port}/api/me")
        yield sc
    finally:
        sc.stop()


def _hostile_entries(sc) -> int:
    """Entries any student can write into inbound, each refused whole; returns how many."""
    good = (SOLUTIONS / A / NB).read_bytes()
    inbound = sc.inbound
    stamp = "2026-01-01 00:00:00.000000 UTC"
    # a link to the instructor's sources (full marks if followed)
    os.symlink(sc.course.root / "solutions" / A, inbound / f"mallory+{A}+{stamp}+lnk")
    # a notebook that is a link to the solution
    name = sc.put("mallory2", A, {"x.txt": b"x"})
    os.symlink(sc.course.root / "solutions" / A / NB, inbound / name / NB)
    # a fifo (a reader that opened it would block forever)
    name = sc.put("mallory3", A, {NB: good})
    os.mkfifo(inbound / name / "pipe")
    # more bytes than a submission may hold
    sc.put("mallory4", A, {NB: good, "big.bin": b"\0" * (60 << 20)})
    # a control character in the name, an unknown assignment, a secret that is not nbgrader's
    sc.put("mallory5", A, {NB: good}, name=f"mallory5\n+{A}+{stamp}+x")
    sc.put("mallory6", "nope", {NB: good})
    name = sc.put("mallory7", A, {NB: good})
    (inbound / name / "submission_secret.txt").write_text("../../etc/passwd")
    # a plain file, not a folder
    (inbound / f"mallory8+{A}+{stamp}+file").write_bytes(good)
    return 8


def _scores(sc, student):
    with open(sc.out / "grades.csv") as fh:
        return {
            r["grade_id"]: (float(r["score"]), float(r["max_score"]), r["status"])
            for r in csv.DictReader(fh)
            if r["student"] == student
        }


def _judge_scores(sc, student):
    """The judge's verdict of each row (expected.json's expectations are the judge's), and no
    difference from one kernel's without a difference status (grading v5)."""
    out = {}
    with open(sc.out / "grades.csv") as fh:
        for r in csv.DictReader(fh):
            if r["student"] != student:
                continue
            if r["kernel_score"] and r["judge_score"]:
                differs = r["kernel_score"] != r["judge_score"]
                assert differs == (r["status"] in ("unconfirmed", "contradicted")), r
            score = float(r["judge_score"]) if r["judge_score"] else float(r["score"])
            status = r["judge_status"] or r["status"]
            out[r["grade_id"]] = (score, float(r["max_score"]), status)
    return out


def test_real_submit_is_graded_and_fetch_feedback_gets_it(served):
    rows = {r["student"]: r for r in served.rows_all}
    assert (
        rows["alice"]["state"] == "released"
        and rows["alice"]["score"] == rows["alice"]["max_score"]
    )
    assert rows["bob"]["state"] == "released" and rows["bob"]["score"] == 0
    pages = served.fetch_feedback("alice", A)  # the real nbgrader fetch_feedback
    assert len(pages) == 1 and pages[0].name == NB.replace(".ipynb", ".html")
    text = pages[0].read_text()
    assert "Attempt 1 of 3" in text and "after you submitted" in text
    assert "hidden tests: 13 of 13 passed" in text
    bob = served.fetch_feedback("bob", A)[0].read_text()
    assert "hidden tests: 0 of 13 passed" in bob
    # before the deadline a hidden test shows its name and failed, nothing else
    row = re.search(r"<code>test_modifies_in_place_views</code>.*?</tr>", bob, re.S).group(0)
    assert "failed" in row and "expected" not in row and "/ 1" not in row
    # the visible tests' messages are there: bob's functions are still the release stubs, so
    # "not implemented yet" and no guessed cause (issue 29)
    assert "not implemented yet" in bob and "likely cause" not in bob
    # and in a terminal: autograder feedback (nbgrader fetch_feedback, the newest page as text)
    proc = run(
        [str(Path(sys.executable).with_name("autograder")), "feedback", A, "--student=alice"],
        cwd=served.home("alice"),
        timeout=120,
    )
    assert "hidden tests: 13 of 13 passed" in proc.stdout and "<" not in proc.stdout


def test_scores_are_the_graders(served):
    """Honest fixtures: exactly the known scores (those of stock nbgrader, tests/fixtures)."""
    cases = fixture_cases(A)
    for case in HONEST:
        scores = _scores(served, f"honest-{case}")
        assert scores, case
        for gid, (score, maximum, status) in scores.items():
            assert status == "ok", (case, gid, status)
            assert score == (0 if gid in cases[case] else maximum), (case, gid)


def test_gradebook_and_submitted_have_it(served):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{served.course.root / 'gradebook.db'}") as gb:
        s = gb.find_submission(A, "alice")
        assert s.score == s.max_score > 0
        assert s.timestamp is not None
        assert gb.find_submission(A, "bob").score == 0
    assert (served.course.root / "submitted" / "alice" / A / NB).is_file()
    assert (served.course.root / "autograded" / "alice" / A / NB).is_file()


def test_hostile_submissions_never_stop_it(served):
    rows = {r["student"]: r for r in served.rows_all if r["student"]}
    expected = json.loads((GRADING / "expected.json").read_text())
    for case in HOSTILE:
        r = rows[f"h-{case}"]
        assert r["state"] == "released", (case, r)
        want = expected[case]
        for gid, (score, maximum, status) in _judge_scores(served, f"h-{case}").items():
            zero = want["base"] == "blank" or any(fnmatch(gid, z) for z in want.get("zero", []))
            assert score == (0 if zero else maximum), (case, gid, score)
            pattern = next((p for p in want.get("status", {}) if fnmatch(gid, p)), None)
            assert status == (want["status"][pattern] if pattern else "ok"), (case, gid, status)
    assert served.proc.poll() is None  # still serving (dave's attempts came after them)


def test_hostile_exchange_entries_are_refused_whole(served):
    refused = [
        r
        for r in served.rows_all
        if r["state"] == "refused" or (r["reason"] or "").startswith("refused")
    ]
    why = " | ".join(r["reason"] for r in refused)
    for text in (
        "symbolic link",
        "not a regular file",
        "bytes",
        "control character",
        "no assignment 'nope'",
        "hexadecimal secret",
        "not a folder",
    ):
        assert text in why, text
    # nothing of a refused submission was graded, nothing reached the gradebook
    assert not (served.course.root / "submitted" / "mallory2").exists()
    assert not (served.course.root / "submitted" / "mallory").exists()
    # a refusal with a usable secret gets a page saying why, and is no attempt
    m3 = next(r for r in served.rows_all if r["student"] == "mallory3")
    assert m3["state"] == "released" and not m3["counted"] and "not a regular file" in m3["result"]


def test_cooldown_and_a_newer_submission_replaces_the_older(served):
    carol = sorted(
        (r for r in served.rows_all if r["student"] == "carol"), key=lambda r: r["submitted"]
    )
    assert [r["state"] for r in carol] == ["released", "replaced", "released"]
    first, _, last = carol
    # never before the cooldown's end (that a submission seen inside it waits is proved on a set
    # clock: tests/test_serve_units.py::test_dispatch_holds_a_submission_until_the_cooldown_is_over)
    assert last["started"] >= first["submitted"] + COOLDOWN - 0.01
    assert last["attempt"] == 2 and last["score"] == last["max_score"]


def test_attempt_limit(served):
    dave = sorted(
        (r for r in served.rows_all if r["student"] == "dave"), key=lambda r: r["submitted"]
    )
    assert [r["attempt"] for r in dave] == [1, 2, 3, None]
    assert "graded attempts" in dave[-1]["result"] and not dave[-1]["counted"]


def test_no_test_source_where_a_student_can_read(served):
    """0 bytes of hidden test source in the exchange's feedback, the fetched pages, the status."""
    import nbformat

    source = nbformat.read(SOLUTIONS / A / NB, as_version=4)
    lines = set()
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            hidden = cell.source.split("BEGIN HIDDEN TESTS", 1)[1:] or [""]
            lines |= {ln.strip() for ln in hidden[0].splitlines() if len(ln.strip()) >= 20}
    assert len(lines) > 10
    readable = [p for p in (served.exchange / "autograd-inplace" / "feedback").iterdir()]
    for student in ("alice", "bob"):
        readable += served.fetch_feedback(student, A)
    texts = [p.read_text(errors="replace") for p in readable]
    texts.append(json.dumps(served.queue))
    texts.append(json.dumps(served.me))
    assert len(texts) > 20
    for text in texts:
        for line in lines:
            assert line not in text, line
    # the service wrote nothing else into the exchange
    course = served.exchange / "autograd-inplace"
    assert sorted(p.name for p in course.iterdir()) == ["feedback", "inbound", "outbound"]


def test_the_exchange_keeps_nbgraders_modes_and_out_is_the_instructors(served):
    """Issue 37 item 1: feedback/ as nbgrader's release_feedback makes it (0711: a student opens
    the page whose name they know, never lists the folder), each page 0644, the service's --out
    0700; the inbound and course folders as release_assignment made them."""
    import stat

    course = served.exchange / "autograd-inplace"
    feedback = course / "feedback"
    assert stat.S_IMODE(feedback.stat().st_mode) == 0o711
    pages = list(feedback.iterdir())
    assert pages and {stat.S_IMODE(p.stat().st_mode) for p in pages} == {0o644}
    assert not [p for p in pages if p.name.startswith(".")]  # no temporary file left
    assert stat.S_IMODE((course / "inbound").stat().st_mode) == 0o2733
    assert stat.S_IMODE(course.stat().st_mode) == 0o755
    assert stat.S_IMODE(served.out.stat().st_mode) == 0o700


def test_serve_refuses_an_exchange_wider_than_nbgraders(tmp_path):
    """A feedback folder others may list (0755, as serve made it before issue 37): serve does not
    start, and says which folder and the chmod that fixes it; with the fix it starts."""
    sc = ServeCourse(tmp_path, [A], serve_args=["--jobs", "1"])
    feedback = sc.exchange / "autograd-inplace" / "feedback"
    feedback.mkdir()
    os.chmod(feedback, 0o755)
    with pytest.raises(RuntimeError) as info:
        sc.start(timeout=120)
    assert "exited 2" in str(info.value)
    assert f"{feedback} has mode 755: its group and others may list" in str(info.value)
    assert f"(fix: chmod 711 {feedback})" in str(info.value)
    assert not (sc.out / "ledger.sqlite").exists()  # refused before anything was made


def test_attempts_csv_and_status_endpoint(served):
    with open(served.out / "attempts.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(served.rows_all)
    released = [r for r in rows if r["state"] == "released" and r["started"]]
    assert released
    for r in released:
        assert r["submitted"] <= r["seen"] <= r["started"] <= r["finished"] <= r["released"]
    status, body = served.queue
    assert status == 200 and body["queued"] == 0 and body["released"] >= 20
    status, body = served.me  # no JupyterHub: no student identity to trust
    assert status == 403


def test_kill_9_mid_burst_loses_nothing_and_releases_nothing_twice(served):
    before = len(served.rows())
    for i in range(10):
        served.put(f"burst{i:02d}", A, {NB: (SOLUTIONS / A / NB).read_bytes()})
    deadline = time.monotonic() + 300
    while sum(r["state"] == "released" for r in served.rows()[before:]) < 2:
        assert time.monotonic() < deadline, served.tail()
        time.sleep(0.05)
    served.stop(signal.SIGKILL)
    served.start()
    rows = served.wait_final(before + 10, timeout=600)
    burst = [r for r in rows if (r["student"] or "").startswith("burst")]
    assert len(burst) == 10
    assert all(r["state"] == "released" and r["releases"] == 1 for r in burst), burst
    assert all(r["score"] == r["max_score"] for r in burst)
    assert all(r["releases"] <= 1 for r in rows)
    assert "ledger" in served.tail()


def test_stock_fetch_feedback_layout(served):
    """What nbgrader's own release_feedback would write: <md5(secret + notebook)>.html, 0644."""
    from nbgrader.utils import notebook_hash

    alice = next(r for r in served.rows_all if r["student"] == "alice")
    path = (
        served.exchange
        / "autograd-inplace"
        / "feedback"
        / (notebook_hash(secret=alice["secret"], notebook_id=A) + ".html")
    )
    assert path.is_file() and (path.stat().st_mode & 0o777) == 0o644


def test_the_class_report_follows_the_service(served):
    """results.jsonl holds each counted attempt's rows once, with its number (rebuilt from the
    ledger, so the kill -9 above wrote none twice), and the class report is written from it
    while the service is idle (issue 29: `autograder report`, live under serve)."""
    lines = [json.loads(x) for x in (served.out / "results.jsonl").read_text().splitlines() if x]
    assert lines and all(type(r.get("attempt")) is int for r in lines)
    keys = [(r["student"], r["notebook"], r["grade_id"], r["attempt"]) for r in lines]
    assert len(keys) == len(set(keys))
    assert sorted({r["attempt"] for r in lines if r["student"] == "dave"}) == [1, 2, 3]
    page = served.out / "report" / "report.html"
    deadline = time.monotonic() + 60
    while not page.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    html = page.read_text()
    assert "attempts to full marks" in html
    assert "dave" not in html  # student ids only with --with-students
    # every submission is in a final state: no private copy of one is left behind
    assert list((served.out / "intake").iterdir()) == []


def test_a_dask_cluster_grades_for_the_service(tmp_path):
    """`autograder serve --scheduler ADDRESS`: the service's sandboxes are Dask workers' (a local
    cluster of two processes here); honest and blank submissions get their scores, released once,
    and the class report is written without an error at start or after."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0"
    ) as cluster:
        sc = ServeCourse(
            tmp_path / "dask",
            [A],
            policy={"cooldown": 0},
            serve_args=["--scheduler", cluster.scheduler_address, "--timeout", "10"],
        )
        sc.start()
        try:
            sc.put("alice", A, {NB: (SOLUTIONS / A / NB).read_bytes()})
            sc.put("bob", A, {NB: (EXERCISES / A / NB).read_bytes()})
            rows = {r["student"]: r for r in sc.wait_final(2, timeout=300)}
        finally:
            sc.stop()
    assert rows["alice"]["state"] == "released" and rows["alice"]["releases"] == 1
    assert rows["alice"]["score"] == rows["alice"]["max_score"] > 0
    assert rows["bob"]["state"] == "released" and rows["bob"]["score"] == 0
    assert "the class report failed" not in sc.tail(10**7)
    assert (sc.out / "report" / "report.html").exists()
