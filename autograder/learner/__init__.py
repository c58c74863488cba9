"""The learner's tools that run beside the course, never in the grader:

* :mod:`.selfcheck` - the visible tests of a saved exercise notebook, run in a fresh kernel
  (``autograder check``; ``check()`` in the notebook's last cell is :mod:`autograder.selfcheck`);
* :mod:`.submit`    - ``autograder submit``: a notebook zipped in nbgrader's submission layout.

The full check (``autograder check --hidden``, :mod:`autograder.fullcheck`) and the progress
table (:mod:`autograder.progress`) grade with the grader, so they sit above both.
"""
