"""Every setting ``nbgrader autograde`` reads, and what ``autograder grade`` does with it.

A course configures ``nbgrader autograde`` through ``nbgrader_config.py`` (and the user's and
system's Jupyter config, and ``--Class.trait=value`` options). :func:`audit` looks at every
configurable that command builds - the application, ``CourseDirectory``, the ``Autograde``
converter, each preprocessor of its two pipelines - as nbgrader
builds them (so a value set on a parent class, ``ExecutePreprocessor.timeout``, counts for the
class that reads it, ``Execute.timeout``), and sorts every trait the configuration sets to a value
other than its default into one of three kinds; none is ignored:

* :data:`HONOURED` - ``autograder grade`` does what ``nbgrader autograde`` does with it;
* :data:`NO_EFFECT` - it changes no score, no gradebook entry and no file of ``autograded/``
  (nbgrader's log, how nbclient talks to a kernel, how much output a saved notebook keeps):
  named on stderr at start, with why;
* anything else - refused at start (exit 2), named, with why: grading on would give scores that
  differ from stock's without anyone seeing it.

Traits that ``nbgrader autograde`` itself never reads (``CourseDirectory.release_directory``, the
exchange's ``max_file_size`` ...) are not looked at, as nbgrader does not look at them.
"""

from __future__ import annotations

# Class.trait -> how it is honoured (where), for the table in docs/instructor.md and the tests
HONOURED: dict[str, str] = {
    "CourseDirectory.root": "the course folder",
    "CourseDirectory.course_id": "the gradebook's course",
    "CourseDirectory.source_directory": "where the source notebooks are",
    "CourseDirectory.submitted_directory": "the default submissions folder",
    "CourseDirectory.autograded_directory": "where autograded notebooks go",
    "CourseDirectory.feedback_directory": "read for nbgrader generate_feedback",
    "CourseDirectory.db_url": "the gradebook",
    "CourseDirectory.ignore": "files not copied beside a notebook",
    "CourseDirectory.groupshared": "folders in autograded/ shared with the group",
    "CourseDirectory.student_id_exclude": "students not graded",
    "CourseDirectory.assignment_id": "as --assignment",
    "CourseDirectory.student_id": "as --student",
    "CourseDirectory.notebook_id": "as --notebook",
    "Autograde.create_student": "unknown students refused when False",
    "Autograde.exclude_overwriting": "the student's copy of those files kept",
    "Autograde.permissions": "the mode of autograded files",
    "Autograde.force": "as --force",
    "Execute.timeout": "each cell's and test cell's time limit (--timeout)",
    "Execute.skip_cells_with_tag": "a student's code cell carrying the tag is not run",
    "OverwriteCells.add_missing_cells": "a test cell the notebook lacks is put back, or left out",
    "AssignLatePenalties.plugin_class": "the late-penalty plugin",
    "LateSubmissionPlugin.penalty_method": "the late penalty",
    "ClearHiddenTests.begin_test_delimeter": "where hidden tests begin",
    "ClearHiddenTests.end_test_delimeter": "where hidden tests end",
    "NbGrader.config_file": "the configuration read, as nbgrader reads it",
    "JupyterApp.config_file": "the configuration read, as nbgrader reads it",
    "JupyterApp.config_file_name": "the configuration read, as nbgrader reads it",
}

_LOG = "nbgrader's own log: autograder grade prints its summary, review.txt and OUT/logs instead"
_KERNEL = (
    "how nbclient talks to a kernel process: the sandbox runs the cells in its own warm process, "
    "with no kernel protocol (no score depends on it)"
)
_OUTPUT = (
    "how much of a cell's output nbgrader keeps in the saved notebook: autograded notebooks keep "
    "20,000 characters a cell (no score depends on it)"
)
NO_EFFECT: dict[str, str] = {
    **{
        f"{cls}.{t}": _LOG
        for cls in ("NbGrader", "Application", "JupyterApp")
        for t in ("log_level", "log_format", "log_datefmt", "logging_config", "logfile")
    },
    "NbGrader.answer_yes": "autograder grade never asks",
    "Application.show_config": "autograder grade does not print its configuration",
    "Application.show_config_json": "autograder grade does not print its configuration",
    "JupyterApp.generate_config": "autograder grade does not write a configuration file",
    **{
        f"Execute.{t}": _KERNEL
        for t in (
            "iopub_timeout",
            "raise_on_iopub_timeout",
            "startup_timeout",
            "shutdown_kernel",
            "shell_timeout_interval",
            "record_timing",
            "store_widget_state",
            "ipython_hist_file",
        )
    },
    "Execute.error_on_timeout": (
        "the output a timed-out cell shows: autograder grade shows its own message (the cell "
        "fails as under stock)"
    ),
    "LimitOutput.max_lines": _OUTPUT,
    "LimitOutput.max_traceback": _OUTPUT,
    "LimitOutput.enabled": _OUTPUT,
    "IgnorePattern.pattern": "which log lines nbgrader drops from saved outputs",
    "IgnorePattern.enabled": "which log lines nbgrader drops from saved outputs",
    "ClearOutput.remove_metadata_fields": "metadata of the saved notebook's outputs",
    "OverwriteCells.missing_cell_notification": "the text of a test cell put back",
    **{
        f"ClearMetadataPreprocessor.{t}": "metadata of the saved notebook"
        for t in (
            "enabled",
            "clear_cell_metadata",
            "clear_notebook_metadata",
            "preserve_nb_metadata_mask",
            "preserve_cell_metadata_mask",
        )
    },
}

