"""Frames between the grader's processes: a JSON header and an optional binary body.

    frame = u32 header length | u32 body length | header (JSON object, UTF-8) | body

Every reader bounds both lengths before reading, parses a header only within the bounds of
:func:`autograder.wire.bounded_json.parse_json` (values, depth: checked before any allocation; text
made safe for UTF-8), and a header that is not a JSON object is a :class:`ProtocolError`: a
process that runs student code can write anything on its channel.
"""

from __future__ import annotations

import json
import os
import selectors
import struct
import sys
import time

from .bounded_json import ObservationError, TooLargeToParse, parse_json

HEADER = struct.Struct(">II")
MAX_HEADER = 4 << 20
MAX_BODY = 128 << 20

# what intake accepts and what a task frame can carry, derived from one another: a submission
# intake accepts always fits its frame (a notebook's text at worst 6x in JSON escapes, the
# extra files 4/3 in base64, plus the plan), so a big honest data file never breaks the channel
MAX_NOTEBOOK_BYTES = 20 << 20
MAX_FILES_BYTES = 50 << 20
MAX_TASK = 6 * MAX_NOTEBOOK_BYTES + (MAX_FILES_BYTES * 4) // 3 + (8 << 20)


class ProtocolError(RuntimeError):
    pass


class Timeout(RuntimeError):
    pass


def encode(header: dict, body: bytes = b"") -> bytes:
    h = json.dumps(header, separators=(",", ":")).encode()
    return HEADER.pack(len(h), len(body)) + h + body


def write_frame(fd: int, header: dict, body: bytes = b"") -> None:
    data = memoryview(encode(header, body))
    while data:
        n = os.write(fd, data)
        data = data[n:]


def wait_readable(fds, timeout: float | None = None) -> set[int]:
    """Those of ``fds`` that are ready to read (or at their end) within ``timeout`` seconds
    (``None``: wait for one; ``0``: look only): the one wait of every event loop here."""
    with selectors.DefaultSelector() as selector:
        for fd in fds:
            selector.register(fd, selectors.EVENT_READ)
        return {key.fd for key, _ in selector.select(timeout)}


def _read_exactly(fd: int, n: int, deadline=None) -> bytes:
    chunks = []
    while n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("no answer in time")
            if not wait_readable([fd], left):
                raise Timeout("no answer in time")
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the channel")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_header(fd: int, max_body=MAX_BODY):
    """``(header, body length)``, leaving the body unread in ``fd`` (for another process to read)."""
    hlen, blen = HEADER.unpack(_read_exactly(fd, HEADER.size))
    if hlen > MAX_HEADER or blen > max_body:
        raise ProtocolError(f"frame of {hlen} + {blen} bytes")
    header = _decode_header(_read_exactly(fd, hlen))
    return header, blen


def read_body(fd: int, blen: int) -> bytes:
    return _read_exactly(fd, blen) if blen else b""


def _decode_header(raw):
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise ProtocolError("a header that is not JSON") from None
    if type(header) is not dict:
        raise ProtocolError("a header that is not a JSON object")
    return header


def read_frame(fd: int, timeout=None, max_body=MAX_BODY):
    """``(header, body)``; raises EOFError, :class:`Timeout` or :class:`ProtocolError`."""
    deadline = None if timeout is None else time.monotonic() + timeout
    hlen, blen = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if hlen > MAX_HEADER or blen > max_body:
        raise ProtocolError(f"frame of {hlen} + {blen} bytes")
    raw = _read_exactly(fd, hlen, deadline)
    body = _read_exactly(fd, blen, deadline) if blen else b""
    return _header(raw), body


def _header(raw: bytes) -> dict:
    try:
        header = parse_json(raw, max_bytes=MAX_HEADER)
    except TooLargeToParse as exc:
        raise ProtocolError(f"a header over the bounds: {exc}") from None
    except ObservationError:
        raise ProtocolError("a header that is not JSON") from None
    if type(header) is not dict:
        raise ProtocolError("a header that is not a JSON object")
    return header


class FrameReader:
    """Incremental reader for a non-blocking fd (used by event loops)."""

    def __init__(self, max_body=MAX_BODY):
        self.buf = bytearray()
        self.max_body = max_body

    def feed(self, data: bytes):
        self.buf += data
        frames = []
        while len(self.buf) >= HEADER.size:
            hlen, blen = HEADER.unpack_from(self.buf)
            if hlen > MAX_HEADER or blen > self.max_body:
                raise ProtocolError(f"frame of {hlen} + {blen} bytes")
            total = HEADER.size + hlen + blen
            if len(self.buf) < total:
                break
            raw = bytes(self.buf[HEADER.size : HEADER.size + hlen])
            body = bytes(self.buf[HEADER.size + hlen : total])
            del self.buf[:total]
            frames.append((_header(raw), body))
        return frames


def flush_stdio():
    """Flush sys.stdout and sys.stderr before a frame is written, so a cell's output stays in order
    with the frames around it; a stream a student replaced or closed is left as it is."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
