"""`autograder report` (autograder/grading/results/class_report.py) on synthetic classes, and the
parts of a failed check that reach it (results.jsonl), with no sandbox.

* Numbers exact: every figure of tests.csv recomputed here from grades.csv alone
  (:func:`recompute`, also used on the course's real fixtures in tests/test_grading.py).
* Causes: every failing row in exactly one cause group; the release stub is "not implemented
  yet" with no guessed cause, in every check that turns a student's exception into a failure.
* Student text renders inert (markup, formula-like, very long values) in the page and the CSVs;
  student ids only with --with-students; no request can leave the page.
* Under serve: attempts to full marks and first vs last attempt; an appended attempt is read
  without reading the file again.
"""

from __future__ import annotations

import csv
import json
import math
import random
import re
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

import pytest

from autograder.authoring.bench_report import synthetic_rows
from autograder.grading.results import report
from autograder.grading.results.class_report import (
    TEST_FIELDS,
    cause_of,
    normalise,
    read_results,
    write_report,
)
from autograder.grading.results.report import Row


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_class(out: Path, rows) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    report.write_csv(out / "grades.csv", rows)
    report.write_jsonl(out / "results.jsonl", rows)
    return out


def recompute(grades_csv: Path) -> dict:
    """Every figure of tests.csv that grades.csv determines, computed here with none of the
    report's code: ``{(assignment, notebook, grade_id): {column: value}}``."""
    rows = read_csv(grades_csv)
    tests: dict = defaultdict(list)
    totals: dict = defaultdict(float)
    for r in rows:
        tests[(r["assignment"], r["notebook"], r["grade_id"])].append(r)
        totals[(r["student"], r["assignment"], r["notebook"])] += float(r["score"])
    out = {}
    for (a, nb, gid), rs in tests.items():
        scores = [float(r["score"]) for r in rs]
        maxima = [float(r["max_score"]) for r in rs]
        passed = sum(s >= m for s, m in zip(scores, maxima, strict=True))
        figures = {
            "max_score": max(maxima),
            "attempted": len(rs),
            "passed": passed,
            "partial": sum(0 < s < m for s, m in zip(scores, maxima, strict=True)),
            "failed": len(rs) - passed,
            "pass_pct": 100 * passed / len(rs),
            "mean_score": sum(scores) / len(rs),
        }
        statuses = {c[len("status_") :] for c in TEST_FIELDS if c.startswith("status_")}
        for st in statuses:
            figures[f"status_{st}"] = sum(r["status"] == st for r in rs)
        assert {r["status"] for r in rs} <= statuses
        # corrected item-total correlation: the test against the rest of its notebook
        xs = scores
        ys = [totals[(r["student"], a, nb)] - float(r["score"]) for r in rs]
        n = len(xs)
        mx, my = sum(xs) / n, sum(ys) / n
        vx = sum((x - mx) ** 2 for x in xs)
        vy = sum((y - my) ** 2 for y in ys)
        if n < 3 or vx < 1e-12 or vy < 1e-12:
            figures["discrimination"] = None
        else:
            cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
            figures["discrimination"] = cov / math.sqrt(vx * vy)
        out[(a, nb, gid)] = figures
    return out


def assert_tests_csv_matches(tests_csv: Path, grades_csv: Path):
    expected = recompute(grades_csv)
    got = {(r["assignment"], r["notebook"], r["grade_id"]): r for r in read_csv(tests_csv)}
    assert got.keys() == expected.keys()
    for key, figures in expected.items():
        for column, value in figures.items():
            cell = got[key][column]
            if value is None:
                assert cell == "", (key, column, cell)
            else:
                assert float(cell) == pytest.approx(value, rel=1e-5, abs=1e-6), (key, column)


# --------------------------------------------------------------------------- numbers


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    out = write_class(tmp_path_factory.mktemp("class") / "out", synthetic_rows(400, seed=3))
    page = write_report(out)
    return out, page


def test_tests_csv_recomputed_from_grades_csv(synthetic):
    out, page = synthetic
    assert_tests_csv_matches(page.parent / "tests.csv", out / "grades.csv")


