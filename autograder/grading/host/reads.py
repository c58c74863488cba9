"""On the host: which global names a submitted notebook's code names, found by compiling its
cells (never running them). The judge uses it to know when one kernel's semantics would let
student code see a test's binding (the namespace contract, README "How the judge keeps names").

* ``functions``: names read as globals by code that can run during a call into student code
  (every function, lambda, comprehension and class body a cell defines: ``LOAD_GLOBAL`` /
  ``LOAD_NAME`` / ``LOAD_FROM_DICT_OR_GLOBALS`` / ``LOAD_DEREF`` of a global);
* ``later[k]``: names the module-level code of the student cells after test ``k`` reads,
  binds or deletes.

Static names only: code that finds names dynamically (``globals()``, ``vars()``, frames,
``eval``) is not counted as reading a test's binding (it reads the student's own namespace,
where no test object ever is); that is the line the README states.
"""

from __future__ import annotations

import dis
import re
import types

LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})
TOUCHES = LOADS | frozenset({"STORE_NAME", "STORE_GLOBAL", "DELETE_NAME", "DELETE_GLOBAL"})
# imports bind names too (STORE_NAME after IMPORT_NAME): covered by TOUCHES


def _compile(source: str):
    """``(code, extra names)``: a magic's text (``%timeit f(x)``) counts every identifier in it."""
    try:
        return compile(source, "<cell>", "exec", dont_inherit=True), set()
    except (SyntaxError, ValueError):
        pass
    try:  # IPython syntax (magics, `!`): what the student's shell would run
        from IPython.core.inputtransformer2 import TransformerManager

        code = compile(
            TransformerManager().transform_cell(source), "<cell>", "exec", dont_inherit=True
        )
        return code, set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))
    except Exception:  # noqa: BLE001 - a cell that does not compile defines and reads nothing
        return None, set()


def _names(code, ops) -> set:
    out = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ops and isinstance(ins.argval, str):
            out.add(ins.argval)
    return out


def _free_loads(code) -> set:
    """Names module-level code reads before it binds them itself (in instruction order: a cell's
    ``x = torch.randn(5)`` then ``print(f(x))`` reads its own ``x``, not an earlier one)."""
    bound: set = set()
    out: set = set()
    for ins in dis.get_instructions(code):
        if not isinstance(ins.argval, str):
            continue
        if ins.opname in LOADS and ins.argval not in bound:
            out.add(ins.argval)
        elif ins.opname in ("STORE_NAME", "STORE_GLOBAL"):
            bound.add(ins.argval)
    return out


def _nested(code):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _nested(const)


def bound_names(source: str) -> set:
    """Names a cell's module-level code binds."""
    code, _ = _compile(source)
    return _names(code, frozenset({"STORE_NAME", "STORE_GLOBAL"})) if code is not None else set()


def star_import(code) -> bool:
    return any(ins.opname == "IMPORT_STAR" for ins in dis.get_instructions(code))


def _test_free_reads(source: str) -> set:
    """Names a test cell reads that it never binds itself (what an earlier cell must have bound)."""
    code, words = _compile(source)
    if code is None:
        return set()
    loads = _free_loads(code) | words
    stores = _names(code, TOUCHES - LOADS)
    for inner in _nested(code):  # (a lambda runs after the cell bound what it reads, as a rule)
        loads |= _names(inner, LOADS) - stores
    return loads


def analyse(items, tests=()) -> dict:
    """What the judge needs of a task's student code (``items``: ``["cell", i, source]`` and
    ``["test", k]`` in notebook order; ``tests``: the test cells' sources by ``k``)::

        {"functions": names student functions read,
         "later": {"k": names the module-level code of the student cells after test k reads,
                   or binds where a test after it reads the name without binding it},
         "cells_after": the tests followed by a student cell,
         "star": a cell star-imports}
    """
    functions: set = set()
    module_level: list = []  # per item: (loads, stores) of its module-level code (None: a test)
    star = False
    for item in items:
        if not item or item[0] != "cell":
            module_level.append(None)
            continue
        source = item[2] if len(item) > 2 and isinstance(item[2], str) else ""
        code, words = _compile(source)
        if code is None:
            module_level.append((set(), set()))
            continue
        star = star or star_import(code)
        module_level.append((_free_loads(code) | words, _names(code, TOUCHES - LOADS)))
        for inner in _nested(code):
            functions |= _names(inner, LOADS)
    free = {}
    for k, source in enumerate(tests):
        free[k] = _test_free_reads(source if isinstance(source, str) else "")
    later: dict = {}
    cells_after: list = []
    loads: set = set()
    stores: set = set()
    tests_read: set = set()  # free reads of the tests after this point
    seen_cell = False
    for item, names in zip(reversed(items), reversed(module_level)):
        if names is None:
            k = item[1]
            later[str(k)] = sorted(loads | (stores & tests_read))
            if seen_cell:
                cells_after.append(k)
            tests_read |= free.get(k, set())
        else:
            # a store by this cell matters to the tests after it, which tests_read holds now
            stores |= names[1] & tests_read
            loads |= names[0]
            seen_cell = True
    return {
        "functions": sorted(functions),
        "later": later,
        "cells_after": sorted(cells_after),
        "star": star,
    }
