"""Intake: the submissions found and read, trusting nothing (:mod:`.collect`); zips made by
``autograder submit`` unpacked into ``submitted/`` (:mod:`.zipcollect`)."""
