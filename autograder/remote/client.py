"""The judge's side of calls into student code: the :class:`Remote` handle, :func:`observe`
and :class:`Outcome`, and the :class:`Link` through which calls go (the judge connects one;
without one, as in one kernel, student code is called directly).

Runs in the judge (and in one kernel); imports nothing of the student's side: a call crosses
as :mod:`autograder.remote.pickler` makes it, and what comes back is an observation
(:mod:`autograder.wire.observation`), decoded here.
"""

from __future__ import annotations

import base64
import contextlib
import io
import sys
import types

from autograder.wire import observation
from autograder.wire.spec import OP_BINARY, OP_COMPARISONS, OP_INPLACE, OP_UNARY

from . import pickler
from .errors import NEEDS_KERNEL, StudentProcessError, UnsupportedTest
from .pickler import has_state, walk
from .silence import depth as quiet_level
from .silence import quiet, quiet_depth


class Link:
    """The judge's end of calls into student code, handed to :func:`connect` by the judge.

    ``channel``: ``.call(header: dict, payload: bytes) -> bytes`` (and, if it has them,
    ``.report(error)``: a reply that cannot be genuine, for the row's status; ``.raised(error)``:
    each exception student code raised, decoded, before the test sees it); ``edits``:
    ``() -> {name: DELETED | handle}``, the running test's edits of the student's names;
    ``rebind``: ``(names report) -> None``, the judge's namespace follows what a call changed."""

    def __init__(self, channel, edits=None, rebind=None):
        self.channel = channel
        self.edits = edits
        self.rebind = rebind


_LINK: list = [None]  # the Link of this process (the judge's), set by connect() alone


def connect(link: Link | None) -> Link | None:
    """Send calls into student code through ``link`` from now on (None: call directly, as in one
    kernel); returns the link it replaces."""
    previous, _LINK[0] = _LINK[0], link
    return previous


def connected() -> Link | None:
    """The link calls go through, or None where student code is called directly."""
    return _LINK[0]


class Remote:
    """An object in the student's process, seen from the judge: a name of the student's namespace
    (``("name",)``, bound late, as the name is when the call is made) or an object that student
    code returned (``("$kept", i)``).

    A faithful proxy: what a test cell does to it is done where the object lives, as in one
    kernel - calling, attribute reads, indexing and slicing, iteration (a generator advances one
    item per ``next``), operators, ``len``/``bool``/``hash``/``str``/``repr``/``dir``,
    ``isinstance`` against built-in classes (``__class__``) and against the student's own
    classes (``isinstance(obj, StudentClass)``: both handles), numpy conversion
    (``__array__``). What comes back is plain data by value, or another handle; the student's
    exceptions are raised here with their type name and message (``TypeError: 'int' object is
    not subscriptable``). Each operation is one request (:func:`_op`) answered with an
    observation."""

    __slots__ = ("_path", "_info")

    def __init__(self, path, info=None):
        object.__setattr__(self, "_path", tuple(path))
        object.__setattr__(self, "_info", info if isinstance(info, dict) else {})

    # attributes
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") and name not in READABLE_DUNDERS:
            raise AttributeError(name)
        return _op("getattr", self, name)

    def __setattr__(self, name, value):
        _op("setattr", self, name, value)

    def __delattr__(self, name):
        _op("delattr", self, name)

    def __dir__(self):
        return _op("dir", self)

    @property  # type: ignore[misc]  # read-only: isinstance() sees the proxied class
    def __class__(self):
        """A built-in class the object derives from (``isinstance(obj, list)``), else Remote."""
        import builtins

        for name in self._info.get("classes", ()):
            cls = _BUILTIN_CLASSES.get(name) or getattr(builtins, name, None)
            if (
                isinstance(cls, type)
                and name in observation.BUILTIN_CLASSES
                and name not in _NOT_CLAIMED
            ):
                return cls
        return Remote

    # calls, and the student's classes
    def __call__(self, *args, **kwargs):
        return _ship(self, args, kwargs).result()

    def __instancecheck__(self, obj):
        return _op("isinstance", obj, self)

    def __subclasscheck__(self, cls):
        return _op("issubclass", cls, self)

    def __reduce__(self):
        raise TypeError("a handle to a student's object crosses only as an argument of a call")

    def __copy__(self):
        return _op("copy", self)

    def __deepcopy__(self, memo):
        return _op("deepcopy", self)

    # text
    def __repr__(self):
        try:
            return _op("repr", self)
        except Exception:  # noqa: BLE001 - e.g. no test running: say what it is
            return self._describe()

    def __str__(self):
        return _op("str", self)

    def __format__(self, spec):
        return _op("format", self, spec)

    def _describe(self):
        if self._path and self._path[0] == "$kept":
            return f"<{self._info.get('type', 'an object')} returned by student code>"
        return "<student's " + ".".join(self._path) + ">"

    # containers, iteration
    def __len__(self):
        return _op("len", self)

    def __bool__(self):
        return _op("bool", self)

    def __iter__(self):
        return _op("iter", self)

    def __next__(self):
        return _op("next", self)

    def __reversed__(self):
        return _op("reversed", self)

    def __contains__(self, item):
        return _op("contains", self, item)

    def __getitem__(self, key):
        return _op("getitem", self, key)

    def __setitem__(self, key, value):
        _op("setitem", self, key, value)

    def __delitem__(self, key):
        _op("delitem", self, key)

    def __hash__(self):
        return _op("hash", self)

    # numbers and numpy
    def __array__(self, dtype=None, copy=None):
        import numpy

        value = _op("array", self)
        if isinstance(value, Remote):  # an array of objects: each stays where it lives
            arr = numpy.empty((), dtype=object)
            arr[()] = value
            return arr
        return numpy.asarray(value, dtype=dtype) if dtype is not None else numpy.asarray(value)

    def __int__(self):
        return _op("int", self)

    def __float__(self):
        return _op("float", self)

    def __complex__(self):
        return _op("complex", self)

    def __index__(self):
        return _op("index", self)

    def __round__(self, ndigits=None):
        return _op("round", self) if ndigits is None else _op("round", self, ndigits)

    def __enter__(self):
        return _op("enter", self)

    def __exit__(self, *exc):
        return _op("exit", self, *exc)


