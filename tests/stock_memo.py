"""Stock `nbgrader autograde` of this course's fixtures, kept with the exact inputs it came from.

Stock nbgrader grades the solution, the blank release and every fixture submission of an
assignment (conftest.StockGrades: about 100 notebooks, a kernel and `import torch` each, a
quarter of `make test`'s CPU). Its grades are a function of its inputs: the Python and every
package (requirements.lock), the course's nbgrader_config.py, the assignment's source folder,
the submitted notebooks, autograder/course.py (which builds the stock course) and the
autograder modules its kernels imported (recorded as each kernel imports them, by
tests/stock_site/sitecustomize.py, on PYTHONPATH for that run only). A run stores each input as a
hash, beside the grades, in tests/fixtures/stock/<assignment>.json; a later run uses the grades
only when every input hashes the same, and runs nbgrader again otherwise (rewriting the file:
commit it). A run in which fewer kernels recorded than it graded notebooks stores nothing.
`AUTOGRADER_STOCK_MEMO=0` always runs nbgrader.

Whatever the memo holds, tests/test_autograde.py::test_the_memo_is_what_stock_nbgrader_gives
runs the real `nbgrader autograde` on every assignment's solution and blank release in every
test run and requires the grades the memo gives for them.

:func:`recorded_run` keeps any other stock run's scores the same way, for a course folder the
tests copy and grade as it is (the fixture courses, the fuzzer's seeded fixed budget): its inputs
are every file of the folder as the run starts, the Python, requirements.lock and the kernels'
autograder modules, in tests/fixtures/stock/<name>.json.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FOLDER = REPO / "tests" / "fixtures" / "stock"
VERSION = 1


def enabled() -> bool:
    return os.environ.get("AUTOGRADER_STOCK_MEMO", "1") != "0"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def submissions(assignment: str) -> dict[str, Path]:
    """What autograder.course.stock_autograde submits: ``{"student/notebook": file}``."""
    from autograder.course import reference_submissions

    return {f"{s}/{nb}": path for (s, nb), path in reference_submissions(assignment).items()}


def inputs(assignment: str) -> dict:
    """What stock's grades of ``assignment`` depend on, but the kernels' modules, as hashes."""
    import platform

    source = REPO / "solutions" / assignment
    files = sorted(p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    subs = submissions(assignment)
    return {
        "version": VERSION,
        "python": platform.python_version(),
        "requirements.lock": _sha((REPO / "requirements.lock").read_bytes()),
        "nbgrader_config.py": _sha((REPO / "nbgrader_config.py").read_bytes()),
        "autograder/course.py": _sha((REPO / "autograder" / "course.py").read_bytes()),
        "source": {str(p.relative_to(REPO)): _sha(p.read_bytes()) for p in files},
        "submissions": {k: _sha(subs[k].read_bytes()) for k in sorted(subs)},
    }


def _hashes(files) -> dict[str, str] | None:
    """``{repo-relative file: sha256}``; None if one is gone."""
    out = {}
    for rel in files:
        path = REPO / rel
        if not path.is_file():
            return None
        out[rel] = _sha(path.read_bytes())
    return out


def _recorded(name: str, inputs_now: dict) -> dict | None:
    """tests/fixtures/stock/<name>.json, if recorded from exactly these inputs and kernel modules."""
    path = FOLDER / f"{name}.json"
    if not enabled() or not path.exists():
        return None
    try:
        memo = json.loads(path.read_text())
    except ValueError:
        return None
    kernel = memo.get("kernel modules")
    if memo.get("inputs") != inputs_now or not isinstance(kernel, dict):
        return None
    if _hashes(sorted(kernel)) != kernel:
        return None
    return memo


def _record(name: str, memo: dict) -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    path = FOLDER / f"{name}.json"
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(memo, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def load(assignment: str, inputs_now: dict):
    """The recorded grades, if recorded from exactly these inputs and these kernel modules."""
    memo = _recorded(assignment, inputs_now)
    if memo is None:
        return None
    return {
        student: {nb: {gid: tuple(v) for gid, v in grades.items()} for nb, grades in nbs.items()}
        for student, nbs in memo["grades"].items()
    }


def store(assignment: str, inputs_now: dict, kernel: dict, grades: dict) -> None:
    _record(assignment, {"inputs": inputs_now, "kernel modules": kernel, "grades": grades})


def _importable(name: str) -> bool:
    """The parents of ``name`` import (find_spec imports them)."""
    try:
        return importlib.util.find_spec(name.rpartition(".")[0] or name) is not None
    except (ImportError, ValueError):
        return False


def _recording(folder: Path) -> tuple[Path, dict]:
    """A folder for tests/stock_site's records, and the environment that makes a run write them."""
    record = folder / "kernel-modules"
    record.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join([str(REPO / "tests" / "stock_site"), os.environ.get("PYTHONPATH", "")])
    return record, {"AUTOGRADER_STOCK_RECORD": str(record), "PYTHONPATH": path.rstrip(os.pathsep)}


