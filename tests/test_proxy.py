"""autograder.remote.Remote, the judge's proxy of a student's object, against the student side
run in this process (the channel calls a Server's serve_call directly): what a test cell does to a handle
behaves as in one kernel (grading v3, issue 17 item 4). End to end: tests/test_fidelity_course.py."""

from __future__ import annotations

import itertools
import types

import numpy as np
import pytest

from autograder import remote
from autograder.procs import run

STUDENT = """
import numpy as np

class Shape:
    def __init__(self, sides):
        self.sides = sides
        self.names = ["a", "b"]
    def __repr__(self):
        return f"Shape({self.sides})"
    def __eq__(self, other):
        return isinstance(other, Shape) and other.sides == self.sides
    def __hash__(self):
        return hash(self.sides)
    def area(self):
        raise NotImplementedError("area of a generic shape")

class Square(Shape):
    pass

def count(n):
    for i in range(n):
        yield i

def adder(k):
    return lambda x: x + k

class Box(list):
    pass

big = np.arange(10.0)
"""


@pytest.fixture
def student():
    ns = {}
    exec(STUDENT, ns)

    server = remote.Server(ns)

    class Channel:
        def call(self, header, payload):
            return server.serve_call(header, payload)

    saved = remote.connect(remote.Link(Channel()))
    yield lambda name, classes=(): remote.Remote((name,), {"classes": list(classes)})
    remote.connect(saved)


def test_instances_attributes_methods_and_the_students_classes(student):
    Shape, Square = student("Shape"), student("Square")
    s = Square(4)
    assert s.sides == 4 and s.names == ["a", "b"] and s.names[1] == "b"
    assert isinstance(s, Shape) and isinstance(s, Square) and issubclass(Square, Shape)
    assert not isinstance(5, Shape)
    assert repr(s) == "Shape(4)" and str(s) == "Shape(4)" and f"{s!r}" == "Shape(4)"
    assert s == Square(4) and s != Shape(3) and hash(s) == hash(4)
    assert hasattr(s, "area") and not hasattr(s, "volume") and "sides" in dir(s)
    s.sides = 5
    assert s.sides == 5
    with pytest.raises(NotImplementedError, match="area of a generic shape"):
        s.area()


def test_errors_read_as_in_one_kernel(student):
    s = student("Shape")(3)
    with pytest.raises(TypeError, match="^'Shape' object is not subscriptable$"):
        s[0]
    with pytest.raises(AttributeError, match="'Shape' object has no attribute 'volume'"):
        _ = s.volume
    with pytest.raises(TypeError, match="has no len"):
        len(s)


def test_generators_closures_and_numbers(student):
    g = student("count")(5)
    assert isinstance(g, types.GeneratorType)
    assert next(g) == 0 and list(itertools.islice(g, 2)) == [1, 2] and list(g) == [3, 4]
    assert sum(student("count")(4)) == 6
    add3 = student("adder")(3)
    assert callable(add3) and add3(4) == 7 and list(map(add3, [1, 2])) == [4, 5]
    b = student("Box")([3, 1, 2])
    assert (
        isinstance(b, list)
        and len(b) == 3
        and 1 in b
        and b[1:] == [1, 2]
        and sorted(b) == [1, 2, 3]
    )


def test_numpy_through_the_proxy(student):
    big = student("big", ("object",))
    np.testing.assert_allclose(big, np.arange(10.0))
    assert np.isclose(np.asarray(big).sum(), 45.0)


# --------------------------------------------------------------------------- grading v3, item 1:
# nothing of the test crosses into the student process but the arguments


