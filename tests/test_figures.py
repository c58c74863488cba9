"""Every lesson's figures are drawn, titled, labelled and deterministic (nbval ignores pixels).

`test_lesson_figures` covers each lesson in course/ (0[1-9]*.ipynb; the start page has no
figure). The checker itself (autograder/figures.py) is proved on throwaway lessons: one that
follows every rule, one that breaks each rule once, one without a figure.
"""
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.figures import lesson_problems
from autograder.notebooks import execute

pytestmark = pytest.mark.slow  # every test runs notebooks in kernels

REPO = Path(__file__).resolve().parents[1]
LESSONS = sorted((REPO / "course").glob("0[1-9]*.ipynb"))


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_lesson_figures(lesson):
    problems = lesson_problems(lesson)
    assert not problems, "\n".join(problems)


def _figure(source):
    cell = new_code_cell(source)
    cell.metadata["tags"] = ["figure"]
    return cell


SETUP = new_code_cell("import matplotlib.pyplot as plt\nimport numpy as np\nx = np.linspace(-2, 2, 5)")


def _lesson(tmp_path, name, cells, run=True):
    path = tmp_path / name
    nbformat.write(new_notebook(cells=[new_markdown_cell("# A lesson"), SETUP, *cells]), path)
    if run:
        execute(path)  # commits the outputs, as `make notebooks` does
    return path


def test_checker_accepts_a_lesson_that_follows_every_rule(tmp_path):
    path = _lesson(tmp_path, "good.ipynb", [
        _figure("fig, ax = plt.subplots()\nax.plot(x, np.maximum(x, 0), label='relu')\n"
                "ax.plot(x, np.clip(x, 0, None), label='clamp')\nax.set_title('ReLU vs clamp')\n"
                "ax.set_xlabel('x')\nax.set_ylabel('y')\nax.legend()\nplt.show()"),
        _figure("fig, (a, b) = plt.subplots(2, 1, sharex=True)\na.plot(x, x)\nb.plot(x, -x)\n"
                "a.set_ylabel('up')\nb.set_ylabel('down')\nb.set_xlabel('x')\nfig.suptitle('Shared x axis')"),
        _figure("fig, ax = plt.subplots()\nim = ax.imshow(np.eye(3))\nax.set_title('A matrix')\n"
                "ax.set_xlabel('column')\nax.set_ylabel('row')\nfig.colorbar(im, ax=ax, label='value')"),
        _figure("fig, ax = plt.subplots()\nax.axis('off')\nax.annotate('x', (0.2, 0.5))\n"
                "ax.set_title('A diagram: no axes, no axis labels')\nplt.show()"),
        _figure("np.random.seed(0)\nfig, ax = plt.subplots()\nax.hist(np.random.randn(50))\n"
                "ax.set_title('seeded')\nax.set_xlabel('value')\nax.set_ylabel('count')"),
        new_code_cell("print('a cell without a figure needs no tag')"),
    ])
    assert lesson_problems(path) == []


def test_checker_reports_each_broken_rule(tmp_path):
    path = _lesson(tmp_path, "bad.ipynb", [
        _figure("plt.plot(x, x)\nplt.xlabel('x')\nplt.ylabel('y')"),
        _figure("plt.plot(x, x)\nplt.title('no x label')\nplt.ylabel('y')"),
        _figure("plt.plot(x, x, label='a')\nplt.plot(x, -x, label='b')\nplt.title('two curves')\n"
                "plt.xlabel('x')\nplt.ylabel('y')"),
        _figure("print('tagged, but no figure')"),
        new_code_cell("plt.plot(x, x)\nplt.title('untagged')\nplt.xlabel('x')\nplt.ylabel('y')"),
        _figure("plt.plot(np.random.rand(5))\nplt.title('random')\nplt.xlabel('i')\nplt.ylabel('value')"),
        _figure("fig, ax = plt.subplots()\nax.plot(x, x)\nax.set_title('shown twice')\nax.set_xlabel('x')\n"
                "ax.set_ylabel('y')\nfig"),
        _figure("im = plt.imshow(np.eye(2))\nplt.title('colorbar')\nplt.xlabel('c')\nplt.ylabel('r')\nplt.colorbar(im)"),
    ])
    assert lesson_problems(path) == [
        "bad.ipynb cell 3 (`plt.plot(x, x)`), figure 1: the figure has no title: use ax.set_title(...) or "
        "fig.suptitle(...)",
        "bad.ipynb cell 4 (`plt.plot(x, x)`), figure 1: the axes titled 'no x label' has no x label: use "
        "ax.set_xlabel(...)",
        "bad.ipynb cell 5 (`plt.plot(x, x, label='a')`), figure 1: the axes titled 'two curves' has 2 labelled "
        "curves but no legend: call ax.legend()",
        "bad.ipynb cell 6 (`print('tagged, but no figure')`) is tagged 'figure' but shows no matplotlib figure",
        "bad.ipynb cell 7 (`plt.plot(x, x)`) shows a figure but is not tagged 'figure'",
        "bad.ipynb cell 8 (`plt.plot(np.random.rand(5))`): a fresh run draws a different image than the "
        "committed one (unseeded randomness? timings? outputs not re-executed with `make notebooks`?)",
        "bad.ipynb cell 9 (`fig, ax = plt.subplots()`) shows the same figure twice: end the cell with "
        "plt.show(), not with the figure",
        "bad.ipynb cell 10 (`im = plt.imshow(np.eye(2))`), figure 1: axes 2 of 2: the colorbar has no label: "
        "use cbar.set_label(...)",
    ]


def test_checker_requires_a_figure_and_committed_images(tmp_path):
    path = _lesson(tmp_path, "no-figure.ipynb", [new_code_cell("print(x)")])
    assert lesson_problems(path) == [
        "no-figure.ipynb has no cell tagged 'figure': every lesson has at least one figure"]
    path = _lesson(tmp_path, "not-executed.ipynb", [
        _figure("plt.plot(x, x)\nplt.title('t')\nplt.xlabel('x')\nplt.ylabel('y')")], run=False)
    assert lesson_problems(path) == [
        "not-executed.ipynb cell 3 (`plt.plot(x, x)`): the committed notebook has no image here: "
        "run `make notebooks`"]
