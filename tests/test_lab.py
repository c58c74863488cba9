"""`make lab` serves JupyterLab on the course (checked over HTTP, as a browser would)."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from autograder.procs import explain_log

pytestmark = pytest.mark.slow  # starts JupyterLab

REPO = Path(__file__).resolve().parents[1]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read().decode()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    port, token = _free_port(), "course-test-token"
    log = tmp_path_factory.mktemp("lab") / "lab.log"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(log.parent / "runtime"))
    args = f"--no-browser --port {port} --ServerApp.ip=127.0.0.1 --IdentityProvider.token={token}"
    command = ["make", "--no-print-directory", "lab", f"LAB_ARGS={args}"]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            command,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                _get(f"{base}/api/status?token={token}")
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(
                        "JupyterLab did not start:\n" + explain_log(command, proc.poll(), log)
                    )
                time.sleep(0.5)
        yield base, token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def test_lab_page_is_served(lab):
    base, token = lab
    status, body = _get(f"{base}/lab?token={token}")
    assert status == 200 and "JupyterLab" in body


def test_root_opens_the_course(lab):
    base, token = lab
    with urllib.request.urlopen(f"{base}/?token={token}", timeout=5) as response:
        assert "/lab/tree/course/" in response.url
        assert response.url.split("?")[0].endswith("/lab/tree/course/00_start_here.ipynb"), (
            f"make lab must open the start page, not {response.url}"
        )


def test_course_and_exercises_are_listed(lab):
    base, token = lab
    _, body = _get(f"{base}/api/contents/course?token={token}")
    lessons = {item["name"] for item in json.loads(body)["content"]}
    assert {p.name for p in (REPO / "course").glob("*.ipynb")} <= lessons
    _, body = _get(f"{base}/api/contents/exercises?token={token}")
    assert {item["name"] for item in json.loads(body)["content"]} >= {
        p.name for p in (REPO / "exercises").iterdir() if p.is_dir()
    }


def test_python_kernel_from_the_venv_is_available(lab):
    base, token = lab
    _, body = _get(f"{base}/api/kernelspecs?token={token}")
    assert "python3" in json.loads(body)["kernelspecs"]
