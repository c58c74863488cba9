"""On the host: which global names a submitted notebook's code names, found by compiling its
cells (never running them). The judge uses it to know when one kernel's semantics would let
student code see a test's binding (the namespace contract, docs/grading.md "How the judge keeps names").

* ``functions``: names read as globals by code that can run during a call into student code
  (every function, lambda, comprehension and class body a cell defines: ``LOAD_GLOBAL`` /
  ``LOAD_NAME`` / ``LOAD_FROM_DICT_OR_GLOBALS`` / ``LOAD_DEREF`` of a global);
* ``later[k]``: names the module-level code of the student cells after test ``k`` reads,
  binds or deletes.

Static names only: code that finds names dynamically (``globals()``, ``vars()``, frames,
``eval``) is not counted as reading a test's binding (it reads the student's own namespace,
where no test object ever is); that is the line docs/grading.md states.
"""

from __future__ import annotations

import dis
import functools
import re
import sys
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


_OPS = {dis.opmap[name]: name for name in TOUCHES if name in dis.opmap}
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
_GLOBAL_SHIFT = 1 if sys.version_info >= (3, 11) else 0  # LOAD_GLOBAL's arg: index << 1 (3.11+)


def _name_ops(code):
    """``(opname, name)`` of the name instructions of ``code`` (its bytecode read directly: a
    tenth of :func:`dis.get_instructions`' time)."""
    raw, names, ext = code.co_code, code.co_names, 0
    for i in range(0, len(raw), 2):
        op, arg = raw[i], raw[i + 1] | ext
        if op == _EXTENDED_ARG:
            ext = arg << 8
            continue
        ext = 0
        opname = _OPS.get(op)
        if opname is None:
            continue
        if opname == "LOAD_GLOBAL":
            arg >>= _GLOBAL_SHIFT
        if 0 <= arg < len(names):
            yield opname, names[arg]


def _names(code, ops) -> set:
    return {name for opname, name in _name_ops(code) if opname in ops}


def _free_loads(code) -> set:
    """Names module-level code reads before it binds them itself (in instruction order: a cell's
    ``x = torch.randn(5)`` then ``print(f(x))`` reads its own ``x``, not an earlier one)."""
    bound: set = set()
    out: set = set()
    for opname, name in _name_ops(code):
        if opname in LOADS and name not in bound:
            out.add(name)
        elif opname in ("STORE_NAME", "STORE_GLOBAL"):
            bound.add(name)
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


@functools.lru_cache(maxsize=4096)
def _test_free_reads(source: str) -> frozenset:
    """Names a test cell reads that it never binds itself (what an earlier cell must have bound).
    Cached by source: every submission of an assignment has the same test cells."""
    code, words = _compile(source)
    if code is None:
        return frozenset()
    loads = _free_loads(code) | words
    stores = _names(code, TOUCHES - LOADS)
    for inner in _nested(code):  # (a lambda runs after the cell bound what it reads, as a rule)
        loads |= _names(inner, LOADS) - stores
    return frozenset(loads)


@functools.lru_cache(maxsize=4096)
def _cell_facts(source: str):
    """``(free loads, stores, function loads, star import)`` of a student cell, or None when it
    does not compile. Cached by source: the release's provided cells recur in every submission."""
    code, words = _compile(source)
    if code is None:
        return None
    functions: set = set()
    for inner in _nested(code):
        functions |= _names(inner, LOADS)
    return (
        frozenset(_free_loads(code) | words),
        frozenset(_names(code, TOUCHES - LOADS)),
        frozenset(functions),
        star_import(code),
    )


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
        facts = _cell_facts(source)
        if facts is None:
            module_level.append((set(), set()))
            continue
        star = star or facts[3]
        module_level.append((facts[0], facts[1]))
        functions |= facts[2]
    free = {}
    for k, source in enumerate(tests):
        free[k] = _test_free_reads(source if isinstance(source, str) else "")
    later: dict = {}
    cells_after: list = []
    loads: set = set()
    stores: set = set()
    tests_read: set = set()  # free reads of the tests after this point
    seen_cell = False
    for item, names in zip(reversed(items), reversed(module_level), strict=False):
        if names is None:
            k = item[1]
            later[str(k)] = sorted(loads | (stores & tests_read))
            if seen_cell:
                cells_after.append(k)
            tests_read |= free.get(k, frozenset())
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
