"""``autograder report``: the class at a glance, from a grading output folder.

    autograder report GRADING_OUT [--out DEST] [--with-students] [--attempts attempts.csv]

Reads ``GRADING_OUT/results.jsonl`` (what each test said: ``autograder grade`` writes it beside
``grades.csv``; an older folder with ``grades.csv`` alone gives the figures without causes) and
writes, in DEST (default ``GRADING_OUT/report``):

* ``report.html`` - one self-contained page (no request leaves it: a Content-Security-Policy of
  ``default-src 'none'``, styles inline, histograms drawn by matplotlib inlined as SVG; every
  text through Jinja2 with autoescape): per assignment and notebook, the submissions, a
  histogram of notebook scores, the tests sorted by pass rate with their rows by status, and
  under each failing test its causes ranked by count, each with one anonymised example;
* ``tests.csv`` - one line per test: the figures of the page (:data:`TEST_FIELDS`);
* ``causes.csv`` - one line per (test, cause group) (:data:`CAUSE_FIELDS`).

Causes: a failed check of this course carries the instructor's ``likely cause``; that text is the
group (numbers in it normalised). A function still the release stub (``raise
NotImplementedError()``) is one group, "not implemented yet". A row whose test could not count is
grouped by its status (timeout, memory-limit, ...). Any other failing row - a stock nbgrader
course's ``assert``, a check without a cause - is grouped by exception type and message, with
numbers, addresses and long tails normalised (:func:`normalise`).

Flags (:func:`flags`): a test almost nobody passes, and a test whose result does not go with the
rest of the notebook - a corrected item-total correlation (the item-discrimination index: the
test's score against the sum of the notebook's other tests) below :data:`DISCRIMINATION_FLAG`.

Student ids appear only with ``--with-students`` (the page can go to teaching assistants): the
students of each cause group then, on the page and in ``causes.csv``.

With ``autograder serve`` (``attempts``: its ``attempts.csv``, and results.jsonl rows carrying an
``attempt`` field) the figures are each notebook's last attempt, and the page adds, per test,
attempts to full marks and the pass rate at the first and at the last attempt.

For ``autograder serve``: after each graded submission, append its rows
(``report.write_jsonl(OUT / "results.jsonl", rows, attempt=n, append=True)``), its line of
``attempts.csv`` (student, assignment, attempt, submitted, seen, started, finished, released:
ISO 8601 or seconds since the epoch), then call :func:`write_report` in the same long-lived
process (once at start-up too: the imports and the first read are the slow part). It reads only
what was appended since its last call and builds and draws again only the notebooks whose rows
changed; each file is replaced whole (written aside, then renamed).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path

import jinja2

from autograder.grading.results.report import DIFFERENCES
from autograder.grading.status import Status

PAGE_NAME = "report.html"
ALMOST_NOBODY = 0.10  # pass rate under which a test is flagged: almost nobody passes
DISCRIMINATION_FLAG = 0.2  # corrected item-total correlation under which a test is flagged
MIN_FOR_FLAGS = 10  # notebooks a test needs before it is flagged at all
OPEN_FIRST = 2  # cause tables shown open under each notebook's hardest tests (and flagged ones)
CAUSES_SHOWN = 8  # cause groups shown under a test on the page (all of them in causes.csv)
STUDENTS_SHOWN = 30  # student ids shown per cause group with --with-students (all in causes.csv)
TEXT_SHOWN = 400  # characters of a student's text (an example) shown on the page
GRADED = ("ok", "in-kernel")

TEST_FIELDS = [
    "assignment",
    "notebook",
    "grade_id",
    "hidden",
    "max_score",
    "attempted",
    "passed",
    "partial",
    "failed",
    "pass_pct",
    "mean_score",
    "discrimination",
    "not_implemented",
    *(f"status_{s.value}" for s in Status),
    "flags",
]
CAUSE_FIELDS = [
    "assignment",
    "notebook",
    "grade_id",
    "rank",
    "kind",
    "cause",
    "rows",
    "share_of_failing_pct",
    "example_check",
    "example_expected",
    "example_found",
    "example_message",
]


# --------------------------------------------------------------------------- reading


class Result:
    """One row of ``results.jsonl`` (or of ``grades.csv`` alone)."""

    __slots__ = (
        "student",
        "assignment",
        "notebook",
        "grade_id",
        "score",
        "max_score",
        "status",
        "hidden",
        "error",
        "message",
        "kind",
        "check",
        "expected",
        "found",
        "cause",
        "attempt",
        "passed",
        "_group",
        "kernel_score",
        "judge_score",
        "judge_reason",
    )

    def __init__(
        self,
        student,
        assignment,
        notebook,
        grade_id,
        score,
        max_score,
        status,
        hidden=False,
        error="",
        message="",
        kind=None,
        check=None,
        expected=None,
        found=None,
        cause=None,
        attempt=None,
    ):
        self.student, self.assignment, self.notebook, self.grade_id = (
            student,
            assignment,
            notebook,
            grade_id,
        )
        self.score, self.max_score, self.status, self.hidden = score, max_score, status, hidden
        self.error, self.message, self.kind, self.check = error, message, kind, check
        self.expected, self.found, self.cause, self.attempt = expected, found, cause, attempt
        self.passed = score >= max_score
        self._group = None
        self.kernel_score = self.judge_score = None  # the two verdicts, where they differ
        self.judge_reason = ""

    @property
    def key(self) -> tuple:
        return (self.student, self.assignment, self.notebook)

    @property
    def group(self) -> tuple[str, str]:
        """``(kind, label)`` of its cause group (:func:`cause_of`), worked out once."""
        if self._group is None:
            self._group = cause_of(self)
        return self._group


def _text(value) -> str | None:
    return value if type(value) is str else None


def _number(value) -> float:
    if type(value) is not float and type(value) is not int:
        value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return float(value)


def _result(d) -> Result:
    attempt = d.get("attempt")
    r = _base_result(d, attempt)
    if r.status in DIFFERENCES:
        r.kernel_score = _number(d["kernel_score"])
        r.judge_score = _number(d["judge_score"])
        r.judge_reason = _text(d.get("judge_reason")) or ""
    return r


def _base_result(d, attempt) -> Result:
    return Result(
        str(d["student"]),
        str(d["assignment"]),
        str(d["notebook"]),
        str(d["grade_id"]),
        _number(d["score"]),
        _number(d["max_score"]),
        str(d["status"]),
        d.get("hidden") is True,
        _text(d.get("error")) or "",
        _text(d.get("message")) or "",
        _text(d.get("kind")),
        _text(d.get("check")),
        _text(d.get("expected")),
        _text(d.get("found")),
        _text(d.get("cause")),
        attempt if type(attempt) is int else None,
    )


def _parse_lines(data: bytes, path: Path, first_line: int) -> list[Result]:
    """Rows of a piece of results.jsonl: one JSON parse for all of its lines (a line that is not
    a results row is named)."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    try:
        docs = json.loads(b"[" + b",".join(lines) + b"]")
        return [_result(d) for d in docs]
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    out = []
    for n, line in enumerate(data.split(b"\n"), first_line):
        if not line.strip():
            continue
        try:
            out.append(_result(json.loads(line)))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path}:{n}: not a results row ({exc})") from None
    return out


