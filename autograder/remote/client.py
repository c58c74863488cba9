"""Calls into student code, and what comes back: the one seam between a test and a submission.

A test cell of this course is a stock nbgrader test cell. In one kernel (nbgrader, the
self-check, JupyterLab) it calls the student's functions directly. Under ``autograder grade``
the same cell runs in the *judge*, a process that never runs student code: there every name
the student's notebook defines is plain data by value or a :class:`Remote` handle, a faithful
proxy of the object where it lives. Calling one sends the call - the callable's name and a
copy of the arguments - to the process that ran the student's cells; so does every other
operation on a handle (an attribute, an index, ``next``, ``==``, ``len``, ``isinstance``: one
of :data:`OPS`, by name). That process performs it and sends back an *observation*
(:mod:`autograder.wire.observation`): the value returned (plain data, or a handle to an object that
stays there) or the exception raised, and the state afterwards of the objects it was given.
The judge decodes it and the test goes on.

Two ways to call, the same in both settings:

* ``modifies_in_place(fn, x)`` - the value (plain data under the grader), or the exception
  re-raised (the test's own exception object when the student code re-raised what it got);
* ``observe(fn, *args)`` - an :class:`Outcome`: ``.value``, ``.error``, ``.after(obj)`` (what
  the call did to an argument), ``.stdout`` / ``.stderr``. ``fn`` may be a *probe* of
  :mod:`autograder.probes` (it runs where the student's code runs, on the student's objects
  passed as arguments); use one for anything that needs the autograd graph of what student code
  returned.

Rules a test author follows (the honest-parity test checks them): a call gets copies of its
arguments made at call time, so state that several calls share goes into one probe; what
crosses to the student's process is the call's arguments as data - tensors, numbers, modules,
the student's own objects, and functions or classes of an importable module by reference
(:mod:`autograder.probes` has functions as data: ``fn(T.add_(1))`` for ``lambda t: t.add_(1)``).
Never code, never expected values, never the checks; nothing by a name: a test that rebinds a
name the student's notebook also defines keeps its object in the judge. A function, lambda or
class defined in a test cell passed into student code raises :class:`UnsupportedTest` (a grader
limitation: calibration grades that notebook in one kernel).
"""
from __future__ import annotations

import base64
import contextlib
import io
import os
import pickle
import sys
import types
import warnings

from autograder.wire import observation

CHANNEL = None      # set in the judge: .call(header: dict, payload: bytes) -> bytes
EDITS = None        # set in the judge: () -> {name: DELETED | value}, the test's edits of student names
DELETED = ("$deleted",)
NAMESPACE = None    # set where student code runs under the grader: the student's namespace
NAMES_CHANGED = None  # set there: () -> names report of what a call bound, rebound, deleted or changed
REBIND = None       # set in the judge: (names report) -> None, the judge's namespace follows it
QUIET = [0]         # depth of autograder.checks.quiet() in this process
_KEPT: list = []    # objects returned by student code that stay callable (handles), per test process


class StudentProcessError(BaseException):
    """The student's process could not answer (timed out, died, hit a limit, sent garbage).

    A ``BaseException``: a test's ``except Exception`` does not swallow it; the judge turns it
    into the row's status (``status``)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


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

    @property
    def __class__(self):
        """A built-in class the object derives from (``isinstance(obj, list)``), else Remote."""
        import builtins

        for name in self._info.get("classes", ()):
            cls = _BUILTIN_CLASSES.get(name) or getattr(builtins, name, None)
            if isinstance(cls, type) and name in observation.BUILTIN_CLASSES and name not in _NOT_CLAIMED:
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
        return (_student_value, (self._path,))

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


READABLE_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__dict__", "__annotations__",
                              "__wrapped__", "__self__", "__func__", "__defaults__", "__kwdefaults__"})
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


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Remote, f"__{_name}__", _binary(_name))
for _name in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift", "rshift",
              "and", "xor", "or"):
    setattr(Remote, f"__{_name}__", _binary(_name))
    setattr(Remote, f"__r{_name}__", _binary(_name, reflected=True))
    if _name != "divmod":
        setattr(Remote, f"__i{_name}__", _binary("i" + _name))
for _name in ("neg", "pos", "abs", "invert", "trunc", "floor", "ceil"):
    setattr(Remote, f"__{_name}__", _unary(_name))
Remote.__hash__ = Remote.__dict__["__hash__"]  # (defining __eq__ would otherwise unset it)


def _op(name, *args):
    """Perform one operation of :data:`OPS` on objects where the student's code runs."""
    return _ship(Remote(("$op", name)), args, {}).result()


