"""Differential fuzzer: `autograder grade` against a real `nbgrader autograde` (issue 26 item 5).

    python -m tests.fuzz --n 50 --seed 1 [--out DIR] [--report FILE]

A seeded generator (``random.Random``; hypothesis is not a dependency) writes small honest
nbgrader courses from a grammar of everyday idioms (``IDIOMS``): functions mutating module-level
state, classes, closures, generators, star imports, threads and pools made in an earlier cell,
many globals, helpers shadowing builtins, numpy and torch values of several dtypes and size
classes, names a test cell defines and a later cell uses, tests iterating lists while calling
student code, tests rebinding a name the student's code reads, a memo global named like a test's
own name (``result``, ``expected``), numpy and torch values of every size class the wire has
(0-d, 1, 4,096, 4,097, 200,000 elements), ``while True`` loops and crashes in student cells. Each generated course is one assignment: a source notebook per group of idioms
(solution cells, test cells with points) and 2-4 students derived from it (``right``, ``wrong``,
``partly`` right, ``crash``ing: a cell raising before or after its definitions, or looping forever).

Every generated assignment of a run lives in one nbgrader course folder, graded once by
``autograder grade`` (the CLI, as tests/test_any_course.py runs it) and, on a copy, by
``nbgrader generate_assignment`` + ``nbgrader autograde`` per assignment; every test cell's score is
compared. Each test cell belongs to one idiom's unit, so a disagreement names the idiom, the cell,
both scores and our status. Idioms that change how a whole notebook is graded (a star import,
thousands of globals, a looping first cell in a notebook graded in one kernel) and the classes
issue 26 lists as wrong today get a notebook of their own, so they never hide or cause another
idiom's disagreement.

The hostile twin (``hostile_assignment``) writes students whose wrong answers try to write the
test's names and objects (``globals()``, ``sys.modules["__main__"]``, frames, ``gc``, ``builtins``,
module attributes); the invariant is that none scores more than stock nbgrader gives the honest
wrong twin (the same answers without the attack).

tests/test_fuzz.py runs a small fixed budget of this in the normal suite; ``make fuzz`` the long run.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.course import stock_kernels
from autograder.procs import explain
from autograder.procs import run as run_process  # (run, below, is the fuzzer's own)

TIMEOUT = 20  # the course's Execute.timeout: what a `while True` cell costs each grader
STUDENTS = ("right", "wrong", "partly", "crash")


# --------------------------------------------------------------------------- nbgrader cells
# the fixture courses' cell helpers (tests/fixtures/courses/nbgrader_cells.py: schema 3 metadata)
sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "courses"))
import nbgrader_cells  # noqa: E402
from nbgrader_cells import meta  # noqa: E402


def answer_cell(gid, code):
    return nbgrader_cells.answer(gid, f"### BEGIN SOLUTION\n{code}\n### END SOLUTION")


def test_cell(gid, code, points=1):
    return nbgrader_cells.test(gid, points, code)


HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.S)


# --------------------------------------------------------------------------- the grammar


@dataclass
class Answer:
    gid: str
    right: str
    wrong: str
    alt: str | None = None  # another right answer (the `partly` / `crash` students may use it)
    loops: bool = False  # the crash student's version loops forever (costs TIMEOUT in each grader)
    student_right: str | None = (
        None  # what the `right` student writes, when not the instructor's answer
    )
    steady: bool = False  # the crash student gets this one right (what follows a looping cell)


@dataclass
class Unit:
    """One idiom's cells: answers and tests, in notebook order (a str is a plain code cell)."""

    idiom: str
    cells: list = field(default_factory=list)  # Answer | ("test", gid, code, points) | str
    side: str = ""  # sided idioms: "solution" (in the instructor's answer) or "student" (only in a student's)

    def tests(self):
        return [c[1] for c in self.cells if isinstance(c, tuple)]


def _name(rng, stem):
    return f"{stem}_{rng.randrange(10, 99)}"


def global_state(rng, uid):
    a, b = rng.randrange(1, 50), rng.randrange(1, 50)
    fn, log, tot = _name(rng, "record"), _name(rng, "log"), _name(rng, "total")
    right = f"{log} = []\n{tot} = 0\n\n\ndef {fn}(x):\n    global {tot}\n    {log}.append(x)\n    {tot} += x\n    return {tot}"
    wrong = f"{log} = []\n{tot} = 0\n\n\ndef {fn}(x):\n    {log}.append(x)\n    return x"
    alt = f"{log} = list()\n{tot} = 0\n\n\ndef {fn}(x):\n    globals()['{tot}'] = {tot} + x\n    {log}.extend([x])\n    return {tot}"
    return Unit(
        "global_state",
        [
            Answer(f"{uid}_ans", right, wrong, alt),
            ("test", f"{uid}_t1", f"{fn}({a})\n{fn}({b})\nassert {tot} == {a + b}, {tot}", 1),
            ("test", f"{uid}_t2", f"assert {log}[-2:] == [{a}, {b}], {log}", 1),
        ],
    )


def class_(rng, uid):
    cls = rng.choice(["Stack", "Tally", "Wallet"]) + str(rng.randrange(10, 99))
    n = rng.randrange(2, 6)
    right = (
        f"class {cls}:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n"
        f"        self.items.append(x)\n\n    def pop(self):\n        return self.items.pop()\n\n"
        f"    def __len__(self):\n        return len(self.items)\n\n    def __repr__(self):\n"
        f"        return f'{cls}({{self.items}})'"
    )
    wrong = right.replace("return self.items.pop()", "return self.items.pop(0)")
    alt = right.replace("self.items.append(x)", "self.items = self.items + [x]")
    test1 = (
        f"s = {cls}()\nfor i in range({n}):\n    s.push(i)\nassert len(s) == {n}\nassert s.pop() == {n - 1}\n"
        f"assert isinstance(s, {cls})"
    )
    test2 = f"s2 = {cls}()\ns2.push('a')\nassert repr(s2) == \"{cls}(['a'])\", repr(s2)"
    return Unit(
        "class",
        [
            Answer(f"{uid}_ans", right, wrong, alt),
            ("test", f"{uid}_t1", test1, 2),
            ("test", f"{uid}_t2", test2, 1),
        ],
    )


def closure(rng, uid):
    k, x = rng.randrange(2, 9), rng.randrange(2, 9)
    fn = _name(rng, "make_scaler")
    right = f"def {fn}(k):\n    def scale(x):\n        return k * x\n    return scale"
    wrong = f"def {fn}(k):\n    return lambda x: k + x"
    alt = f"def {fn}(k):\n    return lambda x: x * k"
    test = f"f = {fn}({k})\nassert f({x}) == {k * x}\ng = {fn}(1)\nassert g({x}) == {x} and f(1) == {k}"
    return Unit(
        "closure", [Answer(f"{uid}_ans", right, wrong, alt), ("test", f"{uid}_t1", test, 1)]
    )


def generator(rng, uid):
    n = rng.randrange(3, 9)
    fn = _name(rng, "evens")
    right = f"def {fn}():\n    i = 0\n    while True:\n        yield i\n        i += 2"
    wrong = f"def {fn}():\n    i = 1\n    while True:\n        yield i\n        i += 2"
    alt = f"import itertools\n\n\ndef {fn}():\n    return (2 * i for i in itertools.count())"
    test = (
        f"import itertools\ng = {fn}()\nassert list(itertools.islice(g, {n})) == {[2 * i for i in range(n)]}\n"
        f"assert next(g) == {2 * n}"
    )
    return Unit(
        "generator", [Answer(f"{uid}_ans", right, wrong, alt), ("test", f"{uid}_t1", test, 1)]
    )


def generator_arg(rng, uid):
    n = rng.randrange(3, 12)
    fn = _name(rng, "total_sq")
    right = f"def {fn}(it):\n    return sum(x * x for x in it)"
    wrong = f"def {fn}(it):\n    return sum(it)"
    test = f"assert {fn}(x for x in range({n})) == {sum(x * x for x in range(n))}"
    return Unit(
        "generator_arg", [Answer(f"{uid}_ans", right, wrong), ("test", f"{uid}_t1", test, 1)]
    )