# results.jsonl read before, by path: (file id, bytes read, fingerprint, rows). Under
# ``autograder serve`` the file only grows: only what was appended since is parsed again.
_READ: dict = {}


def _fingerprint(fh, size: int) -> bytes:
    fh.seek(0)
    head = fh.read(4096)
    fh.seek(max(size - 256, 0))
    return head + fh.read(min(size, 256))


def read_results(grading_out: Path) -> tuple[list[Result], str]:
    """The rows of ``results.jsonl`` (``grades.csv`` when there is none), and which file."""
    jsonl = Path(grading_out) / "results.jsonl"
    if jsonl.exists():
        with open(jsonl, "rb") as fh:
            st = os.fstat(fh.fileno())
            ident = (st.st_dev, st.st_ino)
            seen = _READ.get(str(jsonl))
            rows: list = []
            start = 0
            if seen is not None and seen[0] == ident and st.st_size >= seen[1]:
                if _fingerprint(fh, seen[1]) == seen[2]:
                    rows, start = seen[3], seen[1]
            fh.seek(start)
            data = fh.read()
            end = data.rfind(b"\n") + 1  # a line still being written is read next time
            if data[end:].strip():
                end = len(data) if data.endswith(b"}") and _complete(data[end:]) else end
            new = _parse_lines(data[:end], jsonl, 1) if end else []
            rows = rows + new if new else rows
            done = start + end
            _READ[str(jsonl)] = (ident, done, _fingerprint(fh, done), rows)
        return rows, jsonl.name
    grades = Path(grading_out) / "grades.csv"
    if not grades.exists():
        raise FileNotFoundError(f"no results.jsonl or grades.csv in {grading_out}")
    rows = []
    with open(grades, newline="", encoding="utf-8") as fh:
        for d in csv.DictReader(fh):
            r = Result(
                _unsafe(d["student"]),
                d["assignment"],
                d["notebook"],
                d["grade_id"],
                _number(d["score"]),
                _number(d["max_score"]),
                d["status"],
            )
            if r.status in DIFFERENCES and d.get("kernel_score") and d.get("judge_score"):
                r.kernel_score = _number(d["kernel_score"])
                r.judge_score = _number(d["judge_score"])
                r.judge_reason = d.get("judge_reason") or ""
            rows.append(r)
    return rows, grades.name


def _latest(rows) -> list:
    """Each test's row of the latest attempt (serve appends one per attempt)."""
    latest: dict = {}
    for r in rows:
        key = (r.student, r.assignment, r.notebook, r.grade_id)
        if key not in latest or (r.attempt or 0) >= (latest[key].attempt or 0):
            latest[key] = r
    return list(latest.values())


def _complete(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _unsafe(value: str) -> str:
    """grades.csv's student cell back to the id (report.safe_cell added an apostrophe)."""
    return (
        value[1:] if value[:1] == "'" and value[1:2] in ("=", "+", "-", "@", "\t", "\r") else value
    )


@dataclass
class Attempt:
    student: str
    assignment: str
    attempt: int
    submitted: datetime | None
    released: datetime | None


def read_attempts(path: Path) -> list[Attempt]:
    """``attempts.csv`` (``autograder serve``): student, assignment, attempt, submitted, seen,
    started, finished, released (ISO 8601 or seconds since the epoch; empty when not yet). A row
    without an attempt number is a submission that counts as none (refused at intake, or not
    counted): not an attempt, skipped (it once failed the whole report: a loaded run of
    test_serve, where the report came after the hostile intake's refusals)."""
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for d in csv.DictReader(fh):
            if not d.get("attempt"):
                continue
            try:
                out.append(
                    Attempt(
                        d["student"],
                        d["assignment"],
                        int(d["attempt"]),
                        _when(d.get("submitted")),
                        _when(d.get("released")),
                    )
                )
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{path}: not an attempts row ({exc}): {d}") from None
    return out


def _when(value) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromtimestamp(float(value))
    except ValueError:
        return datetime.fromisoformat(value)


# --------------------------------------------------------------------------- causes

_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?![\w])")
_SPACE = re.compile(r"\s+")
NORMALISED_CHARS = 200


