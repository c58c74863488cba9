"""Observations: what crosses from the process that runs student code to the judge.

A call into student code produces an *outcome*: the value it returned or the exception it
raised, and the state afterwards of the objects it was given (tensors, modules, call
recorders). Where student code runs, :func:`encode` turns those objects into plain JSON-able
data; the judge, which never runs student code, turns the data back into values with
:func:`decode` - exact built-in types, plain tensors built from raw bytes, and marker objects -
after checking every field. Nothing a student can send is executed or trusted to compare
itself: a ``str`` subclass arrives as a plain ``str``, a tensor subclass as a :class:`Foreign`
that every check rejects, an unknown object as a :class:`Foreign` description.

Format (one JSON document; ``NaN``/``Infinity`` allowed)::

    null / true / 1 / 1.5 / "text"        exact built-in values (subclasses are reduced to them)
    [ ... ]                               a list
    {"$": "tuple" | "set" | "frozenset", "items": [...]}
    {"$": "dict", "items": [[key, value], ...]}
    {"$": "tensor", "dtype", "shape", "stride", "offset", "data" (base64 of the storage bytes
        the tensor spans), "requires_grad", "is_leaf", "grad_fn", "version", "grad",
        "storage" (an id shared by tensors with the same memory), "subclass"}
    {"$": "numpy", "dtype", "shape", "data", "scalar"}
    {"$": "exception", "type", "module", "message", "bases", "builtin"}   ("builtin": the class
        is the built-in of that name, by identity; "bases": the built-ins it derives from)
    {"$": "ref", "i": n}                  the very object the judge passed as tracked object n
    {"$": "recorder", "calls": [[args-tuple, kwargs-dict], ...], "snapshots": [...]}
    {"$": "state", "values", "version", "requires_grad", "grad"}   an autograder.checks.TensorState
                                          (recorder and state: classes registered with register())
    {"$": "module", "type", "training", "parameters": {...}, "buffers": {...}, "handle"}
    {"$": "object", "type", "repr", "handle", "classes"}   anything else: under the grader a handle
        (:class:`autograder.remote.Remote`) to the object, which stays where it lives; ``classes``:
        the names of the built-in classes it derives from (``isinstance(obj, list)`` in the judge)
    {"$": "bytes", "data"}
    {"$": "complex", "re", "im"}

Plain data travels by value: None, bool, int, float, complex, str, bytes, lists, tuples, sets,
dicts of them, numpy arrays and scalars (numeric, bool, str/bytes dtypes: exact dtype and
shape), tensors. pandas objects are not encoded by value (pandas is not a dependency of this
project and no test of it could run here): they stay handles, which index, iterate, compare
and convert (``__array__``) as in one kernel.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import sys
import weakref
from dataclasses import dataclass

from .bounded_json import (
    MAX_DOCUMENT,
    MAX_JSON_DEPTH,
    MAX_NODES,
    ObservationError,
    TooLargeToParse,
    check_bounds,
    parse_json,
    safe_text,
)

__all__ = [
    # the codec's parser and bounds (bounded_json), named here too
    "MAX_DOCUMENT",
    "MAX_JSON_DEPTH",
    "MAX_NODES",
    "ObservationError",
    "TooLargeToParse",
    "check_bounds",
    "parse_json",
    "safe_text",
    # the codec
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_STR",
    "MAX_TENSOR_BYTES",
    "REPR_CHARS",
    "DTYPES",
    "ObservationTooLarge",
    "NotPlain",
    "Foreign",
    "TensorMeta",
    "meta_of",
    "KINDS",
    "register",
    "registered",
    "Encoder",
    "NUMPY_KINDS",
    "BUILTIN_CLASSES",
    "builtin_classes",
    "dumps",
    "Decoder",
    "ObservedModule",
    "mirror_exception",
    "loads",
]

MAX_DEPTH = 24  # deeper structures are cut off (an honest value is never that deep)
MAX_ITEMS = 100_000  # elements of one container
MAX_STR = 200_000  # characters of one string
# containers inside a changed argument that a call reports as kept, each by a path of at most
# MAX_DEPTH list indices and dict keys (autograder.remote.server walks no further)
MAX_KEPT = 20_000
MAX_TENSOR_BYTES = 64 << 20  # one tensor's data
REPR_CHARS = 300

DTYPES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "complex64",
    "complex128",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
)


class ObservationTooLarge(ValueError):
    """A genuine value too large to send back (the limits above)."""


class NotPlain(ValueError):
    """An object that is not plain data (an :class:`Encoder` made with ``plain_only``)."""


@dataclass(frozen=True)
class Foreign:
    """Something student code returned that is not plain data (a tensor subclass, an object).

    ``kind``: "tensor subclass", "object", "cut" (too deep), ...; ``type``: its class name;
    ``text``: a short description for messages. ``handle``: the object can still be called
    where it lives (see :mod:`autograder.remote`)."""

    kind: str
    type: str
    text: str
    handle: object = None

    def __repr__(self):
        return self.text

    def __bool__(self):
        raise TypeError(
            f"{self.text} is not a bool: the judge does not let objects decide their truth"
        )


@dataclass
class TensorMeta:
    """What a test may know about a tensor besides its values (see ``autograder.checks.meta``)."""

    requires_grad: bool
    is_leaf: bool
    grad_fn: str | None
    version: int
    grad: object  # a tensor or None
    storage: (
        tuple | None
    )  # two tensors with equal storage share memory (only within one observation)
    offset: int
    stride: tuple


_META: dict = {}  # id(tensor) -> (weak reference, TensorMeta), for tensors this module decoded
_SERIALS = itertools.count(
    1
)  # one per decoded observation: storage ids are only comparable within one


def meta_of(tensor):
    """The :class:`TensorMeta` recorded when ``tensor`` was decoded, or None."""
    entry = _META.get(id(tensor))
    if entry is None or entry[0]() is not tensor:
        return None
    return entry[1]


def _set_meta(tensor, m):
    key = id(tensor)
    _META[key] = (weakref.ref(tensor, lambda _r, key=key: _META.pop(key, None)), m)


# --------------------------------------------------------------------------- registered types


# The two types beyond plain data that the format carries by kind - {"$": "state"} and
# {"$": "recorder"} - belong to the check library (``autograder.checks.TensorState`` and
# ``CallRecorder``), which registers them here when it is imported: the wire imports nothing
# above it. The format of both is defined here; a process where nothing registered a kind
# neither encodes it nor builds it (a node of that kind decodes to a :class:`Foreign`).
KINDS = ("state", "recorder")
_REGISTERED: dict = {}


def register(kind: str, cls: type) -> type:
    """Carry objects of ``cls`` as ``{"$": kind, ...}`` (``kind``: one of :data:`KINDS`).

    ``state``: a class with ``values`` (a tensor), ``version``, ``requires_grad`` and ``grad``;
    ``recorder``: a class built as ``cls(None)`` with lists ``calls`` of ``(args, kwargs)`` and
    ``snapshots`` of argument tuples, and an attribute ``fn`` (what it wraps, followed when the
    arguments of a call are walked)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: the wire carries {', '.join(KINDS)}")
    _REGISTERED[kind] = cls
    return cls


