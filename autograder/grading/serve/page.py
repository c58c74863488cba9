"""The feedback page a student fetches (``nbgrader fetch_feedback``) and the JSON of the status endpoint.

Both are built only from :func:`.policy.student_rows` (names, pass/fail, points and messages as
the policy allows) and the ledger's times: never from a notebook's cells, so no test cell's
source can reach them.
"""

from __future__ import annotations

import jinja2

from autograder.grading.results.feedback import STYLE
from autograder.grading.serve.policy import utc

PAGE = """\
<!DOCTYPE html>
<html><head><meta charset='utf-8'>
<title>{{ title }}</title><style>{{ style | safe }}</style></head><body>
<h1>{{ title }}</h1>
{% if headline %}<p><strong>{{ headline }}</strong></p>{% endif %}
<p>Graded {{ graded }}, {{ after }} after you submitted (submitted {{ submitted }}).
{% if attempt %}Attempt {{ attempt }}{% if max_attempts %} of {{ max_attempts }}{% endif %}.{% endif %}
{{ next }}</p>
{% if deadline %}<p>Deadline: {{ deadline }}.{% if mode != "everything" %} Until then hidden tests show
{% if mode == "pass-fail" %}only whether they passed{% else %}only their points{% endif %}; every message is
shown after the deadline.{% endif %}</p>{% endif %}
{% for note in notes %}<p class='note'>{{ note }}</p>
{% endfor %}{% if tests %}<table><thead><tr><th>test</th><th></th><th>result</th><th>message</th></tr></thead><tbody>
{% for r in tests %}<tr class='{{ "pass" if r.passed else "fail" }}'><td><code>{{ r.test }}</code></td><td>{{ r.kind }}</td>\
<td class='points'>{% if r.under_review %}under review{% elif r.max_points is defined %}{{ r.points | g }} / {{ r.max_points | g }}{% else %}\
{{ "passed" if r.passed else "failed" }}{% endif %}</td><td><pre>{{ r.message | default("") }}</pre></td></tr>
{% endfor %}</tbody></table>{% endif %}</body></html>"""

_env = jinja2.Environment(autoescape=True, undefined=jinja2.ChainableUndefined)
_env.filters["g"] = lambda x: f"{x:g}"
_page = _env.from_string(PAGE)


def headline(tests: list[dict]) -> str:
    shown = [t for t in tests if "max_points" in t and not t.get("under_review")]
    text = ""
    if shown:
        text = (
            f"Score: {sum(t['points'] for t in shown):g} / {sum(t['max_points'] for t in shown):g}"
        )
        if len(shown) < len(tests):
            text += " on the tests whose points are shown"
    hidden = [t for t in tests if "max_points" not in t and not t.get("under_review")]
    review = [t for t in tests if t.get("under_review")]
    if hidden:
        text += ("; " if text else "") + (
            f"hidden tests: {sum(t['passed'] for t in hidden)} of {len(hidden)} passed"
        )
    if review:
        text += ("; " if text else "") + f"{len(review)} under review"
    return text


def render(view: dict) -> str:
    """One notebook's page from :meth:`.service.Service.view`'s dict."""
    return _page.render(
        title=f"{view['assignment']} / {view['notebook']} \u2014 {view['student']}",
        style=STYLE,
        headline=headline(view["tests"]),
        graded=utc(view["graded_at"]),
        after=f"{view['seconds_after_submit']:.1f} s",
        submitted=utc(view["submitted_at"]),
        attempt=view.get("attempt"),
        max_attempts=view.get("max_attempts"),
        next=view["next_attempt"],
        deadline=utc(view.get("deadline")),
        mode=view["hidden_mode"],
        notes=view["notes"],
        tests=view["tests"],
    )
