"""Find the submissions and turn each into a grading task.

The course's source notebooks (``solutions/<assignment>/<notebook>.ipynb``) are the only
source of test cells: a test cell is identified by its nbgrader ``grade_id``, and whatever a
student did to it - edited, deleted, re-tagged, stripped of its metadata, moved - the
instructor's version runs. A task is:

* ``items``: the student's code cells in notebook order (``["cell", i, source]``; locked
  cells such as the setup cell restored from the source, as nbgrader does) and, at each
  test's place, ``["test", k]``. A test cell still carrying its ``grade_id`` marks its place
  (its content is not run); one that lost its metadata but kept its cell id marks the place
  after it (its content runs as ordinary code, as in nbgrader); a deleted one is placed
  after the nearest preceding source cell found in the submission (nbgrader's rule for
  ``add_missing_cells``). Both only where the course's ``OverwriteCells.add_missing_cells`` is
  True; with nbgrader's default, False, such a test is left out (status ``not-in-notebook``);
  a code cell tagged ``Execute.skip_cells_with_tag`` is not run, as nbclient skips it;
* ``tests``: ``{"id", "source", "points"}`` from the source;
* ``files``: the other files of the student's assignment folder (copied to the scratch
  directory, as nbgrader runs a notebook next to its files).

Intake trusts nothing: see :func:`find_submissions` and :func:`read_student_notebook`.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import errno
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

# nbgrader's student ids are folder names: only these are graded (the same rule as `autograder submit`)
# (always with fullmatch: `$` would match before a trailing newline, "alice\n" being a second alice)
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
from autograder.wire.frames import MAX_FILES_BYTES, MAX_NOTEBOOK_BYTES  # noqa: E402 - one place for the caps (the task frame's too)
from autograder.wire.types import Limits, TaskFrame  # noqa: E402


@dataclass(frozen=True)
class TestCell:
    grade_id: str
    points: float
    source: str
    hidden: bool
    cell_id: str | None


@dataclass
class SourceNotebook:
    assignment: str
    name: str
    path: Path
    nb: object
    tests: list[TestCell]
    locked: dict[str, str]  # grade_id -> source of locked (read-only) code cells
    order: list[str]  # grade_ids of the source's cells, in order
    cell_ids: dict[str, str]  # cell id -> grade_id
    # the course's Execute.skip_cells_with_tag (a code cell carrying it is not run) and
    # OverwriteCells.add_missing_cells (a test cell the notebook lacks is put back and run),
    # set by Course.notebooks from its configuration; a source read alone (calibration's own
    # source submission, which lacks no test cell) keeps these
    skip_tag: str = "skip-execution"
    add_missing: bool = True

    @property
    def max_score(self) -> float:
        return sum(t.points for t in self.tests)

    @property
    def language(self) -> str:
        info = self.nb.get("metadata", {}).get("kernelspec", {}) or {}
        lang = (
            info.get("language")
            or self.nb.get("metadata", {}).get("language_info", {}).get("name")
            or ""
        )
        return str(lang).lower()

    def imports(self) -> set[str]:
        """Modules the source notebook's code cells import - the test cells and the instructor's
        own solution cells (preloaded by the sandboxes before the snapshot, and by the judge: the
        only modules the judge binds a student's module name to; it never imports one for it)."""
        names = set()
        sources = [t.source for t in self.tests] + [
            c.get("source", "") for c in self.nb.get("cells", []) if c.get("cell_type") == "code"
        ]
        for source in sources:
            if not isinstance(source, str):
                continue
            try:
                tree = ast.parse(source)
            except (SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module)
                    names.update(
                        f"{node.module}.{a.name}"
                        for a in node.names
                        if node.module == "torch" and f"torch.{a.name}" in TRAINING_MODULES
                    )
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and f"{node.value.id}.{node.attr}" in TRAINING_MODULES
                ):
                    names.add(f"{node.value.id}.{node.attr}")
        return names

    def exports(self) -> list[str]:
        """Builtin names the source's own (non-test) code cells bind: the assignment asks the
        student to define them (an exercise "write your own ``max``"), so the judge binds the
        student's under that name; every other builtin name stays the test's."""
        import builtins

        from autograder.grading.host.reads import bound_names

        cached = self.__dict__.get("_exports")
        if cached is not None:
            return cached
        tests = {t.source for t in self.tests}
        names: set = set()
        for c in self.nb.get("cells", []):
            source = c.get("source", "")
            if c.get("cell_type") == "code" and isinstance(source, str) and source not in tests:
                names |= bound_names(source)
        self.__dict__["_exports"] = sorted(
            n for n in names if hasattr(builtins, n) and not n.startswith("__")
        )
        return self.__dict__["_exports"]