def _sided(rng, side, idiom_version, plain_version):
    """(instructor's answer, what the right student writes): the idiom in the instructor's answer
    (calibration sees it), or only in an honest student's answer (calibration cannot)."""
    if side is None:
        side = rng.choice(["solution", "student"])
    return (idiom_version, idiom_version) if side == "solution" else (plain_version, idiom_version)


def star_import(rng, uid, side=None):
    mod = rng.choice(["math", "numpy"])
    fn = _name(rng, "hyp")
    right, student = _sided(
        rng,
        side,
        f"from {mod} import *\n\n\ndef {fn}(a, b):\n    return sqrt(a * a + b * b)",
        f"import math\n\n\ndef {fn}(a, b):\n    return math.sqrt(a * a + b * b)",
    )
    wrong = f"from {mod} import *\n\n\ndef {fn}(a, b):\n    return sqrt(a + b)"
    test = (
        f"import math\nassert math.isclose({fn}(3, 4), 5.0)\nassert math.isclose({fn}(5, 12), 13.0)"
    )
    return Unit(
        "star_import",
        [
            Answer(f"{uid}_ans", right, wrong, student, student_right=student),
            ("test", f"{uid}_t1", test, 1),
        ],
    )


def pool_earlier(rng, uid, side=None, idiom="pool_earlier"):
    """A concurrent.futures.ThreadPoolExecutor (pool_earlier) or a multiprocessing.pool.ThreadPool
    (threadpool_earlier) made in an earlier cell and used by the graded function."""
    pool = _name(rng, "pool")
    fn = _name(rng, "par_squares")
    make = (
        f"from concurrent.futures import ThreadPoolExecutor\n{pool} = ThreadPoolExecutor(max_workers=2)"
        if idiom == "pool_earlier"
        else f"from multiprocessing.pool import ThreadPool\n{pool} = ThreadPool(2)"
    )
    xs = [rng.randrange(1, 20) for _ in range(4)]
    setup, student_setup = _sided(rng, side, make, f"{pool} = None  # not needed")
    right, student = _sided(
        rng,
        "solution" if setup == make else "student",
        f"def {fn}(xs):\n    return list({pool}.map(lambda v: v * v, xs))",
        f"def {fn}(xs):\n    return [v * v for v in xs]",
    )
    wrong = f"def {fn}(xs):\n    return [v + v for v in xs]"
    return Unit(
        idiom,
        [
            Answer(f"{uid}_pool", setup, setup, student_setup, student_right=student_setup),
            Answer(f"{uid}_ans", right, wrong, student, student_right=student),
            ("test", f"{uid}_t1", f"assert {fn}({xs}) == {[x * x for x in xs]}", 1),
        ],
    )


def threadpool_earlier(rng, uid, side=None):
    return pool_earlier(rng, uid, side, "threadpool_earlier")


def thread_earlier(rng, uid, side=None):
    res, th, fn = _name(rng, "results"), _name(rng, "worker"), _name(rng, "get_result")
    n = rng.randrange(10, 1000)
    make = (
        f"import threading\n{res} = {{}}\n\n\ndef _work():\n    {res}['v'] = sum(range({n}))\n\n\n"
        f"{th} = threading.Thread(target=_work)\n{th}.start()"
    )
    setup, student_setup = _sided(rng, side, make, f"{res} = {{'v': sum(range({n}))}}")
    right = (
        f"def {fn}():\n    {th}.join()\n    return {res}['v']"
        if setup == make
        else f"def {fn}():\n    return {res}['v']"
    )
    student = (
        f"def {fn}():\n    {th}.join()\n    return {res}['v']" if student_setup == make else right
    )
    wrong = f"def {fn}():\n    return {res}['v'] + 1"
    return Unit(
        "thread_earlier",
        [
            Answer(f"{uid}_thread", setup, setup, student_setup, student_right=student_setup),
            Answer(f"{uid}_ans", right, wrong, student, student_right=student),
            ("test", f"{uid}_t1", f"assert {fn}() == {sum(range(n))}", 1),
        ],
    )


def _globals_unit(idiom, count, rng, uid, side="solution"):
    fn = _name(rng, "lookup")
    lines = "\n".join(f"g{uid}_{i} = {i}" for i in range(count))
    right, student = _sided(
        rng,
        side,
        f"{lines}\n\n\ndef {fn}(i):\n    return globals()[f'g{uid}_{{i}}']",
        f"def {fn}(i):\n    return i",
    )
    wrong = f"def {fn}(i):\n    return -1"
    i = rng.randrange(count)
    return Unit(
        idiom,
        [
            Answer(f"{uid}_ans", right, wrong, student, student_right=student),
            ("test", f"{uid}_t1", f"assert {fn}({i}) == {i}", 1),
        ],
    )


def some_globals(rng, uid):
    return _globals_unit("some_globals", rng.randrange(20, 1500), rng, uid)


def many_globals(rng, uid, side=None):
    return _globals_unit("many_globals", rng.randrange(2100, 3000), rng, uid, side)


def shadow_builtin(rng, uid):
    name = rng.choice(["max", "sum", "round", "abs", "len", "list"])
    fn = _name(rng, "spread")
    helpers = {
        "max": "def max(a, b):\n    return a if a > b else b",
        "sum": "def sum(xs):\n    t = 0\n    for x in xs:\n        t = t + x\n    return t",
        "round": "def round(x):\n    return int(x + 0.5)",
        "abs": "def abs(x):\n    return x if x >= 0 else -x",
        "len": "def len(xs):\n    n = 0\n    for _ in xs:\n        n += 1\n    return n",
        "list": "def list(xs):\n    return [x for x in xs]",
    }
    uses = {
        "max": "max(xs[0], xs[-1]) - min(xs)",
        "sum": "sum(xs) - min(xs) * 0",
        "round": "round(max(xs) - min(xs))",
        "abs": "abs(min(xs) - max(xs))",
        "len": "max(xs) - min(xs) + len(xs) * 0",
        "list": "max(list(xs)) - min(xs)",
    }
    xs = sorted(rng.sample(range(-20, 40), 5))
    want = {"sum": sum(xs) - min(xs) * 0, "max": max(xs[0], xs[-1]) - min(xs)}.get(
        name, max(xs) - min(xs)
    )
    right = f"{helpers[name]}\n\n\ndef {fn}(xs):\n    return {uses[name]}"
    wrong = f"{helpers[name]}\n\n\ndef {fn}(xs):\n    return 0"
    return Unit(
        "shadow_builtin",
        [
            Answer(f"{uid}_ans", right, wrong),
            ("test", f"{uid}_t1", f"assert {fn}({xs}) == {want}", 1),
        ],
    )


NP_DTYPES = [
    "float64",
    "float32",
    "float16",
    "int64",
    "int32",
    "int8",
    "uint8",
    "bool_",
    "complex128",
]


def numpy_small(rng, uid):
    dtype = rng.choice(NP_DTYPES)
    n = rng.choice([1, 3, 17, 1000, 100_000])
    fn, glob = _name(rng, "make_arr"), _name(rng, "table")
    right = (
        f"import numpy as np\n{glob} = np.arange({n}).astype(np.{dtype})\n\n\n"
        f"def {fn}(n):\n    return (np.arange(n) % 2).astype(np.{dtype})"
    )
    wrong = right.replace(f"(np.arange(n) % 2).astype(np.{dtype})", "np.arange(n) % 2 + 1")
    alt = right.replace("(np.arange(n) % 2)", "np.array([i % 2 for i in range(n)])")
    test1 = (
        f"import numpy as np\na = {fn}({n})\nassert a.dtype == np.{dtype}, a.dtype\nassert a.shape == ({n},)\n"
        f"np.testing.assert_array_equal(a, (np.arange({n}) % 2).astype(np.{dtype}))"
    )
    test2 = f"assert {glob}.dtype == np.{dtype} and {glob}.shape == ({n},)\nassert {glob}[-1] == np.{dtype}({n - 1})"
    return Unit(
        "numpy_small",
        [
            Answer(f"{uid}_ans", right, wrong, alt),
            ("test", f"{uid}_t1", test1, 2),
            ("test", f"{uid}_t2", test2, 1),
        ],
    )


