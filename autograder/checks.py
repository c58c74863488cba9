"""Checks used by the exercises' test cells.

Each ``check_*`` function either returns quietly or raises :class:`CheckFailure`
(an ``AssertionError``) whose message says what was expected, what was found and the
likely cause. Test cells read like this::

    from autograder.checks import check_tensor, check_grad, quiet

    with quiet():                       # a warning from student code never costs marks
        y = my_relu(x)
    check_tensor(y, torch.relu(x), what="my_relu(x)", cause="...")

Why ``quiet``: nbgrader scores a test cell 0 as soon as it writes anything to stderr,
so warnings that a *correct* solution may trigger are captured, not printed.

The comparisons are deliberately strict about types: a ``torch.Tensor`` subclass or an
object that only pretends to be a bool fails with a clear message instead of being
trusted to compare itself. Values that came from student code are first reduced to plain
data (:func:`plain`: what the grader's judge would receive, see :mod:`autograder.remote`),
so a ``str`` subclass is compared as the ``str`` it holds and never runs its own ``__eq__``.

Under ``autograder grade`` the test cell runs in the judge, a process that never runs student
code: calling a student's function there sends the call to the student's process and returns
plain data (:func:`observe` returns the whole :class:`Outcome`). What a test may know about a
tensor besides its values - version counter, ``requires_grad``, ``is_leaf``, ``.grad``, the
memory it shares - it reads with :func:`meta`, which works the same on a live tensor and on
one that came back from the student's process.
"""

from __future__ import annotations

import sys

import torch

from . import remote
from .messages import CheckFailure, NotImplementedYet, describe, fail, is_stub
from .remote import Outcome, observe, quiet
from .wire import observation
from .wire.observation import Foreign, TensorMeta

__all__ = [
    "observe",
    "Outcome",
    "plain",
    "meta",
    "check_equal",
    "CheckFailure",
    "fail",
    "describe",
    "quiet",
    "as_bool",
    "check_bool",
    "check_returns",
    "check_call",
    "check_true",
    "check_tensor",
    "check_grad",
    "check_raises",
    "check_same_object",
    "TensorState",
    "check_unchanged",
    "CallRecorder",
    "same_values",
    "shares_storage",
]

# Originals captured when the module is imported (before any student code runs), so a
# test keeps working if a notebook reassigns torch.allclose & co. The grading command
# goes further (see autograder/grading), this is just the first line of defence.
_Tensor = torch.Tensor
_equal = torch.equal
_isclose = torch.isclose
_isnan = torch.isnan
_DisableTorchFunction = torch._C.DisableTorchFunction


# --------------------------------------------------------------------------- helpers


def _type_name(value) -> str:
    """The class name a message shows: for the judge's proxy of a student's object, the object's."""
    if type(value) is remote.Remote:
        return str(value._info.get("type") or "object").rsplit(".", 1)[-1]
    return type(value).__name__


def plain(value):
    """``value`` as the judge sees student values: exact built-in types, plain tensors (with
    :func:`meta`), exceptions, :class:`~autograder.wire.observation.Foreign` for anything else.

    Values that already came from the student's process are returned as they are."""
    if _is_plain_tensor(value) and observation.meta_of(value) is not None:
        return value
    if value is None or type(value) in (bool, int, float, str):
        return value
    enc = observation.Encoder()
    try:
        node = enc.encode(value)
    except observation.ObservationTooLarge as exc:
        return Foreign("object", type(value).__name__, f"a value too large to compare ({exc})")
    return observation.Decoder().decode(observation.loads(observation.dumps(node)))


def meta(tensor) -> TensorMeta:
    """Version counter, requires_grad, is_leaf, grad_fn, grad and memory of ``tensor``: recorded
    when it came back from student code, read from the tensor otherwise."""
    m = observation.meta_of(tensor)
    if m is not None:
        return m
    _require_tensors(tensor)
    with _DisableTorchFunction():
        grad = tensor.grad if (tensor.is_leaf or tensor.retains_grad) else None
        fn = tensor.grad_fn
        try:
            storage = ("live", tensor.untyped_storage().data_ptr())
        except Exception:  # noqa: BLE001
            storage = None
        return TensorMeta(
            tensor.requires_grad,
            tensor.is_leaf,
            None if fn is None else type(fn).__name__,
            tensor._version,
            grad,
            storage,
            tensor.storage_offset(),
            tuple(tensor.stride()),
        )


def _is_plain_tensor(value) -> bool:
    return type(value) is _Tensor