READABLE_DUNDERS = frozenset(
    {
        "__name__",
        "__qualname__",
        "__doc__",
        "__module__",
        "__dict__",
        "__annotations__",
        "__wrapped__",
        "__self__",
        "__func__",
        "__defaults__",
        "__kwdefaults__",
    }
)
# (functions, methods and classes are not named: what pickles or inspects arguments asks
# isinstance(obj, types.FunctionType) and would take a handle for a local function)
_NOT_CLAIMED = frozenset({"function", "builtin_function_or_method", "method", "type"})
_BUILTIN_CLASSES = {"generator": types.GeneratorType, "coroutine": types.CoroutineType}


def _binary(name, reflected=False):
    if reflected:

        def op(self, other):
            return _op(name, other, self)
    else:

        def op(self, other):
            return _op(name, self, other)

    return op


def _unary(name):
    def op(self):
        return _op(name, self)

    return op


for _name in OP_COMPARISONS:
    setattr(Remote, f"__{_name}__", _binary(_name))
for _name in OP_BINARY:
    setattr(Remote, f"__{_name}__", _binary(_name))
    setattr(Remote, f"__r{_name}__", _binary(_name, reflected=True))
    if "i" + _name in OP_INPLACE:
        setattr(Remote, f"__i{_name}__", _binary("i" + _name))
for _name in OP_UNARY:
    setattr(Remote, f"__{_name}__", _unary(_name))
Remote.__hash__ = Remote.__dict__["__hash__"]  # type: ignore[method-assign]  # (__eq__ unsets it)


def _op(name, *args):
    """Perform one operation of :data:`autograder.remote.server.OPS` on objects where the student's code runs."""
    return _ship(Remote(("$op", name)), args, {}).result()


# --------------------------------------------------------------------------- outcome


class Outcome:
    """What one call into student code did (the same object in one kernel and under the grader)."""

    def __init__(self, value, error, after, stdout="", stderr="", warnings=()):
        self.value = value
        self.error = error
        self._after = after
        self.stdout = stdout
        self.stderr = stderr
        self.warnings = list(warnings)

    @property
    def raised(self) -> bool:
        return self.error is not None

    def result(self):
        """The value returned, or the exception raised (raised again here)."""
        if self.error is not None:
            raise self.error
        return self.value

    def after(self, obj):
        """The state of ``obj`` (an argument of the call) once the call returned: for a tensor a
        plain tensor with its values (``autograder.checks.meta`` gives version, requires_grad,
        grad ...), for a :class:`~autograder.checks.CallRecorder` the calls it recorded, for
        an ``nn.Module`` its parameters."""
        for o, state in self._after:
            if o is obj:
                return state
        raise KeyError(f"{obj!r} was not an argument of this call")


def observe(fn, *args, **kwargs) -> Outcome:
    """Call ``fn(*args, **kwargs)`` where the student's code runs and return its :class:`Outcome`.

    Quiet: what the call writes to stderr and the warnings it raises are kept in the outcome
    (``.stderr``, ``.warnings``), never printed, so they cannot fail the test."""
    tracked, remote = walk((fn, args, kwargs), Remote)
    with quiet_depth():  # (a probe of autograder.probes always runs where the student's code runs)
        if _LINK[0] is not None and (
            remote or str(getattr(fn, "__module__", "")).startswith("autograder.probes.")
        ):
            return _ship(fn, args, kwargs, tracked)
    return _local(fn, args, kwargs, tracked)


