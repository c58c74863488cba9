"""Results into nbgrader: the gradebook (``nbgrader export``, formgrader) and autograded notebooks.

The assignment, its notebooks and their cells are registered exactly as ``nbgrader
generate_assignment`` does (nbgrader's own ``SaveCells`` preprocessor on the source
notebook), every submission gets nbgrader's submission records with the ``auto_score`` of
each graded cell, and ``autograded/<student>/<assignment>/<notebook>.ipynb`` is written for
formgrader: the student's notebook with each test cell replaced by the instructor's (deleted
ones put back), the output each cell produced while grading, and each test's result.
"""

from __future__ import annotations

import copy
import os
import sys
import time
import warnings
from pathlib import Path

import nbformat


class GradebookWriter:
    def __init__(
        self,
        course_root: Path,
        db_url: str | None = None,
        course_id: str = "",
        late_plugin=None,
        settings=None,
    ):
        from nbgrader.api import Gradebook

        from autograder.grading.config import alembic_on_path

        alembic_on_path()
        self.root = Path(course_root)
        self.db_url = db_url or f"sqlite:///{self.root / 'gradebook.db'}"
        self.gb = Gradebook(self.db_url, course_id)  # as nbgrader autograde opens it
        self._registered = set()
        self.late_plugin = late_plugin  # config.CourseConfig.late_plugin
        self.settings = settings  # the course's nbgrader settings (traitlets Config): release stubs
        self._released: dict = {}
        self.writes = 0  # notebooks recorded, and the seconds it took (autograder grade --timings)
        self.seconds = 0.0
        # (student, assignment, notebook) -> (seconds late, penalty or None): each late notebook
        self.late: dict = {}

    def close(self):
        self.gb.close()

    def register(self, source_nb) -> None:
        """Assignment, notebook, grade/solution/source cells - as generate_assignment records them."""
        key = (source_nb.assignment, source_nb.name)
        if key in self._registered:
            return
        from nbgrader.preprocessors import SaveCells

        self.gb.update_or_create_assignment(source_nb.assignment)
        if self._recorded(source_nb):  # what SaveCells would write is there already
            self._registered.add(key)
            return
        resources = {
            "nbgrader": {
                "db_url": self.db_url,
                "assignment": source_nb.assignment,
                "notebook": source_nb.name,
            }
        }
        nb = copy.deepcopy(self._release(source_nb))
        pre = SaveCells()
        pre.preprocess(nb, resources)
        pre.gradebook.close()
        self._registered.add(key)

    def _recorded(self, source_nb) -> bool:
        """Does the gradebook hold exactly what nbgrader's ``SaveCells`` would record for this
        source notebook (its kernelspec; grade, solution, task and source cells, each with the
        fields SaveCells sets)? Then registering it again (``generate_assignment`` did, or the last
        run) would change nothing but the cells' row ids, and is skipped: about 0.1 s of the host's
        start-up per notebook. Anything different, or missing, and SaveCells runs as before."""
        import json

        from nbgrader import utils
        from nbgrader.api import MissingEntry

        grade, solution, task, source = {}, set(), {}, {}
        for cell in self._release(source_nb).cells:  # SaveCells.preprocess_cell, cell by cell
            if utils.is_grade(cell):
                grade[cell.metadata.nbgrader["grade_id"]] = (
                    float(cell.metadata.nbgrader["points"]),
                    cell.cell_type,
                )
            if utils.is_solution(cell):
                solution.add(cell.metadata.nbgrader["grade_id"])
            if utils.is_task(cell):
                task[cell.metadata.nbgrader["grade_id"]] = (
                    float(cell.metadata.nbgrader["points"]),
                    cell.cell_type,
                )
            if (
                utils.is_grade(cell)
                or utils.is_solution(cell)
                or utils.is_locked(cell)
                or utils.is_task(cell)
            ):
                source[cell.metadata.nbgrader["grade_id"]] = (
                    cell.cell_type,
                    utils.is_locked(cell),
                    cell.source,
                    cell.metadata.nbgrader.get("checksum", None),
                )
        try:
            notebook = self.gb.find_notebook(source_nb.name, source_nb.assignment)
        except MissingEntry:
            return False
        return (
            notebook.kernelspec == json.dumps(source_nb.nb.metadata.get("kernelspec", {}))
            and {c.name: (c.max_score, c.cell_type) for c in notebook.grade_cells} == grade
            and {c.name for c in notebook.solution_cells} == solution
            and {c.name: (c.max_score, c.cell_type) for c in notebook.task_cells} == task
            and {
                c.name: (c.cell_type, c.locked, c.source, c.checksum) for c in notebook.source_cells
            }
            == source
        )

    def record(self, sub, rows) -> None:
        # nbgrader's own add_submission makes SQLAlchemy warn ("... not in session, add operation along
        # 'Student.submissions' will not proceed"): harmless (nbgrader adds the object itself), and
        # printed in the middle of the progress bar
        from sqlalchemy.exc import SAWarning

        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SAWarning)
            self._record(sub, rows)
        self.writes += 1
        self.seconds += time.perf_counter() - start

    def _record(self, sub, rows) -> None:
        from nbgrader.api import MissingEntry

        self.register(sub.source)
        gb = self.gb
        gb.update_or_create_student(sub.student)
        # the submission's time, as nbgrader autograde records it: timestamp.txt's, else whatever
        # the gradebook holds already
        if getattr(sub, "timestamp", None) is not None:
            gb.update_or_create_submission(sub.assignment, sub.student, timestamp=sub.timestamp)
        else:
            try:
                gb.find_submission(sub.assignment, sub.student)
            except MissingEntry:
                gb.add_submission(sub.assignment, sub.student)
        # one query for the notebook's grades with their cells' names (nbgrader's find_grade is
        # one query per cell, and each grade's ``name`` another)
        from nbgrader.api import BaseCell, Grade

        notebook = gb.find_submission_notebook(sub.notebook, sub.assignment, sub.student)
        grades = dict(
            gb.db.query(BaseCell.name, Grade)
            .join(BaseCell, Grade.cell_id == BaseCell.id)
            .filter(Grade.notebook_id == notebook.id)
        )
        for row in rows:
            grade = grades.get(row.grade_id) or gb.find_grade(
                row.grade_id, sub.notebook, sub.assignment, sub.student
            )
            if row.status == "not-in-notebook":  # not run: formgrader's, as stock leaves it
                grade.auto_score, grade.needs_manual_grade = None, True
                continue
            grade.auto_score = float(row.score)
            grade.needs_manual_grade = False
        self._manual_cells(sub, grades)
        gb.db.commit()
        self._late_penalty(sub)

    def _manual_cells(self, sub, grades) -> None:
        """What ``nbgrader autograde`` (SaveAutoGrades) records for the cells a person grades: a
        manually graded answer left as released gets 0 and the comment "No response." (no
        manual grading needed); an answered one is left for formgrader (``auto_score`` None,
        needs a manual grade); every other answer cell's comment is cleared."""
        from nbgrader import utils as nbu
        from nbgrader.api import MissingEntry

        gb = self.gb
        released = self._release_checksums(sub.source)
        student_cells = {}
        if sub.nb is not None:
            for cell in sub.nb.get("cells", []):
                meta = cell.get("metadata", {}).get("nbgrader", {})
                if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str):
                    student_cells.setdefault(meta["grade_id"], cell)
        for src in sub.source.nb.cells:
            meta = src.get("metadata", {}).get("nbgrader", {})
            if not (meta.get("solution") or meta.get("task")):
                continue
            gid = meta.get("grade_id")
            if gid not in released:
                continue
            cell = copy.deepcopy(student_cells.get(gid, src))
            # the release's nbgrader metadata, as OverwriteCells restores it
            cell.metadata["nbgrader"] = copy.deepcopy(dict(released[gid][1]))
            unchanged = nbu.compute_checksum(nbformat.from_dict(cell)) == released[gid][0]
            if meta.get("grade") and meta.get("solution"):
                grade = grades.get(gid) or gb.find_grade(
                    gid, sub.notebook, sub.assignment, sub.student
                )
                grade.auto_score = 0.0 if unchanged else None
                grade.needs_manual_grade = (
                    grade.manual_score is not None or grade.auto_score is None
                )
            try:
                comment = gb.find_comment(gid, sub.notebook, sub.assignment, sub.student)
            except MissingEntry:
                continue
            comment.auto_comment = "No response." if unchanged and not meta.get("task") else None

    def _release(self, source_nb):
        """The source notebook as ``nbgrader generate_assignment`` has it when its SaveCells runs
        (LockCells, ClearSolutions, ClearOutput, ComputeChecksums, with the course's settings): the
        cells, sources and checksums the gradebook records, as stock records them."""
        key = (source_nb.assignment, source_nb.name)
        if key not in self._released:
            from nbgrader.preprocessors import (
                ClearOutput,
                ClearSolutions,
                ComputeChecksums,
                LockCells,
            )

            nb = copy.deepcopy(source_nb.nb)
            resources: dict = {}
            for pre in (LockCells, ClearSolutions, ClearOutput, ComputeChecksums):
                nb, resources = pre(config=self.settings).preprocess(nb, resources)
            self._released[key] = nb
        return self._released[key]

    def _release_checksums(self, source_nb) -> dict:
        """``{grade_id: (checksum, nbgrader metadata)}`` of the cells as released: what an
        untouched answer still has in a submission."""
        return {
            c.metadata.nbgrader["grade_id"]: (
                c.metadata.nbgrader.get("checksum"),
                dict(c.metadata.nbgrader),
            )
            for c in self._release(source_nb).cells
            if isinstance(c.metadata.get("nbgrader", {}).get("grade_id"), str)
        }

    def _late_penalty(self, sub) -> None:
        """nbgrader's AssignLatePenalties, as ``nbgrader autograde`` applies it after grading a
        notebook: no penalty unless the submission is late; then the plugin's, kept within
        ``[0, score]``."""
        gb = self.gb
        submission = gb.find_submission(sub.assignment, sub.student)
        notebook = gb.find_submission_notebook(sub.notebook, sub.assignment, sub.student)
        notebook.late_submission_penalty = None
        late = submission.total_seconds_late
        if late > 0 and self.late_plugin is not None:
            penalty = self.late_plugin.late_submission_penalty(sub.student, notebook.score, late)
            if penalty is not None:
                notebook.late_submission_penalty = min(max(penalty, 0), notebook.score)
        if late > 0:
            self.late[(sub.student, sub.assignment, sub.notebook)] = (
                float(late),
                notebook.late_submission_penalty,
            )
        gb.db.commit()


