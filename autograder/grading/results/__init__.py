"""Results: ``grades.csv`` and the summary (:mod:`.report`), feedback pages (:mod:`.feedback`),
nbgrader's gradebook and autograded notebooks (:mod:`.gradebook`)."""
