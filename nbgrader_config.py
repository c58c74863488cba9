"""nbgrader configuration for this course.

Run nbgrader from the repository root:

    nbgrader generate_assignment 01_relu_inplace --force   # solutions/ -> exercises/
    nbgrader autograde 01_relu_inplace                     # submitted/ -> autograded/
    nbgrader generate_feedback 01_relu_inplace
    nbgrader export

The instructor's sources live in ``solutions/`` (nbgrader's "source" directory) and the
student versions are generated into ``exercises/`` (nbgrader's "release" directory).
"""

import os

c = get_config()  # noqa: F821  (provided by traitlets when nbgrader loads this file)

_here = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.course_id = "autograd-inplace"
c.CourseDirectory.root = _here
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"

# Student stub left in place of every solution region.
c.ClearSolutions.code_stub = {
    "python": "# YOUR CODE HERE\nraise NotImplementedError()",
}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# A single test cell may not hang the grader forever.
c.Execute.timeout = 120

# Deleted or metadata-stripped graded cells are restored from the source instead of
# silently scoring 0 "needs manual grade".
c.OverwriteCells.add_missing_cells = True

# `autograder grade` only: "judge" (the default: calibration decides per notebook; the judge, a
# process that never runs student code, grades what it can carry, one kernel the rest) or
# "kernel" (every notebook in one kernel in the warm sandbox: stock semantics, stock trust).
# README, "Grading any nbgrader course".
c.AutograderGrade.mode = "judge"