@lru_cache(maxsize=1 << 16)
def normalise(text: str) -> str:
    """A message as a group's key: one line, addresses ``0x…``, numbers ``#`` (not in names:
    ``float32``, ``x2``, ``G.0.weight`` stay), whitespace collapsed, at most
    :data:`NORMALISED_CHARS` characters."""
    text = _ADDRESS.sub("0x…", text or "")
    text = _NUMBER.sub("#", text)
    text = _SPACE.sub(" ", text).strip()
    if len(text) > NORMALISED_CHARS:
        text = text[: NORMALISED_CHARS - 1] + "…"
    return text


def _first_line(text: str) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line
    return ""


# group kinds: the instructor's cause, the release stub, a status, partial credit, an exception
NAMED, STUB, STATUS, PARTIAL, EXCEPTION = (
    "cause",
    "not-implemented",
    "status",
    "partial",
    "exception",
)
KIND_LABELS = {
    NAMED: "likely cause",
    STUB: "not implemented",
    STATUS: "status",
    PARTIAL: "partial credit",
    EXCEPTION: "exception",
}


def cause_of(r: Result) -> tuple[str, str]:
    """``(kind, group)`` of a failing row: which cause group it is counted in."""
    if r.status not in GRADED:
        return STATUS, r.status
    if r.kind == STUB:
        return STUB, "not implemented yet"
    if r.cause:
        return NAMED, normalise(r.cause)
    if r.kind == "check" and r.check:
        return EXCEPTION, f"{r.error or 'CheckFailure'}: {normalise(r.check)}"
    if r.score > 0:
        return PARTIAL, "partial credit"
    message = r.message
    if r.error and message.startswith(r.error):
        message = message[len(r.error) :].lstrip(":").lstrip()
    if not r.error and not message:
        return EXCEPTION, "no message"
    if r.error == "NotImplementedError" and not message.strip():
        return STUB, "not implemented yet"
    line = normalise(_first_line(message))
    if not line:
        return EXCEPTION, f"{r.error} (no message)"
    return EXCEPTION, f"{r.error}: {line}" if r.error else line


# --------------------------------------------------------------------------- figures


@dataclass
class Group:
    kind: str
    label: str
    rows: list = field(default_factory=list)
    texts: Counter = field(default_factory=Counter)  # the cause's own texts (before normalising)

    def example(self) -> Result:
        return min(self.rows, key=lambda r: (r.student, r.notebook, r.attempt or 0))

    @property
    def shown(self) -> str:
        """A named cause as the instructor wrote it when every row has the same text."""
        if self.kind == NAMED and len(self.texts) == 1:
            return next(iter(self.texts))
        return self.label


@dataclass
class TestStats:
    assignment: str
    notebook: str
    grade_id: str
    hidden: bool
    max_score: float
    rows: list
    statuses: Counter
    passed: int
    partial: int
    mean_score: float
    not_implemented: int
    discrimination: float | None = None
    groups: list = field(default_factory=list)
    flags: list = field(default_factory=list)
    first_pct: float | None = None
    last_pct: float | None = None
    reached: int = 0
    to_full: list = field(default_factory=list)  # attempts to full marks, per student who got there
    tried: int = 0  # students with at least one attempt on it

    @property
    def attempted(self) -> int:
        return len(self.rows)

    @property
    def failed(self) -> int:
        return self.attempted - self.passed

    @property
    def pass_pct(self) -> float:
        return 100.0 * self.passed / self.attempted if self.attempted else 0.0


def _corr(xs, ys) -> float | None:
    n = len(xs)
    if n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    return sxy / math.sqrt(sxx * syy)


def discrimination(test_scores: dict, totals: dict) -> float | None:
    """The corrected item-total correlation: Pearson's r between the test's score and the sum of
    the notebook's other tests, over notebooks (None when either does not vary)."""
    keys = sorted(test_scores)
    xs = [test_scores[k] for k in keys]
    ys = [totals[k] - test_scores[k] for k in keys]
    return _corr(xs, ys)


def _r(x: float) -> str:
    text = f"{x:.2f}"
    return "0.00" if text == "-0.00" else text


def flags(t: TestStats) -> list[str]:
    out = []
    if t.attempted >= MIN_FOR_FLAGS and t.passed < ALMOST_NOBODY * t.attempted:
        text = f"almost nobody passes ({t.passed} of {t.attempted}"
        if t.not_implemented:
            text += f"; {t.not_implemented} not implemented yet"
        out.append(text + ")")
    if (
        t.attempted >= MIN_FOR_FLAGS
        and t.discrimination is not None
        and t.discrimination < DISCRIMINATION_FLAG
    ):
        out.append(
            f"does not go with the rest of the notebook (discrimination {_r(t.discrimination)} "
            f"< {DISCRIMINATION_FLAG}): a broken or unclear test?"
        )
    return out


