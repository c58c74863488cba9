"""The course's configuration, read the way ``nbgrader autograde`` reads it from that folder.

``autograder grade --course DIR`` (default: the current folder, like nbgrader) loads
``DIR/nbgrader_config.py`` - and the user's and system's Jupyter config folders - through
nbgrader's own application class, so every setting means what it means to nbgrader:

* ``CourseDirectory.source_directory`` / ``submitted_directory`` / ``autograded_directory`` /
  ``feedback_directory`` / ``course_id`` / ``db_url`` / ``ignore`` / ``max_file_size``;
* ``Execute.timeout`` (nbgrader's ExecutePreprocessor timeout, per cell) - the default of
  ``--timeout``;
* ``ClearHiddenTests.begin_test_delimeter`` / ``end_test_delimeter`` - where hidden tests start;
* ``Exchange.root`` and ``AutograderServe.*`` (``autograder serve``: where students submit,
  and the policy of :mod:`.serve.policy`);
* ``AutograderGrade.preload`` (this tool's own setting; optional): modules the warm sandbox
  imports before forking a student process. Default: the modules the course's source notebooks
  import (torch in this course, nothing but the standard library in many others).
* ``AutograderGrade.mode`` (this tool's own setting; optional): ``"judge"`` (the default: two
  verdicts on every test cell the judge grades, :mod:`.verdicts`) or ``"kernel"`` (one kernel's
  verdict alone: stock nbgrader's semantics and stock's trust, the tests run beside the
  student's code).
* ``AutograderGrade.counts`` (optional): which score counts while the two verdicts differ:
  ``"kernel"`` (the default: stock's), ``"judge"`` or ``"lower"`` (:mod:`.verdicts`).

:func:`unsupported` lists what an assignment uses that this grader does not grade the way
nbgrader would; ``autograder grade`` refuses such an assignment with that list instead of
grading it wrong.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class CourseConfig:
    root: Path
    course_id: str = ""
    source_directory: str = "source"
    submitted_directory: str = "submitted"
    autograded_directory: str = "autograded"
    feedback_directory: str = "feedback"
    db_url: str = ""
    timeout: float | None = 30.0
    begin_hidden: str = "BEGIN HIDDEN TESTS"
    end_hidden: str = "END HIDDEN TESTS"
    preload: list | None = None
    mode: str = "judge"  # or "kernel": AutograderGrade.mode
    counts: str = "kernel"  # which verdict counts while they differ: AutograderGrade.counts
    ignore: list = field(default_factory=list)
    max_file_size: int = 100000
    files: list = field(default_factory=list)  # config files read
    exchange_root: str = "/srv/nbgrader/exchange"  # Exchange.root (autograder serve)
    groupshared: bool = False  # CourseDirectory.groupshared: the exchange's modes for a group
    serve: dict = field(default_factory=dict)  # AutograderServe.* (autograder serve's policy)
    # AssignLatePenalties.plugin_class, made as nbgrader autograde makes it (LateSubmissionPlugin,
    # penalty_method 'none' by default): late_submission_penalty(student, score, seconds_late)
    late_plugin: object = field(default=None, repr=False, compare=False)
    # nbgrader's autograde settings that decide which submissions are graded and how autograded/
    # is written, honoured as stock honours them
    student_id_exclude: list = field(default_factory=list)  # CourseDirectory.student_id_exclude
    create_student: bool = True  # Autograde.create_student
    permissions: int = 0o444  # Autograde.permissions (octal digits, as nbgrader writes them: 444)
    settings: object = field(default=None, repr=False, compare=False)  # the traitlets Config read
    exclude_overwriting: dict = field(default_factory=dict)  # Autograde.exclude_overwriting
    skip_tag: str = "skip-execution"  # Execute.skip_cells_with_tag: a code cell not run
    # OverwriteCells.add_missing_cells: a test cell the student's notebook lacks is put back and
    # run (True), or left out, not run, for manual grading (False, nbgrader's default)
    add_missing_cells: bool = False
    # CourseDirectory.assignment_id / student_id / notebook_id and Autograde.force: what nbgrader's
    # assignment argument, --student, --notebook and --force set (the flags win, as in nbgrader)
    assignment_id: str = ""
    student_id: str = "*"
    notebook_id: str = "*"
    force: bool = False
    # nbgrader settings this grader refuses, or names as changing nothing here (.nbsettings)
    refused_settings: list = field(default_factory=list)
    no_effect_settings: list = field(default_factory=list)

    @property
    def source(self) -> Path:
        return self.root / self.source_directory

    @property
    def submitted(self) -> Path:
        return self.root / self.submitted_directory

    @property
    def autograded(self) -> Path:
        return self.root / self.autograded_directory

    @property
    def gradebook_url(self) -> str:
        return self.db_url or f"sqlite:///{self.root / 'gradebook.db'}"


MODES = ("judge", "kernel")


@contextlib.contextmanager
def _cwd(path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def load(root, options=()) -> CourseConfig:
    """The configuration nbgrader's ``autograde`` would use when run from ``root`` (``options``:
    its ``--Class.trait=value`` command-line options, which override the files as in nbgrader)."""
    from nbgrader.apps.autogradeapp import AutogradeApp
    from nbgrader.preprocessors import ClearHiddenTests, Execute

    root = Path(root).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"no course folder {root}")
    AutogradeApp.clear_instance()
    app = AutogradeApp()
    app.log.setLevel(logging.ERROR)
    try:
        with _cwd(root):
            app.initialize(list(options))
        cd = app.coursedir
        execute = Execute(parent=app)
        hidden = ClearHiddenTests(parent=app)
        from nbgrader.preprocessors import AssignLatePenalties, OverwriteCells

        late = AssignLatePenalties(parent=app)
        late.init_plugin()
        from nbgrader.converters import Autograde

        converter = Autograde(coursedir=app.coursedir, parent=app)
        preload = app.config.get("AutograderGrade", {}).get("preload")
        mode = app.config.get("AutograderGrade", {}).get("mode", "judge")
        if mode not in MODES:
            raise ValueError(
                f"AutograderGrade.mode = {mode!r} in the course's configuration: "
                f"one of {', '.join(repr(m) for m in MODES)}"
            )
        from autograder.grading.verdicts import COUNTS, DEFAULT_COUNTS

        counts = app.config.get("AutograderGrade", {}).get("counts", DEFAULT_COUNTS)
        if counts not in COUNTS:
            raise ValueError(
                f"AutograderGrade.counts = {counts!r} in the course's configuration: "
                f"one of {', '.join(repr(m) for m in COUNTS)}"
            )
        from autograder.grading.nbsettings import audit, configurables

        refused, no_effect = audit(configurables(app, converter), app.config)
        timeout = execute.timeout
        files = [str(root / "nbgrader_config.py")] if (root / "nbgrader_config.py").exists() else []
        return CourseConfig(
            root=Path(cd.root).resolve() if cd.root else root,
            course_id=cd.course_id,
            source_directory=cd.source_directory,
            submitted_directory=cd.submitted_directory,
            autograded_directory=cd.autograded_directory,
            feedback_directory=cd.feedback_directory,
            db_url=cd.db_url
            if cd.db_url and not cd.db_url.endswith(os.sep + "gradebook.db")
            else "",
            timeout=float(timeout) if timeout not in (None, -1) and timeout > 0 else None,
            begin_hidden=hidden.begin_test_delimeter,
            end_hidden=hidden.end_test_delimeter,
            preload=list(preload) if preload is not None else None,
            mode=str(mode),
            counts=str(counts),
            ignore=list(cd.ignore),
            max_file_size=int(cd.max_file_size),
            files=files,
            exchange_root=str(app.config.get("Exchange", {}).get("root", "/srv/nbgrader/exchange")),
            serve=dict(app.config.get("AutograderServe", {})),
            groupshared=bool(cd.groupshared),
            late_plugin=late.plugin_inst,
            student_id_exclude=[
                x.strip() for x in str(cd.student_id_exclude or "").split(",") if x.strip()
            ],
            create_student=bool(converter.create_student),
            permissions=int(str(converter.permissions), 8),
            settings=copy.deepcopy(app.config),
            exclude_overwriting={
                str(k): [str(x) for x in v] for k, v in dict(converter.exclude_overwriting).items()
            },
            skip_tag=str(execute.skip_cells_with_tag or ""),
            add_missing_cells=bool(OverwriteCells(parent=app).add_missing_cells),
            assignment_id=str(cd.assignment_id or ""),
            student_id=str(cd.student_id or "*"),
            notebook_id=str(cd.notebook_id or "*"),
            force=bool(converter.force),
            refused_settings=refused,
            no_effect_settings=no_effect,
        )
    finally:
        AutogradeApp.clear_instance()


def alembic_on_path() -> None:
    """nbgrader's Gradebook runs `alembic` from PATH when it opens a database: this
    environment's."""
    bindir = os.path.dirname(sys.executable)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", "")])


