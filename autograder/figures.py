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
* a fresh run plots what the committed notebook shows (what the student sees before running
  anything): the same titles, labels, legends and texts exactly, and the same plotted data
  (lines, scatter points, patches, images, text positions, axis limits) within
  ``TOLERANCE`` (1 %) of the axis span. Not the PNG bytes: the lessons train small networks,
  and the last bits of a float differ with the CPU's vector unit and the BLAS kernels it
  picks (an AVX-512 Intel Xeon and an AMD EPYC draw lesson 4's GAN losses 0.001 apart after
  300 steps), which moves anti-aliased pixels but nothing a reader sees. A difference beyond
  the tolerance means unseeded randomness, timings in the plot, or outputs not re-executed
  (``make notebooks``). ``make notebooks`` records each figure's description in the output's
  metadata (which nbval does not compare), beside the image it was drawn with.

Command line, for lesson authors: ``autograder figures course/01_relu_inplace.ipynb``.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

__all__ = [
    "FIGURE_TAG",
    "INFO_MIME",
    "TOLERANCE",
    "Figure",
    "kernel_hook",
    "record_figures",
    "execute_with_figure_info",
    "cell_figures",
    "figure_problems",
    "figure_differences",
    "lesson_problems",
    "describe_figures",
    "add_parser",
]

FIGURE_TAG = "figure"
INFO_MIME = "application/vnd.autograder.figure-info+json"
IMAGE_MIMES = ("image/png", "image/svg+xml", "image/jpeg")
# A plotted value may move by this fraction of its axis span between runs (CPU-dependent
# rounding); a meaningful change to a figure (another curve, a rescaled one, new random data)
# moves much more. Images and colour arrays: this fraction of their value range.
TOLERANCE = 0.01

# Runs in the lesson's kernel at start-up (IPython's exec_files, so no cell and no execution
# count is added): adds a display formatter for matplotlib figures whose output is the JSON
# description of the figure being displayed, its plotted data included.
KERNEL_HOOK = r'''
def _autograder_figure_info_hook():
    import math

    import numpy as np
    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    class FigureInfoFormatter(BaseFormatter):
        format_type = Unicode("%(mime)s")
        print_method = ObjectName("_repr_autograder_figure_info_")
        _return_type = (dict,)

    def text(artist):
        return artist.get_text() if artist is not None and artist.get_visible() else ""

    def number(v):
        v = float(v)
        return float(f"{v:.7g}") if math.isfinite(v) else None  # JSON has no NaN/inf

    def points(a):
        """An (n, 2) array of data coordinates as a list of [x, y] (None for non-finite)."""
        a = np.ma.filled(np.ma.asarray(a, dtype=float), np.nan).reshape(-1, 2)
        return [[number(x), number(y)] for x, y in a]

    def values(a):
        a = np.ma.filled(np.ma.asarray(a, dtype=float), np.nan)
        return {"shape": list(a.shape), "values": [number(v) for v in a.ravel()]}

    def plotted(ax):
        """What the axes shows, as numbers in data coordinates: the figure's meaning, not its pixels."""
        out = []
        for line in ax.lines:
            try:
                xy = points(np.column_stack([np.asarray(line.get_xdata(), dtype=float).ravel(),
                                             np.asarray(line.get_ydata(), dtype=float).ravel()]))
            except (TypeError, ValueError):  # categorical or date data
                xy = [[str(x), str(y)] for x, y in zip(line.get_xdata(), line.get_ydata())]
            out.append({"kind": "line", "label": line.get_label(), "xy": xy})
        for c in ax.collections:
            item = {"kind": "collection", "label": c.get_label()}
            offsets = np.asarray(c.get_offsets())
            if type(c).__name__ == "PathCollection" or len(offsets) > 1:  # scatter
                item["xy"] = points(offsets)
            else:  # fill_between, LineCollection, ...: the paths' vertices
                verts = [p.vertices for p in c.get_paths()]
                item["xy"] = points(np.concatenate(verts)) if verts else []
            array = c.get_array()
            if array is not None:
                item["array"] = values(array)
            out.append(item)
        for p in ax.patches:
            xy = p.get_patch_transform().transform(p.get_path().vertices)
            out.append({"kind": "patch", "label": p.get_label(), "xy": points(xy)})
        for im in ax.images:
            out.append({"kind": "image", "label": im.get_label(), "array": values(im.get_array())})
        for t in ax.texts:
            out.append({"kind": "text", "label": t.get_text(), "xy": points(np.asarray(t.get_position()))})
        return out

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
                "scale": [ax.get_xscale(), ax.get_yscale()],
                "limits": [[number(v) for v in ax.get_xlim()], [number(v) for v in ax.get_ylim()]],
                "plotted": plotted(ax),
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
'''.replace("%(mime)s", INFO_MIME)