def _operations():
    """What a :class:`Remote` asks of the object where it lives, by name (a fixed table)."""
    import copy
    import math
    import operator

    def _array(obj):
        import numpy

        return numpy.asarray(obj)

    def _iter(obj):
        it = iter(obj)
        return it

    ops = {
        "getattr": getattr, "setattr": setattr, "delattr": delattr, "dir": lambda o: sorted(dir(o)),
        "isinstance": isinstance, "issubclass": issubclass, "copy": copy.copy, "deepcopy": copy.deepcopy,
        "repr": repr, "str": str, "format": format, "len": len, "bool": bool, "iter": _iter, "next": next,
        "reversed": reversed, "contains": operator.contains, "getitem": operator.getitem,
        "setitem": operator.setitem, "delitem": operator.delitem, "hash": hash, "array": _array, "int": int,
        "float": float, "complex": complex, "index": operator.index, "round": round,
        "enter": lambda o: o.__enter__(), "exit": lambda o, *exc: o.__exit__(*exc),
        "divmod": divmod, "pow": pow, "neg": operator.neg, "pos": operator.pos, "abs": abs,
        "invert": operator.invert, "trunc": math.trunc, "floor": math.floor, "ceil": math.ceil,
    }
    for name in ("eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "matmul", "truediv", "floordiv",
                 "mod", "lshift", "rshift", "xor", "iadd", "isub", "imul", "imatmul", "itruediv", "ifloordiv",
                 "imod", "ipow", "ilshift", "irshift", "iand", "ixor", "ior"):
        ops[name] = getattr(operator, name)
    ops["and"], ops["or"] = operator.and_, operator.or_
    return ops


OPS = _operations()


def _student_value(path):
    """Where student code runs: the object a :class:`Remote` path names."""
    if path[0] == "$op":
        return OPS[path[1]]
    if path[0] == "$kept":
        obj = _KEPT[path[1]]
        rest = path[2:]
    else:
        if NAMESPACE is None or path[0] not in NAMESPACE:
            raise NameError(f"name {path[0]!r} is not defined")
        obj = NAMESPACE[path[0]]
        rest = path[1:]
    for name in rest:
        obj = getattr(obj, name)
    return obj


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
    tracked, remote = _walk((fn, args, kwargs))
    with quiet_depth():  # (a probe of autograder.probes always runs where the student's code runs)
        if CHANNEL is not None and (remote or str(getattr(fn, "__module__", "")).startswith("autograder.probes.")):
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
    after = [(o, dec.after(i, observation.loads(observation.dumps(enc.encode(o, top_tracked=True)))))
             for i, o in enumerate(tracked) if _has_state(o)]
    return Outcome(value, error, after, "", captured.getvalue(), warnings_seen)