def _meta(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


def _grade_id(cell):
    gid = _meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def _skipped(cell, tag: str) -> bool:
    """Whether nbclient (``skip_cells_with_tag``) skips this code cell: its tags hold ``tag``."""
    tags = cell.get("metadata", {}).get("tags")
    return bool(tag) and isinstance(tags, list) and tag in tags


def _source(cell) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(str(s) for s in src)
    return src if isinstance(src, str) else ""


def read_source(
    assignment: str, path: Path, begin_hidden: str = "BEGIN HIDDEN TESTS"
) -> SourceNotebook:
    nb = nbformat.read(path, as_version=4)
    tests, locked, order, cell_ids = [], {}, [], {}
    for cell in nb.cells:
        gid = _grade_id(cell)
        if gid is None:
            continue
        order.append(gid)
        if cell.get("id"):
            cell_ids[cell["id"]] = gid
        meta = _meta(cell)
        if cell.cell_type != "code":
            continue
        if meta.get("grade") and not meta.get("solution"):
            source = _source(cell)
            tests.append(
                TestCell(
                    gid,
                    float(meta.get("points", 0)),
                    source,
                    begin_hidden in source,
                    cell.get("id"),
                )
            )
        elif meta.get("locked") and not meta.get("solution"):
            locked[gid] = _source(cell)
    return SourceNotebook(assignment, path.stem, path, nb, tests, locked, order, cell_ids)


# a module the sources use by attribute (``torch.optim.SGD`` after ``import torch``) that the warm
# processes preload: its name tells them to warm up training (grading.warmup.wants_training)
TRAINING_MODULES = frozenset({"torch.optim"})

AUTOTEST = "AUTOTEST"  # nbgrader's InstantiateTests.autotest_delimiter (and "HASHED AUTOTEST")


def recorded_sources(config, assignment: str, notebook: str) -> dict[str, str]:
    """``{grade_id: source}`` of the notebook's cells as ``generate_assignment`` recorded them in
    the course's gradebook (empty when there is none: a gradebook is never created here)."""
    url = config.gradebook_url
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).is_file():
        return {}
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.grading.config import alembic_on_path

    alembic_on_path()
    try:
        with Gradebook(url, config.course_id) as gb:
            cells = gb.find_notebook(notebook, assignment).source_cells
            return {c.name: c.source for c in cells}
    except MissingEntry:
        return {}