def numpy_large(rng, uid, side=None):
    n = rng.choice([3000, 3200])
    fn = _name(rng, "big_eye")
    right, student = _sided(
        rng,
        side,
        f"import numpy as np\n\n\ndef {fn}(n):\n    return np.eye(n)",
        f"import numpy as np\n\n\ndef {fn}(n):\n    return np.eye(n, dtype=np.uint8)",
    )
    wrong = f"import numpy as np\n\n\ndef {fn}(n):\n    return np.ones((n, n))"
    test = f"import numpy as np\nm = {fn}({n})\nassert m.shape == ({n}, {n})\nassert m.trace() == {n} and m.sum() == {n}"
    return Unit(
        "numpy_large",
        [
            Answer(f"{uid}_ans", right, wrong, student, student_right=student),
            ("test", f"{uid}_t1", test, 1),
        ],
    )


TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"]


def torch_small(rng, uid):
    dtype = rng.choice(TORCH_DTYPES)
    n = rng.choice([1, 4, 33, 10_000])
    fn = _name(rng, "make_t")
    right = f"import torch\n\n\ndef {fn}(n):\n    return (torch.arange(n) % 3).to(torch.{dtype})"
    wrong = f"import torch\n\n\ndef {fn}(n):\n    return torch.arange(n) % 3 + 1"
    test = (
        f"import torch\nt = {fn}({n})\nassert t.dtype == torch.{dtype}, t.dtype\nassert t.shape == ({n},)\n"
        f"assert torch.equal(t, (torch.arange({n}) % 3).to(torch.{dtype}))"
    )
    return Unit("torch_small", [Answer(f"{uid}_ans", right, wrong), ("test", f"{uid}_t1", test, 1)])


def torch_large(rng, uid, side=None):
    n = rng.choice([3000, 3100])
    fn = _name(rng, "big_t")
    right, student = _sided(
        rng,
        side,
        f"import torch\n\n\ndef {fn}(n):\n    return torch.ones(n, n, dtype=torch.float64)",
        f"import torch\n\n\ndef {fn}(n):\n    return torch.ones(n, n, dtype=torch.uint8)",
    )
    wrong = f"import torch\n\n\ndef {fn}(n):\n    return torch.zeros(n, n)"
    test = f"import torch\nt = {fn}({n})\nassert t.shape == ({n}, {n})\nassert t.sum().item() == {n * n}"
    return Unit(
        "torch_large",
        [
            Answer(f"{uid}_ans", right, wrong, student, student_right=student),
            ("test", f"{uid}_t1", test, 1),
        ],
    )


def memo_like_test_name(rng, uid):
    """Honest code reusing a name a test also binds: a memo global called `result` (or
    `expected`, `out`) that the student's function reads and updates; the test binds the same
    name, then calls the function again (one kernel hands the function the test's object)."""
    memo = rng.choice(["result", "expected", "out", "cache"])
    fn = _name(rng, "fib")
    n1, n2 = rng.randrange(5, 12), rng.randrange(12, 20)

    def fib(n):
        a, b = 0, 1
        for _ in range(n):
            a, b = b, a + b
        return a

    right = (
        f"{memo} = {{0: 0, 1: 1}}\n\n\ndef {fn}(n):\n    if not isinstance({memo}, dict):\n"
        f"        return {fn}_plain(n)\n    if n not in {memo}:\n        {memo}[n] = {fn}(n - 1) + {fn}(n - 2)\n"
        f"    return {memo}[n]\n\n\ndef {fn}_plain(n):\n    a, b = 0, 1\n    for _ in range(n):\n"
        f"        a, b = b, a + b\n    return a"
    )
    wrong = f"def {fn}(n):\n    return n * n"
    test1 = f"{memo} = {fn}({n1})\nassert {memo} == {fib(n1)}, {memo}"
    test2 = f"assert {fn}({n2}) == {fib(n2)}\nassert {memo} == {fib(n1)}"
    return Unit(
        "memo_like_test_name",
        [
            Answer(f"{uid}_ans", right, wrong),
            ("test", f"{uid}_t1", test1, 1),
            ("test", f"{uid}_t2", test2, 1),
        ],
    )


def value_sizes(rng, uid):
    """numpy and torch values of every size class the wire has: 0-d, one element, the names
    report's cheap bound (4,096 elements) and one past it, 200,000 elements; any dtype; returned by
    a call and held in a global the test reads."""
    lib = rng.choice(["numpy", "torch"])
    n = rng.choice([0, 1, 4096, 4097, 200_000])
    fn, glob = _name(rng, "ramp"), _name(rng, "grid")
    if lib == "numpy":
        dtype = rng.choice(NP_DTYPES)
        make = f"np.ones({n}).astype(np.{dtype})" if n else f"np.array(1, dtype=np.{dtype})"
        right = f"import numpy as np\n{glob} = {make}\n\n\ndef {fn}():\n    return {make}"
        wrong = right.replace(f"return {make}", "return np.zeros(3)")
        test = (
            f"import numpy as np\nv = {fn}()\nassert v.dtype == np.{dtype} and v.shape == {glob}.shape\n"
            f"np.testing.assert_array_equal(v, {glob})\nassert {glob}.size == {max(n, 1)}"
        )
    else:
        dtype = rng.choice(TORCH_DTYPES)
        make = (
            f"torch.ones({n}, dtype=torch.{dtype})"
            if n
            else f"torch.tensor(1, dtype=torch.{dtype})"
        )
        right = f"import torch\n{glob} = {make}\n\n\ndef {fn}():\n    return {make}"
        wrong = right.replace(f"return {make}", "return torch.zeros(3)")
        test = (
            f"import torch\nv = {fn}()\nassert v.dtype == torch.{dtype} and v.shape == {glob}.shape\n"
            f"assert torch.equal(v, {glob})\nassert {glob}.numel() == {max(n, 1)}"
        )
    return Unit("value_sizes", [Answer(f"{uid}_ans", right, wrong), ("test", f"{uid}_t1", test, 1)])


def test_defined_name(rng, uid):
    base, fn = _name(rng, "BASE"), _name(rng, "shift")
    v, x = rng.randrange(2, 30), rng.randrange(2, 30)
    return Unit(
        "test_defined_name",
        [
            Answer(f"{uid}_a0", f"{fn}_ready = True", f"{fn}_ready = True"),
            ("test", f"{uid}_t0", f"{base} = {v}\nassert {fn}_ready", 1),
            Answer(
                f"{uid}_ans", f"def {fn}(x):\n    return {base} + x", f"def {fn}(x):\n    return x"
            ),
            ("test", f"{uid}_t1", f"assert {fn}({x}) == {v + x}\nassert {base} == {v}", 1),
        ],
    )


def test_iterates_list(rng, uid):
    fn = _name(rng, "clip")
    lo, hi = rng.randrange(-5, 0), rng.randrange(1, 6)
    cases = [(x, max(lo, min(hi, x))) for x in rng.sample(range(-10, 10), 5)]
    right = f"def {fn}(x):\n    return max({lo}, min({hi}, x))"
    wrong = f"def {fn}(x):\n    return min({hi}, x)"
    test = (
        f"cases = {cases}\nresults = []\nfor x, want in cases:\n    results.append({fn}(x))\n"
        f"    assert results[-1] == want, (x, results[-1])\nassert len(results) == {len(cases)}"
    )
    return Unit(
        "test_iterates_list", [Answer(f"{uid}_ans", right, wrong), ("test", f"{uid}_t1", test, 1)]
    )


def test_rebinds_config(rng, uid):
    rate, fn = _name(rng, "rate"), _name(rng, "interest")
    r1, r2 = rng.randrange(1, 9), rng.randrange(10, 20)
    right = f"{rate} = {r1}\n\n\ndef {fn}(x):\n    return x * {rate}"
    wrong = f"{rate} = {r1}\n\n\ndef {fn}(x):\n    return x * {r1}"
    return Unit(
        "test_rebinds_config",
        [
            Answer(f"{uid}_ans", right, wrong),
            ("test", f"{uid}_t1", f"assert {fn}(10) == {10 * r1}", 1),
            ("test", f"{uid}_t2", f"{rate} = {r2}\nassert {fn}(10) == {10 * r2}", 1),
        ],
    )


