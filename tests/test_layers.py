"""The package's layers, read from its imports with ``ast`` (module-level and function-local ones).

The trust boundary is a process boundary, and the tree shows it: the wire format (``wire``)
knows nothing above it, the calls into student code (``remote``) build on the wire only, the
test-cell library (``checks``, ``probes``) on both, the learner's tools never reach into the
grader, and in the grader the code that runs inside the sandbox (``grading.inside``) and the
code that runs on the host (``grading.host``) never import each other. No import circle anywhere,
not even one hidden in a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "autograder"

# (module prefix, rank): a module may import modules of its own rank or lower, never higher.
# The longest matching prefix decides; every module of the package must match one.
LAYERS = [
    ("autograder.wire", 0),  # frames, bounded JSON, the observation codec
    ("autograder.messages", 0),  # the failure message format
    ("autograder.course", 0),  # where the course's folders are, nbgrader cell metadata
    ("autograder.procs", 0),  # running a command so that its failure explains itself
    ("autograder.remote", 1),  # calls into student code: client, server, restricted pickler
    ("autograder.checks", 2),  # what test cells import
    ("autograder.probes", 2),  # what test cells hand to student code
    ("autograder.learner", 3),  # the learner's tools: visible self-check, submit
    ("autograder.doctor", 3),  # the in-place doctor, a learner's debugging aid
    ("autograder.grading", 4),  # autograder grade (its sides checked below)
    ("autograder.selfcheck", 5),  # front: what notebooks import (check(), progress()), the
    ("autograder.progress", 5),  # learner's commands that grade (the full check), the command
    ("autograder.fullcheck", 5),  # line, and the authoring tools
    ("autograder.cli", 5),
    ("autograder.figures", 5),
    ("autograder.lessons", 5),
    ("autograder.notebooks", 5),  # (python -m autograder.notebooks: the authoring tool's old name)
    ("autograder.authoring", 5),  # dev and authoring tools: make notebooks, make bench
]
ROOT = ("autograder", 0)  # the package's __init__ (imported by every import of it)

INSIDE = "autograder.grading.inside"  # runs under bwrap, next to student code
HOST = "autograder.grading.host"  # never runs student code
# what the code inside the sandbox may import of the grader: itself and the warm-up
INSIDE_MAY_IMPORT = (INSIDE, "autograder.grading.warmup")
AUTHORING = "autograder.authoring"  # dev and authoring tools, off the graded path


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module of the package that ``name`` imports, wherever the import statement is."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found = set()

    def add(target):
        # the deepest module of the package that the dotted name names
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "autograder":
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "autograder":
                continue
            for alias in node.names:
                # ``from autograder import remote``: the submodule; ``from .x import y``: x
                add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _rank(name: str) -> int | None:
    if name == ROOT[0]:
        return ROOT[1]
    best = None
    for prefix, rank in LAYERS:
        if name == prefix or name.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, rank)
    return None if best is None else best[1]


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def test_the_walk_sees_function_local_imports():
    graph = _graph()
    # (a sanity check of the walker itself: the judge imports the checks inside a function)
    assert any(_within(m, "autograder.checks") for m in graph[f"{HOST}.judge"])


def test_every_module_has_a_layer():
    assert [m for m in _graph() if _rank(m) is None] == []


def test_no_import_circle():
    assert _cycles(_graph()) == []


def test_no_import_from_a_lower_layer_to_a_higher_one():
    bad = [
        f"{src} (layer {_rank(src)}) imports {dst} (layer {_rank(dst)})"
        for src, targets in sorted(_graph().items())
        for dst in sorted(targets)
        if _rank(src) is not None and _rank(dst) is not None and _rank(dst) > _rank(src)
    ]
    assert bad == []


@pytest.mark.parametrize(
    "lower",
    [
        "autograder.wire",
        "autograder.remote",
        "autograder.checks",
        "autograder.probes",
        "autograder.messages",
        "autograder.learner",
    ],
)
def test_below_the_grader_nothing_imports_it(lower):
    bad = [
        f"{src} imports {dst}"
        for src, targets in sorted(_graph().items())
        if _within(src, lower)
        for dst in sorted(targets)
        if _within(dst, "autograder.grading")
    ]
    assert bad == []


def test_inside_the_sandbox_nothing_imports_the_host_side():
    graph = _graph()
    assert any(_within(m, INSIDE) for m in graph), "no grading.inside package"
    bad = [
        f"{src} imports {dst}"
        for src, targets in sorted(graph.items())
        if _within(src, INSIDE)
        for dst in sorted(targets)
        if _within(dst, "autograder.grading")
        and dst != "autograder.grading"
        and not any(_within(dst, ok) for ok in INSIDE_MAY_IMPORT)
    ]
    assert bad == []


def test_the_host_side_never_imports_the_inside():
    graph = _graph()
    assert any(_within(m, HOST) for m in graph), "no grading.host package"
    bad = [
        f"{src} imports {dst}"
        for src, targets in sorted(graph.items())
        if _within(src, HOST)
        for dst in sorted(targets)
        if _within(dst, INSIDE)
    ]
    assert bad == []


def test_nothing_on_the_graded_path_imports_the_authoring_tools():
    """The grader, the learner's tools and what notebooks import never import the dev and
    authoring tools (only the old command name ``python -m autograder.notebooks`` does)."""
    graph = _graph()
    assert any(_within(m, AUTHORING) for m in graph), "no authoring package"
    bad = [
        f"{src} imports {dst}"
        for src, targets in sorted(graph.items())
        if not _within(src, AUTHORING) and src != "autograder.notebooks"
        for dst in sorted(targets)
        if _within(dst, AUTHORING)
    ]
    assert bad == []