class Course:
    """The instructor's side: ``<root>/<source_directory>/<assignment>/<notebook>.ipynb``, where
    the folders come from the course's nbgrader configuration (:mod:`.config`)."""

    def __init__(self, root: Path, config=None, options=()):
        from autograder.grading import config as configuration

        self.config = config or configuration.load(root, options)
        self.root = self.config.root
        self.source = self.config.source
        if not self.source.is_dir():
            raise FileNotFoundError(
                f"no source directory {self.source} (nbgrader's CourseDirectory.source_directory = "
                f"{self.config.source_directory!r}, read from "
                f"{', '.join(self.config.files) or 'nbgrader defaults: no nbgrader_config.py in ' + str(self.root)})"
            )
        self._cache: dict[str, list[SourceNotebook]] = {}

    def assignments(self) -> list[str]:
        return sorted(
            p.name
            for p in self.source.iterdir()
            if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.ipynb"))
        )

    def notebooks(self, assignment: str) -> list[SourceNotebook]:
        if assignment not in self._cache:
            self._cache[assignment] = [
                dataclasses.replace(
                    self._instantiated(read_source(assignment, p, self.config.begin_hidden)),
                    skip_tag=self.config.skip_tag,
                    add_missing=self.config.add_missing_cells,
                )
                for p in sorted((self.source / assignment).glob("*.ipynb"))
            ]
        return self._cache[assignment]

    def _instantiated(self, nb: SourceNotebook) -> SourceNotebook:
        """nbgrader's AUTOTEST directives become test code at ``generate_assignment``
        (InstantiateTests, before SaveCells records every cell), and ``nbgrader autograde`` runs
        the recorded code (OverwriteCells gives each grade cell the gradebook's source): a test
        cell of the source with a directive is taken from the gradebook, as stock takes it. With
        no record (the assignment not generated, no gradebook) it stays as written, and
        :func:`..config.unsupported` refuses the assignment, saying so."""
        if not any(AUTOTEST in t.source for t in nb.tests):
            return nb
        recorded = recorded_sources(self.config, nb.assignment, nb.name)
        tests = []
        for t in nb.tests:
            code = recorded.get(t.grade_id) if AUTOTEST in t.source else None
            if code is None:
                tests.append(t)
            else:
                hidden = self.config.begin_hidden in code
                tests.append(TestCell(t.grade_id, t.points, code, hidden, t.cell_id))
        nb.tests = tests
        return nb

    def unsupported(self, assignment: str) -> list[str]:
        """What the assignment's test cells use that the grader does not support (see :mod:`.config`)."""
        from autograder.grading.config import unsupported

        return [f"{nb.name}: {p}" for nb in self.notebooks(assignment) for p in unsupported(nb)]

    def imports(self) -> list[str]:
        if self.config.preload is not None:
            return sorted(self.config.preload)
        names = set()
        for a in self.assignments():
            for nb in self.notebooks(a):
                names |= nb.imports()
        return sorted(names)


@dataclass
class Submission:
    student: str
    assignment: str
    notebook: str
    path: Path | None
    source: SourceNotebook
    status: str | None = None  # missing-notebook / invalid-notebook (decided here)
    message: str = ""
    nb: object = None  # the student's notebook, when readable
    items: list = field(default_factory=list)
    layout: list = field(default_factory=list)
    files: list = field(default_factory=list)
    timestamp: object = None  # timestamp.txt's time (a datetime, UTC), when the folder has one

    @property
    def key(self) -> str:
        return f"{self.student}/{self.assignment}/{self.notebook}"

    def task(self, limits: Limits | dict, imports: list[str]) -> TaskFrame:
        return {
            "id": self.key,
            "items": self.items,
            "tests": [
                {"id": t.grade_id, "source": t.source, "points": t.points}
                for t in self.source.tests
            ],
            "files": self.files,
            "limits": Limits.of(limits).frame(),
            "imports": list(imports),
            "exports": self.source.exports(),
        }


