"""Check a lesson's figures: produced, labelled, deterministic.

nbval ignores image data, so a lesson whose plot lost its axis labels, or whose plot is never
drawn, would still pass. This module executes a lesson in a fresh kernel with a display
formatter added for matplotlib figures: every time a figure is shown (``plt.show()``, the
inline backend at the end of a cell, ``display(fig)``), the output carries, next to its
``image/png``, a small JSON description of the figure (titles, axis labels, legend entries)
read from the live matplotlib objects. The rules:

* a lesson (``course/0[1-9]*.ipynb``) has at least one cell tagged ``figure``;
* every cell tagged ``figure`` shows at least one figure, and every cell that shows a figure
  is tagged ``figure``;
* every figure has a title (``ax.set_title`` or ``fig.suptitle``); every axes drawn with its
  axis has an x and a y label (its own, one of an axes it shares that axis with, or the
  figure's ``supxlabel``/``supylabel``); a colorbar has a label; an axes with two or more
  labelled artists has a legend (on the axes or the figure); diagrams drawn with the axis
  off (``ax.axis("off")``) need only the title;
* the image a fresh run draws is the image committed in the notebook (what the student sees
  before running anything): a difference means unseeded randomness, timings in the plot, or
  outputs not re-executed (``make notebooks``).

Command line, for lesson authors: ``autograder figures course/01_relu_inplace.ipynb``.
"""
from __future__ import annotations

import base64
import copy
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

__all__ = ["FIGURE_TAG", "INFO_MIME", "Figure", "execute_with_figure_info", "figure_problems",
           "lesson_problems", "describe_figures", "add_parser"]

FIGURE_TAG = "figure"
INFO_MIME = "application/vnd.autograder.figure-info+json"
IMAGE_MIMES = ("image/png", "image/svg+xml", "image/jpeg")

# Runs in the lesson's kernel before the lesson: adds a display formatter for matplotlib
# figures whose output is the JSON description of the figure being displayed.
KERNEL_HOOK = r'''
def _autograder_figure_info_hook():
    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    class FigureInfoFormatter(BaseFormatter):
        format_type = Unicode("%(mime)s")
        print_method = ObjectName("_repr_autograder_figure_info_")
        _return_type = (dict,)

    def text(artist):
        return artist.get_text() if artist is not None and artist.get_visible() else ""

    def describe(fig):
        axes = [ax for ax in fig.axes if ax.get_visible()]
        out = []
        for ax in axes:
            legend = ax.get_legend()
            out.append({
                "title": [ax.get_title(loc) for loc in ("left", "center", "right") if ax.get_title(loc).strip()],
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "zlabel": ax.get_zlabel() if hasattr(ax, "get_zlabel") else None,
                "axis_on": bool(ax.axison),
                "colorbar": getattr(ax, "_colorbar", None) is not None,
                "legend": [t.get_text() for t in legend.get_texts()] if legend is not None else None,
                "labelled": len(ax.get_legend_handles_labels()[1]),
                "shares_x": [axes.index(a) for a in ax.get_shared_x_axes().get_siblings(ax) if a is not ax and a in axes],
                "shares_y": [axes.index(a) for a in ax.get_shared_y_axes().get_siblings(ax) if a is not ax and a in axes],
            })
        return {
            "suptitle": text(getattr(fig, "_suptitle", None)),
            "supxlabel": text(getattr(fig, "_supxlabel", None)),
            "supylabel": text(getattr(fig, "_supylabel", None)),
            "figure_legends": [[t.get_text() for t in lg.get_texts()] for lg in fig.legends],
            "axes": out,
        }

    shell = get_ipython()
    formatter = FigureInfoFormatter(parent=shell.display_formatter)
    # registered for the base class: enabling the inline backend removes every formatter's
    # printer for Figure itself (IPython's select_figure_formats), not for its bases
    from matplotlib.figure import FigureBase

    formatter.for_type(FigureBase, describe)
    shell.display_formatter.formatters[formatter.format_type] = formatter


_autograder_figure_info_hook()
del _autograder_figure_info_hook
''' % {"mime": INFO_MIME}