def test_not_implemented_and_hidden_columns_from_results_jsonl(synthetic):
    out, page = synthetic
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    stubs: dict = defaultdict(int)
    hidden = {}
    for d in lines:
        key = (d["assignment"], d["notebook"], d["grade_id"])
        stubs[key] += d["score"] < d["max_score"] and d["kind"] == "not-implemented"
        hidden[key] = d["hidden"]
    for r in read_csv(page.parent / "tests.csv"):
        key = (r["assignment"], r["notebook"], r["grade_id"])
        assert int(r["not_implemented"]) == stubs[key]
        assert r["hidden"] == str(int(hidden[key]))
    assert sum(stubs.values()) > 0


def test_every_failing_row_is_in_exactly_one_cause_group(synthetic):
    out, page = synthetic
    tests = {
        (r["assignment"], r["notebook"], r["grade_id"]): int(r["failed"])
        for r in read_csv(page.parent / "tests.csv")
    }
    counted: dict = defaultdict(int)
    seen = set()
    for r in read_csv(page.parent / "causes.csv"):
        key = (r["assignment"], r["notebook"], r["grade_id"])
        counted[key] += int(r["rows"])
        assert (key, r["kind"], r["cause"]) not in seen  # one group per cause and test
        seen.add((key, r["kind"], r["cause"]))
    assert {k: v for k, v in counted.items() if v} == {k: v for k, v in tests.items() if v}
    # the rows of one synthetic cause (its text, values aside) are one group, and only they
    rows, _ = read_results(out)
    by_cause: dict = defaultdict(set)
    for r in rows:
        if not r.passed and r.cause:
            by_cause[(r.grade_id, r.cause)].add(cause_of(r))
    assert by_cause and all(len(groups) == 1 for groups in by_cause.values())
    assert len({(k[0], *next(iter(g))) for k, g in by_cause.items()}) == len(by_cause)


def test_flags_a_test_nobody_passes_and_one_that_does_not_go_with_the_rest(synthetic):
    _, page = synthetic
    tests = read_csv(page.parent / "tests.csv")
    # synthetic_rows: test 7 of each assignment passes 4 % of the time, test 5 60 % whatever the
    # student's ability, the others by ability
    for a in {r["assignment"] for r in tests}:
        mine = {int(r["grade_id"].rsplit("_", 1)[1]): r for r in tests if r["assignment"] == a}
        assert "almost nobody passes" in mine[7]["flags"]
        ordinary = [r for k, r in mine.items() if k not in (5, 7)]
        assert all(r["flags"] == "" for r in ordinary)
        assert float(mine[5]["discrimination"]) < min(float(r["discrimination"]) for r in ordinary)
    for r in tests:
        low = r["discrimination"] != "" and float(r["discrimination"]) < 0.2
        assert ("does not go with the rest" in r["flags"]) == low
    assert sum("does not go with the rest" in r["flags"] for r in tests) >= 5


def test_normalise_numbers_and_addresses_not_names():
    assert normalise("x[0] == 0.1 at <T object at 0x7f3a12ff>, got -1.5e-3") == (
        "x[#] == # at <T object at 0x…>, got #"
    )
    assert normalise("float64 G.0.weight x2 prediction_1") == "float64 G.0.weight x2 prediction_1"
    assert (
        normalise("a\n  b " + "c" * 500).startswith("a b ccc") and len(normalise("c" * 500)) == 200
    )


# --------------------------------------------------------------------------- inert text

HOSTILE = [
    "<script>alert('x')</script>",
    "<img src=http://example.com/x.png onerror=alert(1)>",
    '=HYPERLINK("http://example.com/x","click")',
    "+cmd|' /C calc'!A0",
    "@SUM(1+1)",
    r"$\frac{1}{0}$ {{ 7*7 }} {% raw %} ${x}",
    "</pre></td></tr></table><h1>taken</h1>",
    "\u202eevil\u200b \x00 \ud800",
]
LONG = "L" * 200_000


