"""What goes wrong with a call into student code, as the judge sees it."""

from __future__ import annotations


class StudentProcessError(BaseException):
    """The student's process could not answer (timed out, died, hit a limit, sent garbage).

    A ``BaseException``: a test's ``except Exception`` does not swallow it; the judge turns it
    into the row's status (``status``)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class UnsupportedTest(StudentProcessError):
    """A test cell passes into student code something that is not data: a function, lambda or class
    defined in the test. Only data, and functions and classes of an importable module by reference
    (:mod:`autograder.probes`, torch, the standard library), cross to the student's process.

    A grader limitation, never the student's fault: the test's row gets the status
    ``grader-error``, so calibration (:mod:`autograder.grading.calibrate`), which grades the
    instructor's solution first, grades that notebook in one kernel instead."""

    def __init__(self, message):
        super().__init__(
            "grader-error",
            f"{message}: only data, and functions or classes of an importable module "
            "(autograder.probes, torch, the standard library) by reference, can cross "
            "to the student's process (a grader limitation: the notebook is graded in "
            "one kernel)",
        )