def test_test_defined_code_never_crosses():
    """A function, lambda or class defined in a test cell (code compiled as "<test ...>") raises
    UnsupportedTest - a grader status, calibration's cue for one kernel - never ships as code."""
    import pickle

    ns = {"__name__": "__main__"}
    exec(
        compile(
            'def probe(t):\n    """a hidden docstring"""\n    return t.add_(1)\n\nclass Probe:\n    pass\n',
            "<test hidden_cell>",
            "exec",
        ),
        ns,
    )
    for thing in (
        ns["probe"],
        ns["Probe"],
        ns["Probe"](),
        lambda t: t,
        ns["probe"].__code__,
        [1, (ns["probe"],)],
    ):
        with pytest.raises(remote.UnsupportedTest) as info:
            remote.dumps_call(((), thing, (), {}, {}))
        assert info.value.status == "needs-kernel"
    # what does cross: data, the student's own objects by path, functions and classes by reference
    import operator

    import torch

    from autograder import probes
    from autograder.checks import CallRecorder
    from autograder.probes import T, call, fn, seq

    x = torch.tensor([[-1.0, 0.5], [2.0, -3.0]], requires_grad=True)
    x.grad = torch.ones_like(x)
    things = [
        fn(T[0].mul_(2)),
        fn(call(operator.setitem, T.data, 0, 5.0)),
        fn(seq(T[1].mul_(2), T.sum())),
        fn(T @ torch.eye(2)),
        fn(call(torch.softmax, T, dim=0)),
        CallRecorder(fn(T * 2)),
        torch.relu_,
        torch.nn.Linear(2, 2),
        probes.on_a_non_leaf,
        probes.Boom("raised by fn"),
        x,
    ]
    assert b"<test" not in remote.dumps_call(
        remote.Remote(("f",))
    )  # (a student's object: its name)
    payload = remote.dumps_call(things)
    assert b"<test" not in payload and b"docstring" not in payload
    back = pickle.loads(payload)
    assert back[-1].grad is not None and torch.equal(back[-1].grad, x.grad)
    t = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert back[0](t.clone()).tolist() == [2.0, 4.0] and float(back[2](t.clone())) == 17.0
    c = t.clone()
    back[1](c)
    assert c[0].tolist() == [5.0, 5.0]


def _judge_run(code, cwd):
    import sys

    return run([sys.executable, "-c", code], cwd=cwd, timeout=120).stdout


def test_student_module_names_import_nothing(tmp_path):
    """reports-module-name: a names report that names modules binds the judge's module only if the
    judge had loaded it already; nothing is imported on a student's word (the v2 judge imported
    unittest.__main__, which ran discovery in its working directory: a planted test file ran)."""
    (tmp_path / "test_planted.py").write_text(
        f"open({str(tmp_path / 'planted-ran')!r}, 'w').close()\n"
    )
    out = _judge_run(
        """
import json, sys
from autograder.grading.host import judge
sub = judge.Submission([])
names = {"a": "unittest.__main__", "b": "IPython.__main__", "c": "antigravity", "d": "tabnanny", "e": "os",
         "f": "__main__", "g": "test_planted", "h": "this"}
before = set(sys.modules)
sub.bind({k: {"kind": "module", "module": v} for k, v in names.items()})
print(json.dumps({"kinds": {k: type(sub.ns[k]).__name__ for k in names},
                  "new": sorted(set(sys.modules) - before)}))
""",
        tmp_path,
    )
    import json

    got = json.loads(out.strip().splitlines()[-1])
    assert got["kinds"] == {
        "a": "Remote",
        "b": "Remote",
        "c": "Remote",
        "d": "Remote",
        "e": "module",
        "f": "Remote",
        "g": "Remote",
        "h": "Remote",
    }
    assert got["new"] == [], got["new"]
    assert not (tmp_path / "planted-ran").exists()