@dataclass
class Figure:
    """One figure shown by a cell: its description and its image (as stored in the notebook)."""

    info: dict
    image: str | None
    mime: str | None


@dataclass
class CellFigures:
    index: int  # position of the cell in the notebook (0-based; messages count from 1)
    tagged: bool
    figures: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    outputs: list = field(default_factory=list)  # the fresh run's outputs, figure records removed


def _tags(cell):
    return cell.metadata.get("tags", [])


def _image(output):
    for mime in IMAGE_MIMES:
        if mime in output.get("data", {}):
            data = output["data"][mime]
            data = "".join(data) if isinstance(data, list) else data
            return mime, "".join(data.split()) if mime != "image/svg+xml" else data
    return None, None


@contextlib.contextmanager
def kernel_hook():
    """The kernel's ``extra_arguments`` that install the figure description formatter at start-up."""
    with tempfile.TemporaryDirectory(prefix="autograder-figures-") as folder:
        hook = Path(folder) / "figure_hook.py"
        hook.write_text(KERNEL_HOOK)
        yield [f"--IPKernelApp.exec_files={hook}"]


def image_digest(image: str) -> str:
    return hashlib.sha256(image.encode()).hexdigest()


def record_figures(nb):
    """Move each figure description out of the outputs' data into their metadata, in place.

    Data would be compared by nbval (and the plotted numbers are CPU-dependent in their last
    bits); output metadata is not. The record keeps the digest of the image it belongs to, so
    an image re-drawn without a record (a run in JupyterLab) is caught.
    """
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            info = output.get("data", {}).pop(INFO_MIME, None)
            if info is None:
                continue
            mime, image = _image(output)
            output.setdefault("metadata", {})[INFO_MIME] = {
                # one line of compact JSON: thousands of plotted numbers, not thousands of lines
                "figure": json.dumps(info, separators=(",", ":")),
                "image_sha256": image_digest(image) if image is not None else None,
            }
    return nb


def execute_with_figure_info(path, timeout: int = 600, env: dict | None = None) -> list:
    """Execute the notebook at ``path`` (a copy in memory); return a :class:`CellFigures` per code cell.

    ``env``: variables added to the kernel's environment (e.g. ``ATEN_CPU_CAPABILITY``).
    """
    import logging

    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    run = copy.deepcopy(nb)
    log = logging.getLogger("autograder.figures.nbclient")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    with kernel_hook() as extra_arguments:
        client = NotebookClient(
            run,
            timeout=timeout,
            kernel_name="python3",
            allow_errors=True,
            record_timing=False,
            log=log,
            extra_arguments=extra_arguments,
            resources={"metadata": {"path": str(path.resolve().parent)}},
        )
        client.execute(
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})}
        )
    return [
        cell_figures(index, nb.cells[index], cell.get("outputs", []))
        for index, cell in enumerate(run.cells)
        if cell.cell_type == "code"
    ]


def cell_figures(index: int, committed, outputs) -> CellFigures:
    """The figures of code cell ``index`` in a fresh run's ``outputs`` (of a kernel started with
    :func:`kernel_hook`: nbclient's above, or nbval's); ``committed``: the cell as committed."""
    result = CellFigures(index, FIGURE_TAG in _tags(committed))
    for output in outputs:
        if output.output_type == "error" and "raises-exception" not in _tags(committed):
            result.errors.append(f"{output.ename}: {output.evalue}")
        if output.output_type in ("display_data", "execute_result") and INFO_MIME in output.get(
            "data", {}
        ):
            mime, image = _image(output)
            result.figures.append(Figure(dict(output["data"][INFO_MIME]), image, mime))
    fresh = nbformat.v4.new_code_cell(outputs=copy.deepcopy(list(outputs)))
    result.outputs = record_figures(nbformat.v4.new_notebook(cells=[fresh])).cells[0].outputs
    return result


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
        for axis, shares, sup in (
            ("x", "shares_x", "supxlabel"),
            ("y", "shares_y", "supylabel"),
            ("z", None, None),
        ):
            label = ax.get(f"{axis}label")
            if label is None:  # no z axis
                continue
            shared = [axes[j].get(f"{axis}label") or "" for j in ax[shares]] if shares else []
            if (
                not label.strip()
                and not any(s.strip() for s in shared)
                and not (sup and info[sup].strip())
            ):
                problems.append(f"{name} has no {axis} label: use ax.set_{axis}label(...)")
        has_legend = ax["legend"] is not None or bool(info["figure_legends"])
        if ax["labelled"] >= 2 and not has_legend:
            problems.append(
                f"{name} has {ax['labelled']} labelled curves but no legend: call ax.legend()"
            )
        if ax["legend"] is not None and not any(t.strip() for t in ax["legend"]):
            problems.append(
                f"{name} has a legend without entries: give the plotted artists label=..."
            )
    return problems