def _ship(fn, args, kwargs, tracked=None):
    """The judge: send the call to the student's process, decode what comes back."""
    if CHANNEL is None:
        raise RuntimeError("student code can only be called while a test runs under the grader")
    edits = EDITS() if EDITS is not None else {}
    if tracked is None or edits:
        tracked, _ = _walk((fn, args, kwargs, edits))
    payload = _dumps((tracked, fn, args, kwargs, edits))
    header = {"quiet": QUIET[0] > 0}
    torch = sys.modules.get("torch")
    if torch is not None:
        header["rng"] = base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode()
    reply = CHANNEL.call(header, payload)
    try:
        doc = observation.loads(reply)
        if type(doc) is not dict:
            raise observation.ObservationError("not an outcome")
        if "error" in doc:  # the student's process could not encode what it got
            raise StudentProcessError("observation-error", str(doc["error"])[:500])
        dec = observation.Decoder(tracked, handle=lambda i, info=None: Remote(("$kept", i), info))
        error = value = None
        if "raised" in doc:
            error = dec.decode(doc["raised"])
            if not isinstance(error, BaseException):
                raise observation.ObservationError("raised something that is not an exception")
        elif "returned" in doc:
            value = dec.decode(doc["returned"])
        else:
            raise observation.ObservationError("no result")
        after_nodes = doc.get("after")
        if type(after_nodes) is not list or len(after_nodes) != len(tracked):
            raise observation.ObservationError("bad after-states")
        after = [(o, dec.after(i, n)) for i, (o, n) in enumerate(zip(tracked, after_nodes)) if _has_state(o)]
        texts = []
        for key in ("stdout", "stderr"):
            t = doc.get(key, "")
            if type(t) is not str:
                raise observation.ObservationError(f"bad {key}")
            texts.append(t)
        warnings = doc.get("warnings", [])
        if type(warnings) is not list or any(type(w) is not str for w in warnings):
            raise observation.ObservationError("bad warnings")
        if doc.get("names") is not None and REBIND is not None:  # globals the call changed, as in one kernel
            REBIND(doc["names"])
    except observation.ObservationError as exc:
        problem = str(exc)
    else:
        problem = None
    if problem is not None:  # (raised out here: the error, kept for the row's status, keeps no frame
        reply = doc = None   # that holds the reply alive through its context)
        error = StudentProcessError("tampered", f"an observation that cannot be genuine: {problem}")
        _report(error)
        raise error
    # what the student's code printed during the call appears in the test's output, as in one
    # kernel (where a write to stderr fails the test, nbgrader's rule)
    if texts[0]:
        sys.stdout.write(texts[0])
    if texts[1] and QUIET[0] == 0:
        sys.stderr.write(texts[1])
    return Outcome(value, error, after, texts[0], texts[1], warnings)


def _report(error):
    """Tell the judge what went wrong with the student's process (the row's status), even when
    the test catches the exception."""
    report = getattr(CHANNEL, "report", None)
    if report is not None:
        report(error)


def _dumps(obj) -> bytes:
    r"""The call, pickled for the student's process - data only, and names.

    What crosses: plain data, tensors (a leaf's ``.grad`` kept), ``nn.Module``\ s and optimizers
    of library classes or of :mod:`autograder.probes`, exceptions, call recorders, the student's
    own objects (a :class:`Remote` travels as its path), and functions and classes of an
    importable module **by reference** (``torch.relu``, ``operator.setitem``, the building blocks
    of :mod:`autograder.probes`: a module name and a qualified name, resolved there). Never code:
    a function, lambda or class defined in a test cell (its code object would carry the hidden
    test's constants, docstrings and file name into the student's process) raises
    :class:`UnsupportedTest` - a grader limitation, not the student's: calibration then grades the
    notebook in one kernel."""
    torch = sys.modules.get("torch")
    tensor_types = (torch.Tensor, torch.nn.Parameter) if torch is not None else ()

    class Pickler(pickle.Pickler):
        def reducer_override(self, o):
            t = type(o)
            if t is Remote:  # (before pickle asks it what it is: each question a request)
                return _student_value, (o._path,)
            if t in tensor_types and (o.requires_grad or o.grad is not None):
                grad = o.grad if o.is_leaf else None
                return _rebuild_tensor, (o.detach(), o.requires_grad, grad, t is torch.nn.Parameter)
            if isinstance(o, _NEVER_CROSS):
                raise UnsupportedTest(f"the test passes {_what(o)} into student code")
            if isinstance(o, (types.FunctionType, type, types.BuiltinFunctionType)):
                _check_reference(o)
            elif isinstance(o, BaseException) and getattr(t, "_autograder_mirror", False):
                # the judge's stand-in for a student's exception: its built-in base, with its message
                return t.__mro__[1], o.args
            return NotImplemented

    buffer = io.BytesIO()
    try:
        Pickler(buffer, protocol=5).dump(obj)
    except UnsupportedTest as exc:
        error = exc
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        error = UnsupportedTest(f"the test passes something into student code that cannot cross as data: {exc}"[:400])
    else:
        return buffer.getvalue()
    _report(error)  # (the row's status even if the test catches it)
    raise error


