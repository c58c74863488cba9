"""`autograder grade`, driven through its real command line.

* Hostile submissions, one fixture notebook per failure mode (tests/fixtures/grading/, built
  on exercise 1; expectations in expected.json): each gets the expected status on every row
  and never more than the honest notebook it was built from scores under stock nbgrader.
* Honest submissions of every assignment (solution, untouched release, the fixtures of
  tests/fixtures/submissions/): exactly stock nbgrader's scores (the session's real
  `nbgrader autograde` run, shared with test_autograde.py), every status ok.
* Isolation: nothing is read or written outside the sandbox, nothing survives a submission.
* The gradebook (nbgrader export), the feedback pages (no hidden test source) and the Dask
  scheduler (same CSV as the local pool).
"""

from __future__ import annotations

import csv
import fnmatch
import json
import os
import shutil
import signal
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course import (
    EXERCISES,
    FIXTURE_SUBMISSIONS,
    REPO,
    SOLUTIONS,
    TempCourse,
    assignments,
    fixture_cases,
    notebooks,
    reference_submissions,
)
from autograder.grading.intake.collect import read_source
from autograder.procs import explain, run

GRADING = Path(__file__).parent / "fixtures" / "grading"
EXERCISE = "01_relu_inplace"  # the hostile fixtures are built on exercise 1
BASES = {
    "correct": "correct-alternative",
    "values": "mip-values-only",
    "never": "irs-never-in-place",
    "blank": "blank",
}
SUBMISSIONS = FIXTURE_SUBMISSIONS / EXERCISE
FORMULA = '=HYPERLINK("http://example.com/x","click")'
EXPECTED = {
    k: v
    for k, v in json.loads((GRADING / "expected.json").read_text()).items()
    if not k.startswith("_")
}
# ("module": graded by that test module, with the measurements its class needs)
HOSTILE = {
    k: v
    for k, v in EXPECTED.items()
    if "sequence" not in v and not v.get("honest") and "module" not in v
}
SEQUENCE = sorted(
    (k for k, v in EXPECTED.items() if "sequence" in v), key=lambda k: EXPECTED[k]["sequence"]
)
HONEST_IDIOMS = sorted(k for k, v in EXPECTED.items() if v.get("honest"))
AUTOGRADER = str(Path(sys.executable).with_name("autograder"))
pytestmark = pytest.mark.usefixtures(
    "needs_bubblewrap"
)  # fails, with the install command, without it


def grade(*args, timeout=1200, env=None):
    """``autograder grade``, any exit status: the callers check it."""
    return run(
        [AUTOGRADER, "grade", *map(str, args), "--quiet"], expect=None, timeout=timeout, env=env
    )


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def autograded_outputs(course_root, student, assignment=EXERCISE, notebook=EXERCISE):
    nb = nbformat.read(
        Path(course_root) / "autograded" / student / assignment / f"{notebook}.ipynb", as_version=4
    )
    return "\n".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )


def submit(folder, student, assignment, notebook_path, name=None):
    target = Path(folder) / student / assignment / f"{name or assignment}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(notebook_path, target)


# --------------------------------------------------------------------------- hostile


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    course = TempCourse(root / "course", [EXERCISE])
    submitted = root / "submitted"
    for case in HOSTILE:
        notebook = submitted / case / EXERCISE / f"{EXERCISE}.ipynb"
        if case == "missing-notebook":
            (submitted / case / EXERCISE).mkdir(parents=True)
        elif case == "symlink-to-solutions":  # full marks if the grader followed it
            notebook.parent.mkdir(parents=True)
            notebook.symlink_to(course.root / "solutions" / EXERCISE / f"{EXERCISE}.ipynb")
        elif case == "deeply-nested-json":  # RecursionError in a JSON parser ended a whole v1 batch
            notebook.parent.mkdir(parents=True)
            notebook.write_text("[" * 400_000)
        else:
            submit(submitted, case, EXERCISE, GRADING / f"{case}.ipynb")
    # a student folder named like a spreadsheet formula: refused, and never a formula in grades.csv
    submit(submitted, FORMULA, EXERCISE, SUBMISSIONS / "correct-alternative.ipynb")
    # newline-student-id: a second "alice" (`$` matched before the newline)
    submit(submitted, "alice\n", EXERCISE, SUBMISSIONS / "correct-alternative.ipynb")
    out = root / "out"
    proc = grade(
        submitted,
        "--out",
        out,
        "--course",
        course.root,
        "--jobs",
        "2",
        "--timeout",
        "4",
        "--memory-limit",
        "512M",
        "--output-limit",
        "1M",
    )
    rows = read_csv(out / "grades.csv") if (out / "grades.csv").exists() else []
    return {"proc": proc, "rows": rows, "out": out, "course": course}


