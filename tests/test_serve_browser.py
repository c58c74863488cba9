"""A student on a real JupyterHub, in Debian's chromium: Submit, then Fetch Feedback seconds later.

The hub (tests/test_serve_hub.py's: DummyAuthenticator, configurable-http-proxy from npm, the
service started by the hub) spawns the student's JupyterLab on this machine
(SimpleLocalProcessSpawner). The student logs in, opens nbgrader's Assignment List, fetches
exercise 1, (answers it: the solution written into the fetched copy), clicks Submit, then Fetch
Feedback, and opens the service's status page through the hub's OAuth: their own result.
Screenshots in artifacts/browser/serve-*.png.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from autograder.course import SOLUTIONS
from autograder.grading.serve.harness import ServeCourse
from test_browser import ARTIFACTS, CHROMIUM_ARGS, _chromium, _write_settings, menu
from test_serve_hub import start_hub, stop_hub

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("needs_bubblewrap")]

A = "01_relu_inplace"
NB = f"{A}.ipynb"
TIMEOUT_MS = 240_000


def shot(page, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name))


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    pytest.importorskip("jupyterhub")
    root = tmp_path_factory.mktemp("hubb")
    sc = ServeCourse(root / "x", [A], policy={"cooldown": 0})
    sc.home("alice")
    settings = root / "lab-settings"
    _write_settings(settings)
    bindir = str(Path(sys.executable).parent)
    extra = f"""
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
    proc, url, _ = start_hub(root, sc, extra)
    try:
        yield url, sc
    finally:
        stop_hub(proc)


def test_submit_then_fetch_feedback_in_jupyterlab(hub):
    from playwright.sync_api import sync_playwright

    url, sc = hub
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.set_default_timeout(TIMEOUT_MS)
        try:
            page.goto(f"{url}/hub/login")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", "any")
            page.click("input[type=submit], button[type=submit]")
            page.wait_for_url("**/user/alice/lab**")
            page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.wait_for()
            menu(page, "Nbgrader", "Assignment List")
            page.get_by_role("button", name="Fetch", exact=True).first.click()
            fetched = sc.home("alice") / A / NB
            deadline = time.monotonic() + 120
            while not fetched.exists():
                assert time.monotonic() < deadline, "Fetch did not fetch the assignment"
                time.sleep(0.2)
            shutil.copy(SOLUTIONS / A / NB, fetched)  # the student's answers
            shot(page, "serve-1-fetched.png")
            page.get_by_role("button", name="Submit", exact=True).first.click()
            rows = sc.wait_final(1, timeout=300)
            assert rows[0]["student"] == "alice" and rows[0]["score"] == rows[0]["max_score"]
            page.get_by_role("button", name="Fetch Feedback").first.click()
            deadline = time.monotonic() + 120
            folder = sc.home("alice") / A / "feedback"
            while not list(folder.glob("*/*.html")):
                assert time.monotonic() < deadline, "Fetch Feedback fetched nothing"
                time.sleep(0.2)
            page.wait_for_timeout(1000)
            shot(page, "serve-2-feedback-fetched.png")
            text = next(folder.glob("*/*.html")).read_text()
            assert "hidden tests: 13 of 13 passed" in text and "Attempt 1 of 20" in text
            page.goto(f"{url}/services/autograder/api/me")  # through the hub's OAuth
            me = json.loads(page.locator("body").inner_text())
            assert me["student"] == "alice" and me["last"][0]["attempt"] == 1
            shot(page, "serve-3-status.png")
        except BaseException:
            shot(page, "serve-failed.png")
            raise
        finally:
            browser.close()