def registered(kind: str):
    """The class registered for ``kind``, or None."""
    return _REGISTERED.get(kind)


# --------------------------------------------------------------------------- encode (student side)


def _torch():
    return sys.modules.get("torch")


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


class Encoder:
    """Encode values where student code runs. ``tracked``: objects the judge sent (by position)."""

    def __init__(
        self,
        tracked=(),
        keep=None,
        arrival=None,
        plain_only=False,
        max_nodes=None,
        max_bytes=None,
        max_tensor_elements=None,
    ):
        self.tracked = {id(o): i for i, o in enumerate(tracked)}
        self._alive = list(tracked)
        # version counters of the tracked tensors when the call began: an argument's version is
        # reported as a change, because the copy that arrived here started at its own version
        self.arrival = (
            arrival
            if arrival is not None
            else {
                id(o): o._version
                for o in tracked
                if _torch() is not None and isinstance(o, _torch().Tensor)
            }
        )
        self.storages: dict = {}
        self.keep = keep  # callable(obj) -> handle id, for objects that stay where they live
        self.size = 0
        # a budget (the names report): values, bytes of data; plain_only: NotPlain at any object
        self.plain_only = plain_only
        self.max_nodes, self.max_bytes = max_nodes, max_bytes
        self.max_tensor_elements = max_tensor_elements
        self.nodes = 0
        self.spent = 0

    def _spend(self, n):
        self.spent += n
        if self.max_bytes is not None and self.spent > self.max_bytes:
            raise ObservationTooLarge(f"over the budget of {self.max_bytes} bytes")

    def _storage_id(self, t):
        try:
            key = t.untyped_storage().data_ptr()
        except Exception:  # noqa: BLE001 - e.g. a tensor without storage
            return None
        return self.storages.setdefault(key, len(self.storages))

    def encode(self, value, depth=0, top_tracked=False):
        self.nodes += 1
        if self.max_nodes is not None and self.nodes > self.max_nodes:
            raise ObservationTooLarge(f"over the budget of {self.max_nodes} values")
        if depth > MAX_DEPTH:
            if self.plain_only:
                raise NotPlain("nested too deeply")
            return {
                "$": "object",
                "type": type(value).__name__,
                "repr": "(nested too deeply)",
                "handle": None,
                "cut": True,
            }
        if not top_tracked and id(value) in self.tracked:
            return {"$": "ref", "i": self.tracked[id(value)]}
        t = type(value)
        if value is None or t is bool:
            return value
        if t is int:
            return value if abs(value) < (1 << 63) else {"$": "bigint", "v": str(value)}
        if t is float:
            return value
        if t is str:
            if len(value) > MAX_STR:
                raise ObservationTooLarge(f"a string of {len(value)} characters")
            self._spend(len(value))
            return value
        if t is complex:
            return {"$": "complex", "re": value.real, "im": value.imag}
        torch = _torch()
        if torch is not None and isinstance(value, torch.Tensor):
            return self._tensor(value, depth)
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(value, (numpy.ndarray, numpy.generic)):
            return self._numpy(value, numpy)
        if isinstance(value, BaseException):
            return _exception(value)
        if isinstance(value, bool):  # pragma: no cover - bool cannot be subclassed
            return bool(value)
        if isinstance(value, int):
            return self.encode(int(value), depth)
        if isinstance(value, float):
            return float(value)
        if isinstance(value, str):
            return self.encode(str.__str__(value), depth)
        if isinstance(value, complex):
            return self.encode(complex(value), depth)
        if isinstance(value, (bytes, bytearray)):
            if len(value) > MAX_STR:
                raise ObservationTooLarge(f"{len(value)} bytes")
            self._spend(len(value) * 4 // 3)
            return {"$": "bytes", "data": base64.b64encode(bytes(value)).decode()}
        if isinstance(value, list):
            return [self.encode(v, depth + 1) for v in self._items(value)]
        if isinstance(value, (tuple, set, frozenset)):
            kind = (
                "tuple"
                if isinstance(value, tuple)
                else t.__name__
                if t in (set, frozenset)
                else "set"
            )
            items = self._items(value)
            if kind != "tuple":
                items = sorted(items, key=_sort_key)
            return {"$": kind, "items": [self.encode(v, depth + 1) for v in items]}
        if isinstance(value, dict):
            return {
                "$": "dict",
                "items": [
                    [self.encode(k, depth + 1), self.encode(v, depth + 1)]
                    for k, v in self._items(list(value.items()))
                ],
            }
        if self.plain_only:
            raise NotPlain(type(value).__name__)
        TensorState, CallRecorder = _REGISTERED.get("state", ()), _REGISTERED.get("recorder", ())
        if isinstance(value, TensorState):
            return {
                "$": "state",
                "values": self._tensor(value.values, depth + 1),
                "version": int(value.version),
                "requires_grad": bool(value.requires_grad),
                "grad": None if value.grad is None else self._tensor(value.grad, depth + 1),
            }
        if isinstance(value, CallRecorder):
            return {
                "$": "recorder",
                "calls": [
                    [self.encode(tuple(a), depth + 2), self.encode(dict(k), depth + 2)]
                    for a, k in self._items(value.calls)
                ],
                "snapshots": [
                    self.encode(tuple(s), depth + 2) for s in self._items(value.snapshots)
                ],
            }
        if torch is not None and isinstance(value, torch.nn.Module):
            return {
                "$": "module",
                "type": _qualname(type(value)),
                "training": bool(value.training),
                "parameters": {n: self._tensor(p, depth + 1) for n, p in value.named_parameters()},
                "buffers": {n: self._tensor(b, depth + 1) for n, b in value.named_buffers()},
                "handle": self.keep(value) if self.keep else None,
            }
        return {
            "$": "object",
            "type": _qualname(type(value)),
            "repr": _safe_repr(value),
            "handle": self.keep(value) if self.keep else None,
            "classes": builtin_classes(type(value)),
        }

    def _items(self, container):
        items = list(container)
        if len(items) > MAX_ITEMS:
            raise ObservationTooLarge(f"a container of {len(items)} items")
        return items

    def _tensor(self, t, depth):
        torch = _torch()
        subclass = None if type(t) in (torch.Tensor, torch.nn.Parameter) else _qualname(type(t))
        if self.plain_only and (
            subclass
            or (self.max_tensor_elements is not None and t.numel() > self.max_tensor_elements)
        ):
            raise NotPlain("a tensor subclass or a large tensor")
        with torch._C.DisableTorchFunction():
            plain = t.as_subclass(torch.Tensor) if subclass else t
            if plain.layout != torch.strided or plain.is_quantized:
                return {
                    "$": "object",
                    "type": f"torch.Tensor ({plain.layout})",
                    "repr": _safe_repr(t),
                    "handle": None,
                }
            data = plain.detach()
            if data.device.type != "cpu":
                data = data.cpu()
            if _dtype_name(data.dtype) not in DTYPES:
                data = data.to(torch.float64)
            contiguous = data.contiguous()
            raw = (
                contiguous.numpy().tobytes()
                if contiguous.dtype not in (torch.bfloat16,)
                else contiguous.view(torch.int16).numpy().tobytes()
            )
            if len(raw) > MAX_TENSOR_BYTES:
                raise ObservationTooLarge(f"a tensor of {len(raw)} bytes")
            self.size += len(raw)
            self._spend(len(raw) * 4 // 3)
            grad = None
            if plain.is_leaf or plain.retains_grad:
                g = plain.grad
                grad = None if g is None else self._tensor(g, depth + 1)
            fn = plain.grad_fn
            extra = {}
            if id(t) in self.arrival and id(t) in self.tracked:
                extra["version_of"] = self.tracked[id(t)]
                extra["version_delta"] = int(plain._version) - int(self.arrival[id(t)])
            return {
                **extra,
                "$": "tensor",
                "dtype": _dtype_name(contiguous.dtype),
                "shape": list(contiguous.shape),
                "data": base64.b64encode(raw).decode(),
                "requires_grad": bool(plain.requires_grad),
                "is_leaf": bool(plain.is_leaf),
                "grad_fn": None if fn is None else type(fn).__name__,
                "version": int(plain._version),
                "grad": grad,
                "storage": self._storage_id(plain),
                "offset": int(plain.storage_offset()),
                "stride": list(plain.stride()),
                "subclass": subclass,
            }

    def _numpy(self, value, numpy):
        arr = numpy.asarray(value)
        if (
            arr.dtype.kind not in NUMPY_KINDS
            or arr.dtype.fields is not None
            or arr.dtype.subdtype is not None
            or type(value) not in (numpy.ndarray,)
            and not isinstance(value, numpy.generic)
        ):
            if self.plain_only:
                raise NotPlain(f"numpy {arr.dtype}")
            return {
                "$": "object",
                "type": _qualname(type(value)),
                "repr": _safe_repr(value),
                "handle": self.keep(value) if self.keep else None,
                "classes": builtin_classes(type(value)),
            }
        if arr.nbytes > MAX_TENSOR_BYTES:
            raise ObservationTooLarge(f"an array of {arr.nbytes} bytes")
        self._spend(arr.nbytes * 4 // 3)
        raw = numpy.ascontiguousarray(arr).tobytes()
        return {
            "$": "numpy",
            "dtype": arr.dtype.str,
            "shape": list(arr.shape),
            "data": base64.b64encode(raw).decode(),
            "scalar": isinstance(value, numpy.generic),
        }


NUMPY_KINDS = "biufcUS"  # numbers, bools, fixed-width str and bytes (object arrays stay handles)

# built-in classes a handle's ``__class__`` may name in the judge (never looked up by any other name)
BUILTIN_CLASSES = (
    "bool",
    "int",
    "float",
    "complex",
    "str",
    "bytes",
    "bytearray",
    "list",
    "tuple",
    "dict",
    "set",
    "frozenset",
    "range",
    "slice",
    "memoryview",
    "BaseException",
    "generator",
    "coroutine",
    "function",
    "builtin_function_or_method",
    "method",
    "type",
)


def builtin_classes(cls) -> list:
    """The names (of :data:`BUILTIN_CLASSES`) of the built-in classes ``cls`` derives from."""
    try:
        mro = type.__getattribute__(cls, "__mro__")
    except Exception:  # noqa: BLE001
        return []
    out = []
    for c in mro:
        try:
            if type.__getattribute__(c, "__module__") == "builtins":
                name = type.__getattribute__(c, "__name__")
                if name in BUILTIN_CLASSES:
                    out.append(name)
        except Exception:  # noqa: BLE001
            continue
    return out[:8]


def _exception(exc):
    try:
        message = BaseException.__str__(exc)
    except Exception:  # noqa: BLE001
        message = ""
    t = type(exc)
    return {
        "$": "exception",
        "type": t.__qualname__ if isinstance(t.__qualname__, str) else "Exception",
        "module": t.__module__ if isinstance(t.__module__, str) else "",
        "message": message[:MAX_STR],
        # the built-in classes it derives from, by identity: a class that only says it is
        # builtins.ValueError (its __module__ and name set so) is not one, in one kernel or here
        "bases": [c.__name__ for c in t.__mro__ if _is_builtin(c)][:8],
        "builtin": _is_builtin(t),
    }


def _is_builtin(cls) -> bool:
    import builtins

    try:
        name = getattr(cls, "__name__", None)
        return isinstance(name, str) and getattr(builtins, name, None) is cls
    except Exception:  # noqa: BLE001 - a class whose name cannot be read is not a built-in
        return False


def _qualname(t) -> str:
    module = getattr(t, "__module__", "") or ""
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", "object")
    return f"{module}.{name}" if module not in ("builtins", "__main__") else str(name)


def _safe_repr(value) -> str:
    try:
        text = repr(value)
        if type(text) is not str:
            raise TypeError
    except Exception:  # noqa: BLE001 - a broken __repr__ is the student's business
        text = f"<{_qualname(type(value))} object>"
    return text[:REPR_CHARS]


def _sort_key(v):
    return (type(v).__name__, repr(v))


def dumps(document) -> bytes:
    """Encode an observation; the honest side checks the very bounds the host will check."""
    data = json.dumps(document, separators=(",", ":"), allow_nan=True).encode()
    try:
        check_bounds(data)
    except TooLargeToParse as exc:
        raise ObservationTooLarge(str(exc)) from None
    return data


# --------------------------------------------------------------------------- decode (judge side)


class Decoder:
    """Decode an observation in the judge. ``tracked``: the judge's own objects by position;
    ``handle``: maps a handle id to a callable proxy (or None where calls are impossible)."""

    def __init__(self, tracked=(), handle=None):
        self.tracked = list(tracked)
        self.handle = handle
        self.serial = next(_SERIALS)

    def after(self, i, node):
        """Decode the after-state of tracked object ``i``."""
        return self.decode(node)

    def decode(self, node, depth=0):
        if depth > MAX_DEPTH + 8:
            raise ObservationError("nested too deeply")
        if node is None or type(node) in (bool, str):
            return node
        if type(node) is int:
            return node
        if type(node) is float:
            return node
        if type(node) is list:
            return [self.decode(v, depth + 1) for v in node]
        if type(node) is not dict:
            raise ObservationError(f"unexpected {type(node).__name__}")
        kind = node.get("$")
        if kind == "tuple":
            return tuple(self.decode(v, depth + 1) for v in _list(node, "items"))
        if kind in ("set", "frozenset"):
            items = [self.decode(v, depth + 1) for v in _list(node, "items")]
            try:
                return set(items) if kind == "set" else frozenset(items)
            except TypeError:
                raise ObservationError("unhashable set item") from None
        if kind == "dict":
            out = {}
            for pair in _list(node, "items"):
                if type(pair) is not list or len(pair) != 2:
                    raise ObservationError("bad dict item")
                key = self.decode(pair[0], depth + 1)
                try:
                    out[key] = self.decode(pair[1], depth + 1)
                except TypeError:
                    raise ObservationError("unhashable dict key") from None
            return out
        if kind == "bigint":
            text = _str(node, "v")
            if len(text) > 5000 or not text.lstrip("-").isdigit():
                raise ObservationError("bad integer")
            return int(text)
        if kind == "bytes":
            return _b64(node, "data")
        if kind == "complex":
            re_, im = node.get("re"), node.get("im")
            if type(re_) not in (int, float) or type(im) not in (int, float):
                raise ObservationError("bad complex")
            return complex(re_, im)
        if kind == "ref":
            i = _int(node, "i")
            if not 0 <= i < len(self.tracked):
                raise ObservationError("reference to an object that was never sent")
            return self.tracked[i]
        if kind == "tensor":
            return self._tensor(node, depth)
        if kind == "numpy":
            return self._numpy(node)
        if kind == "exception":
            return mirror_exception(node)
        if (
            kind in ("recorder", "state") and kind not in _REGISTERED
        ):  # (no test here could have sent one)
            return Foreign("object", kind, f"a {kind} object")
        if kind == "recorder":
            rec = _REGISTERED["recorder"](None)
            for call in _list(node, "calls"):
                if type(call) is not list or len(call) != 2:
                    raise ObservationError("bad recorded call")
                args, kwargs = self.decode(call[0], depth + 1), self.decode(call[1], depth + 1)
                if type(args) is not tuple or type(kwargs) is not dict:
                    raise ObservationError("bad recorded call")
                rec.calls.append((args, kwargs))
            for snap in _list(node, "snapshots"):
                snap = self.decode(snap, depth + 1)
                if type(snap) is not tuple:
                    raise ObservationError("bad recorded call")
                rec.snapshots.append(snap)
            if len(rec.snapshots) != len(rec.calls):
                raise ObservationError("bad recorded call")
            return rec
        if kind == "state":
            state = _REGISTERED["state"].__new__(_REGISTERED["state"])
            state.values = self._tensor(node.get("values"), depth + 1)
            grad = node.get("grad")
            state.grad = None if grad is None else self._tensor(grad, depth + 1)
            state.version = _int(node, "version")
            state.requires_grad = _bool(node, "requires_grad")
            if isinstance(state.values, Foreign) or isinstance(state.grad, Foreign):
                raise ObservationError("bad tensor state")
            return state
        if kind == "module":
            params = {}
            for group in ("parameters", "buffers"):
                d = node.get(group)
                if type(d) is not dict:
                    raise ObservationError("bad module")
                params[group] = {}
                for name, t in d.items():
                    value = self._tensor(t, depth + 1)
                    if isinstance(value, Foreign):
                        raise ObservationError("a module parameter that is not a tensor")
                    params[group][name] = value
            return ObservedModule(
                _str(node, "type")[:200],
                bool(node.get("training")),
                params["parameters"],
                params["buffers"],
                self._handle(node),
            )
        if kind == "object":
            type_name = _str(node, "type")[:200]
            text = _str(node, "repr")[:REPR_CHARS]
            handle = self._handle(node)
            if handle is not None and not node.get(
                "cut"
            ):  # under the grader: the object itself, by proxy
                return handle
            return Foreign(
                "object", type_name, f"a {type_name}: {text}" if text else f"a {type_name}", handle
            )
        raise ObservationError(f"unknown node {kind!r}")

    def _handle(self, node):
        h = node.get("handle")
        if h is None or self.handle is None:
            return None
        if type(h) is not int or h < 0:
            raise ObservationError("bad handle")
        classes = node.get("classes", [])
        if (
            type(classes) is not list
            or len(classes) > 8
            or any(type(c) is not str for c in classes)
        ):
            raise ObservationError("bad classes")
        info = {
            "type": _str(node, "type")[:200],
            "classes": [c for c in classes if c in BUILTIN_CLASSES],
        }
        return self.handle(h, info)

    def _tensor(self, node, depth):
        import torch

        if type(node) is not dict or node.get("$") != "tensor":
            raise ObservationError("expected a tensor")
        dtype_name = _str(node, "dtype")
        if dtype_name not in DTYPES:
            raise ObservationError(f"dtype {dtype_name!r}")
        dtype = getattr(torch, dtype_name)
        shape = _list(node, "shape")
        if len(shape) > 32 or any(type(s) is not int or s < 0 for s in shape):
            raise ObservationError("bad shape")
        numel = math.prod(shape)
        raw = _b64(node, "data")
        itemsize = torch.empty((), dtype=dtype).element_size()
        if len(raw) != numel * itemsize or len(raw) > MAX_TENSOR_BYTES:
            raise ObservationError("tensor data does not match its shape")
        if dtype == torch.bfloat16:
            flat = (
                torch.frombuffer(bytearray(raw), dtype=torch.int16).view(torch.bfloat16)
                if raw
                else torch.empty(0, dtype=dtype)
            )
        else:
            flat = (
                torch.frombuffer(bytearray(raw), dtype=dtype)
                if raw
                else torch.empty(0, dtype=dtype)
            )
        value = flat.reshape(shape).clone()
        requires_grad = _bool(node, "requires_grad")
        is_leaf = _bool(node, "is_leaf")
        grad_fn = node.get("grad_fn")
        if grad_fn is not None and type(grad_fn) is not str:
            raise ObservationError("bad grad_fn")
        version = _int(node, "version")
        storage = node.get("storage")
        if storage is not None and type(storage) is not int:
            raise ObservationError("bad storage")
        offset = _int(node, "offset")
        stride = _list(node, "stride")
        if any(type(s) is not int for s in stride):
            raise ObservationError("bad stride")
        grad = None
        if node.get("grad") is not None:
            grad = self._tensor(node["grad"], depth + 1)
        subclass = node.get("subclass")
        if subclass is not None:
            if type(subclass) is not str:
                raise ObservationError("bad subclass")
            return Foreign(
                "tensor subclass", subclass[:200], f"a {subclass[:200]} (a torch.Tensor subclass)"
            )
        if requires_grad and (value.is_floating_point() or value.is_complex()):
            value.requires_grad_(True)
            if (
                grad is not None
                and is_leaf
                and not isinstance(grad, Foreign)
                and grad.shape == value.shape
            ):
                value.grad = grad.detach().to(value.dtype)
        if "version_of" in node:  # an argument of the call: its version moved by this much here
            i, delta = node.get("version_of"), node.get("version_delta")
            if (
                type(i) is not int
                or type(delta) is not int
                or not 0 <= i < len(self.tracked)
                or not isinstance(self.tracked[i], torch.Tensor)
            ):
                raise ObservationError(
                    "a version change for an object that is not a tensor argument"
                )
            version = self.tracked[i]._version + delta
        _set_meta(
            value,
            TensorMeta(
                requires_grad,
                is_leaf,
                grad_fn,
                version,
                grad,
                None if storage is None else (self.serial, storage),
                offset,
                tuple(stride),
            ),
        )
        return value

    def _numpy(self, node):
        import numpy

        try:
            dtype = numpy.dtype(_str(node, "dtype")[:40])
        except Exception:  # noqa: BLE001 - whatever numpy makes of a string it cannot read
            raise ObservationError("bad numpy dtype") from None
        if dtype.kind not in NUMPY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
            raise ObservationError("bad numpy dtype")
        shape = _list(node, "shape")
        if len(shape) > 32 or any(type(s) is not int or s < 0 for s in shape):
            raise ObservationError("bad shape")
        raw = _b64(node, "data")
        if len(raw) != math.prod(shape) * dtype.itemsize:
            raise ObservationError("array data does not match its shape")
        if dtype.itemsize == 0:
            raise ObservationError("bad numpy dtype")
        arr = numpy.frombuffer(raw, dtype=dtype).reshape(shape).copy()
        if node.get("scalar") is True:
            if arr.size != 1:
                raise ObservationError("bad numpy scalar")
            return arr.reshape(())[()]
        return arr


@dataclass
class ObservedModule:
    """An ``nn.Module`` as observed: its class name, mode, parameters and buffers (plain tensors)."""

    type: str
    training: bool
    parameters: dict
    buffers: dict
    handle: object = None

    def named_parameters(self):
        return list(self.parameters.items())


def _list(node, key):
    v = node.get(key)
    if type(v) is not list:
        raise ObservationError(f"{key} must be a list")
    if len(v) > MAX_ITEMS:
        raise ObservationError("too many items")
    return v


def _str(node, key):
    v = node.get(key)
    if type(v) is not str:
        raise ObservationError(f"{key} must be a string")
    return v


def _int(node, key):
    v = node.get(key)
    if type(v) is not int:
        raise ObservationError(f"{key} must be an integer")
    return v


def _bool(node, key):
    v = node.get(key)
    if type(v) is not bool:
        raise ObservationError(f"{key} must be true or false")
    return v


def _b64(node, key):
    try:
        return base64.b64decode(_str(node, key), validate=True)
    except (ValueError, TypeError):
        raise ObservationError(f"{key} is not base64") from None


_MIRRORS: dict = {}


def mirror_exception(node) -> BaseException:
    """The judge's stand-in for an exception raised (or returned) by student code.

    A built-in exception type is re-created as itself (``RuntimeError("...")``), so a test's
    ``except RuntimeError`` works; any other type becomes a class of the same name derived
    from the nearest built-in base the student's type had. Only the message is kept. "Built-in"
    is the encoder's identity check (``"builtin"``), not the name: a class whose ``__module__``
    says builtins is mirrored like any other, as one kernel's ``except`` treats it."""
    import builtins

    name = _str(node, "type")[:200]
    module = _str(node, "module")[:200]
    message = _str(node, "message")
    bases = node.get("bases", [])
    if type(bases) is not list or any(type(b) is not str for b in bases):
        raise ObservationError("bad exception bases")
    if module == "builtins" and node.get("builtin", False) is True:
        cls = getattr(builtins, name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return _instantiate(cls, message)
    base = BaseException
    for b in bases:
        cls = getattr(builtins, b, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            base = cls
            break
    key = (module, name, base)
    if key not in _MIRRORS:
        short = name.rsplit(".", 1)[-1]
        if not short.isidentifier():
            short = "StudentException"
        _MIRRORS[key] = type(
            short,
            (base,),
            {"__module__": module or "student", "__qualname__": name, "_autograder_mirror": True},
        )
    return _instantiate(_MIRRORS[key], message)


def _instantiate(cls, message):
    try:
        return cls(message) if message else cls()
    except Exception:  # noqa: BLE001 - exception types with other constructors
        exc = cls.__new__(cls)
        exc.args = (message,)
        return exc


def loads(data: bytes):
    """Parse an observation document (bytes) - raises :class:`ObservationError` on anything odd
    (:class:`TooLargeToParse` when over the bounds)."""
    return parse_json(data)
