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
* :mod:`.host.scheduler`  - one concurrent.futures path: a local thread pool of sandboxes
  (``--jobs``) or a Dask cluster's executor (``--scheduler``);

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
* :mod:`.status`    - the statuses of a row (:class:`~.status.Status`) and every text about them;
* :mod:`.calibrate` - grades each source notebook first: the judge grades a notebook only if the
  solution gets full marks there; otherwise the notebook is graded in one kernel (``in-kernel``);
* :mod:`.command`   - the command line (``autograder grade``).

``make bench`` (this grader against stock ``nbgrader autograde``) is a dev tool:
:mod:`autograder.authoring.bench`.

What crosses between the processes is :mod:`autograder.wire` (frames, bounded JSON,
observations); calls into student code are :mod:`autograder.remote`.

Every graded test cell of every submission gets one row with one of these statuses:
"""

from .status import Status  # noqa: E402 - the statuses and their texts, in one place

STATUSES = {s.value: s.meaning for s in Status}

__doc__ += "\n".join(f"\n* ``{name}`` - {text}" for name, text in STATUSES.items())
