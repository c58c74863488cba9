"""What the site adds to the sources it reads (docs/conf.py): nothing in the repository changes."""

from __future__ import annotations

from pathlib import PurePosixPath

RESULTS = "course/scripts/results/"


def jupyter_anchor(title: str) -> str:
    """The anchor JupyterLab gives a heading (its text, spaces as dashes), so that the lessons'
    links (``00_start_here.ipynb#The-one-mental-model``) work in JupyterLab and on the site."""
    return title.strip().replace(" ", "-")


def title_results(app, docname: str, source: list[str]) -> None:
    """A GPU result table (``gpu_all.py`` writes it, first line: the machine) gets a title on the
    site: its script's name and that line."""
    if not docname.startswith(RESULTS) or source[0].lstrip().startswith("#"):
        return
    name = PurePosixPath(docname).name
    script = "the runs" if name == "index" else f"`{name}.py`"
    first = source[0].splitlines()[0] if source[0] else ""
    source[0] = f"# {script}: {first}\n\n" + source[0]


def setup(app):
    app.connect("source-read", title_results)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