def _require_plain_tensor(value, what, cause=None):
    if _is_plain_tensor(value):
        return
    if isinstance(value, _Tensor) or (
        isinstance(value, Foreign) and value.kind == "tensor subclass"
    ):
        fail(
            f"{what} must be a plain torch.Tensor",
            expected="torch.Tensor",
            found=describe(value),
            cause=cause or "return an ordinary tensor, not a subclass",
        )
    fail(
        f"{what} must be a torch.Tensor",
        expected="torch.Tensor",
        found=f"{_type_name(value)}: {describe(value)}",
        cause=cause
        or "the function returned something other than a tensor (did you forget `return`?)",
    )


def _require_tensors(*values):
    for value in values:
        if not _is_plain_tensor(value):
            fail(
                "expected a plain torch.Tensor",
                expected="torch.Tensor",
                found=f"{_type_name(value)}: {describe(value)}",
                cause="pass ordinary tensors (a subclass or another object cannot be trusted to compare itself)",
            )


def same_values(a, b) -> bool:
    """True when ``a`` and ``b`` have the same shape, dtype and values (NaN equals NaN)."""
    _require_tensors(a, b)
    with _DisableTorchFunction():
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        a = a.detach()
        b = b.detach()
        if a.is_floating_point() or a.is_complex():
            both_nan = _isnan(a) & _isnan(b)
            return bool(((a == b) | both_nan).all())
        return bool(_equal(a, b))


def shares_storage(a, b) -> bool:
    """True when the two tensors use the same memory (same untyped storage).

    Tensors that came back from one call into student code are compared by the storage
    recorded in that call; two live tensors by their memory."""
    _require_tensors(a, b)
    sa, sb = meta(a).storage, meta(b).storage
    if sa is None or sb is None:  # a tensor without memory of its own (e.g. a torch.func wrapper)
        return False
    if (sa[0] == "live") != (sb[0] == "live"):
        raise ValueError(
            "shares_storage: compare two tensors observed in the same call (Outcome.after), "
            "or two tensors of the test"
        )
    return sa is not None and sa == sb


def as_bool(value, what="the result"):
    """Accept ``bool``, ``numpy.bool_`` and a one-element bool ``torch.Tensor``."""
    if type(value) is bool:
        return value
    numpy = sys.modules.get("numpy")
    if numpy is not None and type(value) is numpy.bool_:  # the real numpy.bool_, not a look-alike
        return bool(value)
    if _is_plain_tensor(value) and value.dtype == torch.bool and value.numel() == 1:
        with _DisableTorchFunction():
            return bool(value.item())
    if isinstance(value, Foreign):
        fail(
            f"{what} must be True or False",
            expected="a bool",
            found=value.text,
            cause="return a Python bool (for a tensor, use .item() or bool(...))",
        )
    fail(
        f"{what} must be True or False",
        expected="a bool",
        found=f"{_type_name(value)}: {describe(value)}",
        cause="return a Python bool (for a tensor, use .item() or bool(...))",
    )


def _not_stub(exc, what):
    """A check that turns a student's exception into a failure: the release stub's
    ``NotImplementedError`` is said as "not implemented yet", never with the check's guessed
    cause (:class:`~autograder.messages.NotImplementedYet`)."""
    if is_stub(exc):
        raise NotImplementedYet(what) from None


# --------------------------------------------------------------------------- checks


def check_true(condition, what, *, expected=None, found=None, cause=None):
    """Fail with the three-part message unless ``condition`` is truthy."""
    if not condition:
        fail(what, expected, found, cause)


def check_bool(found, expected: bool, what, *, cause=None):
    """``found`` (converted with :func:`as_bool`) must equal ``expected``."""
    value = as_bool(found, what)
    if value != expected:
        fail(f"{what} returned {value}", expected=expected, found=value, cause=cause)


def check_equal(found, expected, what, *, cause=None):
    """``found`` (reduced to plain data) must equal ``expected`` (a str, int, float, bool,
    None, or a tuple/list/dict of them), with the same type: ``1`` is not ``True``, a
    ``str`` subclass counts as the ``str`` it holds, nothing runs its own ``__eq__``."""
    value = plain(found)
    if not _same_plain(value, expected):
        fail(
            f"{what} returned {describe(value)}",
            expected=describe(expected),
            found=describe(value),
            cause=cause,
        )