def _span(limits) -> float:
    low, high = limits
    span = abs(high - low)
    return span if math.isfinite(span) and span > 0 else 1.0


def _numbers(xy, scales):
    """``xy`` as a float array (None -> nan) on the axes' scales (log axes compared in decades)."""
    import numpy as np

    a = np.array([[math.nan if v is None else v for v in p] for p in xy], dtype=float).reshape(
        -1, 2
    )
    for k, scale in enumerate(scales):
        if scale == "log":
            with np.errstate(divide="ignore", invalid="ignore"):
                a[:, k] = np.log10(np.abs(a[:, k]))
    return a


def _moved(old, new, spans):
    """The largest move of ``new`` from ``old`` as a fraction of each column's span, or None if the
    non-finite entries differ; ``old``/``new`` are (n, 2) arrays."""
    import numpy as np

    if not np.array_equal(np.isfinite(old), np.isfinite(new)):
        return None
    finite = np.isfinite(old)
    moved = np.abs(np.where(finite, old, 0) - np.where(finite, new, 0)) / np.asarray(
        spans, dtype=float
    )
    return float(moved.max()) if moved.size else 0.0


def _value_range(values):
    finite = [v for v in values if v is not None]
    return (max(finite) - min(finite)) or 1.0 if finite else 1.0


def figure_differences(old: dict, new: dict, tolerance: float = TOLERANCE) -> list:
    """How the figure ``new`` differs from ``old`` (descriptions from the kernel hook), as sentences.

    Texts (titles, labels, legends, annotations) and the number and kind of plotted artists
    must be equal; plotted numbers may move by ``tolerance`` of their axis span (of their value
    range for images and colour arrays).
    """
    out = []
    for key in ("suptitle", "supxlabel", "supylabel", "figure_legends"):
        if old.get(key) != new.get(key):
            out.append(f"its {key} is {new.get(key)!r}, committed {old.get(key)!r}")
    if len(old["axes"]) != len(new["axes"]):
        return out + [f"it has {len(new['axes'])} axes, committed {len(old['axes'])}"]
    for i, (a, b) in enumerate(zip(old["axes"], new["axes"], strict=True)):
        name = _axes_name(old, i)
        for key in (
            "title",
            "xlabel",
            "ylabel",
            "zlabel",
            "legend",
            "axis_on",
            "colorbar",
            "scale",
        ):
            if a.get(key) != b.get(key):
                out.append(f"{name}: {key} is {b.get(key)!r}, committed {a.get(key)!r}")
        if "plotted" not in a or "plotted" not in b:
            out.append(f"{name}: no record of the plotted data: re-execute with `make notebooks`")
            continue
        kinds = [(p["kind"], p["label"]) for p in a["plotted"]]
        kinds_new = [(p["kind"], p["label"]) for p in b["plotted"]]
        if kinds != kinds_new:
            out.append(
                f"{name}: it plots {[k for k, _ in kinds_new]}, committed {[k for k, _ in kinds]}"
                " (or their labels differ)"
            )
            continue
        scales = a.get("scale") or ["linear", "linear"]
        lims = _numbers(list(zip(*a["limits"], strict=False)), scales) if a.get("limits") else None
        spans = [_span(list(lims[:, k])) for k in range(2)] if lims is not None else [1.0, 1.0]
        for p, q in zip(a["plotted"], b["plotted"], strict=True):
            what = f"{name}, {p['kind']}" + (
                f" {p['label']!r}" if p["label"] and not p["label"].startswith("_") else ""
            )
            if "xy" in p:
                if len(p["xy"]) != len(q["xy"]):
                    out.append(f"{what}: {len(q['xy'])} points, committed {len(p['xy'])}")
                    continue
                if any(isinstance(v, str) for pt in p["xy"] for v in pt):
                    if p["xy"] != q["xy"]:
                        out.append(f"{what}: its categories differ from the committed ones")
                    continue
                moved = _moved(_numbers(p["xy"], scales), _numbers(q["xy"], scales), spans)
                if moved is None:
                    out.append(
                        f"{what}: its missing (NaN/inf) points differ from the committed ones"
                    )
                elif moved > tolerance:
                    out.append(
                        f"{what}: a point moved by {moved:.1%} of the axis span "
                        f"(tolerance {tolerance:.0%})"
                    )
            if "array" in p:
                if p["array"]["shape"] != q["array"]["shape"]:
                    out.append(
                        f"{what}: shape {q['array']['shape']}, committed {p['array']['shape']}"
                    )
                    continue
                old_v = _numbers([[v, 0] for v in p["array"]["values"]], ["linear", "linear"])[
                    :, :1
                ]
                new_v = _numbers([[v, 0] for v in q["array"]["values"]], ["linear", "linear"])[
                    :, :1
                ]
                moved = _moved(old_v, new_v, [_value_range(p["array"]["values"])])
                if moved is None:
                    out.append(
                        f"{what}: its missing (NaN/inf) values differ from the committed ones"
                    )
                elif moved > tolerance:
                    out.append(
                        f"{what}: a value moved by {moved:.1%} of the value range "
                        f"(tolerance {tolerance:.0%})"
                    )
        if a.get("limits") and b.get("limits"):
            moved = _moved(lims, _numbers(list(zip(*b["limits"], strict=False)), scales), spans)
            if moved is None or moved > tolerance:
                out.append(f"{name}: the axis limits are {b['limits']}, committed {a['limits']}")
    return out


