"""`autograder serve` as a real JupyterHub's hub-managed service, behind the hub's OAuth.

A real JupyterHub (DummyAuthenticator, configurable-http-proxy from the npm registry, installed
once into .venv/node) starts the service from its own `c.JupyterHub.services` entry, as docs/instructor.md
documents. A student's API token reaches `/services/autograder/api/me` through the proxy and gets
that student's own last result (hidden tests as the policy shows them, no test source); another
student gets only theirs; a request without a login is sent to the hub's OAuth.

In Debian's chromium (marker browser), a student logs in, the hub spawns their JupyterLab on this
machine (SimpleLocalProcessSpawner), they open nbgrader's Assignment List, Fetch exercise 1,
(answer it: the solution written into the fetched copy), click Submit, then Fetch Feedback
seconds later, and open the status page through the hub's OAuth: their own result. A second
student logged in at the same time, in another browser session, sees only their own.
Screenshots in artifacts/browser/serve-*.png.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from autograder.course import SOLUTIONS
from autograder.grading.serve.harness import ServeCourse
from autograder.procs import explain_log, run
from test_browser import ARTIFACTS, CHROMIUM_ARGS, _chromium, _write_settings, menu

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_bubblewrap")]

REPO = Path(__file__).resolve().parents[1]
A = "01_relu_inplace"
NB = f"{A}.ipynb"
CHP_VERSION = "5.3.0"
TIMEOUT_MS = 240_000


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def configurable_http_proxy() -> str:
    """configurable-http-proxy from the npm registry, installed once into .venv/node."""
    prefix = REPO / ".venv" / "node"
    chp = prefix / "node_modules" / ".bin" / "configurable-http-proxy"
    if not chp.exists():
        if not shutil.which("npm"):
            pytest.fail("npm is needed to install configurable-http-proxy (apt-get install npm)")
        run(
            ["npm", "install", "--prefix", str(prefix), f"configurable-http-proxy@{CHP_VERSION}"],
            timeout=600,
        )
    return str(chp)


def _api(hub, token, method, path, body=None):
    req = urllib.request.Request(
        f"{hub}/hub/api{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"token {token}"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def _get(port, path, token=None):
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    con.request("GET", path, headers={"Authorization": f"token {token}"} if token else {})
    r = con.getresponse()
    return r.status, r.getheader("Location"), r.read()


def start_hub(root, sc, extra=""):
    """A real JupyterHub that starts `autograder serve` for ``sc``; ``(process, url, admin token)``."""
    hub_port, svc_port, admin = _port(), _port(), secrets.token_hex(16)
    command = [
        str(Path(sys.executable).with_name("autograder")),
        "serve",
        "--course",
        str(sc.course.root),
        "--out",
        str(sc.out),
        "--poll",
        "0.2",
        "--jobs",
        "1",
    ]
    (root / "jupyterhub_config.py").write_text(
        f"""c = get_config()
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {hub_port}
c.JupyterHub.hub_port = {_port()}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{_port()}"
c.ConfigurableHTTPProxy.command = [{configurable_http_proxy()!r}]
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.db_url = "sqlite:///{root / "hub.sqlite"}"
c.JupyterHub.cookie_secret_file = "{root / "cookie_secret"}"
c.JupyterHub.services = [
    {{"name": "autograder", "url": "http://127.0.0.1:{svc_port}", "command": {command!r},
      "oauth_no_confirm": True, "environment": {{"PATH": {os.environ["PATH"]!r}}}}},
    {{"name": "tester", "api_token": {admin!r}}},
]
c.JupyterHub.load_roles = [
    {{"name": "user", "scopes": ["self", "access:services!service=autograder"]}},
    {{"name": "tester", "scopes": ["admin:users", "tokens"], "services": ["tester"]}},
]
"""
        + extra
    )
    log = open(root / "hub.log", "wb")
    hub_command = [
        str(Path(sys.executable).with_name("jupyterhub")),
        "-f",
        str(root / "jupyterhub_config.py"),
    ]
    proc = subprocess.Popen(
        hub_command,
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    deadline = time.monotonic() + 600
    # both: `autograder serve` polls its inbound ("] serving "), and the hub has added its own
    # route to the proxy, which it does only after its managed services answer ("JupyterHub is
    # now running"). Under 4 CPU burners the service's line came first (01:41:25.2) and the hub's
    # API through the proxy still answered 404 a second later (no route yet): serve's line alone
    # is not the hub being up.
    while not all(
        line in (root / "hub.log").read_text(errors="replace")
        for line in ("] serving ", "JupyterHub is now running")
    ):
        if proc.poll() is not None or time.monotonic() > deadline:
            ended = proc.poll()  # before stop_hub: how it ended by itself, or still running
            stop_hub(proc)
            raise RuntimeError(
                "JupyterHub did not start:\n" + explain_log(hub_command, ended, root / "hub.log")
            )
        time.sleep(0.3)
    return proc, f"http://127.0.0.1:{hub_port}", admin


def stop_hub(proc):
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    pytest.importorskip("jupyterhub")  # the `serve` extra (pyproject.toml): make venv installs it
    root = tmp_path_factory.mktemp("hub")
    sc = ServeCourse(root / "x", [A], policy={"cooldown": 0})
    settings = root / "lab-settings"
    _write_settings(settings)
    bindir = str(Path(sys.executable).parent)
    spawner = f"""
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {str(sc.root / "home" / "{username}")!r}
c.Spawner.cmd = [{str(Path(bindir) / "jupyterhub-singleuser")!r}]
c.Spawner.args = ["--allow-root"]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 300
c.Spawner.http_timeout = 300
c.Spawner.environment = {{"PATH": {bindir + os.pathsep + os.environ["PATH"]!r},
                          "JUPYTERLAB_SETTINGS_DIR": {str(settings)!r}}}
