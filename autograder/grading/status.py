"""The status of a row of ``grades.csv`` - why its score is what it is - with every text that
explains it, in one place.

A :class:`Status` is a ``str`` (``Status.TIMEOUT == "timeout"``, the same hash): the CSV, the
JSON between the grader's processes, the gradebook and the feedback pages carry its plain text.
Two other vocabularies meet it here: what a code cell did in the student's process (``error``,
``died``, a limit: :data:`CELL_LABELS`, :data:`OF_CELL`) and what a call into student code got
instead of an answer (:data:`CALL_TEXT`).
"""

from __future__ import annotations

import enum


class Status(enum.StrEnum):
    """One row's status (the ``status`` column of ``grades.csv``)."""

    OK = "ok"
    IN_KERNEL = "in-kernel"
    UNCONFIRMED = "unconfirmed"
    CONTRADICTED = "contradicted"
    SETTLED = "settled"
    TIMEOUT = "timeout"
    KERNEL_DIED = "kernel-died"
    MEMORY_LIMIT = "memory-limit"
    OUTPUT_LIMIT = "output-limit"
    TAMPERED = "tampered"
    INVALID_NOTEBOOK = "invalid-notebook"
    MISSING_NOTEBOOK = "missing-notebook"
    NOT_IN_NOTEBOOK = "not-in-notebook"
    REFUSED = "refused"
    GRADER_ERROR = "grader-error"

    @property
    def meaning(self) -> str:
        """What the status means, for the instructor (``autograder grade --help``, the feedback)."""
        return MEANING[self]

    @property
    def message(self) -> str | None:
        """The row's message when the test itself left none (None: the status needs none)."""
        return MESSAGE.get(self)

    @classmethod
    def of(cls, text) -> Status:
        """The row status for what a verdict or a process reported (this file is the one place a
        row's status comes from): a status of the table as it is, a known alias as its status
        (:data:`ALIASES`), and anything else ``grader-error`` - an unknown word is the grader's
        failure to say why, never a status docs/instructor.md does not list."""
        if isinstance(text, str):
            if text in cls._value2member_map_:
                return cls(text)
            if text in ALIASES:
                return ALIASES[text]
        return cls.GRADER_ERROR


MEANING = {
    Status.OK: "the test ran; the score is its result (full points, nbgrader's partial credit, or 0 "
    "if it raised or wrote to stderr)",
    Status.IN_KERNEL: "graded as stock nbgrader grades it, in one process with the student's code, only: "
    "a test cell the judge cannot grade even for the solution (calibration.txt says why); the score "
    "is as trustworthy as stock nbgrader's",
    Status.UNCONFIRMED: "graded two ways, one kernel (stock nbgrader's verdict) gave more than the judge "
    "confirmed: a forged pass, or state the judge does not carry; both scores and the judge's reason "
    "are in the row, the score is AutograderGrade.counts' (default one kernel's); `autograder settle` "
    "closes it",
    Status.CONTRADICTED: "graded two ways, the judge gave more than one kernel (stock nbgrader's "
    "verdict): e.g. a function that changed the test's own arguments; both scores are in the row, the "
    "score is AutograderGrade.counts' (default one kernel's); `autograder settle` closes it",
    Status.SETTLED: "a difference the instructor settled with `autograder settle` (the score it took)",
    Status.TIMEOUT: "the test, or a cell before it, ran past the time limit (it was killed); score 0",
    Status.KERNEL_DIED: "the process running the test, or the student's cells before it, exited or "
    "crashed (os._exit, a fatal signal); score 0",
    Status.MEMORY_LIMIT: "the test, or a cell before it, ran out of the memory limit; score 0",
    Status.OUTPUT_LIMIT: "the test, or a cell before it, wrote more output than the limit; score 0",
    Status.TAMPERED: "the student's process answered with something no honest process produces (an "
    "observation that breaks the format, garbage on the grader's channels): score 0 for "
    "the test it happened in; on the control channel every row is flagged",
    Status.INVALID_NOTEBOOK: "the file is not a readable notebook (bad JSON, not nbformat, too large, nested too "
    "deeply, not a regular file) or is behind a symbolic link (never followed); score 0",
    Status.MISSING_NOTEBOOK: "the assignment folder has no notebook of that name; score 0",
    Status.NOT_IN_NOTEBOOK: "the test cell is not in the student's notebook (deleted, or its nbgrader "
    "metadata removed) and the course leaves such cells out (OverwriteCells.add_missing_cells False, "
    "nbgrader's default): not run, score 0, left for manual grading in formgrader, as nbgrader "
    "autograde leaves it",
    Status.REFUSED: "not graded: the student folder's name is not a usable student id, or the "
    "submission's timestamp.txt is not a time nbgrader reads (stock refuses it too); nothing in it "
    "was read, no feedback or gradebook entry is written; score 0",
    Status.GRADER_ERROR: "the grader itself failed on this submission (a bug or a broken sandbox; "
    "the command exits non-zero); score 0",
}

MESSAGE = {
    Status.NOT_IN_NOTEBOOK: "this test cell is not in your notebook (deleted, or its nbgrader "
    "metadata removed), so it was not run; it scores 0 until your instructor grades it",
    Status.TIMEOUT: "the test ran past the time limit and was stopped",
    Status.KERNEL_DIED: "the student's process exited or crashed during the test",
    Status.MEMORY_LIMIT: "the student's code ran out of memory during the test",
    Status.OUTPUT_LIMIT: "the student's code wrote more output than the limit",
    Status.TAMPERED: "the student's process sent an answer that cannot be genuine",
    Status.GRADER_ERROR: "the grader failed on this test",
}

# words a verdict or a process may carry that are not row statuses, and the status each becomes:
# a reply the student's process could not encode (a value the observation format cannot carry)
# is the grader's limitation, never the student's fault
ALIASES = {
    "observation-error": Status.GRADER_ERROR,
    "no-process": Status.KERNEL_DIED,
    "died": Status.KERNEL_DIED,
}

# a code cell that hit a limit in the student's process -> the status of the tests after it
LIMITS = {
    "timeout": Status.TIMEOUT,
    "memory-limit": Status.MEMORY_LIMIT,
    "output-limit": Status.OUTPUT_LIMIT,
}
# a test cell run in one kernel (calibration's in-kernel mode) that hit a limit or died -> its status
OF_CELL = {**LIMITS, "died": Status.KERNEL_DIED}

# what a code cell did, for the student's feedback page ("Your code cell 3 raised: ...")
CELL_LABELS = {
    "error": "raised",
    "timeout": "ran past the time limit and was interrupted",
    "memory-limit": "ran out of memory",
    "output-limit": "wrote more output than the limit",
    "died": "ended the notebook's process",
}

# what a call into student code got instead of an answer (the supervisor's reply to the judge)
CALL_TEXT = {
    "timeout": "the call into student code ran past the time limit and was stopped",
    "kernel-died": "the student's process exited or crashed during the call",
    "output-limit": "the student's process wrote more output than the limit",
    "tampered": "the student's process sent an answer that cannot be genuine",
    "no-process": "the student's process is gone",
}
