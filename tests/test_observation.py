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
