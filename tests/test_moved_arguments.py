"""A call's writes into the test's own containers come back with their inner objects (issue 35,
item 2: nested containers).

The rule: after a call, every container the test passed in, and every container inside it, is in
the judge what it is in one kernel - the same contents, and the same object wherever one kernel
still holds the same object. An inner list the student sorted in place is still the test's inner
list (``first = rows[0]`` sees the sort), and one the student replaced is not (``first`` keeps the
old contents), as in one kernel.

The student's side (:mod:`autograder.remote.server`) reports each changed argument's contents and
which inner containers are the objects that were inside it before the call (a path then, a path
now); the judge (:mod:`autograder.remote.client`) checks the report against its own objects and
writes innermost first. Tested here without processes: the student's copy is the judge's objects
copied as the call's pickling copies them (shared objects stay shared), the report goes through the
observation format both ways, and the judge's objects afterwards are compared with the student's,
value and identity, on named cases and on generated structures and in-place edits (hypothesis).
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.remote import client, server
from autograder.wire import observation


def call(arg, edit):
    """Run ``edit`` on the student's copy of the test's ``arg`` as a call would, and bring its
    writes back into ``arg`` as the judge does. Returns the student's copy after the call and
    its inner containers before it (kept alive: no id is reused)."""
    student = copy.deepcopy(arg)
    student_before = inner(student)
    containers = server._containers((student,), {}, [])
    edit(student)
    moved, same = server._moved(containers, [])
    doc = observation.loads(observation.dumps({"moved": moved, "same": same}))
    plan = client._moved(doc.get("moved") or {}, doc.get("same"), (arg,), {}, observation.Decoder())
    client.write_back(plan)
    return student, student_before


def inner(root) -> dict:
    """{path: container} for every container inside ``root`` (first path, as the server walks)."""
    return {tuple(path): obj for obj, path in server._nested(root).values()}


def run_case(arg, edit) -> None:
    """The judge's ``arg`` after the call equals the student's copy, and holds the judge's own
    inner object exactly where the student's copy holds the object it had before the call."""
    judge_before = inner(arg)
    student, student_before = call(arg, edit)
    assert arg == student
    old_path_of = {id(obj): path for path, obj in student_before.items()}
    for path, s_obj in inner(student).items():
        j_obj = client._at(arg, list(path))
        assert j_obj == s_obj, path
        if id(s_obj) in old_path_of:
            assert j_obj is judge_before[old_path_of[id(s_obj)]], (path, "not the test's object")
        else:
            assert all(j_obj is not o for o in judge_before.values()), (path, "not a new object")


def test_an_inner_list_sorted_in_place_is_still_the_tests_list():
    rows = [[3, 1, 2], [5, 4]]
    first = rows[0]
    run_case(rows, lambda r: [x.sort() for x in r])
    assert rows == [[1, 2, 3], [4, 5]]
    assert first == [1, 2, 3] and rows[0] is first


def test_an_inner_list_the_call_replaced_is_not():
    rows = [[3, 1, 2], [5, 4]]
    first = rows[0]

    def replace(r):
        r[:] = [sorted(x) for x in r]

    run_case(rows, replace)
    assert rows == [[1, 2, 3], [4, 5]]
    assert first == [3, 1, 2] and rows[0] is not first


def test_inner_lists_moved_to_other_places_keep_their_identity():
    table = {"a": [1], "b": [2, 2], "c": {"d": [3]}}
    a, d = table["a"], table["c"]["d"]

    def shuffle(t):
        t["b"], t["a"] = t["a"], t["b"]
        t["c"]["d"].append(4)
        t["e"] = t["c"].pop("d")

    run_case(table, shuffle)
    assert table == {"a": [2, 2], "b": [1], "c": {}, "e": [3, 4]}
    assert table["b"] is a and table["e"] is d and d == [3, 4]


def test_an_unchanged_inner_list_beside_a_change_stays_the_tests():
    rows = [[1], [2]]
    second = rows[1]
    run_case(rows, lambda r: r[0].append(9))
    assert rows[1] is second and rows == [[1, 9], [2]]


def test_a_forged_path_is_tampering_and_nothing_is_written():
    rows = [[1], [2]]
    doc = observation.loads(observation.dumps({"moved": {"0": [[1]]}, "same": {"0": [[[0], [7]]]}}))
    with pytest.raises(observation.ObservationError):
        client._moved(doc["moved"], doc["same"], (rows,), {}, observation.Decoder())
    for same in (
        {"0": [[[0], []]]},
        {"0": [[[], [0]]]},
        {"1": []},
        {"0": "x"},
        {"0": [[[0], [0]]] * 2},
    ):
        with pytest.raises(observation.ObservationError):
            client._moved({"0": [[1], [2]]}, same, (rows,), {}, observation.Decoder())
    assert rows == [[1], [2]]


# generated: nested lists and dicts, and in-place edits of their inner containers
leaf = st.integers(0, 9)
tree = st.recursive(
    st.lists(leaf, max_size=3),
    lambda kids: st.one_of(
        st.lists(st.one_of(kids, leaf), min_size=1, max_size=4),
        st.dictionaries(st.sampled_from("abcd"), st.one_of(kids, leaf), min_size=1, max_size=4),
    ),
    max_leaves=12,
)
EDITS = ["sort", "append", "replace", "swap", "reverse_outer", "pop_into_new_key", "clear_inner"]


def _lists(root) -> list:
    return [obj for obj in inner(root).values() if type(obj) is list]


def apply(root, ops) -> None:
    for op, i, j in ops:
        lists = _lists(root)
        containers = list(inner(root).items())
        if op == "sort" and lists:
            lst = lists[i % len(lists)]
            if all(type(x) is int for x in lst):
                lst.sort()
        elif op == "append" and lists:
            lists[i % len(lists)].append(j)
        elif op == "clear_inner" and lists:
            lists[i % len(lists)].clear()
        elif op == "reverse_outer" and type(root) is list:
            root.reverse()
        elif op in ("replace", "swap", "pop_into_new_key") and containers:
            path, obj = containers[i % len(containers)]
            parent = client._at(root, list(path[:-1]))
            key = path[-1]
            if op == "replace":
                parent[key] = copy.deepcopy(obj)
            elif op == "swap":
                other_path, other = containers[j % len(containers)]
                if other is not obj and not _inside(obj, other) and not _inside(other, obj):
                    other_parent = client._at(root, list(other_path[:-1]))
                    parent[key], other_parent[other_path[-1]] = other, obj
            elif type(parent) is dict:
                parent[f"new{j}"] = parent.pop(key)


def _inside(outer, obj) -> bool:
    return any(x is obj for x in inner(outer).values())


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.lists(tree, min_size=1, max_size=3),
        st.dictionaries(st.sampled_from("xyz"), tree, min_size=1),
    ),
    st.lists(st.tuples(st.sampled_from(EDITS), st.integers(0, 20), st.integers(0, 20)), max_size=4),
)
def test_generated_structures_and_edits_come_back_as_in_one_kernel(value, ops):
    run_case(value, lambda root: apply(root, ops))
