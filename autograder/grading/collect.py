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
  ``add_missing_cells``);
* ``tests``: ``{"id", "source", "points"}`` from the source;
* ``files``: the other files of the student's assignment folder (copied to the scratch
  directory, as nbgrader runs a notebook next to its files).
"""
from __future__ import annotations

import ast
import base64
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

# constructs in a student's code that have no business in this course's exercises and that
# the in-process checks cannot fully stop (raw memory views) or that only serve tampering:
# listed in OUT/review.txt for a human look (the grade is not changed by this scan)
REVIEW_PATTERNS = {
    "raw memory views (__array_interface__)": re.compile(r"__array_(interface|struct)__"),
    "native calls (ctypes / cffi)": re.compile(r"\b(ctypes|cffi|_cffi_backend)\b"),
    "interpreter internals (frames, gc, tracing)": re.compile(
        r"_getframe|\bf_(back|locals|globals|trace)\b|\btb_frame\b|\bgi_frame\b|\bgc\.get_"
        r"|set(trace|profile)\b|addaudithook|__code__|__closure__|__defaults__"),
    "the grader's internals": re.compile(r"autograder\.grading|/proc/|\bos\.write\s*\(|\bos\.kill\b"),
    "patching modules": re.compile(r"sys\.modules\s*\[|importlib\.reload|\bbuiltins\.\w+\s*=|"
                                   r"\btorch(\.\w+)+\s*=[^=]|__class__\s*=[^=]"),
    "torch dispatch hooks": re.compile(r"TorchFunctionMode|TorchDispatchMode|torch\.library|_set_torch_function"),
    "IPython hooks": re.compile(r"input_transformers|ast_transformers|register_magic|events\.register"),
}
MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024
MAX_FILES_BYTES = 50 * 1024 * 1024


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
    locked: dict[str, str]            # grade_id -> source of locked (read-only) code cells
    order: list[str]                  # grade_ids of the source's cells, in order
    cell_ids: dict[str, str]          # cell id -> grade_id

    @property
    def max_score(self) -> float:
        return sum(t.points for t in self.tests)

    def imports(self) -> set[str]:
        """Modules the test cells import (preloaded by the sandboxes before the snapshot)."""
        names = set()
        for t in self.tests:
            try:
                tree = ast.parse(t.source)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module)
        return names


def _meta(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


def _grade_id(cell):
    gid = _meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def _source(cell) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(str(s) for s in src)
    return src if isinstance(src, str) else ""


def read_source(assignment: str, path: Path) -> SourceNotebook:
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
            tests.append(TestCell(gid, float(meta.get("points", 0)), source,
                                  "### BEGIN HIDDEN TESTS" in source, cell.get("id")))
        elif meta.get("locked") and not meta.get("solution"):
            locked[gid] = _source(cell)
    return SourceNotebook(assignment, path.stem, path, nb, tests, locked, order, cell_ids)


class Course:
    """The instructor's side: ``<root>/solutions/<assignment>/<notebook>.ipynb``."""

    def __init__(self, root: Path, source_dir: str = "solutions"):
        self.root = Path(root)
        self.source = self.root / source_dir
        if not self.source.is_dir():
            raise FileNotFoundError(f"no source directory {self.source} (the course's solutions/)")
        self._cache: dict[str, list[SourceNotebook]] = {}

    def assignments(self) -> list[str]:
        return sorted(p.name for p in self.source.iterdir()
                      if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.ipynb")))

    def notebooks(self, assignment: str) -> list[SourceNotebook]:
        if assignment not in self._cache:
            self._cache[assignment] = [read_source(assignment, p)
                                       for p in sorted((self.source / assignment).glob("*.ipynb"))]
        return self._cache[assignment]

    def imports(self) -> list[str]:
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
    status: str | None = None         # missing-notebook / invalid-notebook (decided here)
    message: str = ""
    nb: object = None                 # the student's notebook, when readable
    items: list = field(default_factory=list)
    layout: list = field(default_factory=list)
    files: list = field(default_factory=list)
    review: list = field(default_factory=list)  # reasons for a human look (not a status)

    @property
    def key(self) -> str:
        return f"{self.student}/{self.assignment}/{self.notebook}"

    def task(self, limits: dict, imports: list[str]) -> dict:
        return {
            "id": self.key,
            "items": self.items,
            "tests": [{"id": t.grade_id, "source": t.source, "points": t.points} for t in self.source.tests],
            "files": self.files,
            "limits": dict(limits),
            "imports": list(imports),
        }


def read_student_notebook(path: Path):
    """The notebook at ``path``, or raise ValueError with a message for the instructor."""
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"the notebook is {size} bytes (limit {MAX_NOTEBOOK_BYTES})")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells", data.get("worksheets")), list):
        raise ValueError("not a Jupyter notebook (no list of cells)")
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat raises many types
        raise ValueError(f"not a readable notebook: {type(exc).__name__}: {exc}"[:500]) from None
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
        if cell.get("cell_type") != "code":
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
        k = by_cell_id.get(cell.get("id")) if gid is None else None
        if k is not None and k not in placed:  # a test cell stripped of its metadata
            items.append(["test", k])
            placed.add(k)
            layout.append(("inserted", None, k))
            after[source.tests[k].grade_id], where[source.tests[k].grade_id] = len(items), len(layout)
    for k, t in enumerate(source.tests):
        if k in placed:
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


def review_reasons(items) -> list[str]:
    code = "\n".join(item[2] for item in items if item[0] == "cell")
    return [reason for reason, pattern in REVIEW_PATTERNS.items() if pattern.search(code)]


def _extra_files(folder: Path) -> list:
    files, total = [], 0
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or path.suffix == ".ipynb":
            continue
        if path.is_symlink() or not path.is_file():
            continue
        size = path.stat().st_size
        if total + size > MAX_FILES_BYTES:
            break
        total += size
        files.append([str(rel), base64.b64encode(path.read_bytes()).decode()])
    return files


def find_submissions(folder: Path, course: Course, warn=print) -> list[Submission]:
    """Every ``<student>/<assignment>/<notebook>.ipynb`` of a known assignment, sorted.

    A student's assignment folder without a notebook of the source's name gets a
    ``missing-notebook`` submission; an unreadable file an ``invalid-notebook`` one.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no submissions folder {folder}")
    assignments = course.assignments()
    out = []
    for student_dir in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for a_dir in sorted(p for p in student_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if a_dir.name not in assignments:
                warn(f"skipping {a_dir}: no assignment {a_dir.name!r} in {course.source}")
                continue
            files = _extra_files(a_dir)
            known = {s.name for s in course.notebooks(a_dir.name)}
            for extra in sorted(p.stem for p in a_dir.glob("*.ipynb")):
                if extra not in known:
                    warn(f"ignoring {a_dir / (extra + '.ipynb')}: not a notebook of the assignment")
            for source in course.notebooks(a_dir.name):
                path = a_dir / f"{source.name}.ipynb"
                sub = Submission(student_dir.name, a_dir.name, source.name, path, source)
                if not path.is_file():
                    sub.path, sub.status = None, "missing-notebook"
                    sub.message = f"no {source.name}.ipynb in the submitted folder"
                else:
                    try:
                        sub.nb = read_student_notebook(path)
                    except (ValueError, OSError) as exc:
                        sub.status, sub.message = "invalid-notebook", str(exc)
                    else:
                        sub.items, sub.layout = plan(source, sub.nb)
                        sub.files = files
                        sub.review = review_reasons(sub.items)
                out.append(sub)
    return out
