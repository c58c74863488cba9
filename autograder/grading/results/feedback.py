"""Feedback pages: ``OUT/feedback/<student>/<assignment>/<notebook>.html``.

Each page lists every graded test of the notebook with its name, points, status and the
failure message (for the course's checks: what was expected, what was found and the likely
cause). It never contains the source of a test cell, visible or hidden, nor a traceback:
the grader only ever keeps the message of the exception a test raised.
"""
from __future__ import annotations

import html
from pathlib import Path

from autograder.grading import STATUSES
from autograder.grading.status import CELL_LABELS

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: .4rem .5rem; text-align: left; vertical-align: top; }
td.points { white-space: nowrap; }
tr.pass td.points { color: #1a7f37; } tr.fail td.points { color: #b42318; }
pre { white-space: pre-wrap; margin: 0; font-size: .9em; }
.note { background: #fff8e1; border-left: 4px solid #f5a623; padding: .5rem .8rem; margin: 1rem 0; }
"""


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
        notes.append("Your notebook replaced " + ", ".join(result["restored"][:5])
                     + "; the originals were put back before each test.")
    return notes


def render(sub, rows, result=None) -> str:
    total = sum(r.score for r in rows)
    maximum = sum(r.max_score for r in rows)
    title = f"{sub.assignment} / {sub.notebook} \u2014 {sub.student}"
    parts = [
        "<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p><strong>Score: {total:g} / {maximum:g}</strong></p>",
    ]
    if sub.status:
        parts.append(f"<p class='note'>{html.escape(STATUSES.get(sub.status, sub.status))}: "
                     f"{html.escape(sub.message)}</p>")
    for note in _cell_notes(sub, result):
        parts.append(f"<p class='note'>{html.escape(note)}</p>")
    parts.append("<table><thead><tr><th>test</th><th></th><th>points</th><th>status</th><th>message</th>"
                 "</tr></thead><tbody>")
    for r in rows:
        cls = "pass" if r.score >= r.max_score else "fail"
        kind = "hidden" if r.hidden else "visible"
        message = r.message if r.score < r.max_score or r.status != "ok" else ""
        parts.append(
            f"<tr class='{cls}'><td><code>{html.escape(r.grade_id)}</code></td><td>{kind}</td>"
            f"<td class='points'>{r.score:g} / {r.max_score:g}</td><td>{html.escape(r.status)}</td>"
            f"<td><pre>{html.escape(message)}</pre></td></tr>")
    parts.append("</tbody></table></body></html>")
    return "\n".join(parts)


def write(out: Path, sub, rows, result=None) -> Path:
    folder = Path(out) / "feedback" / sub.student / sub.assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{sub.notebook}.html"
    path.write_text(render(sub, rows, result), encoding="utf-8")
    return path
