"""``autograder grade``: class-scale grading of the course's exercises.

Where trust begins and ends is a process boundary, and the package is grouped by the side of
it that a module runs on, then by pipeline step. Inside the sandbox (:mod:`.inside`: student
code runs there, nothing secret does; it imports nothing of the host side):

* :mod:`.inside.zygote`  - a warm Python that forks a relay per submission, which forks the
  student process and relays; it never runs student code;
* :mod:`.inside.student` - the student process: runs the cells, then serves the judge's calls
  into student code from a forked test process, answering with observations (plain data).

On the host (:mod:`.host`: no student code ever runs there):

* :mod:`.host.judge`      - runs the instructor's test cells against the observations and decides
  every verdict;
* :mod:`.host.supervisor` - one sandbox and one judge per worker: carries calls and observations
  between them, enforces the time limits;
* :mod:`.host.sandbox`    - the bubblewrap command line and its limits;
* :mod:`.host.scheduler`  - a local pool of sandboxes (``--jobs``) or a Dask cluster (``--scheduler``);

and the pipeline steps around them (like nbgrader's preprocessors):

* :mod:`.intake.collect`   - intake: find the submissions (``<student>/<assignment>/<notebook>.ipynb``),
  trusting nothing (no links followed, any unreadable notebook a row), and turn each into a
  task: the student's code cells in order, and the place of each test, whose source always
  comes from ``solutions/`` by ``grade_id``;
* :mod:`.intake.zipcollect` - ``autograder collect``: zips made by ``autograder submit`` into ``submitted/``;
* :mod:`.results.gradebook` - scores into nbgrader's gradebook, autograded notebooks for formgrader;
* :mod:`.results.feedback`  - one HTML page per student and assignment, without hidden test source;
* :mod:`.results.report`    - ``grades.csv``, the progress bar and the summary;
* :mod:`.config`    - the course's nbgrader configuration, and what the judge cannot run;
* :mod:`.calibrate` - grades each source notebook first: the judge grades a notebook only if the
  solution gets full marks there; otherwise the notebook is graded in one kernel (``in-kernel``);
* :mod:`.command`   - the command line (``autograder grade``);
* :mod:`.bench`     - ``make bench``: this grader against stock ``nbgrader autograde``.

What crosses between the processes is :mod:`autograder.wire` (frames, bounded JSON,
observations); calls into student code are :mod:`autograder.remote`.

Every graded test cell of every submission gets one row with one of these statuses:
"""

STATUSES = {
    "ok": "the test ran; the score is its result (full points, nbgrader's partial credit, or 0 "
          "if it raised or wrote to stderr)",
    "in-kernel": "graded as stock nbgrader grades it, in one process with the student's code (a notebook "
                 "whose tests the judge cannot run as one kernel would: see calibration.txt); the score is as "
                 "trustworthy as stock nbgrader's",
    "timeout": "the test, or a cell before it, ran past the time limit (it was killed); score 0",
    "kernel-died": "the process running the test, or the student's cells before it, exited or "
                   "crashed (os._exit, a fatal signal); score 0",
    "memory-limit": "the test, or a cell before it, ran out of the memory limit; score 0",
    "output-limit": "the test, or a cell before it, wrote more output than the limit; score 0",
    "tampered": "the student's process answered with something no honest process produces (an "
                "observation that breaks the format, garbage on the grader's channels): score 0 for "
                "the test it happened in; on the control channel every row is flagged",
    "invalid-notebook": "the file is not a readable notebook (bad JSON, not nbformat, too large, nested too "
                        "deeply, not a regular file) or is behind a symbolic link (never followed); score 0",
    "missing-notebook": "the assignment folder has no notebook of that name; score 0",
    "refused": "not graded: the student folder's name is not a usable student id (nothing in it was read, "
               "no feedback or gradebook entry is written); score 0",
    "grader-error": "the grader itself failed on this submission (a bug or a broken sandbox; "
                    "the command exits non-zero); score 0",
}

__doc__ += "\n".join(f"\n* ``{name}`` - {text}" for name, text in STATUSES.items())
