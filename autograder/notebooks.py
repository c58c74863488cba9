"""``python -m autograder.notebooks execute PATH...``: the command as written before the authoring
tools moved; the tool is :mod:`autograder.authoring.notebooks` (``make notebooks``)."""

import sys

from autograder.authoring.notebooks import execute, main, normalized, strip_volatile

__all__ = ["execute", "main", "normalized", "strip_volatile"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
