"""How long the course takes: each page's reading time, measured the same way for every page.

Rule (the course's, stated on the start page), over a lesson's *core* - every cell except those in
a section marked optional:

* prose at 110 words a minute: the markdown, and the text outputs under the code (printed text, a
  result's text, the error line of a cell that raises);
* code at 6 non-comment, non-blank lines a minute (read it, run it, look at what it did);
* a minute and a half for every "predict, then run" prompt: the reader stops, predicts, checks;
* a minute for every figure.

The code of a cell tagged ``figure`` (what draws a diagram) and of an exercise's test cells is run,
not studied: its lines are not counted (the figure, and the test's messages, are).

Where the rates come from: they are the independent review's (2026-11-28, N15), which found the
earlier ones (150 words, 10 lines, half a minute per prompt, figures free) too fast for this
material. Reading research puts reading to learn at about 200 words a minute and reading to
remember at about 140 (Carver's "learning" and "memorizing" gears, *Reading Rate*, 1990); prose
dense with code names and numbers, read to be used at once, is slower than either, hence 110. They
are a stated method, not a measurement of learners: a timed first pass with real learners would
replace them.

A section is optional when its markdown heading contains "(optional)" (any case); it runs until
the next heading of the same or a higher level. The summary in the second language (under its
own heading containing "中文") is not counted: a reader reads one of the two summaries. Words
are whitespace-separated runs. A lesson's core must fit ``CORE_LIMIT_MINUTES``.

An exercise's time is its reading time by the same rule (its whole notebook) plus the time to
write and check the answers, ``WORK_MINUTES``: the authors' estimate per exercise, not measured
(the review asks for one timed learner). :func:`plan` adds the start page, the checking page, the
four cores and the five exercises: the total the start page states.

    python -m autograder.lessons            # every page: words, code lines, figures, minutes
    python -m autograder.lessons --sections NOTEBOOK...   # minutes per section
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

WORDS_PER_MINUTE = 110
CODE_LINES_PER_MINUTE = 6
PREDICT_MINUTES = 1.5
FIGURE_MINUTES = 1.0
# issue 38: each lesson's core at most 60 minutes at these rates (tests/test_start_page.py)
CORE_LIMIT_MINUTES = 60
# writing and checking each exercise's answers: the authors' estimate (minutes), not measured
WORK_MINUTES = {
    "01_relu_inplace": 60,
    "02_custom_backward": 75,
    "03_index_assignment": 60,
    "04_training_loops": 60,
    "05_diagnosis": 60,
}
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
SKIPPED = re.compile(r"\(optional\)|中文", re.I)
PREDICT = re.compile(r"\bpredict\b", re.I)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
REPO = Path(__file__).resolve().parents[1]


@dataclass
class Count:
    words: int = 0  # markdown
    output_words: int = 0  # text outputs
    code_lines: int = 0
    prompts: int = 0  # "predict, then run"
    figures: int = 0  # image outputs

    @property
    def minutes(self) -> float:
        return (
            (self.words + self.output_words) / WORDS_PER_MINUTE
            + self.code_lines / CODE_LINES_PER_MINUTE
            + self.prompts * PREDICT_MINUTES
            + self.figures * FIGURE_MINUTES
        )


@dataclass
class LessonTime:
    path: Path
    core: Count
    optional: Count

    @property
    def minutes(self) -> float:
        return self.core.minutes

    @property
    def rounded(self) -> int:
        """Whole minutes, rounded up (what the start page states)."""
        return math.ceil(self.minutes - 1e-9)

    @property
    def optional_minutes(self) -> float:
        return self.optional.minutes


def _code_lines(source: str) -> int:
    return sum(
        1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#")
    )


def _words(source: str) -> int:
    return len(source.split())


def output_text(cell) -> str:
    """The text a reader reads under a code cell: streams, a result's or a display's text
    (not when it is a figure), and the last line of an error's traceback (its message)."""
    texts = []
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            texts.append(out.get("text", ""))
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if not any(k.startswith("image/") for k in data):
                texts.append(data.get("text/plain", ""))
        elif kind == "error":
            texts.append(ANSI.sub("", (out.get("traceback") or [""])[-1]))
    return "\n".join(texts)


def skims(cell) -> bool:
    """A code cell whose lines a reader runs but does not study: the drawing code of a figure
    (tagged ``figure``: its figure counts) and an exercise's test cell (nbgrader's grade cell
    without a solution: its messages count when it is run)."""
    meta = cell.get("metadata", {})
    nbg = meta.get("nbgrader") or {}
    return "figure" in (meta.get("tags") or []) or bool(
        nbg.get("grade") and not nbg.get("solution")
    )


def figures(cell) -> int:
    return sum(
        1
        for out in cell.get("outputs", [])
        if any(k.startswith("image/") for k in out.get("data", {}))
    )


def measure(path) -> LessonTime:
    return _count(nbformat.read(path, as_version=4), Path(path))


