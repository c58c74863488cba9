"""autograder: the checks behind the course's test cells, and the course's command line.

By side of the grader's trust boundary, lowest layer first (``tests/test_layers.py``):

* :mod:`autograder.wire` - what crosses between the grader's processes (frames, bounded JSON,
  observations);
* :mod:`autograder.remote` - calls into student code: the judge's client, the student's server,
  the restricted pickler;
* :mod:`autograder.checks`, :mod:`autograder.probes`, :mod:`autograder.messages` - what test
  cells import: tensor/gradient comparisons, expected-error checks, "unchanged input" checks,
  all raising messages that say what was expected, what was found and the likely cause;
* :mod:`autograder.learner` - the learner's visible self-check and ``autograder submit``;
* :mod:`autograder.grading` - ``autograder grade`` (``inside`` the sandbox, on the ``host``,
  ``intake``, ``results``);
* the front: :mod:`autograder.selfcheck` (what every exercise's last cell imports),
  :mod:`autograder.fullcheck`, :mod:`autograder.progress`, :mod:`autograder.cli` (the
  ``autograder`` console script), and the authoring tools.
"""

__version__ = "0.1.0"