def test_forbids_helper(rng, uid):
    fn = _name(rng, "average")
    xs = [rng.randrange(0, 20) for _ in range(4)]
    right = f"def {fn}(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(xs)"
    wrong = f"def {fn}(xs):\n    return sum(xs) / (len(xs) + 1)"
    alt = f"from statistics import fmean\n\n\ndef {fn}(xs):\n    return fmean(xs)"  # uses what the test forbids
    test = f"fmean = None  # written by hand, not with statistics.fmean\nassert {fn}({xs}) == {sum(xs) / len(xs)}"
    return Unit(
        "test_forbids_helper",
        [
            Answer(f"{uid}_ans", right, wrong, alt, student_right=alt),
            ("test", f"{uid}_t1", test, 1),
        ],
    )


def while_loop(rng, uid):
    fn = _name(rng, "collatz_steps")
    n = rng.randrange(3, 40)

    def steps(k):
        s = 0
        while k != 1:
            k = k // 2 if k % 2 == 0 else 3 * k + 1
            s += 1
        return s

    right = (
        f"def {fn}(n):\n    steps = 0\n    while True:\n        if n == 1:\n            return steps\n"
        f"        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        steps += 1\n\n\n"
        f"probe = 0\nwhile True:\n    probe += 1\n    if probe > 100:\n        break"
    )
    wrong = right.replace("steps += 1", "steps += 2")
    return Unit(
        "while_loop",
        [
            Answer(f"{uid}_ans", right, wrong, loops=True),
            ("test", f"{uid}_t1", f"assert {fn}({n}) == {steps(n)}\nassert probe == 101", 1),
        ],
    )


def raises(rng, uid):
    fn = _name(rng, "safe_div")
    right = f"def {fn}(a, b):\n    if b == 0:\n        raise ZeroDivisionError('b is zero')\n    return a / b"
    wrong = f"def {fn}(a, b):\n    if b == 0:\n        return 0\n    return a / b"
    test = (
        f"try:\n    {fn}(1, 0)\nexcept ZeroDivisionError:\n    pass\nelse:\n    raise AssertionError('no error')\n"
        f"assert {fn}(6, 3) == 2"
    )
    return Unit("raises", [Answer(f"{uid}_ans", right, wrong), ("test", f"{uid}_t1", test, 1)])


def inkernel_loop_first(rng, uid):
    """A notebook graded in one kernel (a test reads globals()) whose first answer cell loops
    forever in the `crash` student's copy; the answers and tests after it are right."""
    fn, fn2 = _name(rng, "first"), _name(rng, "second")
    k = rng.randrange(2, 9)
    return Unit(
        "inkernel_loop_first",
        [
            Answer(
                f"{uid}_ans", f"def {fn}():\n    return 1", f"def {fn}():\n    return 0", loops=True
            ),
            ("test", f"{uid}_t1", f"assert '{fn}' in globals()\nassert {fn}() == 1", 1),
            Answer(
                f"{uid}_ans2",
                f"def {fn2}(x):\n    return x * {k}",
                f"def {fn2}(x):\n    return x",
                alt=f"def {fn2}(x):\n    return {k} * x",
                steady=True,
            ),
            ("test", f"{uid}_t2", f"assert {fn2}(3) == {3 * k}", 1),
            ("test", f"{uid}_t3", f"assert {fn2}(-1) == {-k}", 1),
        ],
    )


# ---- grading v5's state classes (issue 35 item 5): what a test reads after a call, in one kernel


def arg_array(rng, uid):
    """A test that checks the student's function left its numpy argument alone."""
    fn, n = _name(rng, "centered"), rng.randrange(3, 7)
    right = f"def {fn}(a):\n    return a - a.mean()"
    wrong = f"def {fn}(a):\n    a -= a.mean()\n    return a"
    alt = f"import numpy as np\n\n\ndef {fn}(a):\n    return np.subtract(a, np.mean(a))"
    test = (
        f"import numpy as np\na = np.arange({n}, dtype=float)\nbefore = a.copy()\nr = {fn}(a)\n"
        f"assert np.allclose(r, before - before.mean())\nassert np.array_equal(a, before), a"
    )
    return Unit(
        "arg_array", [Answer(f"{uid}_ans", right, wrong, alt), ("test", f"{uid}_t1", test, 1)]
    )


def arg_list(rng, uid):
    """Leave the list alone (a wrong answer sorts it in place), or change it in place (a wrong
    answer returns a sorted copy): both read the argument after the call."""
    keep, change = _name(rng, "ranked"), _name(rng, "sort_in_place")
    xs = [rng.randrange(0, 50) for _ in range(rng.randrange(3, 7))]
    return Unit(
        "arg_list",
        [
            Answer(
                f"{uid}_ans",
                f"def {keep}(xs):\n    return sorted(xs)",
                f"def {keep}(xs):\n    xs.sort()\n    return xs",
                f"def {keep}(xs):\n    out = list(xs)\n    out.sort()\n    return out",
            ),
            (
                "test",
                f"{uid}_t1",
                f"xs = {xs}\nassert {keep}(xs) == {sorted(xs)}\nassert xs == {xs}, xs",
                1,
            ),
            Answer(
                f"{uid}_ans2",
                f"def {change}(xs):\n    xs.sort()",
                f"def {change}(xs):\n    return sorted(xs)",
                f"def {change}(xs):\n    xs[:] = sorted(xs)",
            ),
            ("test", f"{uid}_t2", f"ys = {xs}\n{change}(ys)\nassert ys == {sorted(xs)}, ys", 1),
        ],
    )


def arg_nested(rng, uid):
    """Containers inside an argument, read through an alias the test took before the call: inner
    lists sorted in place (a wrong answer builds new ones, which the alias never sees), and a
    dict's lists left alone (a wrong answer sorts them in place, which the alias does see)."""
    change, keep = _name(rng, "sort_rows"), _name(rng, "totals")
    rows = [[rng.randrange(0, 50) for _ in range(rng.randrange(2, 5))] for _ in range(3)]
    table = {k: [rng.randrange(0, 50) for _ in range(3)] for k in "ab"}
    sums = {k: sum(v) for k, v in table.items()}
    return Unit(
        "arg_nested",
        [
            Answer(
                f"{uid}_ans",
                f"def {change}(rows):\n    for r in rows:\n        r.sort()",
                f"def {change}(rows):\n    rows[:] = [sorted(r) for r in rows]",
                f"def {change}(rows):\n    for r in rows:\n        r[:] = sorted(r)",
            ),
            (
                "test",
                f"{uid}_t1",
                f"rows = {rows}\nfirst = rows[0]\n{change}(rows)\n"
                f"assert rows == {[sorted(r) for r in rows]}, rows\n"
                f"assert first == {sorted(rows[0])}, first",
                1,
            ),
            Answer(
                f"{uid}_ans2",
                f"def {keep}(table):\n    return {{k: sum(v) for k, v in table.items()}}",
                f"def {keep}(table):\n    for v in table.values():\n        v.sort()\n"
                f"    return {{k: sum(v) for k, v in table.items()}}",
                f"def {keep}(table):\n    out = {{}}\n    for k in table:\n"
                f"        out[k] = sum(sorted(table[k]))\n    return out",
            ),
            (
                "test",
                f"{uid}_t2",
                f"table = {table}\na = table['a']\nassert {keep}(table) == {sums}\n"
                f"assert a == {table['a']}, a",
                1,
            ),
        ],
    )


def global_rng(rng, uid):
    """A test seeds numpy's and Python's global generators and checks reproducibility."""
    fn, n = _name(rng, "draw"), rng.randrange(2, 6)
    right = f"import numpy as np\n\n\ndef {fn}(n):\n    return list(np.random.randint(0, 100, n))"
    wrong = f"import numpy as np\n\n\ndef {fn}(n):\n    return list(np.random.default_rng().integers(0, 100, n))"
    alt = f"import random\n\n\ndef {fn}(n):\n    return [random.randrange(100) for _ in range(n)]"
    test = (
        f"import random\nimport numpy as np\nnp.random.seed(1); random.seed(1)\nfirst = {fn}({n})\n"
        f"np.random.seed(1); random.seed(1)\nassert {fn}({n}) == first\nassert len(first) == {n}"
    )
    return Unit(
        "global_rng", [Answer(f"{uid}_ans", right, wrong, alt), ("test", f"{uid}_t1", test, 1)]
    )