@dataclass
class Section:
    """One assignment's notebook: its submissions, histogram and tests."""

    assignment: str
    notebook: str
    totals: dict  # (student) -> notebook score
    maximum: float
    tests: list
    svg: str = ""
    attempts: dict | None = None  # per-notebook attempt figures (serve)

    @property
    def title(self) -> str:
        return (
            self.assignment
            if self.notebook == self.assignment
            else f"{self.assignment} / {self.notebook}"
        )

    @property
    def submissions(self) -> int:
        return len(self.totals)

    @property
    def mean(self) -> float:
        return sum(self.totals.values()) / len(self.totals) if self.totals else 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.totals.values()) if self.totals else 0.0

    @property
    def full_marks(self) -> int:
        return sum(1 for v in self.totals.values() if v >= self.maximum)


def latest(rows: list[Result]) -> list[Result]:
    """Each notebook's rows of its highest attempt (rows without ``attempt``: as they are)."""
    if not any(r.attempt is not None for r in rows):
        return rows
    last: dict = {}
    for r in rows:
        if r.attempt is not None and r.attempt > last.get(r.key, -1):
            last[r.key] = r.attempt
    return [r for r in rows if r.attempt is None or r.attempt == last.get(r.key)]


# sections built before, by (assignment, notebook): (its rows' identities, Section). Under
# ``autograder serve`` a graded submission changes one notebook's rows: only it is built again.
_BUILT: dict = {}


def build(rows: list[Result], attempts: list[Attempt] | None = None) -> list[Section]:
    """Every figure of the report, per (assignment, notebook)."""
    all_rows = rows
    rows = latest(rows)
    by_nb: dict = defaultdict(list)
    for r in rows:
        by_nb[(r.assignment, r.notebook)].append(r)
    sections = []
    for key, nb_rows in sorted(by_nb.items()):
        signature = (len(nb_rows), hash(tuple(map(id, nb_rows))))
        hit = _BUILT.get(key)
        if hit is None or hit[0] != signature:
            hit = _BUILT[key] = (signature, _section(key[0], key[1], nb_rows))
        sections.append(hit[1])
    if any(r.attempt is not None for r in all_rows):
        _attempt_figures(sections, all_rows, attempts or [])
    return sections


def _section(assignment: str, notebook: str, nb_rows: list) -> Section:
    totals: dict = defaultdict(float)
    per_test: dict = defaultdict(list)
    for r in nb_rows:
        totals[r.student] += r.score
        per_test[r.grade_id].append(r)
    maxima = {gid: max(r.max_score for r in rs) for gid, rs in per_test.items()}
    tests = []
    for gid, trs in per_test.items():
        passed = sum(1 for r in trs if r.passed)
        partial = sum(1 for r in trs if 0 < r.score < r.max_score)
        t = TestStats(
            assignment,
            notebook,
            gid,
            any(r.hidden for r in trs),
            maxima[gid],
            trs,
            Counter(r.status for r in trs),
            passed,
            partial,
            sum(r.score for r in trs) / len(trs),
            sum(1 for r in trs if not r.passed and r.group[0] == STUB),
        )
        t.discrimination = discrimination({r.student: r.score for r in trs}, totals)
        t.groups = _groups(trs)
        t.flags = flags(t)
        tests.append(t)
    tests.sort(key=lambda t: (t.pass_pct, t.grade_id))
    return Section(assignment, notebook, dict(totals), sum(maxima.values()), tests)


def _groups(trs) -> list[Group]:
    groups: dict = {}
    for r in trs:
        if r.passed:
            continue
        kind, label = r.group
        g = groups.get((kind, label))
        if g is None:
            g = groups[(kind, label)] = Group(kind, label)
        g.rows.append(r)
        if kind == NAMED and r.cause:
            g.texts[r.cause] += 1
    return sorted(groups.values(), key=lambda g: (-len(g.rows), g.kind, g.label))


def _attempt_figures(sections, all_rows, attempts):
    """Per test: attempts to full marks, pass rate at the first and at the last attempt; per
    notebook: attempts per student and the time from submission to released feedback."""
    history: dict = defaultdict(
        list
    )  # (assignment, notebook, grade_id, student) -> [(attempt, passed)]
    for r in all_rows:
        if r.attempt is not None:
            history[(r.assignment, r.notebook, r.grade_id, r.student)].append((r.attempt, r.passed))
    waits: dict = defaultdict(list)
    per_student: dict = defaultdict(dict)
    for a in attempts:
        per_student[a.assignment][a.student] = max(
            per_student[a.assignment].get(a.student, 0), a.attempt
        )
        if a.submitted and a.released:
            waits[a.assignment].append((a.released - a.submitted).total_seconds())
    for s in sections:
        for t in s.tests:
            firsts, lasts = [], []
            t.to_full = []
            for student in sorted({r.student for r in t.rows}):
                h = sorted(history.get((s.assignment, s.notebook, t.grade_id, student), []))
                if not h:
                    continue
                firsts.append(h[0][1])
                lasts.append(h[-1][1])
                full = next((n for n, ok in h if ok), None)  # the attempt that first passed
                if full is not None:
                    t.to_full.append(full)
            t.tried = len(firsts)
            t.reached = len(t.to_full)
            t.first_pct = 100.0 * sum(firsts) / len(firsts) if firsts else None
            t.last_pct = 100.0 * sum(lasts) / len(lasts) if firsts else None
        counts = list(per_student.get(s.assignment, {}).values())
        w = sorted(waits.get(s.assignment, []))
        s.attempts = {
            "students": len(counts),
            "attempts": sum(counts),
            "median_attempts": statistics.median(counts) if counts else None,
            "max_attempts": max(counts) if counts else None,
            "median_wait": statistics.median(w) if w else None,
            "p95_wait": w[min(len(w) - 1, int(math.ceil(0.95 * len(w))) - 1)] if w else None,
        }


