"""Failure messages a student can act on.

Every failed check in this course raises :class:`CheckFailure` (an ``AssertionError``)
whose message has the same three parts::

    set_index(x, 0, 5.0) returned the wrong values
      expected: tensor([5., 2., 3.])
      found:    tensor([1., 2., 3.])
      likely cause: the value was written into a copy that you did not return

``describe`` turns tensors and other values into short, deterministic text for those
lines (no memory addresses, bounded length).
"""

from __future__ import annotations

import reprlib

__all__ = ["CheckFailure", "NotImplementedYet", "describe", "format_failure", "fail", "is_stub"]

_MAX_CHARS = 300


class CheckFailure(AssertionError):
    """A check failed. ``str(exc)`` is the whole message shown to the student."""

    kind = "check"

    def __init__(self, what, expected=None, found=None, cause=None):
        self.what = what
        self.expected = expected
        self.found = found
        self.cause = cause
        # each part as text once (a value from student code is described once, never again)
        self.texts = {
            "check": f"{what}",
            "expected": None if expected is None else f"{expected}",
            "found": None if found is None else f"{found}",
            "cause": f"{cause}" if cause else None,
        }
        t = self.texts
        super().__init__(format_failure(t["check"], t["expected"], t["found"], t["cause"]))

    def parts(self) -> dict:
        """The message's parts as text (what the grader keeps beside ``grades.csv``): ``kind``,
        ``check`` (the first line), ``expected``, ``found``, ``cause`` (None where not given)."""
        return dict(self.texts, kind=self.kind)


STUB = "not implemented yet"
STUB_HINT = (
    f"{STUB} (it still raises NotImplementedError: write your code where it says "
    "`# YOUR CODE HERE` and delete the `raise NotImplementedError()` line)"
)


def is_stub(exc) -> bool:
    """True for nbgrader's release stub: a plain ``NotImplementedError`` without a message
    (``raise NotImplementedError()`` in the answer cell). PyTorch's own ``NotImplementedError``
    (a ``Function`` without ``backward``, an operator without a kernel) always says what is
    missing, and is not the stub."""
    if type(exc) is not NotImplementedError:
        return False
    try:
        return str(exc).strip() == ""
    except Exception:  # noqa: BLE001
        return False


class NotImplementedYet(CheckFailure):
    """The function a check called is still the release stub: said as such, with no guessed cause
    (a cause about shapes or leaves would be about code that does not exist yet)."""

    kind = "not-implemented"

    def __init__(self, what):
        super().__init__(f"{what}: {STUB_HINT}")
        self.what = what
        self.texts["check"] = f"{what}"


def _shorten(text: str) -> str:
    text = " ".join(text.split()) if "\n" in text and len(text) > _MAX_CHARS else text
    if len(text) > _MAX_CHARS:
        text = text[: _MAX_CHARS - 3] + "..."
    return text


def describe(value) -> str:
    """Short, deterministic text for ``value`` (tensors include dtype when not float32)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency of the course
        torch = None
    if torch is not None and isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor:
            return (
                f"a {type(value).__module__}.{type(value).__qualname__} (a torch.Tensor subclass)"
            )
        with torch._C.DisableTorchFunction():
            t = value.detach()
            if t.numel() > 12:
                body = f"tensor of shape {tuple(t.shape)}"
                flat = t.reshape(-1)[:6].tolist()
                body += f", first values {flat}"
            else:
                body = " ".join(repr(t).split())
            if t.dtype not in (torch.float32, torch.int64, torch.bool) and "dtype=" not in body:
                body += f" (dtype={t.dtype})"
        return _shorten(body)
    if isinstance(value, BaseException):
        return _shorten(f"{type(value).__name__}: {value}")
    if isinstance(value, type):
        return value.__qualname__
    if type(value).__repr__ is object.__repr__:  # default repr carries a memory address
        return f"<{type(value).__qualname__} object>"
    r = reprlib.Repr()
    r.maxstring = _MAX_CHARS
    r.maxother = _MAX_CHARS
    return _shorten(r.repr(value))


def format_failure(what, expected=None, found=None, cause=None) -> str:
    lines = [str(what)]
    if expected is not None:
        lines.append(f"  expected: {expected}")
    if found is not None:
        lines.append(f"  found:    {found}")
    if cause:
        lines.append(f"  likely cause: {cause}")
    return "\n".join(lines)


def fail(what, expected=None, found=None, cause=None):
    """Raise :class:`CheckFailure` with the three-part message."""
    raise CheckFailure(what, expected, found, cause)
