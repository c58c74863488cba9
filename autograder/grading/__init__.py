"""``autograder grade``: class-scale grading of the course's exercises.

One module per pipeline step (like nbgrader's preprocessors):

* :mod:`.collect`   - find the submissions (``<student>/<assignment>/<notebook>.ipynb``) and turn
  each into a task: the student's code cells in order, and at each test cell's place the
  instructor's test, always taken from ``solutions/`` by ``grade_id``;
* :mod:`.sandbox`   - bubblewrap sandboxes with a warm Python in each (a *zygote*) and the
  resource limits;
* :mod:`.harness`   - what runs inside a sandbox: the zygote forks a fresh process per
  submission, which runs the student's cells and forks once more for every run of
  consecutive tests;
* :mod:`.protect`   - what keeps the tests' view of torch, the checks and the interpreter
  intact, and authenticates results;
* :mod:`.scheduler` - a local pool of sandboxes (``--jobs``) or a Dask cluster (``--scheduler``);
* :mod:`.gradebook` - scores into nbgrader's gradebook, autograded notebooks for formgrader;
* :mod:`.feedback`  - one HTML page per student and assignment, without hidden test source;
* :mod:`.report`    - ``grades.csv``, the progress bar and the summary;
* :mod:`.command`   - the command line (``autograder grade``).

Every graded test cell of every submission gets one row with one of these statuses:
"""

STATUSES = {
    "ok": "the test ran; the score is its result (full points, nbgrader's partial credit, or 0 "
          "if it raised or wrote to stderr)",
    "timeout": "the test, or a cell before it, ran past the time limit (it was killed); score 0",
    "kernel-died": "the process running the test, or the student's cells before it, exited or "
                   "crashed (os._exit, a fatal signal); score 0",
    "memory-limit": "the test, or a cell before it, ran out of the memory limit; score 0",
    "output-limit": "the test, or a cell before it, wrote more output than the limit; score 0",
    "tampered": "the submission changed protected state (torch, the checks, builtins, the "
                "interpreter's hooks) or tried a forbidden operation: before its tests (their scores "
                "are computed with everything restored) or during this test (score 0)",
    "invalid-notebook": "the file is not a readable notebook (bad JSON, not nbformat, too large); score 0",
    "missing-notebook": "the assignment folder has no notebook of that name; score 0",
    "grader-error": "the grader itself failed on this submission (a bug or a broken sandbox; "
                    "the command exits non-zero); score 0",
}

__doc__ += "\n".join(f"\n* ``{name}`` - {text}" for name, text in STATUSES.items())