def _local(fn, args, kwargs, tracked):
    """One kernel: call directly; turn what came back into what the grader would see."""
    import torch

    arrival = {id(o): o._version for o in tracked if isinstance(o, torch.Tensor)}
    error = value = None
    captured = io.StringIO()
    warnings_seen: list = []
    try:
        with quiet() as warnings_seen, contextlib.redirect_stderr(captured):
            value = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - the outcome records whatever was raised
        error = exc
    enc = observation.Encoder(tracked, arrival=arrival)
    dec = observation.Decoder(tracked)
    if error is None:
        value = dec.decode(observation.loads(observation.dumps(enc.encode(value))))
    after = [
        (o, dec.after(i, observation.loads(observation.dumps(enc.encode(o, top_tracked=True)))))
        for i, o in enumerate(tracked)
        if has_state(o)
    ]
    return Outcome(value, error, after, "", captured.getvalue(), warnings_seen)


def _ship(fn, args, kwargs, tracked=None):
    """The judge: send the call to the student's process, decode what comes back."""
    link = _LINK[0]
    if link is None:
        raise RuntimeError("student code can only be called while a test runs under the grader")
    edits = link.edits() if link.edits is not None else {}
    if tracked is None or edits:
        tracked, _ = walk((fn, args, kwargs, edits), Remote)
    payload = dumps_call((tracked, fn, args, kwargs, edits))
    header = {"quiet": quiet_level() > 0}
    torch = sys.modules.get("torch")
    if torch is not None:
        header["rng"] = base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode()
    reply = link.channel.call(header, payload)
    try:
        doc = observation.loads(reply)
        if type(doc) is not dict:
            raise observation.ObservationError("not an outcome")
        if "error" in doc:  # the student's process could not encode what it got
            # a genuine value the wire does not carry (over its bounds, unreadable): one kernel
            raise StudentProcessError(NEEDS_KERNEL, str(doc["error"])[:500])
        dec = observation.Decoder(tracked, handle=lambda i, info=None: Remote(("$kept", i), info))
        error = value = None
        if "raised" in doc:
            error = dec.decode(doc["raised"])
            if not isinstance(error, BaseException):
                raise observation.ObservationError("raised something that is not an exception")
            seen = getattr(link.channel, "raised", None)
            if seen is not None:
                seen(error)
        elif "returned" in doc:
            value = dec.decode(doc["returned"])
        else:
            raise observation.ObservationError("no result")
        after_nodes = doc.get("after")
        if type(after_nodes) is not list or len(after_nodes) != len(tracked):
            raise observation.ObservationError("bad after-states")
        after = [
            (o, dec.after(i, n))
            for i, (o, n) in enumerate(zip(tracked, after_nodes, strict=True))
            if has_state(o)
        ]
        moved = _moved(doc.get("moved"), doc.get("same"), args, kwargs, dec)
        texts = []
        for key in ("stdout", "stderr"):
            t = doc.get(key, "")
            if type(t) is not str:
                raise observation.ObservationError(f"bad {key}")
            texts.append(t)
        warnings = doc.get("warnings", [])
        if type(warnings) is not list or any(type(w) is not str for w in warnings):
            raise observation.ObservationError("bad warnings")
        if link.rebind is not None:  # globals the call changed, as in one kernel; the invariant
            link.rebind(doc.get("names"))
    except observation.ObservationError as exc:
        problem = str(exc)
    else:
        problem = None
    if (
        problem is not None
    ):  # (raised out here: the error, kept for the row's status, keeps no frame
        reply = doc = None  # that holds the reply alive through its context)
        error = StudentProcessError("tampered", f"an observation that cannot be genuine: {problem}")
        _report(error)
        raise error
    write_back(moved)  # what the call wrote into the test's own list, dict, array ...
    # what the student's code printed during the call appears in the test's output, as in one
    # kernel (where a write to stderr fails the test, nbgrader's rule)
    if texts[0]:
        sys.stdout.write(texts[0])
    if texts[1] and quiet_level() == 0:
        sys.stderr.write(texts[1])
    return Outcome(value, error, after, texts[0], texts[1], warnings)


