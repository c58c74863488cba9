"""The figure checker (autograder/figures.py), proved on throwaway lessons (nbval ignores pixels).

One that follows every rule, one that breaks each rule once, one without a figure, one whose
data moves a little (passes) or meaningfully (fails). The lessons themselves are checked in
strict nbval's own run of each (tests/nbval_figures.py, wired in tests/conftest.py): its kernel
starts as another CPU would run the lesson (ATen's portable kernels, one thread) with the figure
formatter, and ``course/<lesson>.ipynb::figures`` checks that run's figures and texts against
the committed ones.
"""

import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.authoring.notebooks import execute
from autograder.figures import (
    INFO_MIME,
    execute_with_figure_info,
    figure_differences,
    lesson_problems,
)
from autograder.procs import explain, run

pytestmark = pytest.mark.slow  # every test runs notebooks in kernels


def _figure(source):
    cell = new_code_cell(source)
    cell.metadata["tags"] = ["figure"]
    return cell


SETUP = new_code_cell(
    "import matplotlib.pyplot as plt\nimport numpy as np\nx = np.linspace(-2, 2, 5)"
)


def _lesson(tmp_path, name, cells, run=True):
    path = tmp_path / name
    nbformat.write(new_notebook(cells=[new_markdown_cell("# A lesson"), SETUP, *cells]), path)
    if run:
        execute(path)  # commits the outputs, as `make notebooks` does
    return path


def test_checker_accepts_a_lesson_that_follows_every_rule(tmp_path):
    path = _lesson(
        tmp_path,
        "good.ipynb",
        [
            _figure(
                "fig, ax = plt.subplots()\nax.plot(x, np.maximum(x, 0), label='relu')\n"
                "ax.plot(x, np.clip(x, 0, None), label='clamp')\nax.set_title('ReLU vs clamp')\n"
                "ax.set_xlabel('x')\nax.set_ylabel('y')\nax.legend()\nplt.show()"
            ),
            _figure(
                "fig, (a, b) = plt.subplots(2, 1, sharex=True)\na.plot(x, x)\nb.plot(x, -x)\n"
                "a.set_ylabel('up')\nb.set_ylabel('down')\nb.set_xlabel('x')\nfig.suptitle('Shared x axis')"
            ),
            _figure(
                "fig, ax = plt.subplots()\nim = ax.imshow(np.eye(3))\nax.set_title('A matrix')\n"
                "ax.set_xlabel('column')\nax.set_ylabel('row')\nfig.colorbar(im, ax=ax, label='value')"
            ),
            _figure(
                "fig, ax = plt.subplots()\nax.axis('off')\nax.annotate('x', (0.2, 0.5))\n"
                "ax.set_title('A diagram: no axes, no axis labels')\nplt.show()"
            ),
            _figure(
                "np.random.seed(0)\nfig, ax = plt.subplots()\nax.hist(np.random.randn(50))\n"
                "ax.set_title('seeded')\nax.set_xlabel('value')\nax.set_ylabel('count')"
            ),
            new_code_cell("print('a cell without a figure needs no tag')"),
        ],
    )
    assert lesson_problems(path) == []