def read_student_notebook(path: Path):
    """The notebook at ``path``, or raise ValueError with a message for the instructor.

    Never follows a link and never blocks: the file is opened with O_NOFOLLOW | O_NONBLOCK and
    read only if it is a regular file, at most MAX_NOTEBOOK_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(
                "it is a symbolic link: the grader does not follow links, nothing behind it was read"
            ) from None
        raise ValueError(f"it cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("it is not a regular file")
        if info.st_size > MAX_NOTEBOOK_BYTES:
            raise ValueError(f"the notebook is {info.st_size} bytes (limit {MAX_NOTEBOOK_BYTES})")
        raw = os.read(fd, MAX_NOTEBOOK_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"the notebook is larger than {MAX_NOTEBOOK_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise ValueError("not a notebook: JSON nested too deeply to read") from None
    if not isinstance(data, dict) or not isinstance(
        data.get("cells", data.get("worksheets")), list
    ):
        raise ValueError("not a Jupyter notebook (no list of cells)")
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # noqa: BLE001 - nbformat and jsonschema raise many types
        raise ValueError(f"not a valid notebook: {type(exc).__name__}: {str(exc)[:300]}") from None
    for cell in nb.cells:
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise ValueError("a cell is not a JSON object with a cell_type")
    return nb


def plan(source: SourceNotebook, nb):
    """``(items, layout)``: what runs in which order, and where every cell came from.

    ``layout`` lists the cells of the autograded notebook: ``("cell", nb_index, i)`` a student
    code cell run as item cell ``i``; ``("test", nb_index, k)`` the student's copy of test k
    (replaced by the source); ``("inserted", None, k)`` a missing test cell put back;
    ``("other", nb_index, None)`` markdown/raw cells and duplicates, not run.
    """
    tests = {t.grade_id: k for k, t in enumerate(source.tests)}
    by_cell_id = {t.cell_id: k for k, t in enumerate(source.tests) if t.cell_id}
    items, layout = [], []
    placed = set()
    after = {}  # source grade_id -> number of items before which a missing follower goes
    where = {}  # source grade_id -> layout index after which missing followers go
    index = 0
    for n, cell in enumerate(nb.cells):
        gid = _grade_id(cell)
        if gid in tests:
            k = tests[gid]
            if k in placed:
                layout.append(("other", n, None))
                continue
            items.append(["test", k])
            placed.add(k)
            layout.append(("test", n, k))
            after[gid], where[gid] = len(items), len(layout)
            continue
        if cell.get("cell_type") != "code" or _skipped(cell, source.skip_tag):
            # (a code cell tagged Execute.skip_cells_with_tag is not run, as nbclient skips it)
            layout.append(("other", n, None))
            if gid in source.order:
                after[gid], where[gid] = len(items), len(layout)
            continue
        text = source.locked.get(gid, _source(cell)) if gid else _source(cell)
        items.append(["cell", index, text])
        layout.append(("cell", n, index))
        index += 1
        if gid in source.order:
            after[gid], where[gid] = len(items), len(layout)
        k = by_cell_id.get(cell.get("id")) if gid is None and source.add_missing else None
        if k is not None and k not in placed:  # a test cell stripped of its metadata
            items.append(["test", k])
            placed.add(k)
            layout.append(("inserted", None, k))
            after[source.tests[k].grade_id], where[source.tests[k].grade_id] = (
                len(items),
                len(layout),
            )
    for k, t in enumerate(source.tests):
        if k in placed or not source.add_missing:  # left out: status not-in-notebook
            continue
        pos = source.order.index(t.grade_id)
        anchor = next((g for g in reversed(source.order[:pos]) if g in after), None)
        at_item = after[anchor] if anchor else 0
        at_layout = where[anchor] if anchor else 0
        items.insert(at_item, ["test", k])
        layout.insert(at_layout, ("inserted", None, k))
        for g in after:
            if after[g] >= at_item and g != anchor:
                after[g] += 1
            if where[g] >= at_layout and g != anchor:
                where[g] += 1
        after[t.grade_id], where[t.grade_id] = at_item + 1, at_layout + 1
        if anchor:
            after[anchor], where[anchor] = at_item + 1, at_layout + 1
        placed.add(k)
    return items, layout


def _extra_files(folder: Path) -> list:
    """The other regular files of a student's assignment folder (no links, no hidden files)."""
    files, total = [], 0
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".") and not os.path.islink(os.path.join(dirpath, d))
        )
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.startswith(".") or path.suffix == ".ipynb":
                continue
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            if total + info.st_size > MAX_FILES_BYTES:
                return files
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                try:
                    data = os.read(fd, info.st_size + 1)[: info.st_size]
                finally:
                    os.close(fd)
            except OSError:
                continue
            total += len(data)
            files.append([str(path.relative_to(folder)), base64.b64encode(data).decode()])
    return files