def test_a_tests_objects_never_travel_by_a_student_name(tmp_path):
    """rebinds-test-name: what a test binds under a name the student's notebook also defines stays
    in the judge; a call carries only deletions and the student's own handles."""
    out = _judge_run(
        """
import json
from autograder.grading.host import judge
from autograder import remote
sub = judge.Submission([])
sub.bind({"expected": {"kind": "value", "value": None}, "reference": {"kind": "callable", "classes": []},
          "helper": {"kind": "callable", "classes": []}, "other": {"kind": "callable", "classes": []},
          "gone": {"kind": "value", "value": 1}})
sub.ns["expected"] = [1.5, 2.5]                   # a test's expected value
sub.ns["reference"] = lambda t: t                  # a test's reference function
sub.ns["helper"] = sub.ns["other"]                 # the student's own object, under another name
del sub.ns["gone"]
edits = sub.edits()
print(json.dumps({k: (list(v) if type(v) is tuple else list(v._path)) for k, v in edits.items()}))
""",
        tmp_path,
    )
    import json

    assert json.loads(out.strip().splitlines()[-1]) == {"helper": ["other"], "gone": ["$deleted"]}


# --------------------------------------------------------------------------- grading v5, issue 35
# item 2: what a call writes into the test's own containers reaches the test, as in one kernel

MUTATIONS = {
    "list": [
        "x.append(1)",
        "x[:] = sorted(x)",
        "x.clear()",
        "x.insert(0, 'a')",
        "x.reverse()",
        "x = x + [1]",
        "pass",
        "x.extend(x)",
        "del x[:1]",
    ],
    "dict": [
        "x['k'] = 1",
        "x.pop(next(iter(x)), None) if x else None",
        "x.clear()",
        "x.update(a=2)",
        "x = dict(x, z=0)",
        "pass",
    ],
    "set": ["x.add(5)", "x.discard(1)", "x.clear()", "x |= {7}", "x = x | {8}", "pass"],
    "ndarray": ["x += 1", "x[...] = 0", "x.sort()", "x *= 2", "x = x + 1", "pass", "x[:1] = -5"],
    "bytearray": ["x.extend(b'z')", "x[:1] = b'q'", "x.clear()", "pass"],
}


def _container(kind, values):
    if kind == "list":
        return list(values)
    if kind == "dict":
        return {f"k{i}": v for i, v in enumerate(values)}
    if kind == "set":
        return set(values)
    if kind == "ndarray":
        return np.array(values, dtype=float)
    return bytearray(bytes(v % 256 for v in values))


def _same(a, b):
    if isinstance(a, np.ndarray):
        return type(b) is np.ndarray and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def test_a_calls_writes_into_the_tests_containers_are_carried():
    """Generated: a container of each carried type, a function that writes into it (or rebinds its
    parameter, or does nothing); the test's own object after the call through the judge's proxy
    equals the same object after the same call in one kernel, and so does the returned value."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @st.composite
    def cases(draw):
        kind = draw(st.sampled_from(sorted(MUTATIONS)))
        values = draw(st.lists(st.integers(-3, 9), min_size=1, max_size=6))
        return kind, values, draw(st.sampled_from(MUTATIONS[kind]))

    @settings(max_examples=120, deadline=None, derandomize=True, database=None)
    @given(cases(), st.booleans())
    def check(case, by_keyword):
        kind, values, op = case
        ns: dict = {}
        exec(f"import numpy as np\ndef f(x):\n    {op}\n    return len(x)\n", ns)
        server = remote.Server(ns)

        class Channel:
            def call(self, header, payload):
                return server.serve_call(header, payload)

        saved = remote.connect(remote.Link(Channel()))
        try:
            ours = _container(kind, values)
            alias = ours  # a test's alias sees the write too
            got = (
                remote.Remote(("f",), {"classes": []})(**{"x": ours})
                if by_keyword
                else (remote.Remote(("f",), {"classes": []})(ours))
            )
        finally:
            remote.connect(saved)
        one_kernel = _container(kind, values)
        want = ns["f"](one_kernel)
        assert got == want, (kind, values, op)
        assert alias is ours and _same(ours, one_kernel), (kind, values, op, ours, one_kernel)

    check()
