"""Length-prefixed JSON messages between the host and a sandbox (both directions)."""
from __future__ import annotations

import json
import os
import struct

HEADER = struct.Struct(">I")
MAX_MESSAGE = 256 * 1024 * 1024


class ProtocolError(RuntimeError):
    pass


def encode(obj) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return HEADER.pack(len(body)) + body


def write_message(fd: int, obj) -> None:
    data = memoryview(encode(obj))
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _read_exactly(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the channel")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int):
    (size,) = HEADER.unpack(_read_exactly(fd, HEADER.size))
    if size > MAX_MESSAGE:
        raise ProtocolError(f"message of {size} bytes")
    return json.loads(_read_exactly(fd, size))