def exception_subclass(rng, uid):
    """The student's own exception class, a subclass of the one the test catches."""
    fn = _name(rng, "parse_age")
    right = f"def {fn}(s):\n    v = int(s)\n    if v < 0:\n        raise ValueError('negative')\n    return v"
    wrong = f"def {fn}(s):\n    v = int(s)\n    if v < 0:\n        raise TypeError('negative')\n    return v"
    alt = (
        f"class NegativeAge(ValueError):\n    pass\n\n\ndef {fn}(s):\n    v = int(s)\n    if v < 0:\n"
        f"        raise NegativeAge(s)\n    return v"
    )
    test = (
        f"assert {fn}('7') == 7\ntry:\n    {fn}('-3')\nexcept ValueError:\n    pass\nelse:\n"
        f"    raise AssertionError('no ValueError')"
    )
    return Unit(
        "exception_subclass",
        [Answer(f"{uid}_ans", right, wrong, alt), ("test", f"{uid}_t1", test, 1)],
    )


def captured_stdout(rng, uid):
    """A test captures what the student's function prints (contextlib.redirect_stdout)."""
    fn, name = _name(rng, "greet"), rng.choice(["ann", "bo", "cy"])
    right = f"def {fn}(name):\n    print(f'Hello, {{name}}!')"
    wrong = f"def {fn}(name):\n    print('Hello', name)"
    alt = f"import sys\n\n\ndef {fn}(name):\n    sys.stdout.write('Hello, ' + name + '!\\n')"
    test = (
        f"import contextlib\nimport io\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n"
        f"    {fn}('{name}')\nassert buf.getvalue() == 'Hello, {name}!\\n', buf.getvalue()"
    )
    return Unit(
        "captured_stdout", [Answer(f"{uid}_ans", right, wrong, alt), ("test", f"{uid}_t1", test, 1)]
    )


def file_env_cwd(rng, uid):
    """The student's code writes a file the test reads; reads an environment variable and the
    working directory the test set."""
    save, where = _name(rng, "save"), _name(rng, "where")
    k = rng.randrange(10, 99)
    return Unit(
        "file_env_cwd",
        [
            Answer(
                f"{uid}_ans",
                f"def {save}(path, n):\n    with open(path, 'w') as fh:\n        fh.write(str(n))\n\n\n"
                f"import os\n\n\ndef {where}():\n    return os.environ.get('FUZZ_DIR', '?') + ':' + os.path.basename(os.getcwd())",
                f"def {save}(path, n):\n    return str(n)\n\n\ndef {where}():\n    return '?'",
                f"from pathlib import Path\n\n\ndef {save}(path, n):\n    Path(path).write_text(f'{{n}}')\n\n\n"
                f"import os\n\n\ndef {where}():\n    return f\"{{os.getenv('FUZZ_DIR', '?')}}:{{os.path.basename(os.getcwd())}}\"",
            ),
            (
                "test",
                f"{uid}_t1",
                f"{save}('n{k}.txt', {k})\nassert open('n{k}.txt').read() == '{k}'",
                1,
            ),
            (
                "test",
                f"{uid}_t2",
                f"import os\nos.makedirs('d{k}', exist_ok=True)\nos.chdir('d{k}')\nos.environ['FUZZ_DIR'] = 'x{k}'\n"
                f"try:\n    assert {where}() == 'x{k}:d{k}', {where}()\nfinally:\n    os.chdir('..')",
                1,
            ),
        ],
    )


def global_mode(rng, uid):
    """A student's cell sets a global mode (torch's default dtype, numpy's error handling) that
    the test's own values then follow."""
    fn = _name(rng, "zeros")
    right = (
        f"import numpy as np\nimport torch\ntorch.set_default_dtype(torch.float64)\nnp.seterr(divide='ignore')\n\n\n"
        f"def {fn}(n):\n    return torch.zeros(n)"
    )
    wrong = f"import torch\n\n\ndef {fn}(n):\n    return torch.zeros(n)"
    test = (
        f"import numpy as np\nimport torch\nassert {fn}(2).dtype == torch.float64\nassert torch.ones(1).dtype == torch.float64\n"
        f"assert np.isinf(np.float64(1.0) / np.float64(0.0))\ntorch.set_default_dtype(torch.float32)"
    )
    return Unit("global_mode", [Answer(f"{uid}_ans", right, wrong), ("test", f"{uid}_t1", test, 1)])


@dataclass(frozen=True)
class Idiom:
    make: object
    alone: bool = False
    sided: bool = False  # make(rng, uid, side): the idiom in the instructor's answer or only in a student's  # a notebook of its own: it changes how the whole notebook is graded, or is known wrong


IDIOMS = {
    "global_state": Idiom(global_state),
    "class": Idiom(class_),
    "closure": Idiom(closure),
    "generator": Idiom(generator),
    "generator_arg": Idiom(generator_arg, True),
    "star_import": Idiom(star_import, True, True),
    "pool_earlier": Idiom(pool_earlier, True, True),
    "threadpool_earlier": Idiom(threadpool_earlier, True, True),
    "thread_earlier": Idiom(thread_earlier, True, True),
    "some_globals": Idiom(some_globals),
    "many_globals": Idiom(many_globals, True, True),
    "shadow_builtin": Idiom(shadow_builtin),
    "numpy_small": Idiom(numpy_small),
    "numpy_large": Idiom(numpy_large, True, True),
    "torch_small": Idiom(torch_small),
    "torch_large": Idiom(torch_large, True, True),
    "test_defined_name": Idiom(test_defined_name, True),
    "memo_like_test_name": Idiom(memo_like_test_name, True),
    "value_sizes": Idiom(value_sizes),
    "test_iterates_list": Idiom(test_iterates_list),
    "test_rebinds_config": Idiom(test_rebinds_config, True),
    "test_forbids_helper": Idiom(test_forbids_helper, True),
    "while_loop": Idiom(while_loop),
    "raises": Idiom(raises),
    "inkernel_loop_first": Idiom(inkernel_loop_first, True),
    # grading v5's state classes: the score counted is one kernel's, so stock's by construction
    "arg_array": Idiom(arg_array),
    "arg_list": Idiom(arg_list),
    "arg_nested": Idiom(arg_nested),
    "global_rng": Idiom(global_rng),
    "exception_subclass": Idiom(exception_subclass),
    "captured_stdout": Idiom(captured_stdout),
    "file_env_cwd": Idiom(file_env_cwd, True),
    "global_mode": Idiom(global_mode, True),
}

# the classes issue 26 lists as graded wrong today (idiom -> item)
KNOWN = {
    "star_import": 4,
    "pool_earlier": 5,
    "threadpool_earlier": 5,
    "thread_earlier": 5,
    "many_globals": 6,
    "numpy_large": 7,
    "torch_large": 7,
    "generator_arg": 8,
    "test_forbids_helper": 9,
    "inkernel_loop_first": 10,
}


# --------------------------------------------------------------------------- courses

KERNELSPEC = {
    "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
    "language_info": {"name": "python"},
}
CONFIG = f'''"""A generated course (tests/fuzz.py)."""
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "fuzz"
c.Execute.timeout = {TIMEOUT}
'''


@dataclass
class Course:
    """One generated assignment: notebooks of units, and the students made from them."""

    name: str
    seed: int
    notebooks: dict  # notebook -> [Unit]
    students: list
    cell_idiom: dict = field(default_factory=dict)  # (notebook, grade_id) -> idiom
    cell_side: dict = field(default_factory=dict)  # (notebook, grade_id) -> Unit.side
    cell_points: dict = field(default_factory=dict)  # (notebook, grade_id) -> points


