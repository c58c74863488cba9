"""The lessons' figure check, in strict nbval's own run of each lesson (tests/conftest.py).

nbval runs every lesson in course/ (0[1-9]*.ipynb; the start page has no figure) cell by cell and
compares each cell's outputs with the committed ones. For the lessons its kernel starts as another
CPU would run them - ATen's portable scalar kernels (``ATEN_CPU_CAPABILITY=default``) instead of
the machine's AVX2/AVX-512 ones, and one thread instead of the machine's cores, so computed
floats differ in their last bits as they do on another CPU - and with the figure formatter of
:mod:`autograder.figures` installed (IPython's ``exec_files``: no cell, no execution count), whose
records nbval leaves out of its comparison. After the last cell, the item
``course/<lesson>.ipynb::figures`` checks the same run's fresh outputs: every figure rule of
:func:`autograder.figures.lesson_problems` (drawn, titled, labelled, plotting the committed
data within its tolerance), and every cell's text again as :func:`texts` reads it (so a cell
nbval is told to skip or not to compare is still compared here). One run of each lesson, not
two; a lesson whose cells were not all run by nbval (a ``-k`` selection) is run here instead.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
LESSONS = sorted((REPO / "course").glob("0[1-9]*.ipynb"))
# Another CPU, as far as one machine can play it: no vectorised ATen kernels, and one thread
# (another core count: parallel reductions split their work by thread).
OTHER_CPU = {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"}

SANITIZE = configparser.ConfigParser()
SANITIZE.read(REPO / "tests" / "nbval_sanitize.cfg")


def texts(outputs):
    """What strict nbval compares of a cell's outputs: texts and error names/values, sanitized."""
    found = []
    for output in outputs:
        if output.output_type == "stream":  # chunks of one stream joined, as nbval does
            if found and found[-1][0] == output.name:
                found[-1] = (output.name, found[-1][1] + output.text)
            else:
                found.append((output.name, output.text))
        elif output.output_type == "error":
            found.append((output.ename, output.evalue))
        else:
            found += [
                (mime, value)
                for mime, value in output.get("data", {}).items()
                if mime.startswith("text/")
            ]
    for section in SANITIZE.sections():
        regex, replace = re.compile(SANITIZE[section]["regex"]), SANITIZE[section]["replace"]
        found = [(kind, regex.sub(replace, "".join(value))) for kind, value in found]
    return found


def lesson_problems(lesson: Path, cells) -> list:
    """Every figure rule the fresh run ``cells`` (:func:`autograder.figures.cell_figures` of each
    code cell) breaks, and every cell whose text differs from the committed one."""
    from autograder.figures import lesson_problems as figure_rules

    problems = figure_rules(lesson, cells=cells)
    committed = nbformat.read(lesson, as_version=4).cells
    for cell in cells:
        if texts(cell.outputs) != texts(committed[cell.index].outputs):
            problems.append(
                f"cell {cell.index + 1} prints other text under {OTHER_CPU}:\n"
                f"  committed: {texts(committed[cell.index].outputs)}\n"
                f"  fresh:     {texts(cell.outputs)}"
            )
    return problems


class LessonFigures(pytest.Item):
    """``course/<lesson>.ipynb::figures``: the checks above, on nbval's run of the lesson."""

    def __init__(self, *, cells, **kwargs):
        super().__init__(**kwargs)
        self.cells = cells  # nbval's items of this lesson, in order

    def runtest(self):
        from autograder.figures import cell_figures, execute_with_figure_info

        lesson = Path(self.parent.path)
        if all(item.test_outputs is not None for item in self.cells):
            # the run was another CPU's: the kernel nbval ran the lesson in says so itself
            said = _kernel_says(
                self.parent.kernel,
                "import torch\nprint(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())",
            )
            assert said.split() == ["DEFAULT", "1"], (
                f"nbval's kernel runs {said!r}, not {OTHER_CPU}"
            )
            committed = self.parent.nb.cells
            cells = [
                cell_figures(
                    next(i for i, c in enumerate(committed) if c is item.cell),
                    item.cell,
                    item.test_outputs,
                )
                for item in self.cells
            ]
        else:  # nbval did not run every cell: one run of our own, as nbval's would have been
            cells = execute_with_figure_info(lesson, env=OTHER_CPU)
        problems = lesson_problems(lesson, cells)
        assert not problems, "\n".join(problems)

    def reportinfo(self):
        return self.path, 0, f"{self.name}: figures and texts of nbval's run under {OTHER_CPU}"


def _kernel_says(kernel, code: str) -> str:
    """What ``code`` prints in nbval's running kernel (``nbval.kernel.RunningKernel``)."""
    msg_id = kernel.execute_cell_input(code, allow_stdin=False)
    kernel.await_reply(msg_id, timeout=60)
    said = ""
    while True:
        msg = kernel.get_message("iopub", timeout=10)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            said += msg["content"]["text"]
        elif msg["msg_type"] == "error":
            said += f"{msg['content']['ename']}: {msg['content']['evalue']}"
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return said


def is_lesson(collector) -> bool:
    return Path(str(getattr(collector, "path", ""))) in LESSONS


def add_figure_checks(items) -> list:
    """``items`` with nbval's kernels for the lessons started as another CPU with the figure
    formatter, and a :class:`LessonFigures` item after each lesson's last cell."""
    from autograder.figures import INFO_MIME

    out = []
    lesson_cells: dict = {}
    for item in items:
        out.append(item)
        file = item.parent
        if not is_lesson(file) or isinstance(item, LessonFigures):
            continue
        if file not in lesson_cells:
            lesson_cells[file] = []
            file.skip_compare = (*file.skip_compare, INFO_MIME)  # the records: checked here
            file.setup = _kernel_as_another_cpu(file.setup)
        lesson_cells[file].append(item)
    for file, cells in lesson_cells.items():
        figures = LessonFigures.from_parent(file, name="figures", cells=cells)
        out.insert(out.index(cells[-1]) + 1, figures)
    return out


def _kernel_as_another_cpu(setup):
    """nbval's ``IPyNbFile.setup``, starting its kernel with OTHER_CPU and the figure formatter."""

    def wrapped():
        import nbval.kernel

        from autograder.figures import kernel_hook

        start = nbval.kernel.start_new_kernel

        def start_new_kernel(**kwargs):
            return start(**kwargs, env={**os.environ, **OTHER_CPU}, extra_arguments=hook)

        with kernel_hook() as hook, contextlib.ExitStack() as restore:
            nbval.kernel.start_new_kernel = start_new_kernel
            restore.callback(setattr, nbval.kernel, "start_new_kernel", start)
            setup()

    return wrapped
