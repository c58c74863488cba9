"""How long a lesson takes: its *core* reading time, measured the same way for every lesson.

Rule (the course's, stated on the start page): prose at 150 words a minute plus code at 10
non-comment, non-blank lines a minute, over the lesson's core - every cell except those in a
section marked optional. A section is optional when its markdown heading contains
"(optional)" (any case); it runs until the next heading of the same or a higher level. The
summary in the second language (under its own heading containing "中文") is not counted: a
reader reads one of the two summaries. Words are whitespace-separated runs.

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
CORE_LIMIT_MINUTES = 45
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
SKIPPED = re.compile(r"\(optional\)|中文", re.I)
REPO = Path(__file__).resolve().parents[1]


@dataclass
class LessonTime:
    path: Path
    words: int
    code_lines: int
    optional_words: int
    optional_code_lines: int

    @property
    def minutes(self) -> float:
        return self.words / WORDS_PER_MINUTE + self.code_lines / CODE_LINES_PER_MINUTE

    @property
    def rounded(self) -> int:
        """Whole minutes, rounded up (what the start page states)."""
        return math.ceil(self.minutes - 1e-9)

    @property
    def optional_minutes(self) -> float:
        return (
            self.optional_words / WORDS_PER_MINUTE
            + self.optional_code_lines / CODE_LINES_PER_MINUTE
        )


def _code_lines(source: str) -> int:
    return sum(
        1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#")
    )


def _words(source: str) -> int:
    return len(source.split())


def measure(path) -> LessonTime:
    nb = nbformat.read(path, as_version=4)
    skip_level = None  # heading level of the optional section we are in
    core = [0, 0]
    optional = [0, 0]
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
                target[0] += _words(part)
        elif cell.cell_type == "code":
            target = optional if skip_level is not None else core
            target[1] += _code_lines(cell.source)
    return LessonTime(Path(path), core[0], core[1], optional[0], optional[1])


def lessons(root: Path = REPO) -> list[Path]:
    return [
        p
        for p in sorted((root / "course").glob("[0-9][0-9]_*.ipynb"))
        if not p.name.startswith("00_")
    ]


def main(argv=None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])] or lessons()
    print(f"{'lesson':40} {'words':>6} {'code':>5} {'core min':>9} {'optional min':>13}")
    for p in paths:
        t = measure(p)
        print(
            f"{p.name:40} {t.words:6d} {t.code_lines:5d} {t.minutes:9.1f} {t.optional_minutes:13.1f}"
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