# --------------------------------------------------------------------------- figures as SVG

_SVG_CACHE: dict = {}


def histogram_svg(totals: list[float], maximum: float, salt: str) -> str:
    """A histogram of notebook scores, drawn by matplotlib, as an inline ``<svg>`` element
    (memoised on its data: ``autograder serve`` redraws only what changed)."""
    counts = Counter(totals)
    key = (tuple(sorted(counts.items())), maximum, salt)
    if key in _SVG_CACHE:
        return _SVG_CACHE[key]
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    with matplotlib.rc_context(
        {"svg.fonttype": "none", "svg.hashsalt": salt, "font.size": 9, "axes.titlesize": 9}
    ):
        fig = Figure(figsize=(5.2, 1.9))
        ax = fig.add_subplot()
        top = max(maximum, max(totals, default=0.0))
        bins = _bins(top)
        ax.hist(totals, bins=bins, color="#4c72b0", edgecolor="white")
        ax.set_xlim(bins[0], bins[-1])
        ax.set_xlabel("notebook score (points)")
        ax.set_ylabel("notebooks")
        ax.spines[["top", "right"]].set_visible(False)
        fig.subplots_adjust(
            left=0.1, right=0.98, bottom=0.24, top=0.95
        )  # (tight_layout: 3x slower)
        buf = io.StringIO()
        fig.savefig(
            buf, format="svg", metadata=dict.fromkeys(("Date", "Creator", "Format", "Type"))
        )
    text = buf.getvalue()
    svg = text[text.index("<svg") :]
    _SVG_CACHE[key] = svg
    return svg


def _bins(top: float) -> list[float]:
    """Bin edges of width 1 point up to 30 points, else 20 equal bins; the top score in the last."""
    if top <= 0:
        return [-0.5, 0.5]
    if top <= 30 and float(top).is_integer():
        return [i - 0.5 for i in range(int(top) + 2)]
    width = top / 20
    return [i * width for i in range(21)]