class UnsupportedTest(StudentProcessError):
    """A test cell passes into student code something that is not data: a function, lambda or class
    defined in the test. Only data, and functions and classes of an importable module by reference
    (:mod:`autograder.probes`, torch, the standard library), cross to the student's process.

    A grader limitation, never the student's fault: the test's row gets the status
    ``grader-error``, so calibration (:mod:`autograder.grading.calibrate`), which grades the
    instructor's solution first, grades that notebook in one kernel instead."""

    def __init__(self, message):
        super().__init__("grader-error", f"{message}: only data, and functions or classes of an importable module "
                                         "(autograder.probes, torch, the standard library) by reference, can cross "
                                         "to the student's process (a grader limitation: the notebook is graded in "
                                         "one kernel)")


_NEVER_CROSS = (types.CodeType, types.FrameType, types.TracebackType, types.GeneratorType, types.CoroutineType,
                types.CellType, types.ModuleType)


def _what(o) -> str:
    if isinstance(o, types.FunctionType):
        return f"a function defined in the test ({getattr(o, '__name__', '?')})"
    if isinstance(o, type):
        return f"a class defined in the test ({getattr(o, '__name__', '?')})"
    return f"a {type(o).__name__} object"


def _check_reference(o):
    """A function or class crosses only as a reference its module resolves to the same object."""
    module_name, qualname = getattr(o, "__module__", None), getattr(o, "__qualname__", None)
    if isinstance(o, types.BuiltinFunctionType) and isinstance(getattr(o, "__self__", None), types.ModuleType):
        return  # a built-in function of a module: pickle names it (torch.relu_, math.sqrt)
    if isinstance(o, types.BuiltinFunctionType):
        return  # a built-in method bound to an object: pickled as (getattr, (object, name)), the object as data
    ok = type(module_name) is str and type(qualname) is str and "<" not in qualname \
        and module_name.split(".")[0] != "__main__"
    if ok:
        target = sys.modules.get(module_name)
        for part in qualname.split("."):
            target = getattr(target, part, None)
        ok = target is o
    if not ok:
        raise UnsupportedTest(f"the test passes {_what(o)} into student code")


def _rebuild_tensor(data, requires_grad, grad, parameter):
    import torch

    if parameter:
        t = torch.nn.Parameter(data, requires_grad=requires_grad)
    else:
        t = data.requires_grad_(requires_grad) if requires_grad else data
    if grad is not None:
        t.grad = grad
    return t


def _has_state(obj) -> bool:
    # (a module not loaded here cannot have made obj: a tensor arrives with torch, a recorder with the checks)
    torch, recorder = sys.modules.get("torch"), observation.registered("recorder")
    if torch is not None and isinstance(obj, (torch.Tensor, torch.nn.Module)):
        return True
    return recorder is not None and isinstance(obj, recorder)


