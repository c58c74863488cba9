"""The ``autograder`` command line.

Subcommands are added by the modules that implement them; each module exposes
``add_parser(subparsers)`` which registers its subcommand and sets ``func``.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys

# module path of each subcommand, in the order shown by --help
SUBCOMMANDS = [
    "autograder.grading.command",
    "autograder.grading.results.settle",
    "autograder.grading.results.class_report",
    "autograder.grading.serve.command",
    "autograder.grading.intake.zipcollect",
    "autograder.selfcheck",
    "autograder.progress",
    "autograder.learner.submit",
    "autograder.learner.feedback",
    "autograder.figures",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autograder",
        description="Tools of the PyTorch autograd & in-place operations course.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


NBGRADER_OPTION = re.compile(r"--[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*=.*")


def main(argv=None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # nbgrader's own --Class.trait=value options, for the commands that read the course's
        # nbgrader configuration as nbgrader does (autograder grade): passed to it, as nbgrader
        # passes its command line to traitlets
        if getattr(args, "nbgrader_options", None) is not None and all(
            NBGRADER_OPTION.fullmatch(x) for x in extra
        ):
            args.nbgrader_options = list(extra)
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