def _kernel_modules(record: Path, notebooks: int) -> dict | None:
    """``{file: sha256}`` of every module the run's kernels imported; None (store nothing) when fewer
    kernels recorded than the run graded notebooks, or a file is gone."""
    reports = [p.read_text().splitlines() for p in record.glob("*.txt")]
    kernels = [r for r in reports if r and "ipykernel" in r[0]]
    files = set()
    for r in reports:
        for name in r[1:]:
            spec = importlib.util.find_spec(name) if _importable(name) else None
            origin = getattr(spec, "origin", None)
            if not origin or not os.path.isfile(origin):
                continue  # a name that did not import (the kernel's error, not a file it ran)
            try:
                files.add(str(Path(origin).resolve().relative_to(REPO)))
            except ValueError:
                files.add(origin)  # outside the repository: never matches, so never reused
    if len(kernels) < notebooks:
        return None
    return _hashes(sorted(files))


def stock_autograde(folder, assignment: str) -> dict:
    """autograder.course.stock_autograde of one assignment: from the memo when nothing it depends
    on changed; otherwise run, recording which autograder modules its kernels loaded."""
    from autograder.course import stock_autograde as real

    now = inputs(assignment)
    grades = load(assignment, now)
    if grades is not None:
        return grades
    record, env = _recording(Path(folder))
    grades = real(folder, [assignment], env=env)[assignment]
    hashes = _kernel_modules(record, len(submissions(assignment)))
    if enabled() and hashes is not None:
        store(assignment, now, hashes, grades)
    return grades


def folder_inputs(root) -> dict:
    """What a stock run from the course folder ``root`` depends on, but the kernels' modules, as
    hashes: the Python, requirements.lock, and every file under ``root`` (its nbgrader_config.py,
    source/ and submitted/: the folder as the run starts)."""
    import platform

    root = Path(root)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {
        "version": VERSION,
        "python": platform.python_version(),
        "requirements.lock": _sha((REPO / "requirements.lock").read_bytes()),
        "files": {str(p.relative_to(root)): _sha(p.read_bytes()) for p in files},
    }


def recorded_run(name: str, root, assignment: str, run) -> dict:
    """``run(env)`` - a stock run of ``assignment`` from the course folder ``root`` with ``env``
    added to its environment, returning ``(scores, ok)``, ``scores`` a dict with tuple keys - once
    for these inputs: the scores kept in tests/fixtures/stock/<name>.json when every file under
    ``root`` and every kernel module hash as they did when it was recorded; otherwise run, and
    recorded when ``ok`` and every submitted notebook's kernel reported what it imported."""
    root = Path(root)
    now = folder_inputs(root)
    memo = _recorded(name, now)
    if memo is not None:
        return {tuple(k): v for k, v in memo["scores"]}
    notebooks = len(list(root.glob(f"submitted/*/{assignment}/*.ipynb")))
    record, env = _recording(root.parent / f"{root.name}-record")
    scores, ok = run(env)
    hashes = _kernel_modules(record, notebooks)
    if enabled() and ok and hashes is not None:
        scores_kept = sorted([list(k), v] for k, v in scores.items())
        _record(name, {"inputs": now, "kernel modules": hashes, "scores": scores_kept})
    return scores
