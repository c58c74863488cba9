"""Every frame kind of the protocol against its written spec (:mod:`autograder.wire.spec`), as
ipykernel tests its message spec: an example of each kind validates, a broken one does not, and
the frames of a real grading run (supervisor, zygote, relay, judge) are each of a kind the spec
names, with the fields it names."""

from __future__ import annotations

import pytest

from autograder.wire import spec
from autograder.wire.spec import SPEC, SpecError, validate

OBS = b'{"value": 2}'
CALL = b"\x80\x05pickled call"

EXAMPLES = {
    ("zygote", "in", "config"): (
        {
            "sandboxed": True,
            "scratch": "/t/work",
            "outdir": "/t/out",
            "home": "/t/home",
            "tmp": "/t",
            "preload": ["torch"],
        },
        b"",
    ),
    ("zygote", "in", "grade"): (
        {"op": "grade", "limits": {"timeout": 5.0, "wall": 600.0}},
        b'{"items": []}',
    ),
    ("zygote", "in", "begin"): ({"op": "begin", "seq": 12345}, b""),
    ("zygote", "in", "call"): ({"op": "call", "seq": 7, "quiet": False, "rng": None}, CALL),
    ("zygote", "in", "more-tests"): ({"op": "more-tests"}, b""),
    ("zygote", "in", "kill-test"): ({"op": "kill-test"}, b""),
    ("zygote", "in", "continue"): ({"op": "continue"}, b""),
    ("zygote", "in", "abort"): ({"op": "abort"}, b""),
    ("zygote", "in", "quit"): ({"op": "quit"}, b""),
    ("zygote", "out", "ready"): ({"ready": True, "pid": 1}, b""),
    ("zygote", "out", "tests"): ({"ev": "tests", "ks": [0, 1]}, b""),
    ("zygote", "out", "reply"): (
        {"ev": "reply", "seq": 7, "names": {"f": {}}, "restored": [], "dtype": "float32"},
        b"",
    ),
    ("zygote", "out", "test-exit"): ({"ev": "test-exit", "status": 137, "killed": True}, b""),
    ("zygote", "out", "garbled"): ({"ev": "garbled", "why": "frame of 1 + 2 bytes"}, b""),
    ("zygote", "out", "done"): (
        {"ev": "done", "result": {"cells": [], "main": "completed", "garbled": False}},
        b"",
    ),
    ("judge", "in", "preload"): ({"preload": ["torch"]}, b""),
    ("judge", "in", "begin"): (
        {"op": "begin", "tests": [{"id": "t1", "source": "assert 1", "points": 1}]},
        b"",
    ),
    ("judge", "in", "test"): ({"op": "test", "k": 0, "names": {}, "dtype": None}, b""),
    ("judge", "in", "reply"): ({"ev": "reply"}, OBS),
    ("judge", "in", "end"): ({"op": "end"}, b""),
    ("judge", "in", "quit"): ({"op": "quit"}, b""),
    ("judge", "out", "ready"): ({"ready": True, "pid": 2}, b""),
    ("judge", "out", "child"): ({"ev": "child", "pid": 3}, b""),
    ("judge", "out", "started"): ({"ev": "ready"}, b""),
    ("judge", "out", "call"): ({"op": "call", "quiet": True}, CALL),
    ("judge", "out", "verdict"): (
        {
            "ev": "verdict",
            "k": 0,
            "passed": False,
            "partial": None,
            "error": "AssertionError",
            "message": "no",
            "failure": {"kind": "check", "check": "f(x) returned 1", "cause": "clone x"},
            "status": None,
            "stderr": False,
            "output": "",
            "seconds": 0.1,
        },
        b"",
    ),
    ("judge", "out", "child-exit"): ({"ev": "child-exit", "status": 0, "peak_rss_kb": 123456}, b""),
    ("test", "in", "begin"): ({"op": "begin", "seq": 1}, b""),
    ("test", "in", "call"): ({"op": "call", "seq": 2, "quiet": False, "rng": "AAAA"}, CALL),
    ("test", "out", "reply"): ({"seq": 2}, OBS),
}


def test_every_kind_has_an_example():
    assert set(EXAMPLES) == set(SPEC)


@pytest.mark.parametrize("key", sorted(SPEC), ids=lambda k: "-".join(k))
def test_each_kind_validates(key):
    channel, direction, kind = key
    header, body = EXAMPLES[key]
    assert validate(channel, direction, header, body) == kind