# --------------------------------------------------------------------------- the page

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 2px solid #ddd; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; }
th, td { border-bottom: 1px solid #e3e3e3; padding: .25rem .45rem; text-align: left; vertical-align: top; }
th { background: #f6f6f6; position: sticky; top: 0; } td.n { text-align: right; white-space: nowrap; }
code, pre { overflow-wrap: anywhere; word-break: break-word; }
pre { white-space: pre-wrap; margin: .1rem 0; font-size: .85em; background: #f7f7f9; padding: .2rem .4rem; }
.flag { color: #b42318; font-weight: 600; } .muted { color: #666; font-size: .9em; }
.bar { display: inline-block; height: .7em; background: #4c72b0; vertical-align: middle; }
.barbg { display: inline-block; width: 5rem; background: #e8e8ee; }
details { margin: .3rem 0 .6rem 1rem; } summary { cursor: pointer; }
.kind { font-size: .75em; padding: 0 .3rem; border-radius: .2rem; background: #eee; white-space: nowrap; }
.kind-cause { background: #dcecff; } .kind-not-implemented { background: #f1f1f1; }
.kind-status { background: #ffe4cc; } .kind-exception { background: #fde2e1; }
.summary { margin: .3rem 0; }
svg { max-width: 100%; height: auto; }
td.test { min-width: 19rem; } td.test code { overflow-wrap: normal; word-break: normal; }
"""

PAGE = """\
<!DOCTYPE html>
<html lang='en'><head><meta charset='utf-8'>
<meta http-equiv='Content-Security-Policy' content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name='referrer' content='no-referrer'>
<title>{{ title }}</title><style>{{ style | safe }}</style></head><body>
<h1>{{ title }}</h1>
<p class='muted'>From {{ source }}: {{ n_rows }} test results of {{ n_notebooks }} notebooks\
{% if with_students %}; <strong>with student ids</strong>{% else %}; no student ids (autograder report --with-students adds them){% endif %}.
Causes are the checks' own "likely cause" where a check gave one; otherwise the exception and its message, numbers normalised.</p>
{% if differences %}<h3>Differences between the two verdicts: {{ differences | length }} open</h3>
<p>One kernel (stock nbgrader's verdict) and the judge gave these test results different scores; the score counted
is the course's <code>AutograderGrade.counts</code>. <code>autograder settle</code> closes them.</p>
<table><thead><tr><th>notebook / test</th><th>status</th><th>one kernel</th><th>judge</th><th>counted</th><th>the judge's reason</th>\
{% if with_students %}<th>student</th>{% endif %}</tr></thead><tbody>
{% for d in differences %}<tr><td><code>{{ d.where }}</code></td><td>{{ d.status }}</td><td>{{ d.kernel | num }}</td>\
<td>{{ d.judge | num }}</td><td>{{ d.score | num }} / {{ d.max | num }}</td><td>{{ d.reason }}</td>\
{% if with_students %}<td>{{ d.student }}</td>{% endif %}</tr>
{% endfor %}</tbody></table>{% endif %}
{% if late %}<h3>Late submissions: {{ late | length }} notebook(s)</h3>
<p>Submitted after the assignment's due date (<code>timestamp.txt</code>, as nbgrader reads it); the penalty is the one the
course's <code>LateSubmissionPlugin</code> set in the gradebook, whose scores are after it (the figures below are before it).</p>
<table><thead><tr><th>notebook</th><th class='n'>late by</th><th class='n'>penalty</th>\
{% if with_students %}<th>student</th>{% endif %}</tr></thead><tbody>
{% for d in late %}<tr><td><code>{{ d.where }}</code></td><td class='n'>{{ d.seconds | secs }}</td><td class='n'>{{ d.penalty | num }}</td>\
{% if with_students %}<td>{{ d.student }}</td>{% endif %}</tr>
{% endfor %}</tbody></table>{% endif %}
{% if all_flags %}<h3>Flags</h3><ul>
{% for s, t, f in all_flags %}<li><a href='#{{ t.anchor }}'><code>{{ s.title }} / {{ t.grade_id }}</code></a>: <span class='flag'>{{ f }}</span></li>
{% endfor %}</ul>{% endif %}
{% for html in sections %}{{ html | safe }}{% endfor %}
<p class='muted'>Discrimination: Pearson's r between a test's score and the rest of the notebook's score, over notebooks;
under {{ flag_r }} (with at least {{ min_n }} notebooks) the test's result does not go with the rest of the notebook.
Statuses: {% for k, v in meanings %}<code>{{ k }}</code> {{ v }}{% if not loop.last %}; {% endif %}{% endfor %}.</p>
</body></html>"""


SECTION = """\
<h2 id='{{ s.anchor }}'>{{ s.title }}</h2>
<p class='summary'><strong>{{ s.submissions }}</strong> submissions; mean <strong>{{ s.mean | num }}</strong> / {{ s.maximum | num }}, median {{ s.median | num }}, full marks {{ s.full_marks }}{% if s.attempts %}<br>under serve: {{ s.attempts.students }} students, {{ s.attempts.attempts }} attempts (median {{ s.attempts.median_attempts | num }}, most {{ s.attempts.max_attempts | num }} per student){% if s.attempts.median_wait is not none %}; feedback released after median {{ s.attempts.median_wait | secs }}, p95 {{ s.attempts.p95_wait | secs }}{% endif %}{% endif %}</p>
{{ s.svg | safe }}
<table><thead><tr><th>test</th><th class='n'>attempted</th><th class='n'>passed</th><th>pass %</th><th class='n'>mean points</th>\
<th class='n'>discrimination</th><th>rows by status</th>{% if s.attempts %}<th class='n'>first / last attempt pass %</th><th class='n'>attempts to full marks (median)</th>{% endif %}</tr></thead><tbody>
{% for t in s.tests %}<tr id='{{ t.anchor }}'><td class='test'><code>{{ t.grade_id }}</code>{% if t.hidden %} <span class='muted'>hidden</span>{% endif %}\
{% for f in t.flags %}<br><span class='flag'>{{ f }}</span>{% endfor %}</td>\
<td class='n'>{{ t.attempted }}</td><td class='n'>{{ t.passed }}</td>\
<td class='n'><span class='barbg'><span class='bar' style='width: {{ t.pass_pct | round(1) }}%'></span></span> {{ t.pass_pct | pct }}</td>\
<td class='n'>{{ t.mean_score | num }} / {{ t.max_score | num }}</td><td class='n'>{{ t.discrimination | r }}</td>\
<td>{% for st, n in t.statuses_sorted %}{{ st }} {{ n }}{% if not loop.last %}, {% endif %}{% endfor %}\
{% if t.not_implemented %}<br><span class='muted'>not implemented yet: {{ t.not_implemented }}</span>{% endif %}</td>\
{% if s.attempts %}<td class='n'>{% if t.first_pct is not none %}{{ t.first_pct | pct }} / {{ t.last_pct | pct }}{% else %}-{% endif %}</td>\
<td class='n'>{% if t.to_full %}{{ t.median_to_full | num }} ({{ t.reached }} of {{ t.tried }}){% else %}-{% endif %}</td>{% endif %}</tr>
{% if t.groups %}<tr><td colspan='{{ 9 if s.attempts else 7 }}'><details{% if t.open %} open{% endif %}><summary>{{ t.failed }} failing: {{ t.groups | length }} cause group{{ 's' if t.groups | length != 1 }}</summary>
<table><thead><tr><th class='n'>rows</th><th>cause</th><th>example (anonymised)</th></tr></thead><tbody>
{% for g in t.groups_shown %}<tr><td class='n'>{{ g.n }}</td><td><span class='kind kind-{{ g.kind }}'>{{ g.kind_label }}</span> {{ g.text }}\
{% if g.students %}<br><span class='muted'>students: {{ g.students }}</span>{% endif %}</td><td>\
{% if g.check %}<pre>{{ g.check }}</pre>{% endif %}{% if g.expected is not none %}<pre>expected: {{ g.expected }}</pre>{% endif %}\
{% if g.found is not none %}<pre>found:    {{ g.found }}</pre>{% endif %}{% if g.message %}<pre>{{ g.message }}</pre>{% endif %}</td></tr>
{% endfor %}{% if t.groups_hidden %}<tr><td colspan='3' class='muted'>{{ t.groups_hidden }} more group(s) of {{ t.rows_hidden }} row(s): causes.csv</td></tr>{% endif %}
</tbody></table></details></td></tr>{% endif %}
{% endfor %}</tbody></table>
"""


def _num(x) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}".rstrip("0").rstrip(".") if isinstance(x, float) else str(x)


_env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
_env.filters["num"] = _num
_env.filters["pct"] = lambda x: f"{x:.0f}%"
_env.filters["r"] = lambda x: "-" if x is None else _r(x)
_env.filters["secs"] = lambda x: f"{x:.1f} s" if x < 120 else f"{x / 60:.1f} min"
_page = _env.from_string(PAGE)
_section_t = _env.from_string(SECTION)


def _clip(text: str | None) -> str | None:
    if text is None:
        return None
    if len(text) > TEXT_SHOWN:
        return text[:TEXT_SHOWN] + f"… [{len(text) - TEXT_SHOWN} more characters]"
    return text


def _group_view(g: Group, failing: int, with_students: bool) -> dict:
    ex = g.example()
    check = expected = found = message = None
    if g.kind == STATUS:
        message = _first_line(ex.message) or (
            Status(g.label).meaning if g.label in {st.value for st in Status} else ""
        )
    elif g.kind == STUB:
        check = ex.check if ex.check and ex.check != "not implemented yet" else None
        message = "the function still raises NotImplementedError() (the release stub)"
    elif ex.check is not None:
        check, expected, found = ex.check, ex.expected, ex.found
    else:
        message = _first_line(ex.message)
    students = ""
    if with_students:
        ids = sorted({r.student for r in g.rows})
        students = ", ".join(ids[:STUDENTS_SHOWN]) + (
            f" and {len(ids) - STUDENTS_SHOWN} more (causes.csv)"
            if len(ids) > STUDENTS_SHOWN
            else ""
        )
    return {
        "n": len(g.rows),
        "kind": g.kind,
        "kind_label": KIND_LABELS[g.kind],
        "text": _clip(g.shown),
        "share": 100.0 * len(g.rows) / failing if failing else 0.0,
        "check": _clip(check),
        "expected": _clip(expected),
        "found": _clip(found),
        "message": _clip(message),
        "students": students,
    }


def _anchor(*parts) -> str:
    return "t-" + re.sub(r"[^A-Za-z0-9_-]+", "-", "--".join(parts))[:120]


# each section's HTML and flags by (section, place, --with-students, attempt figures): under
# ``autograder serve`` only the notebook a submission changed is rendered again
_HTML: dict = {}


def differences(rows) -> list[dict]:
    """The rows whose two verdicts differ (:mod:`..verdicts`), for the top of the page."""
    return [
        {
            "where": f"{r.assignment}/{r.notebook} / {r.grade_id}",
            "status": r.status,
            "kernel": r.kernel_score,
            "judge": r.judge_score,
            "score": r.score,
            "max": r.max_score,
            "reason": r.judge_reason[:200],
            "student": r.student,
        }
        for r in sorted(rows, key=lambda r: (r.assignment, r.notebook, r.grade_id, r.student))
        if r.status in DIFFERENCES and r.kernel_score is not None and r.judge_score is not None
    ]


def read_late(grading_out: Path) -> list[dict]:
    """``late.csv`` of ``autograder grade`` (none: no late notebook, or an older folder): each
    late notebook, how late and its penalty, for the page (values checked: it is a file)."""
    path = Path(grading_out) / "late.csv"
    out: list = []
    if not path.is_file():
        return out
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        for row in csv.DictReader(fh):
            try:
                seconds = float(row.get("seconds_late") or 0)
                penalty = float(row["late_penalty"]) if row.get("late_penalty") else 0.0
            except (TypeError, ValueError):
                continue
            out.append(
                {
                    "where": f"{row.get('assignment', '')}/{row.get('notebook', '')}",
                    "seconds": seconds,
                    "penalty": penalty,
                    "student": row.get("student", ""),
                }
            )
    return out


def render(
    sections: list[Section],
    *,
    source: str,
    with_students: bool,
    title: str,
    diffs: list | None = None,
    late: list | None = None,
) -> str:
    parts: list = []
    all_flags: list = []
    keep: set = set()
    for i, s in enumerate(sections):
        figures = None
        if s.attempts is not None:
            figures = (
                tuple(sorted(s.attempts.items())),
                tuple((t.first_pct, t.last_pct, tuple(t.to_full), t.tried) for t in s.tests),
            )
        key = (id(s), i, with_students, figures)
        hit = _HTML.get(key)
        if hit is None or hit[0] is not s:
            hit = _HTML[key] = (s, *_render_section(i, s, with_students))
        keep.add(key)
        parts.append(hit[1])
        all_flags.extend(hit[2])
    for key in set(_HTML) - keep:
        del _HTML[key]
    return _page.render(
        title=title,
        style=STYLE,
        source=source,
        n_rows=sum(t.attempted for s in sections for t in s.tests),
        n_notebooks=sum(s.submissions for s in sections),
        with_students=with_students,
        sections=parts,
        all_flags=all_flags,
        differences=diffs or [],
        late=late or [],
        flag_r=DISCRIMINATION_FLAG,
        min_n=MIN_FOR_FLAGS,
        meanings=[(s.value, s.meaning) for s in Status],
    )


def _render_section(i: int, s: Section, with_students: bool) -> tuple[str, list]:
    s.svg = histogram_svg(list(s.totals.values()), s.maximum, salt=f"h{i}")
    tests, flagged = [], []
    for rank, t in enumerate(s.tests):
        shown = t.groups[:CAUSES_SHOWN]
        tv = {
            **{k: getattr(t, k) for k in ("grade_id", "hidden", "flags", "attempted", "passed")},
            "pass_pct": t.pass_pct,
            "mean_score": t.mean_score,
            "max_score": t.max_score,
            "discrimination": t.discrimination,
            "not_implemented": t.not_implemented,
            "statuses_sorted": sorted(t.statuses.items(), key=lambda kv: (-kv[1], kv[0])),
            "failed": t.failed,
            "groups": t.groups,
            "groups_shown": [_group_view(g, t.failed, with_students) for g in shown],
            "groups_hidden": len(t.groups) - len(shown),
            "rows_hidden": sum(len(g.rows) for g in t.groups[CAUSES_SHOWN:]),
            "first_pct": t.first_pct,
            "last_pct": t.last_pct,
            "to_full": t.to_full,
            "median_to_full": float(statistics.median(t.to_full)) if t.to_full else None,
            "reached": t.reached,
            "tried": t.tried,
            "anchor": _anchor(s.assignment, s.notebook, t.grade_id),
            # open: the section's OPEN_FIRST hardest tests, flagged ones, a quarter failing
            "open": rank < OPEN_FIRST or bool(t.flags) or 4 * t.failed >= t.attempted,
        }
        tests.append(tv)
        if t.flags:
            flagged.append(({"title": s.title}, tv, "; ".join(t.flags)))
    view = {
        "title": s.title,
        "anchor": _anchor(s.assignment, s.notebook),
        "submissions": s.submissions,
        "mean": s.mean,
        "median": s.median,
        "maximum": s.maximum,
        "full_marks": s.full_marks,
        "attempts": s.attempts,
        "svg": s.svg,
        "tests": tests,
    }
    return _section_t.render(s=view), flagged


# --------------------------------------------------------------------------- CSVs


def _cell(value) -> str:
    from autograder.grading.results.report import safe_cell

    if value is None:
        return ""
    if isinstance(value, float):
        return format(value, ".6g")
    return safe_cell(str(value))


def tests_rows(sections: list[Section]) -> list[dict]:
    out = []
    for s in sections:
        for t in s.tests:
            d = {
                "assignment": s.assignment,
                "notebook": s.notebook,
                "grade_id": t.grade_id,
                "hidden": int(t.hidden),
                "max_score": t.max_score,
                "attempted": t.attempted,
                "passed": t.passed,
                "partial": t.partial,
                "failed": t.failed,
                "pass_pct": round(t.pass_pct, 4),
                "mean_score": round(t.mean_score, 6),
                "discrimination": None if t.discrimination is None else round(t.discrimination, 6),
                "not_implemented": t.not_implemented,
                "flags": "; ".join(t.flags),
            }
            for st in Status:
                d[f"status_{st.value}"] = t.statuses.get(st.value, 0)
            out.append(d)
    return out


def causes_rows(sections: list[Section], with_students: bool) -> list[dict]:
    out = []
    for s in sections:
        for t in s.tests:
            for rank, g in enumerate(t.groups, 1):
                ex = g.example()
                d = {
                    "assignment": s.assignment,
                    "notebook": s.notebook,
                    "grade_id": t.grade_id,
                    "rank": rank,
                    "kind": g.kind,
                    "cause": g.shown,
                    "rows": len(g.rows),
                    "share_of_failing_pct": round(100.0 * len(g.rows) / t.failed, 4),
                    "example_check": ex.check,
                    "example_expected": ex.expected,
                    "example_found": ex.found,
                    "example_message": _first_line(ex.message),
                }
                if with_students:
                    d["students"] = " ".join(sorted({r.student for r in g.rows}))
                out.append(d)
    return out


def _write_csv(path: Path, fields: list[str], rows: list[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8", errors="backslashreplace") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for d in rows:
            w.writerow({k: _cell(v) for k, v in d.items()})
    tmp.replace(path)


# --------------------------------------------------------------------------- entry points


def write_report(
    grading_out: Path,
    dest: Path | None = None,
    *,
    with_students: bool = False,
    attempts: Path | None = None,
) -> Path:
    """(Re)write ``report.html``, ``tests.csv`` and ``causes.csv`` from a grading output folder
    (``dest``: default ``grading_out/report``); returns the page's path. Each file is written
    whole, then renamed into place: a reader never sees half a page."""
    grading_out = Path(grading_out)
    dest = Path(dest) if dest is not None else grading_out / "report"
    rows, source = read_results(grading_out)
    sections = build(rows, read_attempts(Path(attempts)) if attempts else None)
    dest.mkdir(parents=True, exist_ok=True)
    page = render(
        sections,
        source=source,
        with_students=with_students,
        title="Class report",
        diffs=differences(_latest(rows)),
        late=read_late(grading_out),
    )
    _write_csv(dest / "tests.csv", TEST_FIELDS, tests_rows(sections))
    _write_csv(
        dest / "causes.csv",
        CAUSE_FIELDS + (["students"] if with_students else []),
        causes_rows(sections, with_students),
    )
    path = dest / PAGE_NAME
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8", errors="backslashreplace")
    tmp.replace(path)
    return path


def add_parser(subparsers):
    p = subparsers.add_parser(
        "report",
        help="the class at a glance: which tests fail and why (HTML page, tests.csv, causes.csv)",
        description=__doc__.split("\n\n")[0].strip().replace("``", ""),
    )
    p.add_argument("grading_out", type=Path, help="the --out folder of autograder grade")
    p.add_argument(
        "--out", type=Path, default=None, help="folder to write to (default GRADING_OUT/report)"
    )
    p.add_argument(
        "--with-students",
        action="store_true",
        help="name the students of each cause group (leave it out for a page that goes to TAs)",
    )
    p.add_argument(
        "--attempts",
        type=Path,
        default=None,
        help="attempts.csv of autograder serve: attempt figures",
    )
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    try:
        page = write_report(
            args.grading_out, args.out, with_students=args.with_students, attempts=args.attempts
        )
    except (FileNotFoundError, ValueError) as exc:
        print(f"autograder report: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {page} (and tests.csv, causes.csv beside it)")
    return 0
