"""How long a lesson takes: its *core* reading time, measured the same way for every lesson.

Rule (the course's, stated on the start page): everything a reader reads, over the lesson's
core - every cell except those in a section marked optional:

* prose at 150 words a minute: the markdown, and the text outputs under the code (printed
  text, a result's text, the error line of a cell that raises; not figures);
* code at 10 non-comment, non-blank lines a minute;
* a pause of half a minute for every "predict, then run" prompt: the reader stops to predict.

A section is optional when its markdown heading contains "(optional)" (any case); it runs until
the next heading of the same or a higher level. The summary in the second language (under its
own heading containing "中文") is not counted: a reader reads one of the two summaries. Words
are whitespace-separated runs.

    python -m autograder.lessons            # every lesson of course/: words, code lines, minutes
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

WORDS_PER_MINUTE = 150
CODE_LINES_PER_MINUTE = 10
PREDICT_MINUTES = 0.5
CORE_LIMIT_MINUTES = 45
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

    @property
    def minutes(self) -> float:
        return (
            (self.words + self.output_words) / WORDS_PER_MINUTE
            + self.code_lines / CODE_LINES_PER_MINUTE
            + self.prompts * PREDICT_MINUTES
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


def measure(path) -> LessonTime:
    nb = nbformat.read(path, as_version=4)
    skip_level = None  # heading level of the optional section we are in
    core, optional = Count(), Count()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            # a markdown cell may hold several headings: split it at each one
            parts, current = [], []
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
                target = optional if skip_level is not None else core
                target.words += _words(part)
                target.prompts += len(PREDICT.findall(part))
        elif cell.cell_type == "code":
            target = optional if skip_level is not None else core
            target.code_lines += _code_lines(cell.source)
            target.output_words += _words(output_text(cell))
    return LessonTime(Path(path), core, optional)


def lessons(root: Path = REPO) -> list[Path]:
    return [
        p
        for p in sorted((root / "course").glob("[0-9][0-9]_*.ipynb"))
        if not p.name.startswith("00_")
    ]


def main(argv=None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])] or lessons()
    print(
        f"{'lesson':28} {'words':>6} {'output':>6} {'code':>5} {'predict':>7} "
        f"{'core min':>9} {'optional min':>13}"
    )
    for p in paths:
        t = measure(p)
        c = t.core
        print(
            f"{p.name:28} {c.words:6d} {c.output_words:6d} {c.code_lines:5d} {c.prompts:7d} "
            f"{t.minutes:9.1f} {t.optional_minutes:13.1f}"
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