def _count(nb, path: Path, by_section: list | None = None) -> LessonTime:
    """Count ``nb``; ``by_section``, if given, gets ``[heading, optional, Count]`` per heading."""
    skip_level = None  # heading level of the optional section we are in
    core, optional = Count(), Count()
    section = Count()  # what comes before the first heading
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            # a markdown cell may hold several headings: split it at each one
            parts: list[str] = []
            current: list[str] = []
            for line in cell.source.splitlines():
                if HEADING.match(line) and current:
                    parts.append("\n".join(current))
                    current = []
                current.append(line)
            parts.append("\n".join(current))
            for part in parts:
                m = HEADING.match(part.splitlines()[0]) if part.strip() else None
                if m:
                    level = len(m.group(1))
                    if skip_level is not None and level <= skip_level:
                        skip_level = None
                    if skip_level is None and SKIPPED.search(m.group(2)):
                        skip_level = level
                    section = Count()
                    if by_section is not None:
                        by_section.append([m.group(0), skip_level is not None, section])
                for target in (optional if skip_level is not None else core, section):
                    target.words += _words(part)
                    target.prompts += len(PREDICT.findall(part))
        elif cell.cell_type == "code":
            for target in (optional if skip_level is not None else core, section):
                if not skims(cell):
                    target.code_lines += _code_lines(cell.source)
                target.output_words += _words(output_text(cell))
                target.figures += figures(cell)
    return LessonTime(path, core, optional)


def lessons(root: Path = REPO) -> list[Path]:
    return [
        p
        for p in sorted((root / "course").glob("[0-9][0-9]_*.ipynb"))
        if not p.name.startswith("00_")
    ]


START_PAGE = REPO / "course" / "00_start_here.ipynb"
CHECKING_PAGE = REPO / "course" / "00_checking_and_submitting.ipynb"


def exercises(root: Path = REPO) -> list[Path]:
    return sorted((root / "exercises").glob("*/*.ipynb"))


@dataclass
class Plan:
    """The course's time: ``rows`` of (page, minutes) in the order a learner meets them."""

    rows: list

    @property
    def minutes(self) -> float:
        return sum(m for _, m in self.rows)


def exercise_minutes(path: Path) -> float:
    """Reading the whole exercise notebook, plus writing and checking its answers."""
    t = measure(path)
    return t.core.minutes + t.optional.minutes + WORK_MINUTES[path.parent.name]


def plan(root: Path = REPO) -> Plan:
    rows = [(START_PAGE.name, measure(root / "course" / START_PAGE.name).minutes)]
    rows.append((CHECKING_PAGE.name, measure(root / "course" / CHECKING_PAGE.name).minutes))
    by_number = {p.parent.name[:2]: p for p in exercises(root)}
    for lesson in lessons(root):
        rows.append((lesson.name, measure(lesson).minutes))
        ex = by_number.pop(lesson.name[:2], None)
        if ex is not None:
            rows.append((f"exercise {ex.parent.name}", exercise_minutes(ex)))
    for ex in by_number.values():
        rows.append((f"exercise {ex.parent.name}", exercise_minutes(ex)))
    return Plan(rows)


def hours(minutes: float) -> str:
    """``7 h 15 min``: whole minutes rounded up, then to the next 5 minutes."""
    m = 5 * math.ceil(math.ceil(minutes - 1e-9) / 5)
    return f"{m // 60} h {m % 60:02d} min" if m >= 60 else f"{m} min"


def sections(path) -> list[tuple[str, bool, float]]:
    """(heading, optional, minutes) of each heading's section of a notebook (up to the next
    heading of any level), for trimming a core."""
    rows: list = []
    _count(nbformat.read(path, as_version=4), Path(path), rows)
    return [(heading, opt, count.minutes) for heading, opt, count in rows]


def main(argv=None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    if args[:1] == ["--sections"]:
        for p in args[1:]:
            for heading, opt, minutes in sections(p):
                print(f"{minutes:6.1f} {'optional' if opt else 'core':8} {heading[:90]}")
        return 0
    paths = [Path(p) for p in args] or [
        START_PAGE,
        CHECKING_PAGE,
        *lessons(),
        REPO / "course" / "01a_relu_inplace_appendix.ipynb",
    ]
    print(
        f"{'page':36} {'words':>6} {'output':>6} {'code':>5} {'predict':>7} {'figures':>7} "
        f"{'core min':>9} {'optional min':>13}"
    )
    for p in paths:
        t = measure(p)
        c = t.core
        print(
            f"{p.name:36} {c.words:6d} {c.output_words:6d} {c.code_lines:5d} {c.prompts:7d} "
            f"{c.figures:7d} {t.minutes:9.1f} {t.optional_minutes:13.1f}"
        )
    if not argv:
        for ex in exercises():
            print(
                f"exercise {ex.parent.name:27} {exercise_minutes(ex):9.1f} (reading + {WORK_MINUTES[ex.parent.name]} min work)"
            )
        total = plan()
        print(
            f"the whole path (start page, checking page, four cores, five exercises): {total.minutes:.1f} min, {hours(total.minutes)}"
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