@pytest.mark.parametrize("key", sorted(SPEC), ids=lambda k: "-".join(k))
def test_each_kind_refuses_a_missing_field_a_wrong_type_and_a_stray_field(key):
    channel, direction, kind = key
    header, body = EXAMPLES[key]
    match, required, optional, body_rule = SPEC[key]
    for field in required:
        broken = {k: v for k, v in header.items() if k != field}
        with pytest.raises(SpecError):
            validate(channel, direction, broken, body)
        assert validate(channel, direction, header, body) == kind
        wrong = dict(header, **{field: object.__name__ if str not in required[field] else 12.5})
        with pytest.raises(SpecError):
            validate(channel, direction, wrong, body)
    with pytest.raises(SpecError):
        validate(channel, direction, dict(header, stray_field=1), body)
    if body_rule == "none":
        with pytest.raises(SpecError):
            validate(channel, direction, header, b"x")
    if body_rule == "required":
        with pytest.raises(SpecError):
            validate(channel, direction, header, b"")


def test_an_unknown_frame_has_no_kind():
    with pytest.raises(SpecError):
        spec.kind("zygote", "in", {"op": "format-disk"})
    with pytest.raises(SpecError):
        spec.kind("judge", "out", {"ev": "confess"})


STUDENT = "def f(x):\n    return x + 1\n\ndef slow():\n    import time\n    time.sleep(60)\n"
TESTS = [
    {"id": "passes", "source": "assert f(1) == 2", "points": 1},
    {"id": "fails", "source": "assert f(1) == 3, 'f(1) is not 3'", "points": 1},
    {"id": "too_slow", "source": "slow()", "points": 1},
]


def test_a_real_run_speaks_the_spec(monkeypatch, tmp_path):
    """Each frame the supervisor sends to or reads from the zygote and the judge, in a run with a
    passing, a failing and a stopped test."""
    from autograder.grading.host import supervisor
    from autograder.wire.types import Limits, Options

    seen = []
    send, read = supervisor._Process.send, supervisor._Process.read

    def channel(proc):
        return "judge" if proc.log_path.name.startswith("judge-") else "zygote"

    def spy_send(self, header, body=b""):
        seen.append((channel(self), "in", header, body))
        return send(self, header, body)

    def spy_read(self, timeout=None):
        header, body = read(self, timeout)
        seen.append((channel(self), "out", header, body))
        return header, body

    template_send = supervisor.JudgeTemplate.send

    def spy_template(self, header):
        seen.append(("judge", "in", header, b""))
        return template_send(self, header)

    monkeypatch.setattr(supervisor._Process, "send", spy_send)
    monkeypatch.setattr(supervisor._Process, "read", spy_read)
    monkeypatch.setattr(supervisor.JudgeTemplate, "send", spy_template)
    supervisor.close_templates()  # this run's judge starts from a template it sees configured
    items = [["cell", 0, STUDENT], ["test", 0], ["test", 1], ["test", 2]]
    task = {
        "id": "s/a/nb",
        "items": items,
        "tests": TESTS,
        "files": [],
        "imports": [],
        "limits": Limits(timeout=3.0, wall=120.0).frame(),
    }
    sup = supervisor.Supervisor(Options(preload=[], sandbox=False, log_dir=str(tmp_path))).start()
    try:
        result = sup.grade(task)
    finally:
        sup.close()
    assert [t.get("passed") for t in result["tests"]] == [True, False, False]
    assert result["tests"][2]["status"] == "timeout"
    kinds = set()
    for ch, direction, header, body in seen:
        kinds.add((ch, direction, validate(ch, direction, header, body)))
    # the kinds this run must have used (abort, garbled, more-tests need a hostile notebook:
    # their examples above stand for them)
    assert {
        ("zygote", "in", k)
        for k in ("config", "grade", "begin", "call", "kill-test", "continue", "quit")
    } <= kinds
    assert {("zygote", "out", k) for k in ("ready", "tests", "reply", "test-exit", "done")} <= kinds
    assert {
        ("judge", "in", k) for k in ("preload", "begin", "test", "reply", "end", "quit")
    } <= kinds
    assert {
        ("judge", "out", k) for k in ("ready", "child", "started", "call", "verdict", "child-exit")
    } <= kinds


def test_both_sides_name_the_same_operations():
    """The operations a handle asks for are named once (autograder.wire.spec.OPERATIONS): the
    student's side performs exactly those, and every name the judge's side can send is one."""
    import ast
    from pathlib import Path

    import autograder
    from autograder.remote.client import Remote
    from autograder.remote.server import OPS
    from autograder.wire.spec import OPERATIONS

    assert set(OPS) == OPERATIONS
    sent = set()
    for attr, fn in vars(Remote).items():  # the operator methods: __add__ sends "add" ...
        for cell in getattr(fn, "__closure__", None) or ():
            if isinstance(cell.cell_contents, str) and attr.startswith("__"):
                sent.add(cell.cell_contents)
    for path in Path(autograder.__file__).parent.rglob("*.py"):  # _op("len", ...) and the like
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "_op"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                sent.add(node.args[0].value)
    assert len(sent) > 60 and sent <= OPERATIONS, sent - OPERATIONS