def assignment_files(config, sub) -> list:
    """The files stock nbgrader lays next to ``sub``'s notebook before it runs it (and leaves in
    ``autograded/``): the student's, then the source folder's over them but for
    ``Autograde.exclude_overwriting``, ``CourseDirectory.ignore`` applied to both (``config``: the
    course's :class:`..config.CourseConfig`, None for nbgrader's defaults); ``[name, base64]`` in
    name order, MAX_FILES_BYTES together at most (the source's first)."""
    from fnmatch import fnmatch

    ignore = list(getattr(config, "ignore", None) or [])
    excluded = set((getattr(config, "exclude_overwriting", None) or {}).get(sub.assignment, []))

    def kept(rel: str) -> bool:
        return not any(fnmatch(p, pat) for p in Path(rel).parts for pat in ignore)

    source = getattr(getattr(sub, "source", None), "path", None)
    theirs = {
        rel: data
        for rel, data in (source_files(source.parent) if source is not None else [])
        if kept(rel) and rel not in excluded
    }
    total = sum(len(d) * 3 // 4 for d in theirs.values())
    merged = dict(theirs)
    for rel, data in getattr(sub, "files", None) or []:
        if rel in theirs or not kept(rel):
            continue
        total += len(data) * 3 // 4
        if total > MAX_FILES_BYTES:
            break
        merged[rel] = data
    return [[rel, merged[rel]] for rel in sorted(merged)]


def source_files(folder: Path) -> list:
    """A source folder's other files (:func:`_extra_files`), read once per folder and run."""
    key = str(folder)
    if key not in _SOURCE_FILES:
        _SOURCE_FILES[key] = _extra_files(folder)
    return _SOURCE_FILES[key]


_SOURCE_FILES: dict = {}


def _entries(folder: Path):
    """``(name, path, is a real directory, is a link)`` of a folder's entries, never following links."""
    out = []
    with os.scandir(folder) as it:
        for e in it:
            if e.name.startswith("."):
                continue
            out.append((e.name, Path(e.path), e.is_dir(follow_symlinks=False), e.is_symlink()))
    return sorted(out)


def find_submissions(folder: Path, course: Course, warn=print) -> list[Submission]:
    """Every ``<student>/<assignment>/<notebook>.ipynb`` of a known assignment, sorted.

    Trusts nothing in the folder: a link (student folder, assignment folder or notebook) is never
    followed and gets ``invalid-notebook`` rows; a notebook that cannot be read or planned, for
    any reason, an ``invalid-notebook`` row; a student folder whose name is not a usable student
    id ``refused`` rows; an assignment folder without the notebook ``missing-notebook``.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no submissions folder {folder}")
    assignments = course.assignments()
    out = []
    for student, student_dir, is_dir, is_link in _entries(folder):
        if not is_dir and not is_link:
            continue
        if not STUDENT_ID.fullmatch(student):
            warn(
                f"refusing {student_dir}: {student!r} is not a usable student id "
                "(letters, digits, '.', '_' and '-', starting with a letter or digit)"
            )
            if (
                not student.isprintable()
            ):  # shown escaped: no control character reaches any artifact
                student = student.encode("unicode_escape").decode("ascii")
            for a in assignments:
                out += _rows_only(
                    student,
                    a,
                    course,
                    "refused",
                    "the folder name is not a usable student id; nothing in it was read",
                )
            continue
        if is_link:
            warn(f"not following {student_dir}: it is a symbolic link")
            for a in assignments:
                out += _rows_only(
                    student,
                    a,
                    course,
                    "invalid-notebook",
                    "the student's folder is a symbolic link: nothing behind it was read",
                )
            continue
        for a, a_dir, a_is_dir, a_is_link in _entries(student_dir):
            if a not in assignments:
                if a_is_dir or a_is_link:
                    warn(f"skipping {a_dir}: no assignment {a!r} in {course.source}")
                continue
            if a_is_link:
                warn(f"not following {a_dir}: it is a symbolic link")
                out += _rows_only(
                    student,
                    a,
                    course,
                    "invalid-notebook",
                    "the assignment folder is a symbolic link: nothing behind it was read",
                )
                continue
            if not a_is_dir:
                continue
            files = _extra_files(a_dir)
            timestamp, bad_timestamp = read_timestamp(a_dir)
            if bad_timestamp:
                warn(bad_timestamp)
                out += _rows_only(student, a, course, "refused", bad_timestamp)
                continue
            known = {s.name for s in course.notebooks(a)}
            for extra, path, _, _ in _entries(a_dir):
                if extra.endswith(".ipynb") and extra[:-6] not in known:
                    warn(f"ignoring {path}: not a notebook of the assignment")
            for source in course.notebooks(a):
                path = a_dir / f"{source.name}.ipynb"
                sub = Submission(student, a, source.name, path, source, timestamp=timestamp)
                if not os.path.lexists(path):
                    sub.path, sub.status = None, "missing-notebook"
                    sub.message = f"no {source.name}.ipynb in the submitted folder"
                else:
                    try:
                        sub.nb = read_student_notebook(path)
                        sub.items, sub.layout = plan(source, sub.nb)
                    except Exception as exc:  # noqa: BLE001 - any unreadable notebook is that student's row
                        sub.nb, sub.items, sub.layout = None, [], []
                        sub.status = "invalid-notebook"
                        sub.message = (
                            str(exc)
                            if isinstance(exc, ValueError)
                            else f"the notebook cannot be read: {type(exc).__name__}"
                        )
                    else:
                        sub.files = files
                        refusal = kernel_refusal(source, sub.nb)
                        if refusal:
                            sub.status, sub.message, sub.items = "refused", refusal, []
                out.append(sub)
    return out


KERNEL_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


def kernel_refusal(source: SourceNotebook, nb) -> str | None:
    """Why this submission is not graded for the kernel it names (None: it is graded), as stock
    decides: nbgrader autograde gives a submission its source's kernelspec (OverwriteKernelspec);
    a source naming none leaves the submission's, and stock then starts the kernel it names,
    failing when none of that name is installed (nbgrader's test_missing_source_kernelspec). Here
    every notebook runs in the sandbox's Python, so such a submission is refused (exit 4, its rows
    say why): a kernel that is not installed, or one for another language. A name is looked up
    only when it is a plain kernel name (a student writes it)."""
    if (source.nb.get("metadata", {}) or {}).get("kernelspec"):
        return None
    spec = (nb.get("metadata", {}) or {}).get("kernelspec")
    name = spec.get("name") if isinstance(spec, dict) else None
    if not name:
        return None
    language = _kernel_language(name) if type(name) is str and KERNEL_NAME.fullmatch(name) else None
    shown = repr(name)[:80]
    if language is None:
        return (
            f"the notebook asks for kernel {shown}, which is not installed, and its source names "
            "none: not graded (stock nbgrader autograde fails it too)"
        )
    if language != "python":
        return (
            f"the notebook asks for kernel {shown} ({language}): only Python notebooks are graded"
        )
    return None


def _kernel_language(name: str) -> str | None:
    """The language of the installed kernel ``name`` (lower case), or None when none is; the
    name as jupyter_client's KernelManager resolves it (``python`` is the native kernel)."""
    if name not in _KERNELS:
        from jupyter_client.kernelspec import NATIVE_KERNEL_NAME, KernelSpecManager, NoSuchKernel

        try:
            spec = KernelSpecManager().get_kernel_spec(
                NATIVE_KERNEL_NAME if name == "python" else name
            )
            _KERNELS[name] = str(spec.language).lower()
        except (NoSuchKernel, OSError, ValueError):
            _KERNELS[name] = None
    return _KERNELS[name]


_KERNELS: dict = {}


TIMESTAMP = "timestamp.txt"


def read_timestamp(folder: Path):
    """``(time, problem)``: the submission's ``timestamp.txt`` as ``nbgrader autograde`` reads it
    (``CourseDirectory.get_existing_timestamp``: nbgrader's ``parse_utc``); ``(None, None)`` when
    there is none or it is empty (stock warns and records no time); ``(None, message)`` when it
    cannot be read as a time: stock refuses that submission ("Invalid timestamp string"), and so
    is it here (rows ``refused``, with the reason; no gradebook entry, as stock makes none)."""
    path = Path(folder) / TIMESTAMP
    if not path.is_file() or path.is_symlink():
        return None, None
    try:
        text = path.read_bytes()[:200].decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        text = None
    if text == "":
        return None, None
    from nbgrader.utils import parse_utc

    try:
        if text is None:
            raise ValueError(text)
        return parse_utc(text), None
    except (ValueError, OverflowError, TypeError):
        shown = repr(text[:40]) if text is not None else "bytes that are not text"
        return None, (
            f"{TIMESTAMP} holds {shown}, which is not a date and time nbgrader reads: the "
            "submission is not graded (stock nbgrader autograde refuses it too)"
        )


def _rows_only(student, assignment, course, status, message):
    return [
        Submission(student, assignment, source.name, None, source, status=status, message=message)
        for source in course.notebooks(assignment)
    ]