# --------------------------------------------------------------------------- what is refused


def unsupported(source_nb) -> list[str]:
    """Why the grader cannot grade this source notebook as nbgrader would (empty: it can).

    ``source_nb`` is a :class:`~autograder.grading.intake.collect.SourceNotebook`. Test cells the judge
    cannot run (:func:`judge_cannot_run`) are not refused: they are graded in one kernel
    (:mod:`.calibrate`)."""
    problems = []
    language = source_nb.language
    if language and language != "python":
        problems.append(
            f"the notebook's kernel language is {language!r}: only Python notebooks are graded"
        )
    for test in source_nb.tests:
        if "AUTOTEST" in test.source:
            problems.append(
                f"test cell {test.grade_id!r} uses nbgrader's AUTOTEST directives, and the "
                "gradebook has no record of the tests `nbgrader generate_assignment` made from "
                "them (stock grades the recorded tests: run generate_assignment first)"
            )
    tag = getattr(source_nb, "skip_tag", "")
    for cell in source_nb.nb.get("cells", []):
        tags = cell.get("metadata", {}).get("tags")
        gid = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")
        if (
            tag
            and isinstance(tags, list)
            and tag in tags
            and gid in {t.grade_id for t in source_nb.tests}
        ):
            problems.append(
                f"test cell {gid!r} carries the tag {tag!r} (Execute.skip_cells_with_tag): "
                "nbgrader autograde does not run it, so every copy that keeps the tag gets its "
                "points; remove the tag from the source"
            )
    return problems