def _committed_problems(where, outputs, figures) -> list:
    """Compare the figures a fresh run drew with the committed outputs (``outputs``: those with an image)."""
    records = [o.get("metadata", {}).get(INFO_MIME) for o in outputs]
    if any(r is None for r in records):
        return [
            f"{where}: the committed figure has no record of its plotted data: re-execute the lesson "
            "with `make notebooks`"
        ]
    if any(
        r["image_sha256"] != image_digest(_image(o)[1])
        for r, o in zip(records, outputs, strict=True)
    ):
        return [
            f"{where}: the committed image was not drawn by the run that recorded its data: re-execute "
            "the lesson with `make notebooks`"
        ]
    if len(records) != len(figures):
        return [
            f"{where}: a fresh run shows {len(figures)} figures, the committed notebook {len(records)}"
        ]
    problems = []
    for k, (record, figure) in enumerate(zip(records, figures, strict=True)):
        differences = figure_differences(json.loads(record["figure"]), figure.info)
        if differences:
            n = len(differences) - 1
            more = f" (and {n} more difference{'s' if n > 1 else ''})" if n else ""
            problems.append(
                f"{where}, figure {k + 1}: a fresh run draws a different figure than the committed "
                f"one: {differences[0]}{more} (unseeded randomness? timings? outputs not "
                "re-executed with `make notebooks`?)"
            )
    return problems


def lesson_problems(
    path, timeout: int = 600, require_figure: bool = True, cells=None, env: dict | None = None
) -> list:
    """Every figure rule broken by the lesson at ``path``, as messages naming the cell.

    ``cells``: the result of :func:`execute_with_figure_info` when already computed; ``env``:
    variables added to the kernel's environment for the fresh run.
    """
    path = Path(path)
    committed = nbformat.read(path, as_version=4)
    cells = execute_with_figure_info(path, timeout=timeout, env=env) if cells is None else cells
    problems = []
    if require_figure and not any(c.tagged for c in cells):
        problems.append(
            f"{path.name} has no cell tagged {FIGURE_TAG!r}: every lesson has at least one figure"
        )
    for cell in cells:
        first = next(
            (
                line.strip()
                for line in committed.cells[cell.index].source.splitlines()
                if line.strip()
            ),
            "",
        )
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
            problems.append(
                f"{where} shows the same figure twice: end the cell with plt.show(), not with the figure"
            )
        if cell.figures:
            old = [
                o
                for o in committed.cells[cell.index].get("outputs", [])
                if o.output_type in ("display_data", "execute_result") and _image(o)[1] is not None
            ]
            if not old:
                problems.append(
                    f"{where}: the committed notebook has no image here: run `make notebooks`"
                )
            else:
                problems += _committed_problems(where, old, cell.figures)
    return problems


def describe_figures(cells) -> str:
    """A readable summary of the figures found by :func:`execute_with_figure_info`."""
    lines = []
    for cell in cells:
        for k, f in enumerate(cell.figures):
            info = f.info
            titles = [info["suptitle"]] if info["suptitle"] else []
            titles += [t for ax in info["axes"] for t in ax["title"]]
            lines.append(
                f"cell {cell.index + 1}, figure {k + 1}: {' / '.join(titles) or '(no title)'}"
            )
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
    parser.add_argument(
        "--timeout", type=int, default=600, help="seconds per cell (default %(default)s)"
    )
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
