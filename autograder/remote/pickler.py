"""The restricted pickler: what a call into student code carries, and what it never does.

The judge pickles a call - the callable, its arguments, the objects to track and the test's
edits of the student's names - as data only: plain values, tensors, modules and optimizers of
library classes, the student's own objects as their path, and functions and classes of an
importable module by reference. Never code: anything defined in a test cell raises
:class:`~autograder.remote.errors.UnsupportedTest`. The student's process unpickles it
(:class:`autograder.remote.server.Server`), resolving each path in its own namespace.
"""

from __future__ import annotations

import io
import pickle
import sys
import types

from autograder.wire import observation

from .errors import UnsupportedTest

DELETED = ("$deleted",)  # in a call's edits: a test's ``del name`` of one of the student's names


def dumps(obj, handle=()) -> bytes:
    r"""The call, pickled for the student's process - data only, and names.

    What crosses: plain data, tensors (a leaf's ``.grad`` kept), ``nn.Module``\ s and optimizers
    of library classes or of :mod:`autograder.probes`, exceptions, call recorders, the student's
    own objects (a ``handle``, :class:`~autograder.remote.client.Remote`, travels as its path), and functions and classes of an
    importable module **by reference** (``torch.relu``, ``operator.setitem``, the building blocks
    of :mod:`autograder.probes`: a module name and a qualified name, resolved there). Never code:
    a function, lambda or class defined in a test cell (its code object would carry the hidden
    test's constants, docstrings and file name into the student's process) raises
    :class:`UnsupportedTest` - a grader limitation, not the student's: calibration then grades the
    notebook in one kernel."""
    torch = sys.modules.get("torch")
    tensor_types = (torch.Tensor, torch.nn.Parameter) if torch is not None else ()

    class Pickler(pickle.Pickler):
        def persistent_id(self, o):
            # a handle: its path, resolved by the student's process (before pickle asks the handle
            # what it is: each question a request)
            return o._path if type(o) is handle else None

        def reducer_override(self, o):
            t = type(o)
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
        error = UnsupportedTest(
            f"the test passes something into student code that cannot cross as data: {exc}"[:400]
        )
    else:
        return buffer.getvalue()
    raise error


_NEVER_CROSS = (
    types.CodeType,
    types.FrameType,
    types.TracebackType,
    types.GeneratorType,
    types.CoroutineType,
    types.CellType,
    types.ModuleType,
)


def _what(o) -> str:
    if isinstance(o, types.FunctionType):
        return f"a function defined in the test ({getattr(o, '__name__', '?')})"
    if isinstance(o, type):
        return f"a class defined in the test ({getattr(o, '__name__', '?')})"
    return f"a {type(o).__name__} object"


def _check_reference(o):
    """A function or class crosses only as a reference its module resolves to the same object."""
    module_name, qualname = getattr(o, "__module__", None), getattr(o, "__qualname__", None)
    if isinstance(o, types.BuiltinFunctionType) and isinstance(
        getattr(o, "__self__", None), types.ModuleType
    ):
        return  # a built-in function of a module: pickle names it (torch.relu_, math.sqrt)
    if isinstance(o, types.BuiltinFunctionType):
        return  # a built-in method bound to an object: pickled as (getattr, (object, name)), the object as data
    ok = (
        type(module_name) is str
        and type(qualname) is str
        and "<" not in qualname
        and module_name.split(".")[0] != "__main__"
    )
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


def has_state(obj) -> bool:
    # (a module not loaded here cannot have made obj: a tensor arrives with torch, a recorder with the checks)
    torch, recorder = sys.modules.get("torch"), observation.registered("recorder")
    if torch is not None and isinstance(obj, (torch.Tensor, torch.nn.Module)):
        return True
    return recorder is not None and isinstance(obj, recorder)


def walk(roots, handle=()):
    """``(tracked objects, whether any handle is reachable)`` in the arguments of a call.

    Tracked objects keep their identity across the call: tensors, exceptions, call recorders,
    modules, optimizers and functions. A test's own functions are followed into their closures,
    defaults and the globals their code uses (a student's name there makes the call a remote one,
    and :func:`dumps` refuses it)."""
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
        if isinstance(o, handle):
            remote = True
            continue
        if isinstance(
            o,
            (str, bytes, int, float, bool, type(None), types.ModuleType, types.BuiltinFunctionType),
        ):
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
            if _by_value(o):  # (a test's own function: what it uses; it cannot cross, see dumps)
                stack.extend(_function_refs(o))
        elif isinstance(o, types.MethodType):
            stack.extend((o.__func__, o.__self__))
        elif isinstance(o, CallRecorder):
            stack.append(o.fn)
        elif isinstance(o, ProbeFn):  # (a function as data: what its expression holds)
            stack.append(o.expr._node if isinstance(o, probes.Fn) else o._node)
        elif isinstance(o, Module):
            stack.extend(
                list(o._parameters.values()) + list(o._buffers.values()) + list(o._modules.values())
            )
        elif isinstance(o, Optimizer):
            stack.extend(p for g in o.param_groups for p in g["params"])
        elif isinstance(o, type) and _by_value(o):
            stack.extend(
                v
                for v in vars(o).values()
                if isinstance(v, (types.FunctionType, staticmethod, classmethod, property))
            )
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
