"""The frame protocol, written down: every frame that crosses between the grader's processes.

    frame = u32 header length | u32 body length | header (JSON object, UTF-8) | body

(:mod:`.frames` reads and writes them, bounded.) Three channels carry frames:

``zygote`` - the supervisor (host) and the sandbox's zygote, or the relay it forks per notebook::

    host -> zygote   config    {"sandboxed", "scratch", "outdir", "home", "tmp", "preload",
                               "proc"?, "fonts"?}                     first frame (fonts: the
                               host's matplotlib font list files, {name: text})
                     grade     {"op": "grade", "limits"} + body: the task (JSON: items, files,
                               tests [{"id"}], written), read by the relay, never by the zygote
                     begin     {"op": "begin", "seq"}                 a test starts: restore, names
                     call      {"op": "call", "seq", "quiet", "rng"} + body: a pickled call
                     more-tests {"op": "more-tests"}                  fork another test process
                     kill-test {"op": "kill-test"}                    stop the test process
                     continue  {"op": "continue"}                     tests done: on with the cells
                     abort     {"op": "abort"}                        the notebook's wall limit
                     quit      {"op": "quit"}
    zygote -> host   ready     {"ready": true, "pid"}                 warm, waiting for tasks
                     tests     {"ev": "tests", "ks": [int]}           the student process reached tests
                     reply     {"ev": "reply", "seq", "names"?, "restored"?, "error"?, "dtype"?,
                               "complete"?, "threads"?, "status"?} + body: an observation (JSON)
                     test-exit {"ev": "test-exit", "status": int|null, "killed": bool}
                     garbled   {"ev": "garbled", "why"}               the test process broke the protocol
                     done      {"ev": "done", "result"} + body: the files the notebook wrote
                               (result["written"]: [[name, size]], their bytes in order)

``judge`` - the supervisor and the judge::

    host -> judge    preload   {"preload": [str]}                     first frame
                     begin     {"op": "begin", "tests": [{"id", "source", "points"}], "code"?}
                               (code: what the student's cells name, autograder.grading.host.reads)
                     test      {"op": "test", "k", "names", "dtype", "complete"?}  run test k
                     reply     {"ev": "reply", "status"?, "message"?} + body: the call's observation
                     end       {"op": "end"}
                     quit      {"op": "quit"}
    judge -> host    ready     {"ready": true, "pid"}                 warm (after the preload)
                     child     {"ev": "child", "pid"}                 forked for this notebook
                     started   {"ev": "ready"}                        the child is ready for tests
                     call      {"op": "call", "quiet", "rng"} + body: a pickled call into student code
                     verdict   {"ev": "verdict", "k", "passed", "partial", "error", "message",
                               "failure", "status", "stderr", "output", "seconds", "dropped"?,
                               "checks"?}
                               (failure: a failed check's parts, {"kind", "check", "expected",
                               "found", "cause"}, or null)
                     child-exit {"ev": "child-exit", "status", "peak_rss_kb"}

``test`` - the relay and the student's test process (inside the sandbox): the host's ``begin``
and ``call`` frames as they came, and the replies ``{"seq", "names"?, "restored"?, "dtype"?,
"complete"?, "threads"?, "error"?} + body``, which the relay passes on as ``reply`` frames (only those keys).

:data:`SPEC` says the same as data; :func:`kind` names a frame's kind and :func:`validate`
checks a frame against it (``tests/test_frame_spec.py`` checks every kind, and the frames of a
real grading run).
"""

from __future__ import annotations

from typing import Any