def _stream(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def autograded_notebook(sub, rows, result):
    """The notebook formgrader shows: tests from the source, outputs from this grading run."""
    if sub.nb is None:
        return None
    nb = copy.deepcopy(sub.nb)
    cells_out = {c["index"]: c for c in (result or {}).get("cells", [])}
    tests_out = (result or {}).get("tests", [])
    by_test = {row.grade_id: row for row in rows}
    cells = []
    for kind, n, k in sub.layout:
        if kind == "cell":
            cell = nb.cells[n]
            c = cells_out.get(k, {})
            cell.outputs = [_stream(c["output"])] if c.get("output") else []
            if c.get("error"):
                cell.outputs.append(
                    nbformat.v4.new_output(
                        "error",
                        ename=c["error"].split(":")[0],
                        evalue=c["error"],
                        traceback=[c["error"]],
                    )
                )
            cell.execution_count = None
            cells.append(cell)
        elif kind in ("test", "inserted"):
            test = sub.source.tests[k]
            src_cell = next(
                c
                for c in sub.source.nb.cells
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == test.grade_id
            )
            cell = copy.deepcopy(src_cell)
            cell.source = test.source  # the code that ran: AUTOTEST's as the gradebook records it
            cell.outputs = []
            t = tests_out[k] if k < len(tests_out) else {}
            if t.get("output"):
                cell.outputs.append(_stream(t["output"]))
            row = by_test.get(test.grade_id)
            if row is not None and row.score < row.max_score:
                cell.outputs.append(
                    nbformat.v4.new_output(
                        "error",
                        ename=row.status,
                        evalue=row.message or row.status,
                        traceback=[f"{row.status}: {row.message}"],
                    )
                )
            cell.execution_count = None
            cells.append(cell)
        else:
            cells.append(_not_run(nb.cells[n], sub.source))
    nb.cells = cells
    return nb


def _not_run(cell, source):
    """A student cell the grader did not run (markdown, raw, a duplicate of a test cell): a code
    cell keeps no output (only what the grader produced is shown), and a copy of a test cell, or
    a cell claiming grade metadata the source does not have, loses its nbgrader metadata (it is
    graded nowhere; formgrader and ``nbgrader generate_feedback`` show it as a plain cell)."""
    if cell.get("cell_type") == "code":
        cell.outputs = []
        cell.execution_count = None
    meta = cell.get("metadata", {}).get("nbgrader")
    if isinstance(meta, dict):
        gid = meta.get("grade_id")
        if gid in {t.grade_id for t in source.tests} or (
            meta.get("grade") and gid not in source.order
        ):
            cell.metadata.pop("nbgrader", None)
    return cell


def _copy_files(folder: Path, files, permissions: int, ignore=(), skip=()) -> None:
    """``files`` (``[relative path, base64 data]``, as intake reads them: regular files, no links,
    bounded) written under ``folder``, each path's parts checked against nbgrader's ``ignore``
    patterns (as its ``find_all_files``), ``skip`` (paths) left out."""
    import base64
    from fnmatch import fnmatch

    for rel, data in files:
        parts = Path(rel).parts
        if rel in skip or any(fnmatch(p, pat) for p in parts for pat in ignore):
            continue
        if Path(rel).is_absolute() or any(p in ("", ".", "..") for p in parts):
            continue
        dest = folder / rel
        try:
            for parent in reversed(dest.relative_to(folder).parents[:-1]):
                if (folder / parent).is_symlink():  # never written through a link
                    raise OSError(f"{parent} is a link")
            dest.parent.mkdir(parents=True, exist_ok=True)
            _replace(dest)
            dest.write_bytes(base64.b64decode(data))
            os.chmod(dest, permissions)
        except OSError as exc:  # a name that is a folder here, or under a file: left out
            print(f"{folder / rel}: not written ({exc})", file=sys.stderr)


def write_autograded(config, sub, rows, result) -> Path | None:
    """``autograded/<student>/<assignment>/<notebook>.ipynb`` and the assignment's other files,
    as the course's nbgrader settings (``config``: :class:`..config.CourseConfig`) say: the file
    mode nbgrader autograde gives its outputs (``Autograde.permissions``: read-only, 444, by
    default; a file of an earlier run is replaced, as stock replaces it), the other files copied
    as stock copies them: the student's (``timestamp.txt`` among them), then the source folder's
    over them but for ``Autograde.exclude_overwriting``, ``CourseDirectory.ignore`` applied, then
    the files the notebook wrote while it ran (``result["written"]``: the judge's run, or one
    kernel's before its first test cell; :meth:`..calibrate.Calibration.tasks`)."""
    from autograder.grading.intake.collect import assignment_files

    permissions = config.permissions
    nb = autograded_notebook(sub, rows, result)
    if nb is None:
        return None
    folder = Path(config.autograded) / sub.student / sub.assignment
    folder.mkdir(parents=True, exist_ok=True)
    _copy_files(folder, assignment_files(config, sub), permissions)
    # what the notebook wrote while it ran, over them, as stock runs it in this folder (checked
    # at the boundary: host.supervisor.written_files); never over a notebook of the assignment
    written = result.get("written") if isinstance(result, dict) else None
    source = getattr(sub.source, "path", None)
    notebooks = {p.name for p in source.parent.glob("*.ipynb")} if source is not None else set()
    _copy_files(folder, written or [], permissions, skip=notebooks | {f"{sub.notebook}.ipynb"})
    # written whole or not at all: a run killed here leaves no half notebook that the next run,
    # seeing the file, would skip as autograded (tests/test_resume.py)
    path = folder / f"{sub.notebook}.ipynb"
    tmp = folder / f".{sub.notebook}.ipynb.tmp"
    _replace(tmp)
    nbformat.write(nb, tmp)
    os.chmod(tmp, permissions)
    os.replace(tmp, path)  # over an earlier run's (read-only) file, as stock replaces it
    if config.groupshared:
        _share_with_group(folder, Path(config.autograded))
    return path


def _share_with_group(folder: Path, root: Path) -> None:
    """``CourseDirectory.groupshared``: nbgrader's ``set_permissions`` for folders, as it does it:
    every folder under the submission's (itself included) and the ``autograded`` folder get
    ``rwx`` and setgid for the group (``| 0o2770``, other bits kept), where they lack them."""
    for path in [*(Path(d) for d, _, _ in os.walk(folder)), root]:
        mode = path.stat().st_mode
        if mode & 0o2770 != 0o2770:
            try:
                os.chmod(path, (mode | 0o2770) & 0o2777)
            except PermissionError:  # nbgrader warns and goes on
                print(f"could not make {path} groupshared", file=sys.stderr)


def _replace(path: Path) -> None:
    """Remove a file an earlier run wrote (read-only: writing over it fails unless root)."""
    if path.is_symlink() or path.exists():
        path.unlink()