"""
    for student in ("alice", "bob", "carol"):
        sc.home(student)  # nbgrader_config.py: the exchange, the course, the login
    proc, url, admin = start_hub(root, sc, spawner)
    try:
        sc.put("alice", A, {NB: (SOLUTIONS / A / NB).read_bytes()})
        sc.wait_final(1, timeout=300)
        tokens = {}
        for student in ("alice", "bob"):
            _api(url, admin, "POST", f"/users/{student}")
            tokens[student] = _api(url, admin, "POST", f"/users/{student}/tokens", {})["token"]
        port = int(url.rsplit(":", 1)[1])
        yield {"url": url, "port": port, "tokens": tokens, "log": root / "hub.log", "course": sc}
    finally:
        stop_hub(proc)


def test_a_student_sees_their_own_last_result(hub):
    status, _, body = _get(hub["port"], "/services/autograder/api/me", hub["tokens"]["alice"])
    assert status == 200, body
    me = json.loads(body)
    assert me["student"] == "alice" and len(me["last"]) == 1
    last = me["last"][0]
    assert last["attempt"] == 1 and last["hidden_mode"] == "pass-fail"
    hidden = [t for t in last["tests"] if t["kind"] == "hidden"]
    assert hidden and all(set(t) == {"test", "kind", "passed"} and t["passed"] for t in hidden)


def test_another_student_sees_only_theirs(hub):
    bob = {"student": "bob", "last": [], "waiting": []}
    # the student is the token's, whatever the request names
    for path in ("api/me", "api/me?student=alice", "api/me/alice", "api/me?user=alice"):
        status, _, body = _get(hub["port"], f"/services/autograder/{path}", hub["tokens"]["bob"])
        assert status in (200, 404), (path, status, body)
        assert status == 404 or json.loads(body) == bob, (path, body)
    status, _, body = _get(hub["port"], "/services/autograder/api/me", hub["tokens"]["bob"])
    assert status == 200 and json.loads(body) == bob


def test_queue_length_and_no_login_goes_to_the_hub(hub):
    status, _, body = _get(hub["port"], "/services/autograder/api/queue", hub["tokens"]["bob"])
    assert status == 200 and json.loads(body)["queued"] == 0
    status, location, _ = _get(hub["port"], "/services/autograder/api/me")
    assert status == 302 and "/hub/api/oauth2/authorize" in location


def shot(page, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name))


@pytest.mark.browser
def test_submit_then_fetch_feedback_in_jupyterlab(hub):
    from playwright.sync_api import sync_playwright

    url, sc = hub["url"], hub["course"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.set_default_timeout(TIMEOUT_MS)
        try:
            page.goto(f"{url}/hub/login")
            page.fill("input[name=username]", "carol")
            page.fill("input[name=password]", "any")
            page.click("input[type=submit], button[type=submit]")
            page.wait_for_url("**/user/carol/lab**")
            page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.wait_for()
            menu(page, "Nbgrader", "Assignment List")
            page.get_by_role("button", name="Fetch", exact=True).first.click()
            fetched = sc.home("carol") / A / NB
            deadline = time.monotonic() + 120
            while not fetched.exists():
                assert time.monotonic() < deadline, "Fetch did not fetch the assignment"
                time.sleep(0.2)
            shutil.copy(SOLUTIONS / A / NB, fetched)  # the student's answers
            shot(page, "serve-1-fetched.png")
            page.get_by_role("button", name="Submit", exact=True).first.click()
            rows = sc.wait_final(2, timeout=300)
            carol = next(r for r in rows if r["student"] == "carol")
            assert carol["score"] == carol["max_score"]
            page.get_by_role("button", name="Fetch Feedback").first.click()
            deadline = time.monotonic() + 120
            folder = sc.home("carol") / A / "feedback"
            while not list(folder.glob("*/*.html")):
                assert time.monotonic() < deadline, "Fetch Feedback fetched nothing"
                time.sleep(0.2)
            page.wait_for_timeout(1000)
            shot(page, "serve-2-feedback-fetched.png")
            text = next(folder.glob("*/*.html")).read_text()
            assert "hidden tests: 13 of 13 passed" in text and "Attempt 1 of 20" in text
            page.goto(f"{url}/services/autograder/api/me")  # through the hub's OAuth
            me = json.loads(page.locator("body").inner_text())
            assert me["student"] == "carol" and me["last"][0]["attempt"] == 1
            shot(page, "serve-3-status.png")
            # a second student logged in at the same time, in their own browser session: alice
            # (graded before) sees her result only, and carol's session still only carol's
            other = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            other.set_default_timeout(TIMEOUT_MS)
            other.goto(f"{url}/hub/login?next=/services/autograder/api/me")
            other.fill("input[name=username]", "alice")
            other.fill("input[name=password]", "any")
            other.click("input[type=submit], button[type=submit]")
            other.wait_for_url("**/services/autograder/api/me**")
            theirs = json.loads(other.locator("body").inner_text())
            assert theirs["student"] == "alice" and len(theirs["last"]) == 1, theirs
            assert "carol" not in json.dumps(theirs)
            other.goto(f"{url}/services/autograder/api/me?student=carol")
            assert json.loads(other.locator("body").inner_text())["student"] == "alice"
            page.reload()
            mine = json.loads(page.locator("body").inner_text())
            assert mine["student"] == "carol" and "alice" not in json.dumps(mine)
            shot(other, "serve-4-second-student.png")
        except BaseException:
            shot(page, "serve-failed.png")
            raise
        finally:
            browser.close()