def generate_course(name, seed, idioms=None, students=None, side=None):
    """`side`: where a sided idiom lives ("solution", "student"; None: drawn per unit)."""
    rng = random.Random(seed)
    if idioms is None:
        idioms = rng.sample(sorted(IDIOMS), rng.randint(3, 7))
    units = [
        IDIOMS[i].make(rng, f"u{k}", side) if IDIOMS[i].sided else IDIOMS[i].make(rng, f"u{k}")
        for k, i in enumerate(idioms)
    ]
    for unit, idiom in zip(units, idioms, strict=True):
        if IDIOMS[idiom].sided:
            answers = [c for c in unit.cells if isinstance(c, Answer)]
            unit.side = (
                "solution"
                if all(a.student_right in (None, a.right) for a in answers)
                else "student"
            )
    notebooks, shared = {}, []
    for unit in units:
        if IDIOMS[unit.idiom].alone:
            notebooks[f"nb{len(notebooks)}"] = [unit]
        else:
            shared.append(unit)
    for k in range(0, len(shared), 3):
        notebooks[f"nb{len(notebooks)}"] = shared[k : k + 3]
    if students is None:
        students = ["right", "wrong"] + sorted(rng.sample(["partly", "crash"], rng.randint(1, 2)))
        if "inkernel_loop_first" in idioms and "crash" not in students:
            students.append("crash")
    course = Course(name, seed, notebooks, list(students))
    for nb, nb_units in notebooks.items():
        for unit in nb_units:
            for gid in unit.tests():
                course.cell_idiom[(nb, gid)] = unit.idiom
                course.cell_side[(nb, gid)] = unit.side
            for c in unit.cells:
                if isinstance(c, tuple):
                    course.cell_points[(nb, c[1])] = c[3]
    return course


# In the long run only: issue 26 item 10 reports this class not repeatable (stock's score in one
# run of three), so in the fixed budget it could turn CI red or green by chance.
LONG_RUN_ONLY = {"inkernel_loop_first"}


def fixed_budget(seed=26, n=4):
    """`n` courses that together hold every idiom once (a seeded deal), each with the right, the
    wrong and a `crash` or `partly` student: what tests/test_fuzz.py grades."""
    rng = random.Random(seed)
    idioms = sorted(set(IDIOMS) - LONG_RUN_ONLY)
    rng.shuffle(idioms)
    courses = []
    for k in range(n):
        mine = idioms[k::n]
        third = "crash" if "inkernel_loop_first" in mine or k % 2 == 0 else "partly"
        courses.append(
            generate_course(
                f"b{k}",
                seed * 1000 + k,
                idioms=mine,
                students=["right", "wrong", third],
                side="student",
            )
        )
    return courses


def _student_source(answer, student, rng):
    if student == "right":
        return answer.student_right or answer.right
    if student == "wrong":
        return answer.wrong
    if student == "partly":
        return rng.choice([answer.right, answer.wrong, answer.alt or answer.right])
    # crash
    if answer.loops:
        return "import time\n\nwhile True:  # waits for a result that never comes\n    time.sleep(0.05)"
    kind = rng.choice(["right", "alt", "before", "after"])
    if answer.steady:
        return answer.right
    if kind == "before":
        return f"raise RuntimeError('not done yet')\n{answer.right}"
    if kind == "after":
        return f"{answer.right}\nprint(undefined_name_{rng.randrange(100)})"
    return (answer.alt or answer.right) if kind == "alt" else answer.right


def write_course(course, root):
    """Write course `course` as an assignment of the nbgrader course at `root`: the source notebooks
    and each student's submission (the source with answer cells replaced, hidden tests removed)."""
    root = Path(root)
    if not (root / "nbgrader_config.py").exists():
        root.mkdir(parents=True, exist_ok=True)
        (root / "nbgrader_config.py").write_text(CONFIG)
    rng = random.Random(f"{course.seed}-students")
    for nb_name, units in course.notebooks.items():
        cells = [
            new_markdown_cell(
                f"# {course.name}/{nb_name}: {', '.join(u.idiom for u in units)}",
                metadata=meta(f"{nb_name}_intro", locked=True),
            )
        ]
        answers = {}
        for unit in units:
            for c in unit.cells:
                if isinstance(c, Answer):
                    cells.append(answer_cell(c.gid, c.right))
                    answers[c.gid] = c
                elif isinstance(c, tuple):
                    cells.append(test_cell(c[1], c[2], c[3]))
                else:
                    cells.append(new_code_cell(c))
        source = _numbered(new_notebook(cells=cells, metadata=KERNELSPEC))
        folder = root / "source" / course.name
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(source, folder / f"{nb_name}.ipynb")
        for student in course.students:
            sub = nbformat.from_dict(json.loads(json.dumps(source)))
            for cell in sub.cells:
                gid = cell.metadata.get("nbgrader", {}).get("grade_id")
                if gid in answers:
                    cell.source = _student_source(answers[gid], student, rng)
                elif cell.metadata.get("nbgrader", {}).get("grade"):
                    cell.source = HIDDEN.sub("", cell.source)
            out = root / "submitted" / student / course.name
            out.mkdir(parents=True, exist_ok=True)
            nbformat.write(sub, out / f"{nb_name}.ipynb")


def _numbered(nb):
    """``nb`` with its cells' ids numbered in order (nbformat draws them at random): a seed then
    gives the same files, byte for byte (tests/stock_memo.py keeps stock's scores by their hashes)."""
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"
    return nb


# --------------------------------------------------------------------------- the hostile twin

HOSTILE_VECTORS = ("globals", "sys_modules_main", "frames", "gc_objects", "builtins", "module_attr")


def hostile_assignment(seed, name="hostile"):
    """Units whose tests own names and objects (an expected value, a list of cases iterated while
    calling the student, a check function, math.isclose, all()); students: `wrong` (the honest wrong
    twin), `right`, and one per vector whose wrong answers also attack every test-owned name."""
    rng = random.Random(seed)
    k = rng.randrange(3, 9)
    units = {
        "expected": (
            "def h_sq(x):\n    return x * x",
            f"def h_sq(x):\n    return x + {k}",
            f"expected_sq = {(k + 1) ** 2}\nassert h_sq({k + 1}) == expected_sq",
            "expected_sq",
            "x + " + str(k),
        ),
        "cases": (
            "def h_neg(x):\n    return -x",
            "def h_neg(x):\n    return x",
            f"cases_neg = [(0, 0), (1, -1), ({k}, -{k}), (-2, 2)]\nfor x, want in cases_neg:\n    assert h_neg(x) == want",
            "cases_neg",
            "x",
        ),
        "check": (
            "def h_half(x):\n    return x / 2",
            "def h_half(x):\n    return x * 2",
            f"def check_half(got, want):\n    assert got == want, (got, want)\n\n\ngot = h_half({2 * k})\ncheck_half(got, {k})",
            "check_half",
            "x * 2",
        ),
        "isclose": (
            "def h_third(x):\n    return x / 3",
            "def h_third(x):\n    return x / 4",
            f"import math\ngot = h_third({3 * k})\nassert math.isclose(got, {k})",
            "math.isclose",
            "x / 4",
        ),
        "all": (
            "def h_inc(xs):\n    return [x + 1 for x in xs]",
            "def h_inc(xs):\n    return list(xs)",
            "outs = h_inc([1, 2, 3])\nassert all(o == w for o, w in zip(outs, [2, 3, 4]))",
            "all",
            "list(xs)",
        ),
    }
    return units


# what each vector does to a test-owned name, inside the graded call and when the cell runs
_FORGERY = {
    "expected_sq": "RESULT",
    "cases_neg": "[]",
    "check_half": "(lambda *a, **k: None)",
    "math.isclose": "(lambda *a, **k: True)",
    "all": "(lambda *a, **k: True)",
}