def judge_cannot_run(source_nb) -> dict[str, str]:
    """``{grade_id: why}``: test cells the judge cannot run as one kernel would (they talk to the
    kernel or to the notebook's namespace); :mod:`.calibrate` grades their notebook in one kernel."""
    problems = {}
    broken = does_not_compile(source_nb)
    for test in source_nb.tests:
        if test.grade_id in broken:
            continue  # no kernel runs it: it fails for every student, in the judge as under stock
        try:
            tree = ast.parse(test.source)
        except SyntaxError:
            problems[test.grade_id] = (
                "it uses IPython syntax (magics %, %% or ! commands): the judge "
                "runs test cells as Python, outside a Jupyter kernel"
            )
            continue
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        for name, why in (
            ("get_ipython", "talks to the Jupyter kernel"),
            ("display", "uses IPython's display"),
            ("globals", "reads the notebook's global namespace"),
            ("exec", "executes code strings in the student's namespace"),
            ("eval", "evaluates code strings in the student's namespace"),
        ):
            if name in names:
                problems[test.grade_id] = (
                    f"it calls {name}() ({why}), which the judge cannot reproduce"
                )
                break
    return problems


def does_not_compile(source_nb) -> dict[str, str]:
    """``{grade_id: the error}``: test cells that are not valid even as IPython input (an
    ``IndentationError``, a ``SyntaxError`` after IPython's transformations). Stock nbgrader runs
    them, they raise, and every student, the instructor's solution included, scores 0 there: so
    does this grader (the judge reports the error), and calibration expects it."""
    from IPython.core.inputtransformer2 import TransformerManager

    out = {}
    for test in source_nb.tests:
        try:
            ast.parse(test.source)
            continue
        except (SyntaxError, ValueError):
            pass
        try:
            ast.parse(TransformerManager().transform_cell(test.source))
        except (SyntaxError, ValueError) as exc:
            where = f" (line {exc.lineno})" if getattr(exc, "lineno", None) else ""
            msg = getattr(exc, "msg", None) or str(exc)
            out[test.grade_id] = f"{type(exc).__name__}: {msg}{where}"
        except Exception:  # noqa: BLE001 - IPython's transformer failed: treated as IPython syntax
            pass
    return out
