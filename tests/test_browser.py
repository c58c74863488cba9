"""The student's path in a real browser: Debian's chromium driven by Playwright.

JupyterLab runs from .venv through `make lab` on 127.0.0.1 with a token, serving a temporary
copy of the course (course/, exercises/, solutions/, nbgrader_config.py; LAB_ROOT), so the
committed notebooks are never touched. The learner's whole loop: a student opens the start page,
follows its link to lesson 1 and runs it to the end (errors only in the cells tagged
raises-exception), follows the start page's link to exercise 1, types an answer with a typical
mistake, saves, runs all cells, runs the self-check from the notebook and reads its message;
fixes the answer (the reference answer from solutions/), restarts and runs everything, and sees
every visible test and the self-check pass; runs the full check (`check(hidden=True)` in a new
cell: every hidden test too, full marks) and the start page's progress cell (exercise 1: full
marks). `autograder check` also runs in JupyterLab's terminal. Then the instructor opens
formgrader (nbgrader's JupyterLab extension) and sees the assignments listed.

Any JavaScript error in the page console fails the test, and so does any error output in
the final notebook. Screenshots of each step go to artifacts/browser/ (kept by CI), with
timings.json. Chromium is Debian's (/usr/bin/chromium, named in system-packages.txt, installed by
`make test` when it can); no browser is ever downloaded. Without it the test fails (never skips)
with the command that installs it.

Run alone with `make test-browser`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from autograder.course import graded_cells, owner
from autograder.grading.intake.collect import read_source
from autograder.procs import explain_log
from autograder.selfcheck import is_selfcheck_cell
from exercise_answers import filled_release, reference_answers

pytestmark = pytest.mark.browser  # make test-fast leaves it out; make test-browser runs it alone

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ASSIGNMENT = NOTEBOOK = LESSON = "01_relu_inplace"
TIMEOUT_MS = 180_000  # one step (2 shared cores: JupyterLab, kernels and chromium compete)

# the answer with a typical mistake: PyTorch's in-place RuntimeError is not caught
WRONG_INPLACE_RELU_IS_SAFE = '''def inplace_relu_is_safe(producer, x):
    """True iff relu_ after producer gives the same gradient as relu, without an in-place error."""
    xr = x.detach().clone().requires_grad_(True)
    torch.relu_(producer(xr)).sum().backward()
    return True'''

TIMINGS: dict = {}


def _chromium() -> str:
    """Debian's chromium, or a failure (never a skip) with the command that installs it."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    from autograder.fullcheck import install_command

    pytest.fail(
        f"Debian's chromium is not installed ({CHROMIUM}), so the learner's path in a browser is "
        "unproven. `make test` installs it when it can (root or passwordless sudo); otherwise run:\n"
        f"    {install_command('chromium')}\n(no browser is ever downloaded)",
        pytrace=False,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_settings(folder: Path):
    """JupyterLab user settings: no news/update pop-ups over the page; every cell, and the
    terminal's text, in the DOM."""
    settings = {
        "@jupyterlab/apputils-extension/notification": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
        "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
        "@jupyterlab/terminal-extension/plugin": {
            "screenReaderMode": True
        },  # terminal text in the DOM
    }
    for plugin, values in settings.items():
        path = folder / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@pytest.fixture(scope="module")
def chromium():
    return _chromium()


@pytest.fixture(scope="module")
def lab(chromium, tmp_path_factory):
    """JupyterLab from .venv on a copy of the course; yields (base url, token, root)."""
    work = tmp_path_factory.mktemp("browser")
    root = work / "course-copy"
    root.mkdir()
    for name in ("course", "exercises", "solutions"):
        shutil.copytree(
            REPO / name, root / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints")
        )
    shutil.copy(REPO / "nbgrader_config.py", root)
    exchange = (
        work / "exchange"
    )  # as on a JupyterHub (docs/learner.md, "Submitting"): release and collect become available
    exchange.mkdir(mode=0o777)
    with open(root / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    _write_settings(work / "settings")
    port, token = _free_port(), "student-path-test-token"
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(work / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(work / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(work / "runtime"),
        # the terminal runs $SHELL (`make lab`); here /bin/sh, so that what the terminal test
        # sees does not depend on the machine's shell and its start-up files (zsh's first-run
        # menu would take the typed keys): what it tests is that `make lab`'s PATH gets there
        SHELL="/bin/sh",
    )
    env.pop("JPY_SESSION_NAME", None)
    env.pop("ENV", None)  # a file an interactive sh reads first
    log = work / "lab.log"
    args = f"--no-browser --port={port} --ServerApp.ip=127.0.0.1 --IdentityProvider.token={token}"
    start = time.perf_counter()
    command = ["make", "--no-print-directory", "lab", f"LAB_ROOT={root}", f"LAB_ARGS={args}"]
    with open(log, "w") as out:  # exactly what a student runs, served from the copy
        proc = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 240
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(
                        "JupyterLab did not start:\n" + explain_log(command, proc.poll(), log)
                    )
                time.sleep(0.5)
        TIMINGS["jupyterlab_start_s"] = round(time.perf_counter() - start, 1)
        yield base, token, root
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server shuts its kernels down on SIGTERM
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(log, ARTIFACTS / "jupyterlab.log")
        (ARTIFACTS / "timings.json").write_text(json.dumps(TIMINGS, indent=1) + "\n")


@pytest.fixture(scope="module")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


def collect_javascript_errors(page) -> list:
    """A list that fills with the page's console errors and uncaught exceptions."""
    errors = []
    page.on(
        "console",
        lambda msg: (
            errors.append(f"console.{msg.type}: {msg.text}") if msg.type == "error" else None
        ),
    )
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    return errors


@pytest.fixture
def page(browser, request):
    """A page whose JavaScript errors (console errors, uncaught exceptions) fail the test.

    When the test fails, the page as it was is saved as artifacts/browser/failed-<test>.png.
    """
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors = collect_javascript_errors(page)
    failed_before = request.session.testsfailed
    yield page
    if request.session.testsfailed > failed_before:
        shot(page, f"failed-{request.node.name}.png")
    context.close()
    assert not errors, "JavaScript errors in the page:\n" + "\n".join(errors)


def shot(page, name, locator=None):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    if locator is not None:
        locator.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / name))


def menu(page, top, item):
    """Click a JupyterLab menu bar entry, then an item of that menu (by its exact label)."""
    page.locator(".lm-MenuBar-itemLabel", has_text=top).first.click()
    page.locator(".lm-Menu-content .lm-Menu-itemLabel").get_by_text(item, exact=True).first.click()


def current_notebook(page):
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")


def save(page):
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    page.locator(".lm-TabBar-tab.lm-mod-current.jp-mod-dirty").wait_for(state="detached")


def type_answer(page, cell, source):
    """Replace the text of a code cell the way a student would: click, select all, type."""
    cell.scroll_into_view_if_needed()
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(source)
    page.keyboard.press("Escape")


def run_cell(page, cell, tries=3):
    """Select ``cell`` by its prompt and run it (Shift+Enter) until it has run: its prompt shows
    a number. A click that lands while a just-opened notebook is still laying out selects nothing
    (the prompt never changes), and a run requested while the notebook's new kernel is starting
    can be dropped ("[*]" back to "[ ]", seen once in a full run on 2 loaded cores): both are
    tried again."""
    prompt = cell.locator(".jp-InputPrompt")
    cell.scroll_into_view_if_needed()
    before = prompt.inner_text()
    seen = []
    t0 = time.perf_counter()
    for attempt in range(1, tries + 1):
        prompt.click()
        page.keyboard.press("Shift+Enter")
        start_by = time.monotonic() + 30
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        next_sample = time.monotonic() + 20
        while time.monotonic() < deadline:
            now = prompt.inner_text()
            seen.append(now)
            if time.monotonic() > next_sample:  # a slow try: what the page and the server say
                next_sample += 10
                TIMINGS.setdefault("run_cell_slow_polls", []).append(_slow_poll(page, attempt, now))
            if re.fullmatch(r"\[\d+\]:?", now.strip()) and now != before:
                TIMINGS.setdefault("run_cell_s_tries", []).append(
                    [round(time.perf_counter() - t0, 1), attempt]
                )
                return
            if now == before and "*" not in now and time.monotonic() > start_by:
                break  # never started, or dropped: run it again
            if now.strip().startswith("[ ]") and any("*" in p for p in seen):
                break  # started, then dropped
            time.sleep(0.2)
        seen.clear()
        cell.scroll_into_view_if_needed()
    raise AssertionError(f"the cell never ran: its prompt reads {prompt.inner_text()!r}")


def _slow_poll(page, attempt, prompt_text) -> dict:
    """One sample of a run that is taking long (diagnosis only, into timings.json): the clock
    (to match artifacts/browser/jupyterlab.log), the prompt, the status bar, and the server's
    own view of each session's kernel (GET /api/sessions with the page's cookie)."""
    sample = {"at": time.strftime("%H:%M:%S"), "try": attempt, "prompt": prompt_text}
    try:
        sample["status_bar"] = " / ".join(page.locator(".jp-StatusBar").all_inner_texts())[:300]
        sample["sessions"] = page.evaluate(
            """async () => (await (await fetch('/api/sessions')).json()).map(
                s => [s.path, s.kernel && s.kernel.execution_state, s.kernel && s.kernel.connections])"""
        )
    except Exception as exc:  # noqa: BLE001 - a sample must never fail the test
        sample["error"] = repr(exc)[:300]
    return sample


def wait_for_idle_kernel(page):
    """The current notebook's kernel is up and idle (status bar: "... | Idle")."""
    page.locator(
        ".jp-StatusBar-Widget", has_text=re.compile(r"ipykernel\)? \| Idle")
    ).first.wait_for()


def wait_for_screen(page, screen, pattern, what, server_log=None):
    """Wait until the terminal's text (``screen``: its accessibility tree) matches ``pattern``;
    return the text. Past TIMEOUT_MS the failure shows the screen as it was, and the tail of
    ``server_log`` (JupyterLab's own log: a shell that failed to start is reported there)."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    seen = ""
    while time.monotonic() < deadline:
        seen = screen.inner_text() if screen.count() else ""
        if pattern.search(seen) or pattern.search(seen.replace("\n", "")):  # rows wrap long lines
            return seen
        page.wait_for_timeout(250)
    server = "" if server_log is None else "\n" + explain_log("make lab", None, server_log)
    raise AssertionError(
        f"{what} ({pattern.pattern!r}) not on the terminal in {TIMEOUT_MS / 1000:.0f} s; "
        f"it shows:\n{seen[-3000:]}{server}"
    )


def wait_for_output(page, cell, text):
    try:
        cell.locator(".jp-OutputArea-output", has_text=text).first.wait_for()
    except Exception as exc:  # noqa: BLE001 - say what the cell showed instead
        raise AssertionError(
            f"no output with {text!r} in {TIMEOUT_MS / 1000:.0f} s; the cell's prompt reads "
            f"{cell.locator('.jp-InputPrompt').inner_text()!r} and its output:\n"
            f"{cell.locator('.jp-OutputArea').inner_text()[-3000:]}"
        ) from exc
    page.wait_for_function(  # nothing left queued or running ([*])
        "() => ![...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-InputPrompt')]"
        ".some(e => e.textContent.includes('*'))",
        timeout=TIMEOUT_MS,
    )
    return cell.locator(".jp-OutputArea").inner_text()


def test_student_path(lab, page):
    base, token, root = lab
    release = nbformat.read(REPO / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    index = {c.metadata.get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(release.cells)}
    names, _ = graded_cells(release)
    answers = reference_answers(ASSIGNMENT, NOTEBOOK)
    check_index = next(i for i, c in enumerate(release.cells) if is_selfcheck_cell(c))
    committed = REPO / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    committed_bytes = committed.read_bytes()
    started = time.perf_counter()

    # 1. the start page, and its map
    page.goto(f"{base}/?token={token}")  # what `make lab` opens: the start page
    page.locator(".jp-RenderedMarkdown h1", has_text="Start here").wait_for()
    shot(page, "01-start-page.png", page.locator(".jp-RenderedMarkdown h2", has_text="The map"))

    # 1b. a lesson, opened from the map and run to the end: errors only where tagged raises-exception
    t0 = time.perf_counter()
    page.locator(f'.jp-RenderedMarkdown a[href*="/files/course/{LESSON}.ipynb"]').first.click()
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=f"{LESSON}.ipynb").wait_for()
    lesson = current_notebook(page)
    lesson.locator(".jp-RenderedMarkdown h1").first.wait_for()
    # Run All before the new kernel is ready runs nothing: wait for it (status bar: "... | Idle")
    page.locator(
        ".jp-StatusBar-Widget", has_text=re.compile(r"ipykernel\)? \| Idle")
    ).first.wait_for()
    menu(page, "Run", "Run All Cells")
    prompts_js = (
        "() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell "
        ".jp-InputPrompt')].map(e => e.textContent.trim())"
    )
    # JupyterLab runs the cells one by one: done when the last code cell has its number, or when
    # nothing has run for 15 s (Run All stopped at an error: the saved file below says where).
    # A cell scrolled out of view is not in the page (JupyterLab renders the visible cells only),
    # so a long cell off screen shows no [*]: the kernel's "Busy" in the status bar counts too.
    busy = page.locator(".jp-StatusBar-Widget", has_text=re.compile(r"\| Busy"))
    deadline, quiet = time.time() + 2 * TIMEOUT_MS / 1000, 0
    while True:
        prompts = page.evaluate(prompts_js)
        if re.fullmatch(r"\[\d+\]:?", prompts[-1]):
            break
        running = any("*" in p for p in prompts) or busy.count() > 0
        quiet = 0 if running else quiet + 1
        if quiet >= 15:
            break
        assert time.time() < deadline, f"the lesson's Run All did not finish; prompts: {prompts}"
        page.wait_for_timeout(1000)
    save(page)
    TIMINGS["lesson_run_all_s"] = round(time.perf_counter() - t0, 1)
    shot(page, "01b-lesson-run-to-the-end.png")
    ran = nbformat.read(root / "course" / f"{LESSON}.ipynb", as_version=4)
    for i, cell in enumerate(ran.cells):
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None, (
            f"lesson cell {i} did not run (Run All stopped before it)"
        )
        tagged = "raises-exception" in cell.metadata.get("tags", [])
        errors = [o.ename for o in cell.outputs if o.output_type == "error"]
        assert bool(errors) == tagged, f"lesson cell {i}: " + (
            f"raised {errors} but is not tagged raises-exception"
            if errors
            else "tagged raises-exception but raised nothing"
        )
    page.locator(".lm-TabBar-tab", has_text="00_start_here.ipynb").first.click()

    # 2. the exercise, opened from the start page's link
    link = page.locator(
        f'.jp-RenderedMarkdown a[href*="/files/exercises/{ASSIGNMENT}/{NOTEBOOK}.ipynb"]'
    ).first
    link.scroll_into_view_if_needed()
    link.click()
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=f"{NOTEBOOK}.ipynb").wait_for()
    notebook = current_notebook(page)
    notebook.locator(".jp-RenderedMarkdown h1").first.wait_for()
    cells = notebook.locator(".jp-Notebook .jp-Cell")
    assert cells.count() == len(release.cells)
    shot(page, "02-exercise-opened.png")

    # 3. answers typed: the first right, the second with a typical mistake; save; run all
    t0 = time.perf_counter()
    type_answer(page, cells.nth(index[names[0]]), answers[names[0]])
    shot(page, "03-answer-typed.png", cells.nth(index[names[0]]))
    type_answer(page, cells.nth(index[names[1]]), WRONG_INPLACE_RELU_IS_SAFE)
    save(page)
    menu(page, "Run", "Run All Cells")
    # Run All stops at the first error: here the "Try it" cell that calls the wrong function
    notebook.locator(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
        has_text="RuntimeError",
    ).first.wait_for()
    TIMINGS["answers_typed_run_all_to_error_s"] = round(time.perf_counter() - t0, 1)

    # 4. the self-check, run from the notebook, says what is wrong
    check_cell = cells.nth(check_index)
    run_cell(page, check_cell)
    t0 = time.perf_counter()
    report = wait_for_output(page, check_cell, "functions pass their visible tests")
    TIMINGS["selfcheck_in_notebook_wrong_s"] = round(time.perf_counter() - t0, 1)
    assert f"PASS  {names[0]}: visible tests pass" in report
    assert f"FAIL  {names[1]}: visible tests fail" in report
    assert "likely cause: sigmoid saves its output for backward" in report
    assert "1 of 2 functions pass their visible tests" in report
    shot(page, "04-self-check-wrong-answer.png", check_cell)

    # 5. fixed with the reference answer; save; restart the kernel and run everything
    t0 = time.perf_counter()
    type_answer(page, cells.nth(index[names[1]]), answers[names[1]])
    save(page)
    TIMINGS["answer_fixed_and_saved_s"] = round(time.perf_counter() - t0, 1)
    menu(page, "Kernel", "Restart Kernel and Run All Cells…")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    t0 = time.perf_counter()
    report = wait_for_output(page, check_cell, "2 of 2 functions pass their visible tests")
    TIMINGS["restart_run_all_with_selfcheck_s"] = round(time.perf_counter() - t0, 1)
    for name in names:
        assert f"PASS  {name}: visible tests pass" in report
        cells.nth(index[f"test_{name}"]).locator(
            ".jp-OutputArea-output", has_text=f"{name}: visible tests passed"
        ).wait_for()
    source = read_source(ASSIGNMENT, REPO / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    hidden = sum(t.hidden and owner(t.grade_id, names) == names[0] for t in source.tests)
    assert f"hidden tests ({hidden} cells) run when graded" in report
    shot(page, "05-visible-tests-passed.png", cells.nth(index[f"test_{names[1]}"]))
    shot(page, "06-self-check-passed.png", check_cell)
    assert (
        notebook.locator(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
        ).count()
        == 0
    )

    # 5b. the full check, from a new cell at the end: every test, the hidden ones included
    check_cell.locator(".jp-InputPrompt").click()
    page.keyboard.press("b")  # a new cell below the (read-only) self-check cell
    full_cell = cells.nth(len(release.cells))
    full_cell.locator(".cm-content").click()
    page.keyboard.insert_text("from autograder.selfcheck import check\ncheck(hidden=True)")
    page.keyboard.press("Shift+Enter")
    t0 = time.perf_counter()
    report = wait_for_output(page, full_cell, "score: ")
    TIMINGS["full_check_in_notebook_s"] = round(time.perf_counter() - t0, 1)
    for test in source.tests:
        kind = "hidden" if test.hidden else "visible"
        assert f"PASS  {test.grade_id} ({kind}): {test.points:g} / {test.points:g}" in report
    assert (
        f"score: {source.max_score:g} / {source.max_score:g}" in report and "Full marks" in report
    )
    shot(page, "06b-full-check.png", full_cell)

    # 6. what was saved: the typed answers, and no error output anywhere
    save(page)
    saved = nbformat.read(root / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    for name in names:
        assert saved.cells[index[name]].source == answers[name], (
            f"the typed {name} was not saved as typed"
        )
    for i, cell in enumerate(saved.cells):
        for out in cell.get("outputs", []):
            assert out.output_type != "error", f"cell {i} has an error output: {out.get('ename')}"
            assert not (out.output_type == "stream" and out.name == "stderr"), (
                f"cell {i} wrote to stderr"
            )
    assert "2 of 2 functions pass" in "".join(
        o.get("text", "") for o in saved.cells[check_index].outputs
    )

    # 7. progress, from the cell of the page the start page links to for checking, submitting
    # and progress: exercise 1 has full marks, the others are not started
    page.locator(".lm-TabBar-tab", has_text="00_start_here.ipynb").first.click()
    start = current_notebook(page)
    link = start.locator('.jp-RenderedMarkdown a[href*="/files/course/00_checking_and_submitting"]')
    link.first.scroll_into_view_if_needed()
    link.first.click()
    page.locator(
        ".lm-TabBar-tab.lm-mod-current", has_text="00_checking_and_submitting.ipynb"
    ).wait_for()
    mechanics = current_notebook(page)
    progress_cell = mechanics.locator(".jp-CodeCell", has_text='progress("../exercises")').first
    t0 = time.perf_counter()
    wait_for_idle_kernel(page)
    TIMINGS["progress_kernel_idle_s"] = round(time.perf_counter() - t0, 1)
    run_cell(page, progress_cell)
    t0 = time.perf_counter()
    text = wait_for_output(page, progress_cell, "exercises with full marks")
    TIMINGS["progress_cell_s"] = round(time.perf_counter() - t0, 1)
    assert re.search(
        rf"{ASSIGNMENT}\s+full marks\s+score {source.max_score:g} / {source.max_score:g}", text
    ), text
    n_exercises = len(list((REPO / "solutions").glob("*/*.ipynb")))
    assert f"1 of {n_exercises} exercises with full marks" in text
    shot(page, "06c-progress.png", progress_cell)
    TIMINGS["student_path_s"] = round(time.perf_counter() - started, 1)
    assert committed.read_bytes() == committed_bytes, "the committed exercise must stay untouched"


def test_every_lesson_and_exercise_opens_from_the_map(lab, page):
    """Each link of the start page's map (lessons 1-4, exercises 1-4) opens its notebook in JupyterLab."""
    base, token, _ = lab
    page.goto(f"{base}/?token={token}")
    page.locator(".jp-RenderedMarkdown h1", has_text="Start here").wait_for()
    targets = [f"course/{p.name}" for p in sorted((REPO / "course").glob("0[1-9]_*.ipynb"))]
    targets += [
        p.relative_to(REPO).as_posix() for p in sorted((REPO / "exercises").glob("*/*.ipynb"))
    ]
    assert any("04_training_loops" in t for t in targets)
    for target in targets:
        page.locator(".lm-TabBar-tab", has_text="00_start_here.ipynb").first.click()
        start = current_notebook(
            page
        )  # the visible panel (a restored workspace may hold hidden ones)
        start.locator(
            ".jp-RenderedMarkdown h2", has_text="The map"
        ).first.scroll_into_view_if_needed()
        start.locator(f'.jp-RenderedMarkdown a[href*="/files/{target}"]').first.click()
        name = target.rsplit("/", 1)[1]
        page.locator(".lm-TabBar-tab.lm-mod-current", has_text=name).wait_for()
        current_notebook(page).locator(
            ".jp-RenderedMarkdown h1, .jp-RenderedMarkdown h2"
        ).first.wait_for()
    shot(page, "08-lesson-4-and-exercise-4-open.png")


def test_instructor_sees_the_assignments_in_formgrader(lab, page):
    base, token, _ = lab
    page.goto(f"{base}/?token={token}")
    page.locator(".jp-RenderedMarkdown h1", has_text="Start here").wait_for()
    menu(page, "Nbgrader", "Formgrader")
    frame = page.frame_locator("iframe").first
    frame.get_by_text("Manage Assignments").first.wait_for()
    for assignment in sorted(p.name for p in (REPO / "solutions").iterdir() if p.is_dir()):
        frame.locator("table tbody").get_by_text(assignment, exact=True).first.wait_for()
    assert frame.locator("#warning-exchange, #warning-course-id").count() == 0, (
        "release/collect unavailable"
    )
    page.wait_for_timeout(500)
    shot(page, "07-formgrader-assignments.png")


def test_javascript_errors_are_caught(browser):
    """The listener that fails the tests above does see console errors and uncaught exceptions."""
    page = browser.new_page()
    errors = collect_javascript_errors(page)
    page.set_content(
        "<script>console.error('boom'); setTimeout(() => { throw new Error('uncaught boom'); });</script>"
    )
    page.wait_for_timeout(500)
    page.close()
    assert errors == ["console.error: boom", "uncaught: uncaught boom"]


def test_self_check_from_the_terminal(lab, page):
    """`autograder check` in JupyterLab's terminal (File > New > Terminal), PATH as `make lab` sets it."""
    base, token, root = lab
    answered = root / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"  # as the student left it
    nbformat.write(
        filled_release(ASSIGNMENT, NOTEBOOK, reference_answers(ASSIGNMENT, NOTEBOOK)), answered
    )
    page.goto(f"{base}/?token={token}")
    page.locator(".jp-RenderedMarkdown h1", has_text="Start here").wait_for()
    menu(page, "File", "New")
    page.locator(".lm-Menu-content .lm-Menu-itemLabel").get_by_text(
        "Terminal", exact=True
    ).first.click()
    terminal = page.locator(".jp-Terminal:visible")
    terminal.locator(".xterm-helper-textarea").wait_for(state="attached")
    text = terminal.locator(".xterm-accessibility-tree")
    # Type only into a terminal that is drawn, connected and focused: the shell's prompt is on
    # it, and the keys go to xterm's input element (a click on a terminal still laying out can
    # leave the focus elsewhere). Then the command must show (echoed by the shell) before its end
    # is awaited, so a failure says which step did not happen.
    log = root.parent / "lab.log"  # the lab fixture's
    wait_for_screen(page, text, re.compile(r"\S"), "the shell's prompt", log)
    terminal.locator(".xterm-helper-textarea").focus()
    command = f"autograder check exercises/{ASSIGNMENT}/{NOTEBOOK}.ipynb"
    page.keyboard.type(f'{command}; echo "exit status $?"\n')
    wait_for_screen(page, text, re.compile(re.escape(command)), "the command as typed", log)
    screen = wait_for_screen(
        page, text, re.compile(r"^exit status \d+", re.M), "the check's end", log
    )
    assert "exit status 0" in screen and "2 of 2 functions pass their visible tests" in screen, (
        f"`autograder check` of the reference answers in the terminal; the screen:\n{screen}"
    )
    shot(page, "08-terminal-self-check.png")


REPORT_SHOT = REPO / "artifacts" / "report" / "report.png"  # (artifacts/browser/ is the lab's)


def test_class_report_page(browser, tmp_path):
    """`autograder report`'s page in chromium, opened from disk: no request but the page itself
    (and any the page tried would be refused by its Content-Security-Policy and logged as a
    console error, which fails the test), no script, no dialog; student text with markup, a
    script tag and formula-like values shows as text; one histogram (an inline SVG) per
    notebook. The screenshot: artifacts/report/report.png."""
    from autograder.authoring.bench_report import synthetic_rows
    from autograder.grading.results.class_report import write_report
    from test_report import hostile_rows, write_class

    rows = synthetic_rows(300, seed=4)
    for r in hostile_rows():
        r.assignment = r.notebook = "zz_hostile"
        rows.append(r)
    path = write_report(write_class(tmp_path / "out", rows), with_students=True)
    context = browser.new_context(viewport={"width": 1280, "height": 1400})
    page = context.new_page()
    requests, dialogs = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    errors = collect_javascript_errors(page)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    assert page.locator("script").count() == 0
    assert page.locator("svg").count() == 6  # five assignments and the hostile one
    hostile = page.locator("#t-zz_hostile--zz_hostile").locator("xpath=following-sibling::*")
    assert hostile.get_by_text("<script>alert('x')</script>").count() >= 1
    assert page.get_by_text("<b>stu</b>-").count() >= 1
    page.wait_for_timeout(300)
    REPORT_SHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(REPORT_SHOT))
    context.close()
    assert requests == [path.as_uri()], requests
    assert not dialogs and not errors, (dialogs, errors)