# The operations a handle (autograder.remote.client.Remote) asks of the object where it lives,
# by name, in a call frame's pickled ("$op", name) path; the student's side performs each one from
# its fixed table (autograder.remote.server.OPS). Named once here, for both sides.
OP_CALLS = (  # the handle's methods and the judge's probes: len(h), h[k], str(h), ...
    "getattr", "setattr", "delattr", "dir", "isinstance", "issubclass", "copy", "deepcopy",
    "repr", "str", "format", "len", "bool", "iter", "next", "reversed", "contains", "getitem",
    "setitem", "delitem", "hash", "array", "int", "float", "complex", "index", "round", "enter",
    "exit",
)  # fmt: skip
OP_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
OP_BINARY = (  # each also reflected (__radd__ ...) and, but divmod, in place (__iadd__: "iadd")
    "add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift",
    "rshift", "and", "xor", "or",
)  # fmt: skip
OP_UNARY = ("neg", "pos", "abs", "invert", "trunc", "floor", "ceil")
OP_INPLACE = tuple("i" + name for name in OP_BINARY if name != "divmod")
OPERATIONS = frozenset(OP_CALLS + OP_COMPARISONS + OP_BINARY + OP_UNARY + OP_INPLACE)


_INT = (int,)
_NUM = (int, float)
_STR = (str,)
_BOOL = (bool,)
_LIST = (list,)
_DICT = (dict,)
_NONE = (type(None),)

# (channel, direction, kind) -> (match: fields that name the kind, required {field: types},
# optional {field: types}, body: "none" | "maybe" | "required")
SPEC: dict[tuple[str, str, str], tuple[dict[str, Any], dict[str, tuple], dict[str, tuple], str]] = {
    # supervisor -> zygote
    ("zygote", "in", "config"): (
        {},
        {
            "sandboxed": _BOOL,
            "scratch": _STR,
            "outdir": _STR,
            "home": _STR,
            "tmp": _STR,
            "preload": _LIST,
        },
        {"proc": _STR, "fonts": _DICT},
        "none",
    ),
    ("zygote", "in", "grade"): ({"op": "grade"}, {"limits": _DICT}, {}, "required"),
    ("zygote", "in", "begin"): ({"op": "begin"}, {"seq": _INT}, {}, "none"),
    ("zygote", "in", "call"): (
        {"op": "call"},
        {"seq": _INT, "quiet": _BOOL, "rng": _STR + _NONE},
        {},
        "required",
    ),
    ("zygote", "in", "more-tests"): ({"op": "more-tests"}, {}, {}, "none"),
    ("zygote", "in", "kill-test"): ({"op": "kill-test"}, {}, {}, "none"),
    ("zygote", "in", "continue"): ({"op": "continue"}, {}, {}, "none"),
    ("zygote", "in", "abort"): ({"op": "abort"}, {}, {}, "none"),
    ("zygote", "in", "quit"): ({"op": "quit"}, {}, {}, "none"),
    # zygote -> supervisor
    ("zygote", "out", "ready"): ({"ready": True}, {"pid": _INT}, {}, "none"),
    ("zygote", "out", "tests"): ({"ev": "tests"}, {"ks": _LIST}, {}, "none"),
    ("zygote", "out", "reply"): (
        {"ev": "reply"},
        {"seq": _INT + _NONE},
        {
            "names": _DICT,
            "restored": _LIST,
            "error": _STR,
            "dtype": _STR,
            "status": _STR,
            "complete": _BOOL,
            "threads": _LIST,
        },
        "maybe",
    ),
    ("zygote", "out", "test-exit"): (
        {"ev": "test-exit"},
        {"status": _INT + _NONE, "killed": _BOOL},
        {},
        "none",
    ),
    ("zygote", "out", "garbled"): ({"ev": "garbled"}, {"why": _STR}, {}, "none"),
    ("zygote", "out", "done"): ({"ev": "done"}, {"result": _DICT}, {}, "maybe"),
    # supervisor -> judge
    ("judge", "in", "preload"): ({}, {"preload": _LIST}, {}, "none"),
    ("judge", "in", "begin"): ({"op": "begin"}, {"tests": _LIST}, {"code": _DICT}, "none"),
    ("judge", "in", "test"): (
        {"op": "test"},
        {"k": _INT, "names": _DICT + _NONE, "dtype": _STR + _NONE},
        {"complete": _BOOL},
        "none",
    ),
    ("judge", "in", "reply"): ({"ev": "reply"}, {}, {"status": _STR, "message": _STR}, "maybe"),
    ("judge", "in", "end"): ({"op": "end"}, {}, {}, "none"),
    ("judge", "in", "quit"): ({"op": "quit"}, {}, {}, "none"),
    # judge -> supervisor
    ("judge", "out", "ready"): ({"ready": True}, {"pid": _INT}, {}, "none"),
    ("judge", "out", "child"): ({"ev": "child"}, {"pid": _INT}, {}, "none"),
    ("judge", "out", "started"): ({"ev": "ready"}, {}, {}, "none"),
    ("judge", "out", "call"): ({"op": "call"}, {"quiet": _BOOL}, {"rng": _STR + _NONE}, "required"),
    ("judge", "out", "verdict"): (
        {"ev": "verdict"},
        {"k": _INT, "passed": _BOOL},
        {
            "partial": _NUM + _NONE,
            "error": _STR + _NONE,
            "message": _STR + _NONE,
            "failure": _DICT + _NONE,
            "status": _STR + _NONE,
            "output": _STR + _NONE,
            "seconds": _NUM + _NONE,
            "stderr": _BOOL,
            "dropped": _LIST,
            "checks": _LIST,
        },
        "none",
    ),
    ("judge", "out", "child-exit"): (
        {"ev": "child-exit"},
        {"status": _INT + _NONE},
        {"peak_rss_kb": _INT + _NONE},
        "none",
    ),
    # relay <-> the student's test process
    ("test", "in", "begin"): ({"op": "begin"}, {"seq": _INT}, {}, "none"),
    ("test", "in", "call"): (
        {"op": "call"},
        {"seq": _INT, "quiet": _BOOL, "rng": _STR + _NONE},
        {},
        "required",
    ),
    ("test", "out", "reply"): (
        {},
        {"seq": _INT + _NONE},
        {
            "names": _DICT,
            "restored": _LIST,
            "error": _STR,
            "dtype": _STR,
            "complete": _BOOL,
            "threads": _LIST,
        },
        "maybe",
    ),
}