def test_hostile_run_succeeds(hostile):
    """Every hostile notebook graded; the two student folders whose names are not usable ids are
    refused, which makes the exit status 4 (stock exits 1 on a submission it cannot grade), and
    stderr names them escaped."""
    proc = hostile["proc"]
    assert proc.returncode == 4, explain(proc)
    assert "submission(s) refused" in proc.stderr and "alice\\n/" in proc.stderr, explain(proc)
    assert "test cells by status:" in proc.stdout


def test_csv_has_exactly_the_columns_and_every_submission_its_rows(hostile):
    header = (hostile["out"] / "grades.csv").read_text().splitlines()[0]
    assert header == (
        "student,assignment,notebook,grade_id,score,max_score,status,"
        "kernel_score,judge_score,judge_status,judge_reason"
    )
    tests = [
        t.grade_id for t in read_source(EXERCISE, SOLUTIONS / EXERCISE / f"{EXERCISE}.ipynb").tests
    ]
    for case in HOSTILE:
        got = [r["grade_id"] for r in hostile["rows"] if r["student"] == case]
        assert got == tests, (
            f"{case}: rows for {got}"
        )  # also: no row for a student's fake test cell


def test_a_loop_costs_the_judge_a_tenth_of_its_limit(hostile):
    """A test one kernel ran past the limit on (``infinite-loop``: its ``modifies_in_place`` loops
    on an input with a NaN, which only ``test_modifies_in_place_input`` passes; the other tests
    of the notebook pass) is run by the judge after it, under a tenth of the limit (at least 1 s):
    loops cost a class their limit once, as in stock, not twice; the score is one kernel's 0
    either way."""
    from autograder.grading.host.supervisor import after_kernel_limit

    assert after_kernel_limit(4) == 1 and after_kernel_limit(120) == 12
    assert after_kernel_limit(0.5) == 0.5  # never longer than the limit
    rows = [
        r
        for r in hostile["rows"]
        if r["student"] == "infinite-loop" and r["grade_id"] == "test_modifies_in_place_input"
    ]
    assert rows and all(r["status"] == "timeout" and r["score"] == "0" for r in rows), rows
    assert all("checked again here for 1 s" in r["judge_reason"] for r in rows), rows
    again = [r for r in hostile["rows"] if "checked again" in r["judge_reason"]]
    assert all(r["kernel_score"] == "0" and r["status"] == "timeout" for r in again), again


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_submission(case, hostile, stock_grades):
    check_case(case, hostile["rows"], hostile["course"], stock_grades)


def check_case(case, all_rows, course, stock_grades, student=None):
    """``case``'s rows (student ``student``, default the case's name) as expected.json says: the
    judge's verdict (``judge_score``, ``judge_status``) is what the case expects of it, never
    more than the honest base; and wherever one kernel's verdict differs, the row says so
    (grading v5: the score counted is one kernel's, the default AutograderGrade.counts)."""
    spec = EXPECTED[case]
    student = student or case
    base = stock_grades[EXERCISE][BASES[spec["base"]]][EXERCISE]
    rows = {r["grade_id"]: r for r in all_rows if r["student"] == student}
    assert rows, f"no rows for {case}"
    problems = []
    for gid, row in rows.items():
        status = next(
            (s for pattern, s in spec.get("status", {}).items() if fnmatch.fnmatch(gid, pattern)),
            "ok",
        )
        base_score, max_score = base[gid]
        score = 0.0 if any(fnmatch.fnmatch(gid, p) for p in spec.get("zero", [])) else base_score
        judge = float(row["judge_score"]) if row["judge_score"] else float(row["score"])
        judge_status = row["judge_status"] or row["status"]
        if judge_status != status:
            problems.append(f"{gid}: the judge's status {judge_status}, expected {status}")
        if judge != score and spec.get("compare") != "le":
            problems.append(f"{gid}: the judge's score {judge:g}, expected {score:g}")
        assert judge <= base_score, f"{case}: {gid}: the judge gives more than the honest notebook"
        assert float(row["max_score"]) == max_score
        if row["kernel_score"] and row["judge_score"]:
            differs = row["kernel_score"] != row["judge_score"]
            assert differs == (row["status"] in ("unconfirmed", "contradicted")), (case, row)
            if not differs:
                assert row["status"] == judge_status, (case, row)
            # the score counted is one kernel's (AutograderGrade.counts' default)
            assert float(row["score"]) == float(row["kernel_score"]), (case, row)
    assert not problems, f"{case}:\n" + "\n".join(problems)
    if "output" in spec:
        out = autograded_outputs(course.root, student)
        assert spec["output"] in out, (
            f"{case}: {spec['output']!r} not in the output:\n{out[-3000:]}"
        )