def _same_plain(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_plain(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_plain(a[k], b[k]) for k in b)
    if isinstance(b, float) and b != b:
        return a != a
    if b is None or type(b) in (str, int, float, bool):
        return a == b
    raise TypeError(f"check_equal compares plain values, not {type(b).__name__}")


def check_returns(call, expected: bool, what, *, cause=None, pick=None):
    """``call`` must return the bool ``expected``: run ``call()`` quietly, or read an
    :class:`Outcome` that :func:`observe` returned. ``pick`` selects the bool from the result
    (e.g. ``lambda r: r[0]`` when a probe returned a tuple).

    An exception is reported with the same three-part message.
    """
    if isinstance(call, Outcome):
        if call.raised:
            _raised(call.error, what, expected, cause)
        found = call.value
    else:
        try:
            with quiet():
                found = call()
        except Exception as exc:  # noqa: BLE001 - turned into an actionable message
            _raised(exc, what, expected, cause)
    if pick is not None:
        found = pick(found)
    check_bool(found, expected, what, cause=cause)


def check_call(call, what, *, cause=None):
    """Run ``call()`` quietly and return its result.

    An exception from ``call`` (student code, or a ``backward()`` through what it returned)
    becomes the three-part message instead of a bare traceback. A :class:`CheckFailure`
    raised inside ``call`` passes through unchanged.
    """
    try:
        with quiet():
            return call()
    except CheckFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - turned into an actionable message
        _raised(exc, what, "no exception", cause)


def _raised(exc, what, expected, cause):
    """Student code raised where it should have returned: the three-part message (or, for the
    release's bare stub, "not implemented yet")."""
    _not_stub(exc, what)
    fail(f"{what} raised {type(exc).__name__}", expected=expected, found=describe(exc), cause=cause)


def _first_mismatch(found, expected, mismatch):
    index = tuple(int(i) for i in mismatch.nonzero()[0]) if mismatch.dim() else ()
    return index, found[index].item(), expected[index].item()


def check_tensor(found, expected, what, *, cause=None, rtol=1e-5, atol=1e-8, check_dtype=True):
    """``found`` must be a plain tensor equal to ``expected`` (NaN matches NaN)."""
    _require_plain_tensor(found, what, None)
    with _DisableTorchFunction():
        if tuple(found.shape) != tuple(expected.shape):
            fail(
                f"{what} has the wrong shape",
                expected=tuple(expected.shape),
                found=tuple(found.shape),
                cause=cause,
            )
        if check_dtype and found.dtype != expected.dtype:
            fail(
                f"{what} has the wrong dtype",
                expected=expected.dtype,
                found=found.dtype,
                cause=cause,
            )
        f = found.detach()
        e = expected.detach().to(f.dtype)
        if f.is_floating_point() or f.is_complex():
            close = _isclose(f, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            close = f == e
        if bool(close.all()):
            return
        index, fv, ev = _first_mismatch(f, e, ~close)
        where = (
            f" (first difference at index {list(index)}: {fv!r} instead of {ev!r})" if index else ""
        )
        fail(
            f"{what} has the wrong values{where}",
            expected=describe(e),
            found=describe(f),
            cause=cause,
        )


def check_grad(found, expected, what, *, inputs=None, name="x", cause=None, rtol=1e-5, atol=1e-8):
    """Compare a gradient; the message names the first wrong position and the input there.

    ``inputs`` (optional) is the tensor the gradient is taken with respect to, so the
    message can say e.g. ``at x[2] == 0.0 your gradient is 1.0; expected 0.0``.
    """
    if found is None:
        fail(
            f"{what}: no gradient was computed",
            expected=describe(expected),
            found="None",
            cause=cause or "the result is not connected to the input in the autograd graph",
        )
    _require_plain_tensor(found, what)
    with _DisableTorchFunction():
        if tuple(found.shape) != tuple(expected.shape):
            fail(
                f"{what} has the wrong shape",
                expected=tuple(expected.shape),
                found=tuple(found.shape),
                cause=cause,
            )
        f = found.detach()
        e = expected.detach().to(f.dtype)
        close = _isclose(f, e, rtol=rtol, atol=atol, equal_nan=True)
        if bool(close.all()):
            return
        index, fv, ev = _first_mismatch(f, e, ~close)
        at = f"{name}[{', '.join(map(str, index))}]" if index else name
        if inputs is not None:
            at += f" == {inputs.detach()[index].item()!r}"
        fail(
            f"{what}: at {at} your gradient is {fv!r}; expected {ev!r}",
            expected=describe(e),
            found=describe(f),
            cause=cause,
        )


def check_raises(call, exception_types, what, *, match=None, cause=None):
    """``call()`` must raise one of ``exception_types`` (whose message contains ``match``).

    Returns the exception. Warnings and stderr output of ``call`` are captured.
    """
    if not isinstance(exception_types, tuple):
        exception_types = (exception_types,)
    names = " or ".join(t.__name__ for t in exception_types)
    try:
        with quiet():
            call()
    except exception_types as exc:
        if match is not None and match not in str(exc):
            fail(
                f"{what} raised {type(exc).__name__} with an unexpected message",
                expected=f"a message containing {match!r}",
                found=describe(str(exc)),
                cause=cause,
            )
        return exc
    except Exception as exc:  # noqa: BLE001 - reported to the student, not swallowed silently
        _not_stub(exc, what)
        fail(f"{what} raised the wrong exception", expected=names, found=describe(exc), cause=cause)
    fail(f"{what} did not raise", expected=names, found="no exception", cause=cause)


def check_same_object(call, exception, what, *, cause=None):
    """``call()`` must let ``exception`` (an exception instance) propagate unchanged."""
    try:
        with quiet():
            call()
    except BaseException as exc:  # noqa: BLE001 - identity is what is being checked
        if exc is exception:
            return
        _not_stub(exc, what)
        fail(
            f"{what} did not let the original exception through",
            expected=f"the very same {type(exception).__name__} object: {describe(exception)}",
            found=describe(exc),
            cause=cause
            or "catch only the exceptions you mean to handle, and re-raise with a bare `raise`",
        )
    fail(
        f"{what} swallowed an exception",
        expected=f"{type(exception).__name__} to propagate",
        found="no exception",
        cause=cause or "an exception you do not handle must propagate",
    )


def _grad_of(tensor):
    """``tensor.grad`` without the warning PyTorch prints for non-leaf tensors."""
    if tensor.is_leaf or tensor.retains_grad:
        return tensor.grad
    return None


class TensorState:
    """What a function must not change about a tensor: values, version, requires_grad, grad."""

    def __init__(self, tensor):
        _require_tensors(tensor)
        m = meta(tensor)
        with _DisableTorchFunction():
            self.values = tensor.detach().clone()
            self.version = m.version
            self.requires_grad = m.requires_grad
            self.grad = None if m.grad is None else plain(m.grad).detach().clone()


def check_unchanged(tensor, state: TensorState, what, *, cause=None, role="its input"):
    """``tensor`` must still match the :class:`TensorState` taken before the call.

    ``tensor`` is the argument after the call: under the grader, ``outcome.after(x)``.
    ``role`` names the tensor in the message ("its input", "grad_output", "a saved tensor").
    """
    if not _is_plain_tensor(tensor):
        fail(
            f"{what} turned {role} into something else",
            expected="a plain torch.Tensor",
            found=describe(tensor),
            cause=cause or "do not change the class of the argument (x.__class__ = ...)",
        )
    m = meta(tensor)
    with _DisableTorchFunction():
        if not same_values(tensor.detach(), state.values):
            fail(
                f"{what} changed the values of {role}",
                expected=describe(state.values),
                found=describe(tensor.detach()),
                cause=cause or "work on a copy (x.detach().clone()), never on the argument itself",
            )
        if m.version != state.version:
            fail(
                f"{what} wrote into {role} (its _version moved from {state.version} to {m.version})",
                expected=f"_version {state.version}",
                found=f"_version {m.version}",
                cause=cause or "an in-place operation was applied to the argument itself",
            )
        if m.requires_grad != state.requires_grad:
            fail(
                f"{what} changed requires_grad of {role}",
                expected=state.requires_grad,
                found=m.requires_grad,
                cause=cause or "call requires_grad_() on a copy, not on the argument",
            )
        now = m.grad
        if (state.grad is None) != (now is None) or (
            now is not None and not same_values(now.detach(), state.grad)
        ):
            fail(
                f"{what} changed the .grad of {role}",
                expected=describe(state.grad),
                found=describe(now),
                cause=cause
                or "call backward on a fresh copy that requires grad, not on the argument",
            )


class CallRecorder:
    """Wrap a callable to count its calls and keep the arguments it received.

    ``calls``: ``(args, kwargs)`` of each call, the objects themselves; ``snapshots``: the
    same arguments with every tensor copied at the moment of the call (what the callable
    was given, before it changed anything)."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = []
        self.snapshots = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        self.snapshots.append(tuple(_snapshot(a) for a in args))
        return self.fn(*args, **kwargs)

    @property
    def count(self):
        return len(self.calls)

    def first_arg(self, call=0):
        return self.calls[call][0][0]

    def first_snapshot(self, call=0):
        """The first argument of call ``call`` as it was when the call began."""
        return self.snapshots[call][0]


def _snapshot(value):
    if isinstance(value, _Tensor):
        with _DisableTorchFunction():
            return value.detach().clone()
    return value


# the wire carries these two by kind ({"$": "state"}, {"$": "recorder"}: autograder.wire.observation),
# and imports nothing of the checks: they are registered with it here
observation.register("state", TensorState)
observation.register("recorder", CallRecorder)