class SpecError(ValueError):
    pass


def kinds(channel: str, direction: str) -> list[str]:
    return [k for (c, d, k) in SPEC if c == channel and d == direction]


def kind(channel: str, direction: str, header: dict) -> str:
    """The kind of frame ``header`` is on that channel and direction (the most specific match)."""
    best, best_n = None, -1
    for (c, d, k), (match, required, _, _) in SPEC.items():
        if c != channel or d != direction:
            continue
        if all(header.get(f) == v and type(header.get(f)) is type(v) for f, v in match.items()):
            if not match and not set(required) <= set(header):
                continue
            if len(match) > best_n:
                best, best_n = k, len(match)
    if best is None:
        raise SpecError(f"no {channel} {direction} frame looks like {sorted(header)}")
    return best


def validate(channel: str, direction: str, header: dict, body: bytes = b"") -> str:
    """Check a frame against :data:`SPEC`; return its kind, or raise :class:`SpecError`."""
    k = kind(channel, direction, header)
    match, required, optional, body_rule = SPEC[(channel, direction, k)]
    for field, types in required.items():
        if field not in header:
            raise SpecError(f"{channel} {direction} {k}: no {field!r}")
        if not isinstance(header[field], types) or (
            types != _BOOL and type(header[field]) is bool and bool not in types
        ):
            raise SpecError(
                f"{channel} {direction} {k}: {field!r} is {type(header[field]).__name__}"
            )
    for field, types in optional.items():
        if field in header and not (
            isinstance(header[field], types) and (type(header[field]) is not bool or bool in types)
        ):
            raise SpecError(
                f"{channel} {direction} {k}: {field!r} is {type(header[field]).__name__}"
            )
    extra = set(header) - set(match) - set(required) - set(optional)
    if extra:
        raise SpecError(f"{channel} {direction} {k}: fields not in the spec: {sorted(extra)}")
    if body_rule == "none" and body:
        raise SpecError(f"{channel} {direction} {k}: a body where none belongs")
    if body_rule == "required" and not body:
        raise SpecError(f"{channel} {direction} {k}: no body")
    return k