def test_forged_deep_reply_leaves_the_judge_bounded(sequence):
    """forged-deep-reply answered calls with 93 MB of nested lists (the v2 judge, with no memory
    limit, took 4.9 GB decoding one): the judge's peak resident memory (its own report, per
    submission, in logs/judge-memory.tsv) stays under 1 GB, and the other submissions were graded.
    Graded in the sequence run (the course's 120 s limit): its reply is made by the student's own
    process on the test's clock, and at load 12 on 2 cores the hostile run's 4 s limit ended it
    before the judge saw it (issue 34, a loaded run)."""
    lines = [
        line.split("\t")
        for line in (sequence["out"] / "logs" / "judge-memory.tsv").read_text().splitlines()
    ]
    peaks = {key.split("/")[0]: int(kb) for key, kb in lines}
    (student,) = sequence["students"]["forged-deep-reply"]
    assert student in peaks and len(peaks) > len(SEQUENCE), peaks
    assert max(peaks.values()) < 1 << 20, peaks  # kB
    rows = [r for r in sequence["rows"] if r["student"] == student]
    assert rows and {r["status"] for r in rows} == {"tampered"}


def test_formula_student_id_is_refused_and_never_a_formula(hostile):
    rows = [r for r in hostile["rows"] if "HYPERLINK" in r["student"]]
    assert (
        rows and {r["status"] for r in rows} == {"refused"} and {r["score"] for r in rows} == {"0"}
    )
    text = (hostile["out"] / "grades.csv").read_text()
    for line in text.splitlines()[1:]:
        for cell in next(csv.reader([line])):
            assert cell[:1] not in ("=", "+", "@") and not (
                cell[:1] == "-" and not cell[1:2].isdigit()
            ), line
    assert not (hostile["out"] / "feedback" / FORMULA).exists()


def test_newline_student_id_is_refused(hostile):
    rows = [r for r in hostile["rows"] if r["student"].startswith("alice")]
    # refused, and shown escaped: no control character in any artifact
    assert rows and {(r["student"], r["status"], r["score"]) for r in rows} == {
        ("alice\\n", "refused", "0")
    }
    assert not [p for p in (hostile["out"] / "feedback").iterdir() if p.name.startswith("alice")]
    assert not [
        line
        for line in (hostile["out"] / "review.txt").read_text().splitlines()
        if line.startswith("/")
    ]


def test_duplicate_test_cell_carries_nothing_into_any_artifact(hostile):
    """A copy of a test cell with a fabricated HTML output (a script): the autograded notebook
    (formgrader, `nbgrader generate_feedback`) shows only what the grader produced, once per test."""
    path = (
        hostile["course"].root
        / "autograded"
        / "duplicate-test-cell-html"
        / EXERCISE
        / f"{EXERCISE}.ipynb"
    )
    assert "<script" not in path.read_text()
    nb = nbformat.read(path, as_version=4)
    gids = [
        c.metadata["nbgrader"]["grade_id"]
        for c in nb.cells
        if c.get("metadata", {}).get("nbgrader", {}).get("grade")
    ]
    assert len(gids) == len(set(gids))
    page = hostile["out"] / "feedback" / "duplicate-test-cell-html" / EXERCISE / f"{EXERCISE}.html"
    assert "<script" not in page.read_text()
    course = hostile["course"]
    course.nbgrader(
        "generate_feedback", EXERCISE, "--student", "duplicate-test-cell-html", "--force"
    )
    html = (
        course.root / "feedback" / "duplicate-test-cell-html" / EXERCISE / f"{EXERCISE}.html"
    ).read_text()
    assert (
        "document.title" not in html and "100/100" not in html
    )  # (nbgrader's own page has scripts)


def test_writes_outside_changed_nothing_on_the_host(hostile):
    places = [
        REPO,
        REPO / "autograder",
        Path(sys.prefix),
        Path("/root"),
        Path("/home"),
        Path("/usr"),
        Path("/etc"),
        Path("/"),
    ]
    assert not [p for p in places if (p / "HACKED-writes-outside.txt").exists()]
    assert "writes-outside wrote: []" in autograded_outputs(
        hostile["course"].root, "writes-outside"
    )


