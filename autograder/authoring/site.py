"""The course as a website (`make site`), and the search that proves nothing hidden is published.

    python -m autograder.authoring.site [OUT]        # default build/site; the pages in OUT/html

Sphinx with myst-nb builds static HTML from the repository (docs/conf.py says what it reads: the
guides in docs/, the lessons with their committed outputs, never executed again, the GPU result
tables, the released exercises). Warnings are errors: a broken link or a missing page stops the
build.

:func:`leaks` searches every file the build wrote (pages, search index, doctrees, downloads) for
what only the instructor has: each line of a hidden test or of a solution in solutions/ that no
published source contains, and any SQLite file (a gradebook). HTML is searched as text (tags
removed, entities decoded) and JSON-like files with their escapes decoded too, so a line split
into highlighted tokens or escaped in the search index is still found.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "build" / "site"
# the sources the site publishes (docs/conf.py's include_patterns)
PUBLISHED = ("docs/*.md", "course/*.ipynb", "course/scripts/results/*/*.md", "exercises/*/*.ipynb")
REGION = re.compile(
    r"### BEGIN (SOLUTION|HIDDEN TESTS)\n(.*?)(?:### END (?:SOLUTION|HIDDEN TESTS)|\Z)", re.S
)
MIN_CHARS = 12  # shorter lines (`return x`, `pass`) say nothing about a solution
SQLITE = b"SQLite format 3\x00"


def build(out: Path = DEFAULT_OUT) -> Path:
    """Build the site into ``out`` (html/ and doctrees/); returns the pages' folder."""
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(REPO / "docs")]
    command += [
        "-d",
        str(out / "doctrees"),
        "-W",
        "--keep-going",
        "-q",
        str(REPO),
        str(out / "html"),
    ]
    subprocess.run(command, cwd=REPO, check=True)
    return out / "html"


def _norm(text: str) -> str:
    return " ".join(text.split())


def hidden_lines(repo: Path = REPO) -> set[str]:
    """Each line (whitespace normalised) of a hidden test or a solution in ``repo/solutions``,
    at least MIN_CHARS long, that no published source contains: what must never be on the site.
    A markdown answer cell (nbgrader's ``solution`` without markers) counts whole."""
    secret: set[str] = set()
    for path in sorted((repo / "solutions").glob("*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            source = cell.source
            grade = cell.metadata.get("nbgrader", {})
            parts = [m.group(2) for m in REGION.finditer(source)]
            if cell.cell_type == "markdown" and grade.get("solution"):
                parts.append(source)
            for part in parts:
                secret |= {_norm(x) for x in part.splitlines() if len(_norm(x)) >= MIN_CHARS}
    public = "\n".join(_norm(t) for t in _texts_of_sources(repo))
    return {line for line in secret if line not in public}


def _texts_of_sources(repo: Path) -> Iterable[str]:
    for pattern in PUBLISHED:
        for path in sorted(repo.glob(pattern)):
            if path.suffix == ".ipynb":
                for cell in nbformat.read(path, as_version=4).cells:
                    yield cell.source
                    for output in cell.get("outputs", []):
                        yield json.dumps(output, ensure_ascii=False)
                        yield "".join(output.get("text", ""))
                        for value in output.get("data", {}).values():
                            yield value if isinstance(value, str) else "".join(value)
            else:
                yield path.read_text()


def _texts_of_output(path: Path) -> Iterable[str]:
    """What a reader, a search or a parser gets from one output file."""
    data = path.read_bytes()
    text = data.decode("utf-8", errors="replace")
    yield text
    if path.suffix in (".html", ".htm", ".xml", ".svg"):
        yield html.unescape(re.sub(r"<[^>]+>", "", text))
    # JSON strings (the search index, a notebook copy) and pickled doctrees: escapes decoded
    yield text.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def leaks(out: Path, repo: Path = REPO) -> list[str]:
    """Everything hidden found under ``out``: ``"FILE: line"``, or ``"FILE: an SQLite file"``."""
    secret = hidden_lines(repo)
    found = []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        name = path.relative_to(out)
        if path.read_bytes()[: len(SQLITE)] == SQLITE or path.suffix == ".db":
            found.append(f"{name}: an SQLite file (a gradebook?)")
            continue
        texts = "\n".join(_norm(t) for t in _texts_of_output(path))
        found += [f"{name}: {line}" for line in sorted(secret) if line in texts]
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]).resolve() if args else DEFAULT_OUT
    pages = build(out)
    found = leaks(out)
    if found:
        print("hidden content in the site:\n  " + "\n  ".join(found), file=sys.stderr)
        return 1
    print(f"the site is in {pages} (open {pages / 'index.html'}); nothing hidden in it")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
