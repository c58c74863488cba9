"""`autograder serve` as a real JupyterHub's hub-managed service, behind the hub's OAuth.

A real JupyterHub (DummyAuthenticator, configurable-http-proxy from the npm registry, installed
once into .venv/node) starts the service from its own `c.JupyterHub.services` entry, as the README
documents. A student's API token reaches `/services/autograder/api/me` through the proxy and gets
that student's own last result (hidden tests as the policy shows them, no test source); another
student gets only theirs; a request without a login is sent to the hub's OAuth.
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

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_bubblewrap")]

REPO = Path(__file__).resolve().parents[1]
A = "01_relu_inplace"
NB = f"{A}.ipynb"
CHP_VERSION = "5.3.0"


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
        subprocess.run(
            ["npm", "install", "--prefix", str(prefix), f"configurable-http-proxy@{CHP_VERSION}"],
            check=True,
            capture_output=True,
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
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("jupyterhub")),
            "-f",
            str(root / "jupyterhub_config.py"),
        ],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    deadline = time.monotonic() + 600
    while "] serving " not in (root / "hub.log").read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_hub(proc)
            raise RuntimeError((root / "hub.log").read_text()[-4000:])
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
    proc, url, admin = start_hub(root, sc)
    try:
        sc.put("alice", A, {NB: (SOLUTIONS / A / NB).read_bytes()})
        sc.wait_final(1, timeout=300)
        tokens = {}
        for student in ("alice", "bob"):
            _api(url, admin, "POST", f"/users/{student}")
            tokens[student] = _api(url, admin, "POST", f"/users/{student}/tokens", {})["token"]
        port = int(url.rsplit(":", 1)[1])
        yield {"port": port, "tokens": tokens, "log": root / "hub.log", "course": sc}
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
    status, _, body = _get(hub["port"], "/services/autograder/api/me", hub["tokens"]["bob"])
    assert status == 200 and json.loads(body) == {"student": "bob", "last": [], "waiting": []}


def test_queue_length_and_no_login_goes_to_the_hub(hub):
    status, _, body = _get(hub["port"], "/services/autograder/api/queue", hub["tokens"]["bob"])
    assert status == 200 and json.loads(body)["queued"] == 0
    status, location, _ = _get(hub["port"], "/services/autograder/api/me")
    assert status == 302 and "/hub/api/oauth2/authorize" in location