@dataclass
class Figure:
    """One figure shown by a cell: its description and its image (as stored in the notebook)."""

    info: dict
    image: str | None
    mime: str | None


@dataclass
class CellFigures:
    index: int          # position of the cell in the notebook (0-based; messages count from 1)
    tagged: bool
    figures: list = field(default_factory=list)
    errors: list = field(default_factory=list)


def _tags(cell):
    return cell.metadata.get("tags", [])


def _image(output):
    for mime in IMAGE_MIMES:
        if mime in output.get("data", {}):
            data = output["data"][mime]
            data = "".join(data) if isinstance(data, list) else data
            return mime, "".join(data.split()) if mime != "image/svg+xml" else data
    return None, None


def execute_with_figure_info(path, timeout: int = 600) -> list:
    """Execute the notebook at ``path`` (a copy in memory); return a :class:`CellFigures` per code cell."""
    import logging

    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    run = copy.deepcopy(nb)
    run.cells.insert(0, nbformat.v4.new_code_cell(KERNEL_HOOK))
    log = logging.getLogger("autograder.figures.nbclient")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    client = NotebookClient(run, timeout=timeout, kernel_name="python3", allow_errors=True, record_timing=False,
                            log=log, resources={"metadata": {"path": str(path.resolve().parent)}})
    client.execute(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if any(o.output_type == "error" for o in run.cells[0].outputs):
        raise RuntimeError(f"the figure hook failed: {run.cells[0].outputs}")
    cells = []
    for index, cell in enumerate(run.cells[1:]):
        if cell.cell_type != "code":
            continue
        result = CellFigures(index, FIGURE_TAG in _tags(nb.cells[index]))
        for output in cell.get("outputs", []):
            if output.output_type == "error" and "raises-exception" not in _tags(nb.cells[index]):
                result.errors.append(f"{output.ename}: {output.evalue}")
            if output.output_type in ("display_data", "execute_result") and INFO_MIME in output.get("data", {}):
                mime, image = _image(output)
                result.figures.append(Figure(dict(output["data"][INFO_MIME]), image, mime))
        cells.append(result)
    return cells


def _axes_name(info, i):
    ax = info["axes"][i]
    if ax["title"]:
        return f"the axes titled {ax['title'][0]!r}"
    return "the axes" if len(info["axes"]) == 1 else f"axes {i + 1} of {len(info['axes'])}"


def figure_problems(info: dict) -> list:
    """What a figure lacks, as sentences that say how to fix it (empty when it is fine)."""
    axes = info["axes"]
    if not axes:
        return ["the figure is empty (no axes)"]
    problems = []
    if not info["suptitle"].strip() and not any(ax["title"] for ax in axes):
        problems.append("the figure has no title: use ax.set_title(...) or fig.suptitle(...)")
    for i, ax in enumerate(axes):
        name = _axes_name(info, i)
        if ax["colorbar"]:
            if not (ax["xlabel"].strip() or ax["ylabel"].strip()):
                problems.append(f"{name}: the colorbar has no label: use cbar.set_label(...)")
            continue
        if not ax["axis_on"]:
            continue  # a diagram: the title says what it is
        for axis, shares, sup in (("x", "shares_x", "supxlabel"), ("y", "shares_y", "supylabel"),
                                  ("z", None, None)):
            label = ax.get(f"{axis}label")
            if label is None:  # no z axis
                continue
            shared = [axes[j].get(f"{axis}label") or "" for j in ax[shares]] if shares else []
            if not label.strip() and not any(s.strip() for s in shared) and not (sup and info[sup].strip()):
                problems.append(f"{name} has no {axis} label: use ax.set_{axis}label(...)")
        has_legend = ax["legend"] is not None or bool(info["figure_legends"])
        if ax["labelled"] >= 2 and not has_legend:
            problems.append(f"{name} has {ax['labelled']} labelled curves but no legend: call ax.legend()")
        if ax["legend"] is not None and not any(t.strip() for t in ax["legend"]):
            problems.append(f"{name} has a legend without entries: give the plotted artists label=...")
    return problems


def lesson_problems(path, timeout: int = 600, require_figure: bool = True, cells=None) -> list:
    """Every figure rule broken by the lesson at ``path``, as messages naming the cell.

    ``cells``: the result of :func:`execute_with_figure_info` when already computed.
    """
    path = Path(path)
    committed = nbformat.read(path, as_version=4)
    cells = execute_with_figure_info(path, timeout=timeout) if cells is None else cells
    problems = []
    if require_figure and not any(c.tagged for c in cells):
        problems.append(f"{path.name} has no cell tagged {FIGURE_TAG!r}: every lesson has at least one figure")
    for cell in cells:
        first = next((line.strip() for line in committed.cells[cell.index].source.splitlines() if line.strip()), "")
        first = first if len(first) <= 40 else first[:37] + "..."
        where = f"{path.name} cell {cell.index + 1} (`{first}`)"
        for error in cell.errors:
            problems.append(f"{where} raised {error}")
        if cell.tagged and not cell.figures:
            problems.append(f"{where} is tagged {FIGURE_TAG!r} but shows no matplotlib figure")
        if cell.figures and not cell.tagged:
            problems.append(f"{where} shows a figure but is not tagged {FIGURE_TAG!r}")
        for k, figure in enumerate(cell.figures):
            label = f"{where}, figure {k + 1}"
            problems += [f"{label}: {p}" for p in figure_problems(figure.info)]
            if figure.image is None:
                problems.append(f"{label} was shown without an image")
        images = [f.image for f in cell.figures if f.image is not None]
        if len(set(images)) < len(images):
            problems.append(f"{where} shows the same figure twice: end the cell with plt.show(), not with the figure")
        if cell.figures:
            old = [_image(o) for o in committed.cells[cell.index].get("outputs", [])
                   if o.output_type in ("display_data", "execute_result")]
            old = [image for mime, image in old if image is not None]
            new = [f.image for f in cell.figures]
            if not old:
                problems.append(f"{where}: the committed notebook has no image here: run `make notebooks`")
            elif old != new:
                problems.append(f"{where}: a fresh run draws a different image than the committed one "
                                "(unseeded randomness? timings? outputs not re-executed with `make notebooks`?)")
    return problems


def describe_figures(cells) -> str:
    """A readable summary of the figures found by :func:`execute_with_figure_info`."""
    lines = []
    for cell in cells:
        for k, f in enumerate(cell.figures):
            info = f.info
            titles = [info["suptitle"]] if info["suptitle"] else []
            titles += [t for ax in info["axes"] for t in ax["title"]]
            lines.append(f"cell {cell.index + 1}, figure {k + 1}: {' / '.join(titles) or '(no title)'}")
            for i, ax in enumerate(info["axes"]):
                bits = [f"x={ax['xlabel']!r}", f"y={ax['ylabel']!r}"]
                if ax["legend"]:
                    bits.append(f"legend={ax['legend']}")
                if not ax["axis_on"]:
                    bits.append("axis off")
                lines.append(f"    axes {i + 1}: " + ", ".join(bits))
    return "\n".join(lines)


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "figures",
        help="execute lessons and check their figures (tagged, titled, labelled, deterministic)",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    parser.add_argument("lessons", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (default %(default)s)")
    parser.set_defaults(func=_main)


def _main(args) -> int:
    status = 0
    for path in args.lessons:
        if not path.is_file():
            print(f"autograder figures: {path}: no such file", file=sys.stderr)
            return 2
        print(f"{path}:")
        cells = execute_with_figure_info(path, timeout=args.timeout)
        print(describe_figures(cells) or "    no figures")
        problems = lesson_problems(path, cells=cells)
        for problem in problems:
            print(f"  problem: {problem}")
        status = status or (1 if problems else 0)
    return status