def test_checker_reports_each_broken_rule(tmp_path):
    path = _lesson(
        tmp_path,
        "bad.ipynb",
        [
            _figure("plt.plot(x, x)\nplt.xlabel('x')\nplt.ylabel('y')"),
            _figure("plt.plot(x, x)\nplt.title('no x label')\nplt.ylabel('y')"),
            _figure(
                "plt.plot(x, x, label='a')\nplt.plot(x, -x, label='b')\nplt.title('two curves')\n"
                "plt.xlabel('x')\nplt.ylabel('y')"
            ),
            _figure("print('tagged, but no figure')"),
            new_code_cell(
                "plt.plot(x, x)\nplt.title('untagged')\nplt.xlabel('x')\nplt.ylabel('y')"
            ),
            _figure(
                "plt.plot(np.random.rand(5))\nplt.title('random')\nplt.xlabel('i')\nplt.ylabel('value')"
            ),
            _figure(
                "fig, ax = plt.subplots()\nax.plot(x, x)\nax.set_title('shown twice')\nax.set_xlabel('x')\n"
                "ax.set_ylabel('y')\nfig"
            ),
            _figure(
                "im = plt.imshow(np.eye(2))\nplt.title('colorbar')\nplt.xlabel('c')\nplt.ylabel('r')\nplt.colorbar(im)"
            ),
        ],
    )
    expected = [
        "bad.ipynb cell 3 (`plt.plot(x, x)`), figure 1: the figure has no title: use ax.set_title(...) or "
        "fig.suptitle(...)",
        "bad.ipynb cell 4 (`plt.plot(x, x)`), figure 1: the axes titled 'no x label' has no x label: use "
        "ax.set_xlabel(...)",
        "bad.ipynb cell 5 (`plt.plot(x, x, label='a')`), figure 1: the axes titled 'two curves' has 2 labelled "
        "curves but no legend: call ax.legend()",
        "bad.ipynb cell 6 (`print('tagged, but no figure')`) is tagged 'figure' but shows no matplotlib figure",
        "bad.ipynb cell 7 (`plt.plot(x, x)`) shows a figure but is not tagged 'figure'",
        re.compile(
            r"bad\.ipynb cell 8 \(`plt\.plot\(np\.random\.rand\(5\)\)`\), figure 1: a fresh run draws a "
            r"different figure than the committed one: the axes titled 'random', line: a point moved by "
            r"[0-9.]+% of the axis span \(tolerance 1%\).* \(unseeded randomness\? timings\? outputs not "
            r"re-executed with `make notebooks`\?\)"
        ),
        "bad.ipynb cell 9 (`fig, ax = plt.subplots()`) shows the same figure twice: end the cell with "
        "plt.show(), not with the figure",
        "bad.ipynb cell 10 (`im = plt.imshow(np.eye(2))`), figure 1: axes 2 of 2: the colorbar has no label: "
        "use cbar.set_label(...)",
    ]
    problems = lesson_problems(path)
    assert len(problems) == len(expected), "\n".join(problems)
    for problem, want in zip(problems, expected, strict=True):
        assert want.fullmatch(problem) if isinstance(want, re.Pattern) else problem == want, problem


def test_checker_requires_a_figure_and_committed_images(tmp_path):
    path = _lesson(tmp_path, "no-figure.ipynb", [new_code_cell("print(x)")])
    assert lesson_problems(path) == [
        "no-figure.ipynb has no cell tagged 'figure': every lesson has at least one figure"
    ]
    path = _lesson(
        tmp_path,
        "not-executed.ipynb",
        [_figure("plt.plot(x, x)\nplt.title('t')\nplt.xlabel('x')\nplt.ylabel('y')")],
        run=False,
    )
    assert lesson_problems(path) == [
        "not-executed.ipynb cell 3 (`plt.plot(x, x)`): the committed notebook has no image here: "
        "run `make notebooks`"
    ]


SCALED = _figure(
    "import os\nscale = float(os.environ.get('SCALE', '1'))\nfig, ax = plt.subplots()\n"
    "ax.plot(x, scale * x ** 2, label='scaled')\nax.scatter(x, scale * x, label='points')\n"
    "ax.text(0, scale, 'a note')\nax.set_title('scaled by $SCALE')\nax.set_xlabel('x')\n"
    "ax.set_ylabel('y')\nax.legend()\nplt.show()"
)


