"""The ``autograder`` command line.

Subcommands are added by the modules that implement them; each module exposes
``add_parser(subparsers)`` which registers its subcommand and sets ``func``.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# module path of each subcommand, in the order shown by --help
SUBCOMMANDS = [
    "autograder.grading.command",
    "autograder.grading.zipcollect",
    "autograder.selfcheck",
    "autograder.progress",
    "autograder.submit",
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


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
