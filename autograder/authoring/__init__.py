"""The course's authoring and developer tools: never on the graded path.

* :mod:`.notebooks` - ``make notebooks``: execute the lessons and solutions, outputs committed for
  nbval, each figure's record in its output's metadata (:mod:`autograder.figures`);
* :mod:`.bench`     - ``make bench``: ``autograder grade`` against stock ``nbgrader autograde``.

Nothing else of :mod:`autograder` imports them (``tests/test_layers.py``): the grader, the
learner's tools and what notebooks import never depend on them.
"""