def test_feedback_shows_messages_never_hidden_test_source(hostile):
    source = read_source(EXERCISE, SOLUTIONS / EXERCISE / f"{EXERCISE}.ipynb")
    page = (
        hostile["out"] / "feedback" / "deleted-test-cell" / EXERCISE / f"{EXERCISE}.html"
    ).read_text()
    # the failing hidden test: its name, its points and the check's message, no source
    assert "test_modifies_in_place_unchanged_values" in page
    assert "0 / 1" in page
    assert "returned False" in page and "likely cause" in page
    assert "Traceback" not in page and "BEGIN HIDDEN TESTS" not in page
    for test in source.tests:
        for line in test.source.splitlines():
            line = line.strip()
            if len(line) > 25 and any(ch in line for ch in "=(") and not line.startswith("#"):
                assert line not in page, f"hidden test source in the feedback: {line}"


def test_patched_torch_is_put_back_and_the_student_told(hostile):
    page = (
        hostile["out"] / "feedback" / "monkeypatch-allclose" / EXERCISE / f"{EXERCISE}.html"
    ).read_text()
    assert "replaced torch.allclose" in page
    assert "put back before each test" in page


def test_review_lists_exactly_the_notebooks_with_a_status_other_than_ok(hostile):
    """... and those whose code wrote names the test owns (dropped: never a status)."""
    review = (hostile["out"] / "review.txt").read_text()
    listed = {line.split("/")[0] for line in review.splitlines() if line}
    flagged = {r["student"] for r in hostile["rows"] if r["status"] != "ok"}
    wrote = {line.split("/")[0] for line in review.splitlines() if "names the test owns" in line}
    assert listed == flagged | wrote
    assert {"writes-test-globals", "rebinds-test-checks"} <= wrote
    assert "honest-memo-global-named-result" in flagged  # in-kernel: decided while grading
    assert "shadows-builtins" not in listed
    assert {"forged-result", "frame-trace-skip", "invalid-json"} <= listed
    assert "sys-exit" not in listed and "monkeypatch-allclose" not in listed


def test_hidden_tests_never_reach_the_student_process(hostile):
    """leaks-hidden-tests searched every frame and object of its process for test source and printed it."""
    source = read_source(EXERCISE, SOLUTIONS / EXERCISE / f"{EXERCISE}.ipynb")
    # what the student's own copy holds (the release: visible tests, "Try it" cells) is no secret
    release = "\n".join(
        c.source
        for c in nbformat.read(EXERCISES / EXERCISE / f"{EXERCISE}.ipynb", as_version=4).cells
    )
    out = autograded_outputs(hostile["course"].root, "leaks-hidden-tests")
    page = (
        hostile["out"] / "feedback" / "leaks-hidden-tests" / EXERCISE / f"{EXERCISE}.html"
    ).read_text()
    assert "LOOT 0 strings:" in out, out[:2000]  # it searched its whole process and found nothing
    for test in source.tests:
        for line in test.source.splitlines():
            line = line.strip()
            if len(line) > 25 and not line.startswith("#") and line not in release:
                assert line not in out and line not in page, (
                    f"test source reached the student: {line}"
                )


def _hidden_lines():
    """The hidden tests' source lines a student has no copy of (not in the release)."""
    source = read_source(EXERCISE, SOLUTIONS / EXERCISE / f"{EXERCISE}.ipynb")
    release = "\n".join(
        c.source
        for c in nbformat.read(EXERCISES / EXERCISE / f"{EXERCISE}.ipynb", as_version=4).cells
    )
    return [
        line.strip()
        for test in source.tests
        for line in test.source.splitlines()
        if len(line.strip()) > 25
        and not line.strip().startswith("#")
        and line.strip() not in release
    ]


def test_nothing_of_the_tests_crosses_but_arguments(hostile):
    """Grading v3, item 1. harvests-shipped-objects scanned its arguments (and all they hold) and
    every object of its process for functions, code objects and docstrings from the tests: none
    (a test's function crosses only by reference to a public module: autograder.probes);
    raises-with-caller-docstring raised with every constant, file name and docstring of its
    callers' frames and of its argument's code: no hidden-test line reached its feedback."""
    import html
    import re

    out = autograded_outputs(hostile["course"].root, "harvests-shipped-objects")
    counts = re.findall(r"harvests-shipped-objects found: (\d+) docstrings: (\d+)", out)
    assert counts and all(c == ("0", "0") for c in counts), counts
    page = html.unescape(
        (
            hostile["out"]
            / "feedback"
            / "raises-with-caller-docstring"
            / EXERCISE
            / f"{EXERCISE}.html"
        ).read_text()
    )
    out = autograded_outputs(hostile["course"].root, "raises-with-caller-docstring")
    assert page.count("caller says:") >= 10  # the attack ran in (nearly) every test
    assert "<test " not in page and "<test " not in out
    for line in _hidden_lines():
        assert line not in page and line not in out, f"hidden test source in the feedback: {line}"