def _walk(roots):
    """``(tracked objects, whether any Remote is reachable)`` in the arguments of a call.

    Tracked objects keep their identity across the call: tensors, exceptions, call recorders,
    modules, optimizers and functions. A test's own functions are followed into their closures,
    defaults and the globals their code uses (a student's name there makes the call a remote one,
    and :func:`_dumps` refuses it)."""
    # (types of modules not loaded here cannot occur: a course without torch never imports it)
    torch, recorder = sys.modules.get("torch"), observation.registered("recorder")
    kept = (BaseException, types.FunctionType)
    if torch is not None:
        kept += (torch.Tensor, torch.nn.Module, torch.optim.Optimizer)
    if recorder is not None:
        kept += (recorder,)
    CallRecorder = recorder if recorder is not None else ()
    probes = sys.modules.get("autograder.probes")
    ProbeFn = (probes.Fn, probes.Expr) if probes is not None else ()
    Module = torch.nn.Module if torch is not None else ()
    Optimizer = torch.optim.Optimizer if torch is not None else ()

    tracked, seen, remote = [], set(), False
    stack = [roots]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, Remote):
            remote = True
            continue
        if isinstance(o, (str, bytes, int, float, bool, type(None), types.ModuleType, types.BuiltinFunctionType)):
            continue
        if isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(reversed(list(o)))
            continue
        if isinstance(o, dict):
            stack.extend(reversed(list(o.values())))
            continue
        if isinstance(o, kept):
            tracked.append(o)
        if isinstance(o, types.FunctionType):
            if _by_value(o):  # (a test's own function: what it uses; it cannot cross, see _dumps)
                stack.extend(_function_refs(o))
        elif isinstance(o, types.MethodType):
            stack.extend((o.__func__, o.__self__))
        elif isinstance(o, CallRecorder):
            stack.append(o.fn)
        elif isinstance(o, ProbeFn):  # (a function as data: what its expression holds)
            stack.append(o.expr._node if isinstance(o, probes.Fn) else o._node)
        elif isinstance(o, Module):
            stack.extend(list(o._parameters.values()) + list(o._buffers.values()) + list(o._modules.values()))
        elif isinstance(o, Optimizer):
            stack.extend(p for g in o.param_groups for p in g["params"])
        elif isinstance(o, type) and _by_value(o):
            stack.extend(v for v in vars(o).values() if isinstance(v, (types.FunctionType, staticmethod,
                                                                          classmethod, property)))
        elif isinstance(o, (staticmethod, classmethod)):
            stack.append(o.__func__)
        elif hasattr(o, "__dict__") and not isinstance(o, type) and _by_value(type(o)):
            stack.append(vars(o))
    return tracked, remote


def _by_value(cls) -> bool:
    """Classes and functions defined in a test (or a notebook), not those of a library or of
    :mod:`autograder.probes` (which cross by reference)."""
    module = getattr(cls, "__module__", None)
    return module in (None, "__main__") or module not in sys.modules


def _function_refs(fn):
    refs = []
    if fn.__closure__:
        for cell in fn.__closure__:
            try:
                refs.append(cell.cell_contents)
            except ValueError:
                pass
    refs.extend(fn.__defaults__ or ())
    refs.extend((fn.__kwdefaults__ or {}).values())
    g = fn.__globals__
    for name in _code_names(fn.__code__):
        if name in g:
            refs.append(g[name])
    return refs


