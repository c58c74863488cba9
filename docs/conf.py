"""The course as a website: `make site` (Sphinx with myst-nb; docs/developer.md, "The website", says why).

The source folder is the repository root, narrowed by ``include_patterns`` to what is published:
the guides in docs/, the lessons in course/ with their committed outputs (never executed here:
``nb_execution_mode = "off"``, so a page shows exactly the outputs nbval compares), the GPU result
tables the lessons cite, and the released exercises in exercises/. Nothing else is read: not
solutions/ (the hidden tests), not a gradebook. tests/test_site.py builds the site and searches the
whole output for anything hidden; tests/test_browser.py opens every page in chromium.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

project = "PyTorch autograd & in-place operations"
author = "the course's authors"
copyright = "2026, " + author

extensions = ["myst_nb", "site_ext"]
root_doc = "docs/index"
include_patterns = [
    "docs/*.md",
    "course/*.ipynb",
    "course/scripts/results/*/*.md",
    "exercises/*/*.ipynb",
]
# the lessons skip heading levels (H2 to H4) as JupyterLab allows; the result tables start at H3
suppress_warnings = ["myst.header"]

# the notebooks are shown as committed and checked (strict nbval): never executed by the build
nb_execution_mode = "off"
# an error cell's traceback is shown as the lesson shows it (ANSI colours included)
nb_render_error_lexer = "ipythontb"


myst_heading_anchors = 4
# the anchor JupyterLab gives a heading, so the lessons' links work in both (site_ext.py)
myst_heading_slug_func = "site_ext.jupyter_anchor"
myst_enable_extensions = ["dollarmath"]

html_theme = "alabaster"
html_title = project
html_static_path = ["_static"]
html_favicon = "_static/favicon.svg"  # (a browser asks for one: a 404 without it)
templates_path = ["_templates"]
html_copy_source = False  # the pages are the product; notebooks are opened in JupyterLab
html_show_sourcelink = False
html_theme_options = {"page_width": "1100px", "sidebar_width": "260px"}
# `make lab`'s JupyterLab (its default address); the link each lesson and exercise page shows
html_context = {"lab_url": "http://localhost:8888/lab/tree/"}
html_additional_pages = {"index": "redirect.html"}