def test_output_stays_bounded(hostile):
    """3,000 cells printing 20,000 characters each: the autograded notebook and feedback stay small."""
    nb = (
        hostile["course"].root
        / "autograded"
        / "output-amplification"
        / EXERCISE
        / f"{EXERCISE}.ipynb"
    )
    assert nb.stat().st_size < 8_000_000, nb.stat().st_size
    page = hostile["out"] / "feedback" / "output-amplification" / EXERCISE / f"{EXERCISE}.html"
    assert page.stat().st_size < 1_000_000


def test_wall_limit_stops_a_notebook(tmp_path):
    """Each cell is under --timeout, the notebook is not under --wall-limit."""
    course = TempCourse(tmp_path / "course", [EXERCISE])
    submit(tmp_path / "submitted", "slow", EXERCISE, GRADING / "infinite-loop-cell.ipynb")
    proc = grade(
        tmp_path / "submitted",
        "--out",
        tmp_path / "out",
        "--course",
        course.root,
        "--jobs",
        "1",
        "--timeout",
        "60",
        "--wall-limit",
        "4",
        "--no-gradebook",
    )
    assert proc.returncode == 0, explain(proc)
    rows = read_csv(tmp_path / "out" / "grades.csv")
    before = [r for r in rows if r["grade_id"].startswith("test_modifies_in_place")]
    after = [r for r in rows if r["grade_id"].startswith("test_inplace_relu_is_safe")]
    assert {(r["status"], r["score"]) for r in before} == {("ok", "1")}
    assert {(r["status"], r["score"]) for r in after} == {("timeout", "0")}


# --------------------------------------------------------------------------- isolation


def test_nothing_survives_a_submission(tmp_path):
    """Processes and files left by a submission are gone before the next one (same sandbox)."""
    course = TempCourse(tmp_path / "course", [EXERCISE])
    submitted = tmp_path / "submitted"
    submit(submitted, "0-dev-leaves-file", EXERCISE, GRADING / "dev-leaves-file.ipynb")
    submit(submitted, "1-fork-bomb", EXERCISE, GRADING / "fork-bomb.ipynb")
    submit(submitted, "2-leftover-daemon", EXERCISE, GRADING / "leftover-daemon.ipynb")
    submit(submitted, "3-writes-outside", EXERCISE, GRADING / "writes-outside.ipynb")
    check = nbformat.read(EXERCISES / EXERCISE / f"{EXERCISE}.ipynb", as_version=4)
    check.cells.insert(
        2,
        nbformat.v4.new_code_cell(
            "import os, tempfile\n"
            "alive = []\n"
            "for pid in range(2, 4096):\n"
            "    if pid in (os.getpid(), os.getppid()):\n"
            "        continue\n"
            "    try:\n"
            "        os.kill(pid, 0)\n"
            "        alive.append(pid)\n"
            "    except ProcessLookupError:\n"
            "        pass\n"
            "print('check: processes', alive, 'scratch', os.listdir('.'), 'tmp', sorted(os.listdir(tempfile.gettempdir())),\n"
            "      'shm', os.listdir('/dev/shm'), 'dev-leftover', os.path.exists('/dev/leftover'))",
            id="check",
        ),
    )
    nbformat.write(check, tmp_path / "check.ipynb")
    submit(submitted, "4-check", EXERCISE, tmp_path / "check.ipynb")
    proc = grade(submitted, "--out", tmp_path / "out", "--course", course.root, "--jobs", "1")
    assert proc.returncode == 0, explain(proc)
    out = autograded_outputs(course.root, "4-check")
    assert (
        "check: processes [] scratch [] tmp ['home', 'out', 'work'] shm [] dev-leftover False"
        in out
    ), out
    rows = read_csv(tmp_path / "out" / "grades.csv")
    assert {r["status"] for r in rows if r["student"] != "4-check"} == {"ok"}


