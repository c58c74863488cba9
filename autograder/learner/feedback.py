"""``autograder feedback ASSIGNMENT``: fetch the feedback of your submissions and show the newest in the terminal.

Runs the real ``nbgrader fetch_feedback ASSIGNMENT`` (your nbgrader configuration: the course
id and the exchange) - what *Fetch Feedback* in JupyterLab's Assignment List does - then prints
the newest page as text (``ASSIGNMENT/feedback/<timestamp>/<notebook>.html``). Exit status: 0 a
page was shown, 1 no feedback yet, 2 nbgrader failed.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path


def as_text(page: str) -> str:
    """A feedback page as plain text: one line per paragraph and table row."""
    page = re.sub(r"(?s)<(style|title)>.*?</\1>", "", page)
    page = re.sub(r"(?i)</(p|tr|h1|pre)>|<br\s*/?>", "\n", page)
    page = re.sub(r"(?i)</t[dh]>", "  ", page)
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    lines = [re.sub(r"[ \t]+", " ", ln).strip() for ln in text.splitlines()]
    return "\n".join(ln for ln in lines if ln)


def newest(folder: Path) -> list[Path]:
    """The pages of the newest submission that has feedback (its folder names nbgrader's timestamp)."""
    stamps = sorted(p for p in folder.glob("*") if p.is_dir() and any(p.glob("*.html")))
    return sorted(stamps[-1].glob("*.html")) if stamps else []


def run(args) -> int:
    cmd = [sys.executable, "-m", "nbgrader", "fetch_feedback", args.assignment]
    if args.student:
        cmd.append(f"--student={args.student}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout + proc.stderr, file=sys.stderr)
        print("autograder feedback: nbgrader fetch_feedback failed (above)", file=sys.stderr)
        return 2
    pages = newest(Path(args.assignment) / "feedback")
    if not pages:
        print(f"No feedback for {args.assignment} yet: submit it, then try again in a few seconds.")
        return 1
    for page in pages:
        print(f"== {page}")
        print(as_text(page.read_text(encoding="utf-8", errors="replace")))
    return 0


def add_parser(subparsers):
    p = subparsers.add_parser(
        "feedback",
        help="fetch your feedback (nbgrader fetch_feedback) and show the newest in the terminal",
        description=__doc__,
    )
    p.add_argument(
        "assignment", help="the assignment, e.g. 01_relu_inplace (run from the folder above it)"
    )
    p.add_argument(
        "--student", default=None, help="your student id (default: your login, as nbgrader)"
    )
    p.set_defaults(func=run)
    return p