def hostile_rows():
    rows = []
    for i, text in enumerate([*HOSTILE, LONG]):
        for student, score in (("<b>stu</b>-" + str(i), 0.0), (f"=ok{i}", 1.0)):
            row = Row(student, "a1", "a1", f"test_{i % 3}", score, 1.0, "ok", hidden=True)
            if score == 0.0:
                row.error = "CheckFailure" if i % 2 else "ValueError"
                if i % 2:
                    row.failure = {
                        "kind": "check",
                        "check": f"f({text}) returned the wrong values",
                        "expected": text,
                        "found": text,
                        "cause": text if i % 4 == 1 else None,
                    }
                row.message = f"{row.error}: {text}"
            rows.append(row)
    return rows


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: set = set()
        self.attrs: list = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs.extend(attrs)


def test_student_text_renders_inert(tmp_path):
    out = write_class(tmp_path / "out", hostile_rows())
    page = write_report(out, with_students=True)
    html = page.read_text(encoding="utf-8")
    parser = Tags()
    parser.feed(html)
    svg = {"svg", "g", "path", "defs", "clippath", "use", "text", "rect", "style", "metadata"}
    html_tags = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "ul"}
    html_tags |= {"li", "a", "code", "span", "br", "table", "thead", "tbody", "tr", "th", "td"}
    html_tags |= {"pre", "details", "summary", "strong"}
    assert parser.tags <= html_tags | svg, parser.tags - html_tags - svg
    assert "<script" not in html and "<img" not in html and "<h1>taken" not in html
    assert "&lt;script&gt;" in html and "&lt;b&gt;stu&lt;/b&gt;" in html
    for name, value in parser.attrs:  # nothing that loads: no src, links to the page itself
        assert name not in ("src", "srcset", "action", "formaction", "background"), (name, value)
        if name in ("href", "xlink:href"):
            assert value.startswith("#"), value
    assert "default-src 'none'" in html
    assert len(html) < 500_000 and "more characters]" in html  # the long value is cut
    for name in ("tests.csv", "causes.csv"):
        with open(page.parent / name, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                for cell in row:
                    assert cell[:1] not in ("=", "+", "-", "@") or _number(cell), (name, cell)


def _number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------- student ids


def test_student_ids_only_with_students(tmp_path):
    rows = synthetic_rows(60, seed=5)
    ids = {r.student for r in rows}
    for r in rows:
        r.student = "stu-" + r.student  # ids that no figure or text contains by chance
    out = write_class(tmp_path / "out", rows)
    page = write_report(out, tmp_path / "ta")
    texts = [page.read_text()] + [
        (page.parent / n).read_text() for n in ("tests.csv", "causes.csv")
    ]
    for text in texts:
        assert "stu-" not in text
    page = write_report(out, tmp_path / "instructor", with_students=True)
    named = read_csv(page.parent / "causes.csv")
    assert {s for r in named for s in r["students"].split()} == {
        "stu-" + r.student
        for r in synthetic_rows(60, seed=5)
        if r.score < r.max_score and r.student in ids
    }
    assert "stu-" in page.read_text()


# --------------------------------------------------------------------------- serve


def test_attempts_to_full_marks_and_first_vs_last(tmp_path):
    """ana: fails, fails, passes (3 attempts to full marks); bo: passes at once; cy: fails twice."""
    out = tmp_path / "out"
    out.mkdir()
    history = {"ana": [0, 0, 1], "bo": [1], "cy": [0, 0]}
    rows = []
    with open(out / "attempts.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            ["student", "assignment", "attempt", "submitted", "seen", "started"]
            + ["finished", "released"]
        )
        for student, scores in history.items():
            for n, score in enumerate(scores, 1):
                t0 = 1_800_000_000 + 100 * n
                w.writerow([student, "a1", n, t0, t0, t0 + 1, t0 + 2, t0 + 2.5])
                row = Row(student, "a1", "a1", "test_x", float(score), 1.0, "ok")
                other = Row(student, "a1", "a1", "test_y", 1.0, 1.0, "ok")
                if not score:
                    row.error, row.message = "ValueError", "ValueError: bad"
                report.write_jsonl(out / "results.jsonl", [row, other], attempt=n, append=True)
                rows.append(row)
    report.write_csv(out / "grades.csv", [r for r in rows])
    page = write_report(out, attempts=out / "attempts.csv")
    html = page.read_text()
    # the class figures are each notebook's last attempt: ana and bo pass, cy does not
    tests = {r["grade_id"]: r for r in read_csv(page.parent / "tests.csv")}
    assert (tests["test_x"]["attempted"], tests["test_x"]["passed"]) == ("3", "2")
    # first attempt: 1 of 3 passes (33 %), last: 2 of 3 (67 %); to full marks: 3 and 1, median 2
    assert "33% / 67%" in html
    assert "2 (2 of 3)" in html
    assert "6 attempts" in html and "median 2.5 s" in html


def test_an_appended_attempt_is_read_without_reading_the_file_again(tmp_path, monkeypatch):
    from autograder.grading.results import class_report

    out = write_class(tmp_path / "out", synthetic_rows(50, seed=2))
    write_report(out)
    parsed = []
    real = class_report._parse_lines
    monkeypatch.setattr(
        class_report, "_parse_lines", lambda data, *a: parsed.append(len(data)) or real(data, *a)
    )
    late = [Row("late", "01_relu_inplace", "01_relu_inplace", "t", 1.0, 1.0, "ok")]
    report.write_jsonl(out / "results.jsonl", late, attempt=1, append=True)
    rows, _ = read_results(out)
    assert rows[-1].student == "late" and parsed == [len(json.dumps(report.record(late[0], 1))) + 1]
    report.write_jsonl(out / "results.jsonl", late)  # rewritten (a new grade run): read whole
    rows, _ = read_results(out)
    assert [r.student for r in rows] == ["late"]


# --------------------------------------------------------------------------- the stub


def stub():
    raise NotImplementedError()


def test_the_release_stub_is_not_implemented_yet_in_every_check():
    from autograder.checks import (
        CheckFailure,
        check_call,
        check_raises,
        check_returns,
        check_same_object,
        observe,
    )
    from autograder.messages import NotImplementedYet

    calls = [
        lambda: check_call(stub, "f(x)", cause="a guess about shapes"),
        lambda: check_returns(stub, True, "f(x)", cause="a guess about leaves"),
        lambda: check_returns(observe(stub), True, "f(x)", cause="a guess about leaves"),
        lambda: check_raises(stub, ValueError, "f(x)", cause="a guess about dtypes"),
        lambda: check_same_object(stub, KeyError("k"), "f(x)", cause="a guess"),
    ]
    for call in calls:
        with pytest.raises(NotImplementedYet) as info:
            call()
        text = str(info.value)
        assert text.startswith("f(x): not implemented yet") and "likely cause" not in text
        assert "NotImplementedError" in text  # autograder check --hidden: TODO
        assert info.value.parts() == {
            "kind": "not-implemented",
            "check": "f(x)",
            "expected": None,
            "found": None,
            "cause": None,
        }

    def torch_style():  # PyTorch's NotImplementedError says what is missing: not the stub
        raise NotImplementedError("You must implement the backward function")

    with pytest.raises(CheckFailure) as info:
        check_call(torch_style, "f(x)", cause="write backward")
    assert not isinstance(info.value, NotImplementedYet)
    assert "likely cause: write backward" in str(info.value)


def test_judge_keeps_a_failed_checks_parts_and_the_stub():
    from autograder.grading.host.judge import failure_parts, not_implemented
    from autograder.messages import CheckFailure
    from autograder.wire.observation import mirror_exception

    exc = CheckFailure("f(x) returned the wrong values", "tensor([1.])", "tensor([2.])", "clone x")
    assert failure_parts(exc) == {
        "kind": "check",
        "check": "f(x) returned the wrong values",
        "expected": "tensor([1.])",
        "found": "tensor([2.])",
        "cause": "clone x",
    }
    # a student's exception class named CheckFailure is a mirror: its message only
    fake = mirror_exception(
        {"type": "CheckFailure", "module": "student", "message": "x", "bases": ["AssertionError"]}
    )
    assert failure_parts(fake) is None
    stub_exc = mirror_exception(  # (as the encoder reports the real built-in: "builtin")
        {"type": "NotImplementedError", "module": "builtins", "message": "", "builtin": True}
    )
    assert failure_parts(stub_exc) == {"kind": "not-implemented", "check": "not implemented yet"}
    # a test that called the stub and then failed on its own check: no guessed cause survives
    failure, message = not_implemented(failure_parts(exc), str(exc))
    assert failure == {"kind": "not-implemented", "check": "f(x) returned the wrong values"}
    assert message.startswith("f(x) returned the wrong values: not implemented yet")
    assert "clone x" not in message


def test_parts_read_back_from_a_message_graded_in_one_kernel():
    from autograder.messages import CheckFailure, NotImplementedYet

    rng = random.Random(0)
    for _ in range(200):
        parts = {
            "check": "".join(rng.choice("ab: (x)[0]=<>'\"") for _ in range(rng.randint(1, 30))),
            "expected": rng.choice([None, "tensor([1., 2.])", "a: b", ""]),
            "found": rng.choice([None, "x", "  expected: y"]),
            "cause": rng.choice([None, "clone x first", "likely cause: z"]),
        }
        exc = CheckFailure(parts["check"], parts["expected"], parts["found"], parts["cause"])
        got = report.parse_failure(f"CheckFailure: {exc}", "CheckFailure")
        assert got == {"kind": "check", **{k: v for k, v in parts.items() if v is not None}}
    stub_msg = f"NotImplementedYet: {NotImplementedYet('g(1)')}"
    assert report.parse_failure(stub_msg, "NotImplementedYet") == {
        "kind": "not-implemented",
        "check": "g(1)",
    }
    assert report.parse_failure("NotImplementedError", "NotImplementedError")["kind"] == (
        "not-implemented"
    )
    assert report.parse_failure("AssertionError: x\n  expected: 1", "AssertionError") is None
    assert report.parse_failure("CheckFailure: x\nsomething else", "CheckFailure") is None


def test_results_jsonl_has_the_rows_of_grades_csv(synthetic):
    out, _ = synthetic
    grades = read_csv(out / "grades.csv")
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [
        (d["student"], d["assignment"], d["notebook"], d["grade_id"], d["status"]) for d in lines
    ] == [
        (g["student"], g["assignment"], g["notebook"], g["grade_id"], g["status"]) for g in grades
    ]
    assert [d["score"] for d in lines] == [float(g["score"]) for g in grades]
    assert all(d["kind"] is None for d in lines if d["score"] >= d["max_score"])


def test_report_command(tmp_path, capsys):
    from autograder.cli import main

    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "no results.jsonl or grades.csv" in capsys.readouterr().err
    out = write_class(tmp_path / "out", synthetic_rows(20, seed=1))
    (out / "results.jsonl").unlink()  # a grading folder from before results.jsonl: figures alone
    assert main(["report", str(out), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "report.html").exists()
    assert_tests_csv_matches(tmp_path / "r" / "tests.csv", out / "grades.csv")
    assert re.search(r"From grades\.csv", (tmp_path / "r" / "report.html").read_text())


def test_a_rewrite_after_an_append_is_the_report_made_afresh(tmp_path):
    """write_report keeps what it read and built (serve rewrites the page after each graded
    submission): after attempts are appended, the page and CSVs are byte for byte those of a
    process that reads everything for the first time."""
    from autograder.grading.results import class_report

    rows = synthetic_rows(100, seed=6)
    out = tmp_path / "out"
    out.mkdir()
    report.write_jsonl(out / "results.jsonl", rows, attempt=1)
    write_report(out, tmp_path / "warm", attempts=None)
    again = [r for r in rows if r.student in ("s00001", "s00007")]
    for r in again:
        r.score = r.max_score
    report.write_jsonl(out / "results.jsonl", again, attempt=2, append=True)
    warm = write_report(out, tmp_path / "warm")
    for cache in (class_report._READ, class_report._BUILT, class_report._HTML):
        cache.clear()
    class_report._SVG_CACHE.clear()
    fresh = write_report(out, tmp_path / "fresh")
    for name in ("report.html", "tests.csv", "causes.csv"):
        assert (warm.parent / name).read_bytes() == (fresh.parent / name).read_bytes(), name
    tests = read_csv(fresh.parent / "tests.csv")
    assert sum(int(r["attempted"]) for r in tests) == len(rows)  # the last attempt of each


def test_a_stock_courses_rows_grouped_by_exception_and_normalised_message(tmp_path):
    """No check parts (a stock nbgrader course): exception type and first line of the message,
    numbers and addresses normalised; an empty message, and the release stub, said as such."""
    messages = {
        "a": "ValueError: bad value 3 at <Obj at 0x7f00aa>\nmore",
        "b": "ValueError: bad value 15 at <Obj at 0x8b11ff>",
        "c": "AssertionError",
        "d": "AssertionError: ",
        "e": "NameError: name 'fib' is not defined",
        "f": "NotImplementedError",
        "g": "",
    }
    rows = [Row(s, "ps1", "ps1", "test_fib", 0.0, 1.0, "ok") for s in messages]
    for r in rows:
        r.message = messages[r.student]
        r.error = r.message.split(":")[0]
    rows.append(Row("h", "ps1", "ps1", "test_fib", 1.0, 1.0, "ok"))
    page = write_report(write_class(tmp_path / "out", rows))
    got = {(r["kind"], r["cause"]): int(r["rows"]) for r in read_csv(page.parent / "causes.csv")}
    assert got == {
        ("exception", "ValueError: bad value # at <Obj at 0x…>"): 2,
        ("exception", "AssertionError (no message)"): 2,
        ("exception", "NameError: name 'fib' is not defined"): 1,
        ("not-implemented", "not implemented yet"): 1,
        ("exception", "no message"): 1,
    }


def test_attempts_without_a_number_are_not_attempts(tmp_path):
    """serve's attempts.csv holds refused submissions (no attempt number, sometimes no student):
    the class report reads the counted attempts and skips those, instead of failing whole."""
    from autograder.grading.results.class_report import read_attempts

    path = tmp_path / "attempts.csv"
    path.write_text(
        "id,student,assignment,state,attempt,counted,submitted,seen,started,finished,released,"
        "score,max_score,reason\n"
        "a,ann,hw,released,1,1,2026-11-29T06:27:12.460Z,,,,2026-11-29T06:27:13.000Z,1,1,\n"
        "m,mal,hw,refused,,0,2026-01-01T00:00:00.000Z,,,,,,,refused: a symbolic link\n"
        "x,,,refused,,0,,,,,,,,refused: a control character in the folder name\n"
        "b,ann,hw,released,2,1,2026-11-29T06:30:00Z,,,,,1,1,\n",
        encoding="utf-8",
    )
    got = read_attempts(path)
    assert [(a.student, a.attempt) for a in got] == [("ann", 1), ("ann", 2)]
    assert got[0].released is not None and got[1].released is None
    (tmp_path / "bad.csv").write_text(path.read_text().replace(",1,1,2026", ",one,1,2026", 1))
    with pytest.raises(ValueError, match="not an attempts row"):
        read_attempts(tmp_path / "bad.csv")


def test_the_summary_counts_notebooks_without_test_cells():
    """A notebook with no test cell has no row; it was graded all the same (nbgrader's
    test_handle_failure grades four such notebooks): the count is of notebooks, not of rows."""
    rows = [Row("ada", "a1", "nb1", "t1", 1.0, 2.0, "ok")]
    graded = [("ada", "a1", "nb1"), ("ada", "a1", "nb2"), ("bo", "a1", "nb1")]
    text = report.summary(rows, 10.0, "", startup=4.0, notebooks=graded)
    assert text.splitlines()[0] == "graded 3 notebooks (2 students) in 10.0 s"
    assert "2.00 s per notebook" in text
    assert report.summary([], 1.0, "").splitlines()[0].startswith("graded 0 notebooks")