@pytest.fixture(scope="module")
def sequence(tmp_path_factory):
    """The 'sequence' cases one after the other in one sandbox (--jobs 1, default limits), the second
    System V case twice; then the honest idioms, with the default limits."""
    root = tmp_path_factory.mktemp("sequence")
    course = TempCourse(root / "course", [EXERCISE])
    submitted = root / "submitted"
    students = {}
    for n, case in enumerate(SEQUENCE + SEQUENCE[-1:] + HONEST_IDIOMS):
        student = f"{n:02d}-{case}"
        students.setdefault(case, []).append(student)
        submit(submitted, student, EXERCISE, GRADING / f"{case}.ipynb")
        if case == "data-file-beside-notebook":
            (submitted / student / EXERCISE / "data.csv").write_text(
                "".join(f"{i},{i * 0.5:.6f},{(i * 7919) % 1000003}\n" for i in range(185_000))
            )
    out = root / "out"
    proc = grade(
        submitted, "--out", out, "--course", course.root, "--jobs", "1"
    )  # the course's timeout (120 s)
    rows = read_csv(out / "grades.csv") if (out / "grades.csv").exists() else []
    return {"proc": proc, "rows": rows, "out": out, "course": course, "students": students}


@pytest.mark.parametrize("case", SEQUENCE + HONEST_IDIOMS)
def test_nothing_of_a_submission_reaches_the_next_and_honest_idioms_pass(
    case, sequence, stock_grades
):
    """reads-zygote-memory: the zygote that forks every student process never held an earlier
    submission (a later student scanning its own memory finds nothing of it); sysv-shm-survives:
    each submission has an IPC namespace of its own; big-global, big-debug-print,
    data-file-beside-notebook, torch-compile-helper: honest work is never failed by a limit
    (stock scores, ok)."""
    assert sequence["proc"].returncode == 0, explain(sequence["proc"])
    for student in sequence["students"][case]:
        check_case(case, sequence["rows"], sequence["course"], stock_grades, student=student)


def test_no_sandbox_no_grading(tmp_path):
    """Without bubblewrap the command refuses (unless --no-sandbox) and says why."""
    (tmp_path / "submitted").mkdir()
    env = dict(os.environ, PATH=str(tmp_path))
    proc = grade(tmp_path / "submitted", "--out", tmp_path / "out", env=env)
    assert proc.returncode == 2, explain(proc)
    assert "bubblewrap" in proc.stderr and "--no-sandbox" in proc.stderr


def test_missing_submissions_folder_is_a_clear_error(tmp_path):
    proc = grade(tmp_path / "nowhere", "--out", tmp_path / "out")
    assert proc.returncode == 2, explain(proc)
    assert "no submissions folder" in proc.stderr


# --------------------------------------------------------------------------- honest


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    """Every assignment's solution, blank release and fixture submissions, graded by the CLI."""
    root = tmp_path_factory.mktemp("honest")
    course = TempCourse(root / "course")
    course.generate()
    for a in assignments():
        for (student, nb), path in reference_submissions(a).items():
            course.submit(student, a, path, nb)
    out = root / "out"
    proc = grade(course.root / "submitted", "--out", out, "--course", course.root, "--jobs", "2")
    assert (out / "grades.csv").exists(), explain(proc)
    return {"proc": proc, "out": out, "course": course, "rows": read_csv(out / "grades.csv")}


def test_honest_submissions_get_exactly_stock_nbgrader_scores(honest, stock_grades):
    assert honest["proc"].returncode == 0, explain(honest["proc"])
    ours = {
        (r["assignment"], r["student"], r["notebook"], r["grade_id"]): (
            float(r["score"]),
            float(r["max_score"]),
        )
        for r in honest["rows"]
    }
    stock = {
        (a, student, nb, gid): score
        for a, students in stock_grades.items()
        for student, nbs in students.items()
        for nb, grades in nbs.items()
        for gid, score in grades.items()
    }
    assert ours == stock
    assert {r["status"] for r in honest["rows"]} == {"ok"}
    assert (honest["out"] / "review.txt").read_text() == ""


