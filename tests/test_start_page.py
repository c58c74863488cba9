"""course/00_start_here.ipynb is the map of the course: every lesson and every exercise is
linked from it, every relative link resolves inside the repository, and `make lab` opens it.

Links are relative to course/ (JupyterLab resolves a link in a rendered notebook against the
notebook's folder and opens the target in a new tab), e.g. `01_relu_inplace.ipynb` and
`../exercises/01_relu_inplace/01_relu_inplace.ipynb`.
"""

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat

REPO = Path(__file__).resolve().parents[1]
START = REPO / "course" / "00_start_here.ipynb"
MARKDOWN_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"<a\s[^>]*href=[\"']([^\"']+)[\"']", re.I)


def links(nb):
    found = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found += MARKDOWN_LINK.findall(cell.source) + HTML_LINK.findall(cell.source)
    return found


def local_targets(nb, base):
    """``{link: resolved path}`` of every link that points into the repository."""
    out = {}
    for link in links(nb):
        parts = urlsplit(link)
        if parts.scheme or parts.netloc or not parts.path:  # http(s), mailto, #anchor
            continue
        out[link] = (base / unquote(parts.path)).resolve()
    return out


def test_every_local_link_resolves_inside_the_repository():
    targets = local_targets(nbformat.read(START, as_version=4), START.parent)
    assert targets, "the start page links to no notebook"
    for link, path in targets.items():
        assert path.exists(), f"{START.name} links to {link}, which does not exist"
        assert REPO in path.parents, (
            f"{link} points outside the repository: JupyterLab cannot open it"
        )


def test_every_lesson_and_exercise_is_linked():
    linked = set(local_targets(nbformat.read(START, as_version=4), START.parent).values())
    required = [p for p in sorted((REPO / "course").glob("*.ipynb")) if p != START]
    required += sorted((REPO / "exercises").glob("*/*.ipynb"))
    missing = [p.relative_to(REPO).as_posix() for p in required if p.resolve() not in linked]
    assert not missing, (
        f"not linked from course/{START.name}: {missing}; add them to its map "
        "(links relative to course/, e.g. 02_x.ipynb and ../exercises/02_x/02_x.ipynb)"
    )


def test_links_are_relative_and_found_by_the_link_parser():
    """The parser used above finds the kinds of links the page uses (a test of the test)."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell(
                "[a](01_a.ipynb) ![img](fig.png) [b](../exercises/01_a/01_a.ipynb#Part-1) "
                '<a href="02_b.ipynb">b</a> [web](https://pytorch.org) [top](#map)'
            )
        ]
    )
    assert links(nb) == [
        "01_a.ipynb",
        "../exercises/01_a/01_a.ipynb#Part-1",
        "https://pytorch.org",
        "#map",
        "02_b.ipynb",
    ]
    assert {
        k: v.relative_to(REPO).as_posix() for k, v in local_targets(nb, START.parent).items()
    } == {
        "01_a.ipynb": "course/01_a.ipynb",
        "../exercises/01_a/01_a.ipynb#Part-1": "exercises/01_a/01_a.ipynb",
        "02_b.ipynb": "course/02_b.ipynb",
    }


def test_make_lab_opens_the_start_page():
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^START_PAGE \?= lab/tree/course/00_start_here\.ipynb$", makefile, re.M)


def _map_rows():
    nb = nbformat.read(START, as_version=4)
    return [
        line
        for c in nb.cells
        if c.cell_type == "markdown"
        for line in c.source.splitlines()
        if line.startswith("|") and ".ipynb" in line
    ]


def test_stated_lesson_times_are_the_measured_core_times():
    """Each lesson's row states its core time as autograder.lessons measures it (prose and text
    outputs at 110 words a minute, 6 code lines a minute, a minute and a half per predict prompt,
    a minute per figure, optional sections apart), and every core fits the course's limit."""
    from autograder.lessons import CORE_LIMIT_MINUTES, lessons, measure

    rows = _map_rows()
    for path in lessons():
        t = measure(path)
        row = next((r for r in rows if f"]({path.name})" in r), None)
        assert row is not None, f"{path.name} has no row in the start page's map"
        stated = re.search(r"about (\d+) min", row)
        assert stated and int(stated.group(1)) == t.rounded, (
            f"{path.name}: the map says {stated.group(0) if stated else 'nothing'}, measured core {t.minutes:.1f} min "
            f"(state 'about {t.rounded} min')"
        )
        assert t.minutes <= CORE_LIMIT_MINUTES, (
            f"{path.name}: core {t.minutes:.1f} min > {CORE_LIMIT_MINUTES}"
        )


def test_stated_exercise_times_and_the_total_are_measured():
    """Each exercise's time on the map is its reading time by the same rule plus the stated work
    estimate (autograder.lessons.exercise_minutes, rounded up), and the total the page states is
    autograder.lessons.plan(): this page, the checking page, the four cores, the five exercises."""
    import math

    from autograder.lessons import exercise_minutes, exercises, hours, plan

    rows = _map_rows()
    for ex in exercises():
        row = next((r for r in rows if f"exercises/{ex.parent.name}/{ex.name})" in r), None)
        assert row is not None, f"{ex.parent.name} has no row in the start page's map"
        want = math.ceil(exercise_minutes(ex) - 1e-9)
        stated = re.findall(r"(\d+) min", row.rsplit("|", 2)[-2])
        assert stated and int(stated[-1]) == want, (ex.parent.name, row.rsplit("|", 2)[-2], want)
    text = "\n".join(c.source for c in nbformat.read(START, as_version=4).cells)
    total = hours(plan().minutes)
    assert f"Plan about {total} for the whole path" in text, total


GRADING = REPO / "course" / "00_checking_and_submitting.ipynb"


def test_the_mechanics_have_their_own_page_linked_both_ways():
    """The start page is the learning path; checking, submitting and progress are on their own
    page, which the start page links to and which links back."""
    start = nbformat.read(START, as_version=4)
    grading = nbformat.read(GRADING, as_version=4)
    assert GRADING.resolve() in set(local_targets(start, START.parent).values())
    assert START.resolve() in set(local_targets(grading, GRADING.parent).values())
    headings = [
        line
        for c in grading.cells
        if c.cell_type == "markdown"
        for line in c.source.splitlines()
        if line.startswith("## ")
    ]
    for topic in ("exercise", "check", "submit", "progress"):
        assert any(topic in h.lower() for h in headings), f"{GRADING.name}: no section on {topic}"
    code = "\n".join(c.source for c in start.cells if c.cell_type == "code")
    assert "progress(" not in code and "run_visible_tests" not in code, (
        f"{START.name} is the learning path: the progress and self-check cells belong on {GRADING.name}"
    )
    assert any("progress(" in c.source for c in grading.cells if c.cell_type == "code")