KNOWN = frozenset(HONOURED) | frozenset(NO_EFFECT)

# what nbgrader autograde never reads (the exchange's, generate_assignment's)
NOT_READ: frozenset = frozenset(
    {
        "CourseDirectory.release_directory",
        "CourseDirectory.solution_directory",
        "CourseDirectory.source_with_tests_directory",
        "CourseDirectory.max_file_size",
        "CourseDirectory.max_dir_size",
        "CourseDirectory.include",
        "ClearHiddenTests.enforce_metadata",
        "ClearHiddenTests.enabled",
    }
)


def configurables(app, converter) -> list:
    """What ``nbgrader autograde`` configures, built as it builds them: the application, its
    course directory, the converter, each preprocessor of the converter's pipelines (the
    pipelines as configured), ClearHiddenTests' delimiters."""
    from nbgrader.preprocessors import AssignLatePenalties, ClearHiddenTests

    out = [app, app.coursedir, converter]
    seen = set()
    for pp in [*converter.sanitize_preprocessors, *converter.autograde_preprocessors]:
        if isinstance(pp, type) and pp not in seen:
            seen.add(pp)
            try:
                out.append(pp(parent=converter))
            except Exception:  # noqa: BLE001 - a pipeline of its own is refused by its own trait
                continue
    # (the late-submission plugin is not looked at: it runs as nbgrader runs it, with whatever
    # settings it reads, a plugin of the course's own included)
    out += [AssignLatePenalties(parent=converter), ClearHiddenTests(parent=app)]
    return out


def audit(objs, config) -> tuple[list[str], list[str]]:
    """``(refused, no_effect)``: a line for each trait of ``objs`` (:func:`configurables`) that
    ``config`` (the loaded traitlets config) sets to a value other than the trait's default and
    that is not :data:`HONOURED` (nor :data:`NOT_READ`); refused unless :data:`NO_EFFECT` says why
    it changes nothing."""
    refused, no_effect, seen = [], [], set()
    for obj in objs:
        if obj is None:
            continue
        sections = [c.__name__ for c in type(obj).mro() if hasattr(c, "class_traits")]
        for name, trait in sorted(type(obj).class_traits(config=True).items()):
            where = next((s for s in sections if s in config and name in config[s]), None)
            if where is None:
                continue
            try:
                value, default = getattr(obj, name), trait.default()
                changed = value != default
            except Exception:  # noqa: BLE001 - a value that cannot be compared is a change
                changed, value = True, "?"
            key = f"{type(obj).__name__}.{name}"
            owner = next(
                (f"{s}.{name}" for s in sections if f"{s}.{name}" in KNOWN),
                key,
            )
            if not changed or owner in HONOURED or key in NOT_READ or owner in seen:
                continue
            seen.add(owner)
            shown = key if where == type(obj).__name__ else f"{key} (set as {where}.{name})"
            text = f"{shown} = {_short(value)}"
            if owner in NO_EFFECT:
                no_effect.append(f"{text}: no effect here ({NO_EFFECT[owner]})")
            else:
                refused.append(text)
    return refused, no_effect


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def enforce(config, warn) -> None:
    """Refuse a course whose settings :func:`audit` refused (ValueError, naming each); ``warn``
    each that changes nothing here."""
    if config.refused_settings:
        raise ValueError(
            "the course's nbgrader settings ask for what `autograder grade` does not do as "
            "`nbgrader autograde` does, so the scores could differ from stock's; refused:\n  "
            + "\n  ".join(config.refused_settings)
            + "\n(remove them from nbgrader_config.py or the command line, or grade with "
            "`nbgrader autograde`)"
        )
    for line in config.no_effect_settings:
        warn(line)