def _attack(vector, target, value):
    """Code that writes `value` over the test-owned `target` through `vector` (a list of cases is
    emptied in place, under the loop iterating it)."""
    if target == "math.isclose":
        if vector in ("module_attr", "builtins"):
            return f"import math as _m\n_m.isclose = {value}"
        target, value = "math", f"__import__('types').SimpleNamespace(isclose={value})"
    if target == "all" and vector == "module_attr":
        return f"import builtins as _b\n_b.all = {value}"

    def op(d):
        if target == "cases_neg":
            return f"{d}[{target!r}].clear()"
        return f"{d}[{target!r}] = {value}"

    if vector == "globals":
        return op("globals()")
    if vector in ("sys_modules_main", "module_attr"):
        return "import sys as _s\n" + op("vars(_s.modules['__main__'])")
    if vector == "frames":
        return (
            # (the __main__ frames alone, as for gc_objects below: the stack also holds the
            # kernel's event loop, tornado's module among them)
            f"import sys as _s\n_f = _s._getframe(0)\nwhile _f is not None:\n    try:\n"
            f"        if _f.f_globals.get('__name__') == '__main__':\n"
            f"            {op('_f.f_globals')}\n    except Exception:\n        pass\n    _f = _f.f_back"
        )
    if vector == "gc_objects":
        # only namespaces named __main__ (the kernel's, where the tests' names live). Patching every
        # dict that holds the name also replaced `math` in the kernel's own modules (ipykernel's,
        # tornado's): its output thread then stalled ("IOStream.flush timed out", a 4-cell notebook
        # 15 s instead of 1.9 s, measured), and once in make test stock's run failed on nbclient's
        # 4 s iopub_timeout (issue 34): an attack on the kernel, not on the tests, and a flaky one
        return (
            f"import gc as _g\nfor _o in _g.get_objects():\n"
            f"    if isinstance(_o, dict) and _o.get('__name__') == '__main__' and {target!r} in _o:\n"
            f"        {op('_o')}"
        )
    if vector == "builtins":
        return "import builtins as _b\n" + op("vars(_b)")
    raise ValueError(vector)


def _indent(code, n=4):
    return "\n".join(" " * n + line if line else line for line in code.splitlines())


def hostile_source(unit, vector):
    right, wrong, test, target, expr = unit
    name = wrong.split("(")[0].split()[-1]
    arg = wrong.split("(")[1].split(")")[0]
    value = _FORGERY[target].replace("RESULT", "RESULT_")
    attack = _attack(vector, target, value)
    return (
        f"def {name}({arg}):\n    RESULT_ = {expr}\n    try:\n{_indent(attack, 8)}\n    except Exception:\n"
        f"        pass\n    return RESULT_\n\n\ntry:\n    RESULT_ = None\n{_indent(attack)}\nexcept Exception:\n    pass"
    )


def write_hostile(root, seed, name="hostile"):
    root = Path(root)
    units = hostile_assignment(seed, name)
    cells = [new_markdown_cell(f"# {name}", metadata=meta("intro", locked=True))]
    for key, (right, _wrong, test, _target, _expr) in units.items():
        cells.append(answer_cell(f"{key}_ans", right))
        cells.append(test_cell(f"{key}_t", test, 1))
    source = _numbered(new_notebook(cells=cells, metadata=KERNELSPEC))
    (root / "source" / name).mkdir(parents=True, exist_ok=True)
    nbformat.write(source, root / "source" / name / f"{name}.ipynb")
    students = {
        "right": {k: u[0] for k, u in units.items()},
        "wrong": {k: u[1] for k, u in units.items()},
    }
    for vector in HOSTILE_VECTORS:
        students[f"x-{vector}"] = {k: hostile_source(u, vector) for k, u in units.items()}
    for student, answers in students.items():
        sub = nbformat.from_dict(json.loads(json.dumps(source)))
        for cell in sub.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if gid.endswith("_ans"):
                cell.source = answers[gid[:-4]]
        out = root / "submitted" / student / name
        out.mkdir(parents=True, exist_ok=True)
        nbformat.write(sub, out / f"{name}.ipynb")
    return {f"{k}_t": k for k in units}


# --------------------------------------------------------------------------- graders


def _env():
    # nbgrader runs `alembic` from PATH: this environment's first
    return dict(
        os.environ,
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )


def grade_ours(root, out, extra=()):
    """`autograder grade` from the course folder: ({(student, assignment, notebook, grade_id): (score, status)}, proc)."""
    autograder = str(Path(sys.executable).with_name("autograder"))
    proc = run_process(  # any exit status: compared and reported by the caller
        [autograder, "grade", "--out", str(out), "--quiet", *extra],
        expect=None,
        cwd=root,
        timeout=3600,
        env=_env(),
    )
    got = {}
    path = Path(out) / "grades.csv"
    if path.exists():
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                got[(r["student"], r["assignment"], r["notebook"], r["grade_id"])] = _ours(r)
    return got, proc


def _ours(r) -> tuple:
    """A row of grades.csv: (the score counted, the status, the judge's score or None)."""
    judge = float(r["judge_score"]) if r.get("judge_score") else None
    return float(r["score"]), r["status"], judge


STOCK_ERRORS = []


def grade_stock(root, assignment, students=None, memo=None):
    """A real `nbgrader generate_assignment` + `nbgrader autograde` of one assignment:
    {(student, assignment, notebook, grade_id): score} over the test cells. ``memo``: a name under
    which tests/stock_memo.py keeps the scores with the inputs they came from (every file of the
    folder, the Python, requirements.lock, the autograder modules the kernels imported): taken
    from there when every input hashes the same, run and recorded otherwise."""
    if memo is None or students is not None:
        return _grade_stock(root, assignment, students, {})[0]
    import stock_memo  # tests/ (on sys.path under pytest)

    return stock_memo.recorded_run(
        memo, root, assignment, lambda env: _grade_stock(root, assignment, None, env)
    )


def _grade_stock(root, assignment, students, extra_env):
    """grade_stock's real run, with ``extra_env`` added: (scores, whether both commands exited 0)."""
    env = {**_env(), **extra_env}
    ok = True
    cmd = [
        sys.executable,
        "-m",
        "nbgrader",
        "autograde",
        assignment,
        "--force",
        "--log-level=ERROR",
    ]
    if students:
        cmd += [f"--student={s}" for s in students]
    for step in (
        [
            sys.executable,
            "-m",
            "nbgrader",
            "generate_assignment",
            assignment,
            "--force",
            "--log-level=ERROR",
        ],
        cmd,
    ):
        # no retry: a stock run that fails is reported with its command, status and output tails;
        # its kernels talk over private unix sockets (autograder.course.stock_kernels: issue 34's
        # cause, a TCP port taken between jupyter_client's pick and the kernel's bind)
        with stock_kernels() as kernels:
            proc = run_process(
                step + (kernels if step is cmd else []),
                expect=None,
                cwd=root,
                env=env,
                timeout=3600,
            )
        if proc.returncode != 0:
            message = f"stock {' '.join(step[3:5])} {assignment} failed:\n" + explain(
                proc, cwd=root
            )
            if step is not cmd:
                raise RuntimeError(message)
            STOCK_ERRORS.append(message)  # what it graded still counts; a cell it did not differs
            ok = False
    return read_stock(root, assignment), ok


def read_stock(root, assignment):
    """What stock nbgrader recorded in the gradebook of `root` for `assignment`'s test cells."""
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{Path(root) / 'gradebook.db'}", "fuzz") as gb:
        for sub in gb.assignment_submissions(assignment):
            for nb in sub.notebooks:
                for g in nb.grades:
                    if g.cell_type == "code":
                        scores[(sub.student.id, assignment, nb.name, g.name)] = float(
                            g.auto_score or 0.0
                        )
    return scores


# --------------------------------------------------------------------------- the run


@dataclass
class Result:
    courses: list
    rows: list  # dicts: course, idiom, student, notebook, grade_id, stock, ours, status, agree
    hostile: list  # dicts: vector, unit, grade_id, stock_wrong, ours, status, holds
    ours_rc: int
    seconds: dict


def _assignment_copy(root, dest, assignment):
    dest.mkdir(parents=True)
    shutil.copy(root / "nbgrader_config.py", dest / "nbgrader_config.py")
    shutil.copytree(root / "source" / assignment, dest / "source" / assignment)
    for student in (root / "submitted").iterdir():
        if (student / assignment).is_dir():
            shutil.copytree(student / assignment, dest / "submitted" / student.name / assignment)