def test_gradebook_feeds_nbgrader_export(honest):
    course = honest["course"]
    for a in assignments():
        assert course.scores(a) == {
            student: {
                nb: {
                    r["grade_id"]: (float(r["score"]), float(r["max_score"]))
                    for r in honest["rows"]
                    if (r["student"], r["assignment"], r["notebook"]) == (student, a, nb)
                }
                for nb in notebooks(a)
            }
            for student in {r["student"] for r in honest["rows"] if r["assignment"] == a}
        }
    course.nbgrader("export")
    exported = read_csv(course.root / "grades.csv")
    totals = {}
    for r in honest["rows"]:
        key = (r["assignment"], r["student"])
        totals[key] = totals.get(key, 0.0) + float(r["score"])
    # nbgrader exports every student of the gradebook for every assignment: 0 where none was submitted
    assert {(r["assignment"], r["student_id"]): float(r["score"]) for r in exported} == {
        (a, student): totals.get((a, student), 0.0)
        for a in assignments()
        for student in {s for _, s in totals}
    }
    for a in assignments():
        for nb in notebooks(a):
            assert (course.root / "autograded" / "solution" / a / f"{nb}.ipynb").exists()


def test_dask_workers_that_share_nothing_and_one_killed_mid_run(honest, tmp_path, tmp_path_factory):
    """Two Dask workers as on other machines: each in a private mount namespace where the test
    session's temporary folder (the course, its gradebook, the instructor's output folder) is an
    empty tmpfs, so none of them exists there (checked from inside); the tasks carry what they
    grade. One is killed (SIGKILL, as a lost machine) while it holds a task: the scheduler gives
    its tasks to the other, and the rows are still the local run's, byte for byte, each once
    (issue 40, items 2 and 3)."""
    import shlex
    import subprocess
    import time

    from distributed import Client, LocalCluster

    assignment = "01_relu_inplace"
    course = honest["course"].root
    hidden = tmp_path_factory.getbasetemp()  # this worker's: the course and tmp_path are in it
    assert hidden in course.parents and hidden in tmp_path.parents
    workers = []
    with (
        LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        for i in range(2):
            worker = [
                str(Path(sys.executable).with_name("dask")), "worker", cluster.scheduler_address,
                "--nthreads", "1", "--no-nanny", "--name", f"elsewhere-{i}",
            ]  # fmt: skip
            # a private mount namespace (root, as CI); elsewhere inside a user namespace of its
            # own, as bubblewrap makes them (checked both ways on 2026-11-29)
            userns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
            isolate = ["unshare", *userns, "--mount", "--propagation", "private", "sh", "-c",
                       f'mount -t tmpfs tmpfs {shlex.quote(str(hidden))} && exec "$@"', "sh"]  # fmt: skip
            log = open(tmp_path / f"worker-{i}.log", "wb")
            workers.append(
                subprocess.Popen([*isolate, *worker], stdout=log, stderr=subprocess.STDOUT)
            )
            log.close()
        try:
            client.wait_for_workers(2, timeout=300)
            sees = client.run(lambda: [os.path.exists(p) for p in (course, tmp_path)])
            assert sees and all(v == [False, False] for v in sees.values()), sees
            pids = client.run(os.getpid)
            command = [
                AUTOGRADER, "grade", str(course / "submitted"), "--out", str(tmp_path / "out"),
                "--course", str(course), "--scheduler", cluster.scheduler_address,
                "--assignment", assignment, "--no-gradebook", "--quiet",
            ]  # fmt: skip
            log_path = tmp_path / "grade.log"
            with open(log_path, "wb") as fh:
                proc = subprocess.Popen(command, stdout=fh, stderr=subprocess.STDOUT)
            killed = None
            deadline = time.monotonic() + 600
            while killed is None and proc.poll() is None and time.monotonic() < deadline:
                for address, state in list(cluster.scheduler.workers.items()):
                    if address in pids and state.processing:
                        os.kill(pids[address], signal.SIGKILL)
                        killed = (address, len(state.processing))
                        break
                time.sleep(0.02)
            proc.wait(timeout=600)
        finally:
            for w in workers:
                w.kill()
                w.wait()
    text = log_path.read_text(errors="replace")
    assert killed, "no worker held a task to kill:\n" + text
    assert proc.returncode == 0, text
    local = (honest["out"] / "grades.csv").read_text().splitlines(keepends=True)
    ours = (tmp_path / "out" / "grades.csv").read_text().splitlines(keepends=True)
    assert len(ours) > 20
    assert ours == [local[0]] + [x for x in local[1:] if x.split(",")[1] == assignment]


# --------------------------------------------------------------------------- autograder report


def test_results_jsonl_keeps_each_checks_parts_and_the_stub(honest):
    """results.jsonl has grades.csv's rows; a failed check of this course keeps its parts (the
    judge's, never read back from text); the blank release says "not implemented yet" with no
    guessed cause, in results.jsonl and on its feedback pages - but for the answer cells that
    define names ("cause_1 is not set": a true cause)."""
    lines = [json.loads(x) for x in (honest["out"] / "results.jsonl").read_text().splitlines()]
    assert [
        (d["student"], d["assignment"], d["grade_id"], d["score"], d["status"]) for d in lines
    ] == [
        (r["student"], r["assignment"], r["grade_id"], float(r["score"]), r["status"])
        for r in honest["rows"]
    ]
    failing = [d for d in lines if d["score"] < d["max_score"]]
    assert failing and all(d["parts_from"] == "judge" and d["check"] for d in failing)
    blank = [d for d in failing if d["student"] == "blank"]
    for d in blank:
        if d["kind"] == "not-implemented":
            assert (
                d["cause"] is None
                and d["expected"] is None
                and "not implemented yet" in d["message"]
            )
        else:
            assert d["check"].endswith("is not set") or "is not set (" in d["check"], d
    assert sum(d["kind"] == "not-implemented" for d in blank) >= 0.85 * len(blank)
    for a in assignments():
        for nb in notebooks(a):
            page = (honest["out"] / "feedback" / "blank" / a / f"{nb}.html").read_text()
            if a.startswith("03"):  # the example: every test of exercise 3
                assert page.count("not implemented yet") == len(
                    read_source(a, SOLUTIONS / a / f"{nb}.ipynb").tests
                )
                assert "likely cause" not in page


def test_class_report_of_the_course_fixtures(honest, tmp_path):
    """The report on every assignment's solution, blank release and fixture submissions:
    tests.csv is exactly what grades.csv gives; each named mistake of tests/fixtures/submissions
    (its failing rows) lands in exactly one cause group per test; at least 95 % of the named
    mistakes' failing rows, and of all failing rows, carry a named cause."""
    from autograder.grading.results.class_report import build, read_results, write_report
    from test_report import assert_tests_csv_matches

    page = write_report(honest["out"], tmp_path / "report")
    assert_tests_csv_matches(page.parent / "tests.csv", honest["out"] / "grades.csv")
    rows, _ = read_results(honest["out"])
    mistakes = {
        (a, case)
        for a in assignments()
        for case in fixture_cases(a)
        if not case.startswith(("correct", "honest"))
    }
    groups_of: dict = {}
    named = total = mistake_rows = mistake_named = 0
    for section in build(rows):
        for t in section.tests:
            for g in t.groups:
                for r in g.rows:
                    total += 1
                    named += g.kind in ("cause", "not-implemented")
                    if (r.assignment, r.student) in mistakes:
                        groups_of.setdefault((r.assignment, r.student, t.grade_id), []).append(g)
                        mistake_rows += 1
                        mistake_named += g.kind == "cause"
    # every test a named mistake fails under stock nbgrader is in the report, in one group
    expected = {(a, case, gid) for a, case in mistakes for gid in fixture_cases(a)[case]}
    assert set(groups_of) == expected
    assert all(len(gs) == 1 for gs in groups_of.values())
    share, share_all = mistake_named / mistake_rows, named / total
    print(
        f"named mistakes: {mistake_named}/{mistake_rows} failing rows with a likely cause "
        f"({100 * share:.1f} %); all failing rows with a named cause or not implemented yet: "
        f"{named}/{total} ({100 * share_all:.1f} %)"
    )
    assert share >= 0.95 and share_all >= 0.95


def test_class_report_groups_the_hostile_rows_by_status(hostile, tmp_path):
    """Rows that could not count (timeout, memory-limit, tampered, ...) are grouped by status,
    and tests.csv's status columns are grades.csv's."""
    from autograder.grading.results.class_report import write_report
    from test_report import assert_tests_csv_matches

    page = write_report(hostile["out"], tmp_path / "report", with_students=True)
    assert_tests_csv_matches(page.parent / "tests.csv", hostile["out"] / "grades.csv")
    causes = read_csv(page.parent / "causes.csv")
    statuses = {  # (a difference counted at full points is no cause of failure)
        r["status"]
        for r in read_csv(hostile["out"] / "grades.csv")
        if float(r["score"]) < float(r["max_score"])
    } - {"ok", "in-kernel"}
    assert statuses and statuses <= {r["cause"] for r in causes if r["kind"] == "status"}
    grades = read_csv(hostile["out"] / "grades.csv")
    for r in causes:
        if r["kind"] == "status":
            assert int(r["rows"]) == sum(  # (a tampered row keeps the judge's score: may pass)
                g["status"] == r["cause"]
                and g["grade_id"] == r["grade_id"]
                and float(g["score"]) < float(g["max_score"])
                for g in grades
            )
            assert r["students"]