def _code_names(code):
    names, stack = [], [code]
    while stack:
        c = stack.pop()
        names.extend(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return names


# --------------------------------------------------------------------------- student side


def serve_call(header: dict, payload: bytes, out_fd: int = 1, err_fd: int = 2) -> bytes:
    """Where student code runs: perform one call sent by the judge; return the observation."""
    rng = header.get("rng")
    # the judge's call, as _dumps made it (the supervisor relays only what the judge sent): data, and
    # functions and classes by reference - never a test's code, constants or docstrings
    tracked, fn, args, kwargs, edits = pickle.loads(payload)
    torch = sys.modules.get("torch")
    arrival = {id(o): o._version for o in tracked if torch is not None and isinstance(o, torch.Tensor)}
    if isinstance(rng, str) and torch is not None:
        try:
            torch.set_rng_state(torch.frombuffer(bytearray(base64.b64decode(rng)), dtype=torch.uint8))
        except Exception:  # noqa: BLE001
            pass
    sizes = [_size(out_fd), _size(err_fd)]
    warnings_seen: list = []
    doc: dict = {}
    outcome = None
    saved = _apply_edits(edits)
    try:
        if header.get("quiet"):
            with quiet() as warnings_seen:
                value = fn(*args, **kwargs)
        else:
            value = fn(*args, **kwargs)
        outcome = ("returned", value)
    except BaseException as exc:  # noqa: BLE001 - reported to the judge as what was raised
        outcome = ("raised", exc)
    finally:
        _undo_edits(saved)
    _flush()
    if NAMES_CHANGED is not None:
        try:
            changed = NAMES_CHANGED()
            if changed:
                doc["names"] = changed
        except Exception:  # noqa: BLE001 - a global that breaks when read: the judge keeps what it has
            pass
    enc = observation.Encoder(tracked, keep=_keep, arrival=arrival)
    try:
        doc[outcome[0]] = enc.encode(outcome[1])
        doc["after"] = [enc.encode(o, top_tracked=True) if _has_state(o) else None for o in tracked]
    except observation.ObservationTooLarge as exc:
        doc = {"error": f"what the call returned is too large to grade: {exc}"}
    except Exception as exc:  # noqa: BLE001 - an object that breaks when read
        doc = {"error": f"what the call returned could not be read: {type(exc).__name__}: {exc}"[:500]}
    doc["stdout"] = _read_from(out_fd, sizes[0])
    doc["stderr"] = _read_from(err_fd, sizes[1])
    doc["warnings"] = [str(w)[:500] for w in warnings_seen][:50]
    try:
        return observation.dumps(doc)
    except observation.ObservationTooLarge as exc:
        return observation.dumps({"error": f"what the call returned is too large to grade: {exc}"})


def _apply_edits(edits):
    """A test cell's ``del name`` / ``name = other`` of the student's names, for one call (nbgrader
    runs tests in the student's namespace, where such a statement changes what student code sees:
    e.g. ``del squares`` to check that ``sum_of_squares`` calls ``squares``)."""
    saved = {}
    if not edits or NAMESPACE is None:
        return saved
    missing = object()
    for name, value in edits.items():
        saved[name] = NAMESPACE.get(name, missing)
        if type(value) is tuple and len(value) == 1 and type(value[0]) is str and value[0] == DELETED[0]:
            NAMESPACE.pop(name, None)
        else:
            NAMESPACE[name] = value
    saved["$missing"] = missing
    return saved


def _undo_edits(saved):
    if not saved:
        return
    missing = saved.pop("$missing")
    for name, value in saved.items():
        if value is missing:
            NAMESPACE.pop(name, None)
        else:
            NAMESPACE[name] = value


def _keep(obj) -> int:
    _KEPT.append(obj)
    return len(_KEPT) - 1


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass


def _size(fd):
    try:
        return os.fstat(fd).st_size
    except OSError:
        return 0


CALL_OUTPUT_KEEP = 20_000


def _read_from(fd, start) -> str:
    """What was written to the file behind ``fd`` since ``start`` (capped)."""
    try:
        end = os.fstat(fd).st_size
        if end <= start:
            return ""
        data = os.pread(fd, min(end - start, CALL_OUTPUT_KEEP), start)
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    if end - start > CALL_OUTPUT_KEEP:
        text += f"\n... [{end - start - CALL_OUTPUT_KEEP} more bytes]\n"
    return text


@contextlib.contextmanager
def quiet():
    """Run student code without letting warnings or stderr output reach the cell output.

    Yields a ``list`` that collects the warning messages, in case a test wants them.
    """
    caught: list[str] = []
    buffer = io.StringIO()
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        with contextlib.redirect_stderr(buffer), quiet_depth():
            try:
                yield caught
            finally:
                caught.extend(str(r.message) for r in records)


@contextlib.contextmanager
def quiet_depth():
    QUIET[0] += 1
    try:
        yield
    finally:
        QUIET[0] -= 1