def run(root, courses, hostile_seed=None, stock_jobs=5, memo=None):
    """Grade every course (and the hostile twin) both ways, compare every test cell. Stock grades
    each assignment in a copy of its own (its own gradebook), `stock_jobs` at a time, while
    `autograder grade` grades the whole folder. ``memo``: a prefix under which each assignment's
    stock scores are kept with their inputs (grade_stock), for a seeded budget run again and
    again (tests/test_fuzz.py); the long run never keeps them."""
    from concurrent.futures import ThreadPoolExecutor

    STOCK_ERRORS.clear()
    root = Path(root)
    stock_root = root.parent / f"{root.name}-stock"
    for path in (root, stock_root):
        if path.exists():
            shutil.rmtree(path)
    for course in courses:
        write_course(course, root)
    hostile_units = write_hostile(root, hostile_seed) if hostile_seed is not None else None
    assignments = [c.name for c in courses] + (["hostile"] if hostile_units is not None else [])
    for a in assignments:
        _assignment_copy(root, stock_root / a, a)
    t0 = time.monotonic()
    timed = {}

    def ours_job():
        got = grade_ours(root, root.parent / f"{root.name}-out")
        timed["ours"] = time.monotonic() - t0
        return got

    def stock_job(a):
        return grade_stock(stock_root / a, a, memo=None if memo is None else f"{memo}-{a}")

    with ThreadPoolExecutor(max_workers=1 + stock_jobs) as pool:
        ours_future = pool.submit(ours_job)
        stock_futures = [pool.submit(stock_job, a) for a in assignments]
        stock = {}
        for f in stock_futures:
            stock.update(f.result())
        timed["stock"] = time.monotonic() - t0
        ours, proc = ours_future.result()
    timed["both"] = time.monotonic() - t0
    return compare(
        courses,
        ours,
        stock,
        hostile_units,
        proc.returncode,
        {**timed, "ours_stderr": proc.stderr[-4000:]},
    )


def compare(courses, ours, stock, hostile_units, ours_rc, seconds):
    rows = []
    for course in courses:
        for (nb, gid), idiom in course.cell_idiom.items():
            for student in course.students:
                key = (student, course.name, nb, gid)
                s = stock.get(key)
                o, status, _ = ours.get(key, (None, "missing", None))
                rows.append(
                    {
                        "course": course.name,
                        "seed": course.seed,
                        "idiom": idiom,
                        "side": course.cell_side.get((nb, gid), ""),
                        "student": student,
                        "points": course.cell_points[(nb, gid)],
                        "notebook": nb,
                        "grade_id": gid,
                        "stock": s,
                        "ours": o,
                        "status": status,
                        "agree": s is not None and o is not None and s == o,
                    }
                )
    hostile = []
    if hostile_units is not None:
        for vector in HOSTILE_VECTORS:
            for gid, unit in hostile_units.items():
                base = stock.get(("wrong", "hostile", "hostile", gid))
                attack = stock.get((f"x-{vector}", "hostile", "hostile", gid))
                o, status, judge = ours.get(
                    (f"x-{vector}", "hostile", "hostile", gid), (None, "missing", None)
                )
                hostile.append(
                    {
                        "vector": vector,
                        "unit": unit,
                        "grade_id": gid,
                        "stock_wrong": base,
                        "stock_attack": attack,
                        "ours": o,
                        "status": status,
                        "judge": judge,
                        # grading v5: the judge never gives more than the honest wrong twin, and a
                        # counted score above it (one kernel's: a forged pass) is never silent
                        "holds": base is not None
                        and o is not None
                        and (judge if judge is not None else o) <= base
                        and (o <= base or status in ("unconfirmed", "contradicted")),
                    }
                )
    return Result(courses, rows, hostile, ours_rc, seconds)


def compare_existing(root, courses, hostile_seed=None):
    """Compare what an earlier run left in `root` (its -out and -stock folders) without grading again;
    an assignment stock did not finish is graded again first."""
    root = Path(root)
    stock_root = root.parent / f"{root.name}-stock"
    ours, _ = {}, None
    with open(root.parent / f"{root.name}-out" / "grades.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            ours[(r["student"], r["assignment"], r["notebook"], r["grade_id"])] = _ours(r)
    hostile_units = (
        {f"{k}_t": k for k in hostile_assignment(hostile_seed)}
        if hostile_seed is not None
        else None
    )
    stock = {}
    for a in [c.name for c in courses] + (["hostile"] if hostile_units is not None else []):
        got = read_stock(stock_root / a, a)
        students = {p.name for p in (stock_root / a / "submitted").iterdir()}
        if {k[0] for k in got} != students:
            got = grade_stock(stock_root / a, a)
        stock.update(got)
    return compare(courses, ours, stock, hostile_units, None, {})


def summary(result):
    rows = result.rows
    by_idiom = {}
    for r in rows:
        label = f"{r['idiom']}@{r['side']}" if r.get("side") else r["idiom"]
        d = by_idiom.setdefault(label, {"compared": 0, "agree": 0, "disagree": 0})
        d["compared"] += 1
        d["agree" if r["agree"] else "disagree"] += 1
    return {
        "generated": len(result.courses),
        "notebooks": sum(len(c.notebooks) for c in result.courses),
        "submissions": sum(len(c.notebooks) * len(c.students) for c in result.courses),
        "compared": len(rows),
        "agreements": sum(r["agree"] for r in rows),
        "disagreements": sum(not r["agree"] for r in rows),
        "by_idiom": by_idiom,
        "hostile_checked": len(result.hostile),
        "hostile_breaks": sum(not h["holds"] for h in result.hostile),
        "ours_exit": result.ours_rc,
        "seconds": {k: round(v, 1) for k, v in result.seconds.items() if isinstance(v, float)},
    }


def write_report(result, path):
    s = summary(result)
    lines = [
        "differential fuzz: autograder grade vs nbgrader autograde",
        f"generated {s['generated']} courses ({s['notebooks']} notebooks, {s['submissions']} submissions); "
        f"compared {s['compared']} test cells: {s['agreements']} agreements, {s['disagreements']} disagreements; "
        f"autograder grade exit {s['ours_exit']}; seconds {s['seconds']}",
        "",
        "by idiom (compared / agree / disagree; @solution: the idiom is in the instructor's answer, "
        "@student: only in the students' answers):",
    ]
    for idiom, d in sorted(s["by_idiom"].items()):
        base = idiom.split("@")[0]
        known = f"  [known: issue 26 item {KNOWN[base]}]" if base in KNOWN else ""
        lines.append(f"  {idiom:30s} {d['compared']:4d} {d['agree']:4d} {d['disagree']:4d}{known}")
    lines += ["", "disagreements (course seed idiom student notebook cell: stock / ours status):"]
    for r in result.rows:
        if not r["agree"]:
            where = f"@{r['side']}" if r.get("side") else ""
            lines.append(
                f"  {r['course']} seed={r['seed']} {r['idiom']}{where} {r['student']} {r['notebook']} {r['grade_id']}: "
                f"stock {r['stock']} / ours {r['ours']} {r['status']}"
            )
    statuses = {}
    for r in result.rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    lines += ["", f"our statuses over compared rows: {statuses}"]
    lines += [f"stock nbgrader failed: {e}" for e in STOCK_ERRORS]
    if result.hostile:
        lines += [
            "",
            "hostile twin (vector unit: stock honest-wrong / stock with the attack / ours status):",
        ]
        for h in result.hostile:
            lines.append(
                f"  {h['vector']:16s} {h['unit']:9s}: stock {h['stock_wrong']} / stock {h['stock_attack']} / "
                f"ours {h['ours']} {h['status']}"
                f"{'' if h['holds'] else '  BREAK'}"
            )
    Path(path).write_text("\n".join(lines) + "\n")
    return s


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=50, help="courses to generate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="artifacts/fuzz", help="work folder (courses, grades)")
    parser.add_argument("--report", default=None, help="report file (default OUT/report.txt)")
    parser.add_argument("--no-hostile", action="store_true")
    parser.add_argument(
        "--compare-only",
        action="store_true",
        help="compare what an earlier run with the same --n/--seed/--out left, grading nothing again "
        "(save what stock left unfinished)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    courses = [generate_course(f"f{k:03d}", args.seed * 100_003 + k) for k in range(args.n)]
    hostile_seed = None if args.no_hostile else args.seed
    if args.compare_only:
        result = compare_existing(out / "course", courses, hostile_seed)
    else:
        result = run(out / "course", courses, hostile_seed=hostile_seed)
    report = Path(args.report) if args.report else out / "report.txt"
    s = write_report(result, report)
    print(report.read_text())
    print(f"report: {report}")
    return 0 if s["compared"] else 1


if __name__ == "__main__":
    sys.exit(main())
