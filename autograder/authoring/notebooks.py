"""Execute and normalise the course's notebooks (used by ``make notebooks`` and the tests).

``python -m autograder.authoring.notebooks execute PATH...`` runs each notebook top to bottom in a fresh
kernel (working directory = the notebook's folder) and writes the outputs back, without the
volatile per-cell timing metadata, so the committed outputs are exactly what nbval compares.
Each matplotlib figure's description (titles, labels, plotted data: ``autograder.figures``) is
recorded in its output's metadata, which nbval does not compare, for the figure check.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import nbformat

# cell / notebook metadata that changes from run to run and carries no meaning
VOLATILE_CELL_METADATA = (
    "execution",
    "collapsed",
    "scrolled",
    "jp-MarkdownHeadingCollapsed",
    "trusted",
)
VOLATILE_NOTEBOOK_METADATA = ("widgets", "toc", "varInspector")


def strip_volatile(nb):
    """Remove volatile metadata in place; return ``nb``."""
    for key in VOLATILE_NOTEBOOK_METADATA:
        nb.metadata.pop(key, None)
    for cell in nb.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
    return nb


def normalized(nb):
    """A deep copy of ``nb`` without volatile metadata, for comparisons."""
    return strip_volatile(copy.deepcopy(nb))


def execute(path: Path, timeout: int = 600, kernel_name: str = "python3") -> float:
    """Execute the notebook at ``path`` in place; return the wall time in seconds."""
    from nbclient import NotebookClient

    from autograder.figures import kernel_hook, record_figures

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    with kernel_hook() as extra_arguments:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name=kernel_name,
            allow_errors=False,
            record_timing=False,
            extra_arguments=extra_arguments,
            resources={"metadata": {"path": str(path.parent.resolve())}},
        )
        start = time.perf_counter()
        client.execute()
        elapsed = time.perf_counter() - start
    record_figures(nb)
    strip_volatile(nb)
    nbformat.write(nb, path)
    return elapsed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.authoring.notebooks")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("execute", help="execute notebooks in place (outputs committed for nbval)")
    run.add_argument("paths", nargs="+", type=Path)
    run.add_argument("--timeout", type=int, default=600)
    args = parser.parse_args(argv)
    for path in args.paths:
        seconds = execute(path, timeout=args.timeout)
        print(f"executed {path} in {seconds:.1f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