def test_checker_compares_plotted_data_within_a_tolerance_not_pixels(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALE", "1")
    path = _lesson(tmp_path, "scaled.ipynb", [SCALED])
    committed = [
        o
        for o in nbformat.read(path, as_version=4).cells[2].outputs
        if o.output_type == "display_data"
    ]
    assert (
        INFO_MIME not in committed[0].data and INFO_MIME in committed[0].metadata
    )  # nbval skips metadata
    # a last-bits change (another CPU's rounding): other pixels, same figure
    moved = execute_with_figure_info(path, env={"SCALE": "1.002"})
    assert moved[1].figures[0].image != "".join(committed[0].data["image/png"].split())
    assert lesson_problems(path, cells=moved) == []
    # a meaningful change: the curve 3 % higher, 1.8 % of the axis span (whose margins grow too)
    assert lesson_problems(path, env={"SCALE": "1.03"}) == [
        "scaled.ipynb cell 3 (`import os`), figure 1: a fresh run draws a different figure than the committed one: "
        "the axes titled 'scaled by $SCALE', line 'scaled': a point moved by 1.8% of the axis span (tolerance 1%) "
        "(and 1 more difference) (unseeded randomness? timings? outputs not re-executed with `make notebooks`?)"
    ]


def test_checker_requires_the_record_of_the_committed_image(tmp_path):
    path = _lesson(tmp_path, "scaled.ipynb", [SCALED])
    nb = nbformat.read(path, as_version=4)
    output = next(o for o in nb.cells[2].outputs if o.output_type == "display_data")
    record = output.metadata.pop(INFO_MIME)
    nbformat.write(nb, path)
    assert lesson_problems(path) == [
        "scaled.ipynb cell 3 (`import os`): the committed figure has no record of its plotted data: re-execute "
        "the lesson with `make notebooks`"
    ]
    output.metadata[INFO_MIME] = record
    output.data["image/png"] = (
        output.data["image/png"][:-8] + "AAAAAAA="
    )  # re-drawn in JupyterLab, say
    nbformat.write(nb, path)
    assert lesson_problems(path) == [
        "scaled.ipynb cell 3 (`import os`): the committed image was not drawn by the run that recorded its data: "
        "re-execute the lesson with `make notebooks`"
    ]


def _description(**axes):
    ax = {
        "title": ["t"],
        "xlabel": "x",
        "ylabel": "y",
        "zlabel": None,
        "axis_on": True,
        "colorbar": False,
        "legend": None,
        "labelled": 0,
        "shares_x": [],
        "shares_y": [],
        "scale": ["linear", "linear"],
        "limits": [[0.0, 10.0], [0.0, 100.0]],
        "plotted": [{"kind": "line", "label": "_child0", "xy": [[0.0, 0.0], [10.0, 100.0]]}],
    }
    ax.update(axes)
    return {"suptitle": "", "supxlabel": "", "supylabel": "", "figure_legends": [], "axes": [ax]}


def test_figure_differences_names_what_changed():
    old = _description()
    assert figure_differences(old, _description()) == []
    assert figure_differences(old, _description(ylabel="loss")) == [
        "the axes titled 't': ylabel is 'loss', committed 'y'"
    ]
    # y moved by 0.9 of a span of 100: within 1 %; by 2: not
    near = [{"kind": "line", "label": "_child0", "xy": [[0.0, 0.9], [10.0, 100.0]]}]
    assert figure_differences(old, _description(plotted=near)) == []
    far = [{"kind": "line", "label": "_child0", "xy": [[0.0, 2.0], [10.0, 100.0]]}]
    assert figure_differences(old, _description(plotted=far)) == [
        "the axes titled 't', line: a point moved by 2.0% of the axis span (tolerance 1%)"
    ]
    # a log axis compares decades; missing points must stay missing; a new artist is a new figure
    log = _description(scale=["linear", "log"], limits=[[0.0, 10.0], [1.0, 1000.0]])
    log_far = _description(
        scale=["linear", "log"],
        limits=[[0.0, 10.0], [1.0, 1000.0]],
        plotted=[{"kind": "line", "label": "_child0", "xy": [[0.0, 0.0], [10.0, 200.0]]}],
    )
    assert figure_differences(log, log_far)[0].endswith(
        "a point moved by 10.0% of the axis span (tolerance 1%)"
    )
    gap = [{"kind": "line", "label": "_child0", "xy": [[0.0, None], [10.0, 100.0]]}]
    assert figure_differences(old, _description(plotted=gap)) == [
        "the axes titled 't', line: its missing (NaN/inf) points differ from the committed ones"
    ]
    extra = old["axes"][0]["plotted"] + [{"kind": "text", "label": "note", "xy": [[1.0, 1.0]]}]
    assert figure_differences(old, _description(plotted=extra)) == [
        "the axes titled 't': it plots ['line', 'text'], committed ['line'] (or their labels differ)"
    ]


def test_every_lesson_is_checked_in_its_nbval_run(repo):
    """Each lesson's nbval run ends with its figure check (tests/nbval_figures.py), right after
    its last cell, and the start page (no figure) has none."""
    import sys

    from nbval_figures import LESSONS

    proc = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_layers.py",  # (tests/conftest.py is what wires the check in)
            "course",
        ],
        expect=None,  # the collected ids are what is checked
        cwd=repo,
        timeout=300,
    )
    ids = [line for line in proc.stdout.splitlines() if line.startswith("course/")]
    assert ids, explain(proc)
    assert [i for i in ids if i.endswith("::figures")] == [
        f"course/{lesson.name}::figures" for lesson in LESSONS
    ]
    for lesson in LESSONS:
        last = max(k for k, i in enumerate(ids) if i.startswith(f"course/{lesson.name}::"))
        assert ids[last] == f"course/{lesson.name}::figures"
