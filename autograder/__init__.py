"""autograder: the checks behind the course's test cells, and the course's command line.

* :mod:`autograder.checks` - what test cells import: tensor/gradient comparisons,
  expected-error checks, "unchanged input" checks, all raising messages that say
  what was expected, what was found and the likely cause.
* :mod:`autograder.messages` - the message format itself.
* :mod:`autograder.cli` - the ``autograder`` console script.
"""

__version__ = "0.1.0"