def _moved(nodes, same, args, kwargs, dec) -> list:
    """``[(argument, new contents, kept)]``: the test's own containers a call changed in place (the
    student's process reports them: :func:`autograder.remote.server._containers`), checked: each
    names an argument of this call of a carried type, and its new contents are of the same type.
    ``kept`` (:func:`_kept`): the containers inside it that are still the test's own objects."""
    if nodes is None and same is None:
        return []
    if type(nodes) is not dict or len(nodes) > len(args) + len(kwargs):
        raise observation.ObservationError("bad moved arguments")
    if same is not None and (type(same) is not dict or not set(same) <= set(nodes)):
        raise observation.ObservationError("bad kept containers")
    out = []
    for where, node in nodes.items():
        if type(where) is not str:
            raise observation.ObservationError("bad moved arguments")
        if where.startswith("="):
            if where[1:] not in kwargs:
                raise observation.ObservationError("a moved argument that was not given")
            target = kwargs[where[1:]]
        elif where.isdigit() and int(where) < len(args):
            target = args[int(where)]
        else:
            raise observation.ObservationError("a moved argument that was not given")
        value = dec.decode(node)
        if not _same_kind(target, value):
            raise observation.ObservationError("a moved argument of another type")
        out.append((target, value, _kept(target, value, (same or {}).get(where, []))))
    return out


def _kept(target, value, pairs) -> list:
    """``[(original, new contents, parent, key)]``, innermost first: for each ``[new path, old
    path]`` the student's process reported, the test's container at the old path (read before
    anything is written) that the call left in place at the new path of ``value``, whose contents
    it takes (``parent[key]``: that slot of the new contents). Checked: paths that exist, of list
    indices and dict keys, containers of the same kind, each new path once."""
    if type(pairs) is not list or len(pairs) > observation.MAX_KEPT:
        raise observation.ObservationError("bad kept containers")
    plan, seen = [], set()
    for pair in pairs:
        if type(pair) is not list or len(pair) != 2:
            raise observation.ObservationError("bad kept containers")
        new, old = (_path(x) for x in pair)
        if not new or tuple(new) in seen:
            raise observation.ObservationError("bad kept containers")
        seen.add(tuple(new))
        parent = _at(value, new[:-1])
        original, inside = _at(target, old), _at(value, new)
        if original is target or not _same_kind(original, inside):
            raise observation.ObservationError("a kept container of another type")
        plan.append((len(new), original, inside, parent, new[-1]))
    plan.sort(key=lambda step: -step[0])
    return [step[1:] for step in plan]


def _path(x) -> list:
    if (
        type(x) is not list
        or len(x) > observation.MAX_DEPTH
        or any(type(k) not in (str, int) for k in x)
    ):
        raise observation.ObservationError("bad kept containers")
    return x


def _at(root, path):
    """The object at ``path`` (list indices, dict keys) inside ``root``."""
    obj = root
    for key in path:
        if type(obj) is list and type(key) is int and -len(obj) <= key < len(obj):
            obj = obj[key]
        elif type(obj) is dict and key in obj:
            obj = obj[key]
        else:
            raise observation.ObservationError("a kept container that is not there")
    return obj


def write_back(moved) -> None:
    """Write what :func:`_moved` checked into the test's own objects: the inner containers the
    call kept first, innermost first (each takes its new contents and its place in the new
    contents of its parent), then each argument itself."""
    for target, contents, kept in moved:
        for original, inside, parent, key in kept:
            if write_into(original, inside):
                parent[key] = original
        write_into(target, contents)


def _same_kind(target, value) -> bool:
    numpy = sys.modules.get("numpy")
    if numpy is not None and type(target) is numpy.ndarray:
        return type(value) is numpy.ndarray
    if type(target) is bytearray:
        return type(value) in (bytes, bytearray)
    return type(target) in (list, dict, set) and type(value) is type(target)


def write_into(target, value) -> bool:
    """Write ``value`` into ``target`` - a list, bytearray, dict, set or numpy array, ``value`` of
    the same kind - so that every alias of ``target`` sees it, as one kernel's object would have
    changed; True when written. An array whose shape or dtype changed (``resize``), or a
    read-only one, is left as it is (numpy cannot change a view's shape in place either way).
    One rule for both places a copy's writes come back: a call's arguments here, and the names
    the judge holds (grading.host.judge)."""
    if not _same_kind(target, value):
        return False
    if type(target) is list or type(target) is bytearray:
        target[:] = value
    elif type(target) in (dict, set):
        target.clear()
        target.update(value)
    elif target.shape == value.shape and target.dtype == value.dtype and target.flags.writeable:
        target[...] = value
    else:
        return False
    return True


def _report(error):
    """Tell the judge what went wrong with the student's process (the row's status), even when
    the test catches the exception."""
    report = getattr(_LINK[0] and _LINK[0].channel, "report", None)
    if report is not None:
        report(error)


def dumps_call(obj) -> bytes:
    """:func:`autograder.remote.pickler.dumps`, a refusal reported (the row's status even if the
    test catches it)."""
    try:
        return pickler.dumps(obj, Remote)
    except UnsupportedTest as error:
        _report(error)
        raise
