"""JSON from the sandbox, bounded on the raw bytes *before* it is parsed.

Everything the host parses from a process that ran student code - an observation, a frame
header such as the names report - goes through :func:`parse_json`: its size, its number of
values and its depth are counted on the bytes first (:func:`check_bounds`), and its text is made
safe for UTF-8 once, here at the boundary (lone surrogates become U+FFFD).
"""

from __future__ import annotations

import itertools
import json
import re

MAX_DOCUMENT = 96 << 20  # one encoded observation
# Bounds on what the host parses from the sandbox, checked on the raw bytes *before* any
# allocation (an observation, a frame header such as the names report): a document of at most
# MAX_DOCUMENT bytes with at most MAX_NODES JSON values (each list, object, string, number)
# nested at most MAX_JSON_DEPTH deep. Parsed, such a document takes at most ~100 MB of Python
# objects (1M empty lists at ~72 bytes each, plus the bytes themselves); without the bounds a
# 95 MB reply of nested lists took 4.9 GB in the judge. An honest observation is far inside
# them: a tensor or an array is one string, a list of MAX_ITEMS numbers 100,000 values.
MAX_NODES = 1_000_000
MAX_JSON_DEPTH = 100  # (a dict costs 3 levels of JSON per level of MAX_DEPTH)


class ObservationError(ValueError):
    """An observation that does not follow the format: it cannot come from the honest encoder."""


class TooLargeToParse(ObservationError):
    """A document from the sandbox over the bounds (size, values, depth): never parsed."""


_DEPTH = [0] * 256
_DEPTH[ord("[")] = _DEPTH[ord("{")] = 1
_DEPTH[ord("]")] = _DEPTH[ord("}")] = -1
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def check_bounds(data, max_bytes=MAX_DOCUMENT, max_nodes=MAX_NODES, max_depth=MAX_JSON_DEPTH):
    """Raise :class:`TooLargeToParse` unless the JSON text ``data`` (bytes) is within the bounds.

    Counted on the bytes, nothing parsed: every JSON value but the first follows one of
    ``[ { , :``, so their count bounds the number of values (a separator inside a string counts
    too: the bound errs on the safe side); the depth is measured with the strings taken out."""
    if len(data) > max_bytes:
        raise TooLargeToParse(f"a document of {len(data)} bytes (at most {max_bytes})")
    opens = data.count(b"[") + data.count(b"{")
    nodes = opens + data.count(b",") + data.count(b":") + 1
    if nodes > max_nodes:
        raise TooLargeToParse(f"a document of about {nodes} values (at most {max_nodes})")
    if (
        opens > max_depth and _depth(data) > max_depth
    ):  # (brackets in strings counted: an upper bound)
        depth = _depth(_STRINGS.sub(b"", data))
        if depth > max_depth:
            raise TooLargeToParse(f"a document nested {depth} deep (at most {max_depth})")


def _depth(data):
    return max(
        itertools.accumulate(_DEPTH[b] for b in data.translate(None, _NOT_BRACKETS)), default=0
    )


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate (not encodable as UTF-8) replaced by U+FFFD."""
    return _SURROGATES.sub("\ufffd", text)


def _safe_strings(value):
    """Every string in a parsed document (keys too) made UTF-8-safe, in place where possible."""
    if type(value) is str:
        return safe_text(value)
    if type(value) is list:
        for i, v in enumerate(value):
            value[i] = _safe_strings(v)
        return value
    if type(value) is dict:
        return {safe_text(k): _safe_strings(v) for k, v in value.items()}
    return value


def parse_json(data: bytes, max_bytes=MAX_DOCUMENT, max_nodes=MAX_NODES, max_depth=MAX_JSON_DEPTH):
    """Parse JSON that came from the sandbox: bounds checked first (:func:`check_bounds`), text
    made safe for UTF-8 once, here at the boundary. Raises :class:`ObservationError`."""
    if not isinstance(data, (bytes, bytearray)):
        raise ObservationError("not bytes")
    check_bounds(data, max_bytes, max_nodes, max_depth)
    try:
        value = json.loads(data)
    except (ValueError, RecursionError, MemoryError, UnicodeDecodeError) as exc:
        raise ObservationError(f"not an observation ({type(exc).__name__})") from None
    if _SURROGATE_BYTES.search(data):
        value = _safe_strings(value)
    return value
