"""autograder.remote.Remote, the judge's proxy of a student's object, against the student side
run in this process (the channel calls serve_call directly): what a test cell does to a handle
behaves as in one kernel (grading v3, issue 17 item 4). End to end: tests/test_fidelity_course.py."""
from __future__ import annotations

import itertools
import types

import numpy as np
import pytest

from autograder import remote

STUDENT = '''
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
'''


@pytest.fixture
def student():
    ns = {}
    exec(STUDENT, ns)

    class Channel:
        def call(self, header, payload):
            return remote.serve_call(header, payload)

    saved = remote.NAMESPACE, remote.CHANNEL
    remote.NAMESPACE, remote.CHANNEL = ns, Channel()
    remote._KEPT.clear()
    yield lambda name, classes=(): remote.Remote((name,), {"classes": list(classes)})
    remote.NAMESPACE, remote.CHANNEL = saved


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
        s.volume
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
    assert isinstance(b, list) and len(b) == 3 and 1 in b and b[1:] == [1, 2] and sorted(b) == [1, 2, 3]


def test_numpy_through_the_proxy(student):
    big = student("big", ("object",))
    np.testing.assert_allclose(big, np.arange(10.0))
    assert np.isclose(np.asarray(big).sum(), 45.0)
