"""Feedback pages: ``OUT/feedback/<student>/<assignment>/<notebook>.html``.

Each page lists every graded test of the notebook with its name, points, status and the
failure message (for the course's checks: what was expected, what was found and the likely
cause). It never contains the source of a test cell, visible or hidden, nor a traceback:
the grader only ever keeps the message of the exception a test raised.

The page is a Jinja2 template with autoescape on: every text reaches it as data and is
escaped there, once; the template renders the report's rows (never a notebook's cells).
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from autograder.grading import STATUSES
from autograder.grading.results.report import DIFFERENCES
from autograder.grading.status import CELL_LABELS
from autograder.grading.verdicts import UNDER_REVIEW

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: .4rem .5rem; text-align: left; vertical-align: top; }
td.points { white-space: nowrap; }
tr.pass td.points { color: #1a7f37; } tr.fail td.points { color: #b42318; }
pre { white-space: pre-wrap; margin: 0; font-size: .9em; }
.note { background: #fff8e1; border-left: 4px solid #f5a623; padding: .5rem .8rem; margin: 1rem 0; }
"""

PAGE = """\
<!DOCTYPE html>
<html><head><meta charset='utf-8'>
<title>{{ title }}</title><style>{{ style | safe }}</style></head><body>
<h1>{{ title }}</h1>
<p><strong>Score: {{ total | g }} / {{ maximum | g }}</strong></p>
{% if status %}<p class='note'>{{ status }}: {{ status_message }}</p>
{% endif %}{% for note in notes %}<p class='note'>{{ note }}</p>
{% endfor %}<table><thead><tr><th>test</th><th></th><th>points</th><th>status</th><th>message</th></tr></thead><tbody>
{% for r in rows %}<tr class='{{ r.cls }}'><td><code>{{ r.grade_id }}</code></td><td>{{ r.kind }}</td>\
<td class='points'>{{ r.score | g }} / {{ r.max_score | g }}</td><td>{{ r.status }}</td>\
<td><pre>{{ r.message }}</pre></td></tr>
{% endfor %}</tbody></table></body></html>"""

_env = jinja2.Environment(
    autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=False
)
_env.filters["g"] = lambda x: f"{x:g}"
_page = _env.from_string(PAGE)


def _cell_notes(sub, result) -> list[str]:
    notes = []
    if not result:
        return notes
    for c in result.get("cells", []):
        st = c.get("status")
        if st in CELL_LABELS:
            text = f"Your code cell {c['index'] + 1} {CELL_LABELS[st]}"
            if c.get("error") and st != "timeout":
                text += f": {c['error'].splitlines()[0][:300]}"
            notes.append(text)
    if result.get("restored"):
        notes.append(
            "Your notebook replaced "
            + ", ".join(result["restored"][:5])
            + "; the originals were put back before each test."
        )
    return notes


def _row(r) -> dict:
    """What the template shows of one report row (a difference between the two verdicts: "under
    review", and no message of either: :mod:`..verdicts`)."""
    if r.status in DIFFERENCES:
        return {
            "cls": "fail",
            "grade_id": r.grade_id,
            "kind": "hidden" if r.hidden else "visible",
            "score": r.score,
            "max_score": r.max_score,
            "status": "under review",
            "message": UNDER_REVIEW,
        }
    return {
        "cls": "pass" if r.score >= r.max_score else "fail",
        "grade_id": r.grade_id,
        "kind": "hidden" if r.hidden else "visible",
        "score": r.score,
        "max_score": r.max_score,
        "status": r.status,
        "message": r.message if r.score < r.max_score or r.status != "ok" else "",
    }


def render(sub, rows, result=None) -> str:
    return _page.render(
        title=f"{sub.assignment} / {sub.notebook} \u2014 {sub.student}",
        style=STYLE,
        total=sum(r.score for r in rows),
        maximum=sum(r.max_score for r in rows),
        status=STATUSES.get(sub.status, sub.status) if sub.status else "",
        status_message=sub.message,
        notes=_cell_notes(sub, result),
        rows=[_row(r) for r in rows],
    )


def write(out: Path, sub, rows, result=None) -> Path:
    folder = Path(out) / "feedback" / sub.student / sub.assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{sub.notebook}.html"
    path.write_text(render(sub, rows, result), encoding="utf-8")
    return path
