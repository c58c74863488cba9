"""autograder.wire.observation: what the host parses from the sandbox is bounded before allocation,
and its text is safe for UTF-8 (the decoding half of grading v3, issue 17 item 3)."""

from __future__ import annotations

import json

import pytest

from autograder.wire import frames as protocol
from autograder.wire import observation


def test_too_many_values_are_refused_before_parsing():
    data = b"[" + b"[]," * 2_000_000 + b"[]]"  # 6 MB that would parse into ~150 MB of lists
    with pytest.raises(observation.TooLargeToParse, match="values"):
        observation.loads(data)


def test_too_deep_is_refused_and_brackets_in_strings_do_not_count():
    with pytest.raises(observation.TooLargeToParse, match="nested"):
        observation.loads(b"[" * 500 + b"]" * 500)
    text = json.dumps({"s": "[" * 5000 + '\\"{' * 10}).encode()
    assert observation.loads(text)["s"].startswith("[[[")


def test_oversized_document_is_refused():
    with pytest.raises(observation.TooLargeToParse, match="bytes"):
        observation.check_bounds(b" " * 10, max_bytes=5)


def test_the_honest_encoder_checks_the_same_bounds():
    with pytest.raises(observation.ObservationTooLarge):
        observation.dumps([[0] * 90_000 for _ in range(12)])


def test_lone_surrogates_become_replacement_characters_once_at_the_boundary():
    doc = observation.loads(b'{"a": "x\\ud800y", "\\udfff": ["\xed\xa0\x80", "\\ud83d\\ude00"]}')
    assert doc == {"a": "x\ufffdy", "\ufffd": ["\ufffd", "\U0001f600"]}
    json.dumps(doc, ensure_ascii=False).encode("utf-8")  # writable as UTF-8


def test_frame_headers_are_bounded_and_made_safe():
    body = json.dumps({"message": "\ud800", "x": [1]}).encode()
    frame = protocol.HEADER.pack(len(body), 0) + body
    [(header, _)] = protocol.FrameReader().feed(frame)
    assert header["message"] == "\ufffd"
    deep = b'{"a":' + b"[" * 1000 + b"]" * 1000 + b"}"
    with pytest.raises(protocol.ProtocolError, match="bounds"):
        protocol.FrameReader().feed(protocol.HEADER.pack(len(deep), 0) + deep)


# --------------------------------------------------------------------------- exception identity

_BUILTIN_EXCEPTIONS = sorted(
    name
    for name, cls in vars(__import__("builtins")).items()
    if isinstance(cls, type) and issubclass(cls, BaseException)
)


def _round_trip_exception(exc):
    return observation.mirror_exception(
        observation.loads(observation.dumps(observation.Encoder().encode(exc)))
    )


def test_a_builtin_exception_is_itself_in_the_judge():
    import builtins

    for name in _BUILTIN_EXCEPTIONS:
        cls = getattr(builtins, name)
        try:
            exc = cls("m")
        except TypeError:  # (constructors with other arguments)
            continue
        assert type(_round_trip_exception(exc)) is cls, name


def test_a_class_that_only_names_itself_a_builtin_is_not_one():
    """The rule (issue 35 item 4): the judge re-creates a built-in exception only when the class
    raised is that built-in by identity. For generated forgeries - any built-in's name and
    __module__ = "builtins" on a class derived from another built-in exception - the judge's
    exception is an instance of a built-in exactly when the forged class is (as ``except``
    decides in one kernel)."""
    import builtins

    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=200, deadline=None, derandomize=True, database=None)
    @given(st.sampled_from(_BUILTIN_EXCEPTIONS), st.sampled_from(_BUILTIN_EXCEPTIONS))
    def check(claimed, base_name):
        base = getattr(builtins, base_name)
        try:
            forged = type(claimed, (base,), {"__module__": "builtins"})
            forged.__qualname__ = claimed
            exc = forged("m")
        except TypeError:  # a base that cannot be subclassed or built with one argument
            return
        got = _round_trip_exception(exc)
        for name in _BUILTIN_EXCEPTIONS:
            real = getattr(builtins, name)
            assert isinstance(got, real) == isinstance(exc, real), (claimed, base_name, name)

    check()
