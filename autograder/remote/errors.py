"""What goes wrong with a call into student code, as the judge sees it."""

from __future__ import annotations

NEEDS_KERNEL = "needs-kernel"  # what the judge cannot carry: its verdict is "not confirmed"


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

    A grader limitation, never the student's fault: the status ``needs-kernel`` makes the judge's
    verdict "not confirmed" (:mod:`autograder.grading.verdicts`): calibration gives the test cell to
    one kernel alone when the instructor's solution does it; when only a student's notebook does,
    the row is a difference the instructor sees, with one kernel's score counted by default."""

    def __init__(self, message):
        super().__init__(
            NEEDS_KERNEL,
            f"{message}: only data, and functions or classes of an importable module "
            "(autograder.probes, torch, the standard library) by reference, can cross "
            "to the student's process (a grader limitation: the judge does not confirm "
            "this test; one kernel's verdict stands)",
        )
