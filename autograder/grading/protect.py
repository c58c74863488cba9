"""Inside the sandbox: keep the state the tests depend on out of the student's reach.

Everything here is built in the warm *zygote* process before any student code runs
(:func:`build`), so every reference it captures points at the original objects. A child
forked per submission runs the student's cells; a grandchild forked per test restores the
snapshot, runs the instructor's test and reports. This module provides the pieces the
harness needs (the threat model and its limits are in README.md, instructor section):

* **guard** - a snapshot of the protected interpreter state: the ``__dict__`` of every
  module loaded at snapshot time (torch and its submodules, numpy, the standard library,
  ``autograder.*``, ``builtins``, ``sys``) and of every class defined in them, the
  ``sys.modules`` entries of those modules, the import hooks, torch's global module-hook
  registries, the closure cells of ``autograder`` functions and torch's C-level state
  (function / dispatch mode stacks, saved-tensor hooks, grad mode, default dtype and
  device, dispatch TLS, the dynamo frame-evaluation callback). Change detection is cheap:
  CPython 3.11 keeps a version tag in every dict that moves on every write; the guard reads
  the tags of all protected dicts with one numpy gather (microseconds) and diffs only a dict
  whose tag moved. What changed is restored and reported.
* **profiler** - during a test, every transition between student code and trusted code
  (the test itself, ``autograder``, torch, the standard library) is seen through
  ``sys.setprofile``; the state is recorded when control enters student code and
  re-verified when it comes back, so a patch applied inside the graded function is caught
  even if it would undo itself later, and so is a rebinding of the test's own variables.
* **audit hooks** (``sys.addaudithook``: cannot be removed) - refuse to student code:
  tracing and profiling, adding audit hooks, ``gc`` object-graph walks, ``ctypes``,
  reading generator frames, replacing ``__code__``/``__defaults__``/``__class__`` of
  protected objects, running programs, loading native code from outside the installation,
  re-creating loaded modules, registering kernels for torch operators; during a test also
  stack and traceback frames, new threads, signal handlers and at-fork callbacks. Forks are
  rationed. Each refusal that can only serve tampering is recorded.
* **vault** - a generator whose frame (unreachable: reading ``gi_frame`` is refused)
  holds a random key and the hidden tests of the current submission; it hands a test's
  source only to the test driver and signs the driver's result (HMAC-SHA256), which the
  zygote verifies, so bytes written to the result pipe by anyone else do not count.

Functions here bind everything they use as default arguments or generator locals (the
audit hook refuses to replace ``__defaults__`` of protected functions) and look up no
module global after :func:`build`, so patching this module's globals changes nothing.
"""
from __future__ import annotations

import ctypes
import gc
import operator
import os
import sys
import types

MISSING = object()

# dict version tag offset in CPython 3.11 (PyObject_HEAD, ma_used, ma_version_tag)
VERSION_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p) + ctypes.sizeof(ctypes.c_ssize_t)

GENERATOR_FRAME_ATTRIBUTES = frozenset({"gi_frame", "cr_frame", "ag_frame"})
EXEC_EVENTS = frozenset({"os.exec", "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen",
                         "pty.spawn", "os.startfile"})
FORK_EVENTS = frozenset({"os.fork", "os.forkpty"})
TAMPER_EVENTS = frozenset({"sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
                           "sys._current_frames"})
TRACE_EVENTS = frozenset({"sys.settrace", "sys.setprofile"})
TEST_ONLY_SEALED = frozenset({"signal.signal", "_thread.start_new_thread"})
# extension modules that call arbitrary native functions (like ctypes): never loaded for students
FFI_MODULES = frozenset({"_cffi_backend", "_ctypes_test", "_testcapi", "_testinternalcapi"})
# set by the interpreter / IPython when a cell raises, or counters torch moves in normal use
# (every tensor.register_hook / module hook takes the next handle id): not state the tests
# depend on, and never restored
BENIGN = frozenset({("sys", "last_type"), ("sys", "last_value"), ("sys", "last_traceback"),
                    ("sys", "last_exc"), ("torch.utils.hooks.RemovableHandle", "next_id"),
                    ("torch.random", "_fork_rng_warned_already"),
                    # tempfile caches TMPDIR and its name generator on first use
                    ("tempfile", "tempdir"), ("tempfile", "_name_sequence")})

# functions that hand stack frames to their caller
FRAME_HANDING_FUNCTIONS = (
    ("inspect", ("currentframe", "stack", "trace", "getouterframes", "getinnerframes",
                 "getgeneratorlocals", "getcoroutinelocals", "getasyncgenlocals")),
    ("traceback", ("walk_stack", "walk_tb")),
    ("logging", ("currentframe",)),
    ("asyncio.base_tasks", ("_task_get_stack", "_task_print_stack")),
)

# --------------------------------------------------------------------------- snapshot


def _real_dict(cls):
    """The dict behind a class's ``__dict__`` mappingproxy."""
    for ref in gc.get_referents(cls.__dict__):
        if type(ref) is dict:
            return ref
    return None


def _functions_of(value):
    """Plain functions stored in a namespace entry (also behind static/class methods, properties)."""
    if isinstance(value, types.FunctionType):
        yield value
    elif isinstance(value, (staticmethod, classmethod)):
        if isinstance(value.__func__, types.FunctionType):
            yield value.__func__
    elif isinstance(value, property):
        for f in (value.fget, value.fset, value.fdel):
            if isinstance(f, types.FunctionType):
                yield f


def _add_codes(code, out):
    """Add the id of ``code`` and of every code object nested in it to ``out``."""
    stack = [code]
    while stack:
        c = stack.pop()
        if id(c) in out:
            continue
        out.add(id(c))
        stack.extend(const for const in c.co_consts if isinstance(const, types.CodeType))
    return out


def code_ids(code):
    """Ids of ``code`` and of all code objects nested in it (lambdas, functions, comprehensions)."""
    return frozenset(_add_codes(code, set()))


def owner_name(owner):
    if isinstance(owner, types.ModuleType):
        return owner.__name__
    return f"{owner.__module__}.{owner.__qualname__}"


class Snapshot:
    """What :func:`build` collects (then captured by the generators below)."""

    def __init__(self, module_names):
        self.modules = {}
        for name in module_names:
            m = sys.modules.get(name)
            if isinstance(m, types.ModuleType):
                self.modules[name] = m
        self.entries = []  # (kind, owner, real dict, version view, copy, name)
        seen = set()
        classes = []
        for name, module in self.modules.items():
            d = module.__dict__
            if id(d) in seen:
                continue
            seen.add(id(d))
            self._add("module", module, d)
            for value in list(d.values()):
                if isinstance(value, type) and getattr(value, "__module__", None) == name:
                    classes.append(value)
        while classes:
            cls = classes.pop()
            if cls.__flags__ & (1 << 8):  # Py_TPFLAGS_IMMUTABLETYPE: cannot be patched
                continue
            rd = _real_dict(cls)
            if rd is None or id(rd) in seen:
                continue
            seen.add(id(rd))
            self._add("class", cls, rd)
            for value in list(rd.values()):
                if isinstance(value, type) and value.__module__ == cls.__module__:
                    classes.append(value)
        mm = self.modules.get("torch.nn.modules.module")
        if mm is not None:  # global hooks torch runs on every module call
            for key, value in list(vars(mm).items()):
                if key.startswith("_global_") and isinstance(value, dict) and id(value) not in seen:
                    seen.add(id(value))
                    self._add("registry", mm, value)
        self.module_names = tuple(self.modules)
        self.module_objects = tuple(self.modules.values())
        self.module_types = tuple(type(m) for m in self.module_objects)
        self.trusted_globals = frozenset(id(m.__dict__) for m in self.module_objects)

        protected, cells, codes = set(), [], set()
        for kind, owner, d, _, _, _ in self.entries:
            protected.add(id(owner))
            auto = owner_name(owner).startswith("autograder")
            for value in list(d.values()):
                if isinstance(value, (type, types.ModuleType)):
                    protected.add(id(value))
                for f in _functions_of(value):
                    protected.add(id(f))
                    _add_codes(f.__code__, codes)
                    if auto and f.__closure__:
                        for cell in f.__closure__:
                            try:
                                cells.append((cell, cell.cell_contents))
                            except ValueError:
                                pass
        globals_ids = self.trusted_globals
        for obj in gc.get_objects():  # decorator wrappers, partials' functions ...
            if type(obj) is types.FunctionType and id(obj.__globals__) in globals_ids:
                protected.add(id(obj))
                _add_codes(obj.__code__, codes)
        self.protected_ids = frozenset(protected)
        self.cells = tuple(cells)
        self.trusted_codes = frozenset(codes)
        handing = set()
        for modname, names in FRAME_HANDING_FUNCTIONS:
            m = sys.modules.get(modname)
            for n in names:
                f = getattr(m, n, None) if m is not None else None
                if isinstance(f, types.FunctionType):
                    _add_codes(f.__code__, handing)
        self.frame_handing = frozenset(handing)

    def refresh(self):
        self.entries = [(kind, owner, d, view, dict(d), label) for kind, owner, d, view, _, label in self.entries]

    def _add(self, kind, owner, d):
        self.entries.append((kind, owner, d, None, dict(d), owner_name(owner)))


# --------------------------------------------------------------------------- torch C state


def torch_state():
    """``(name, getter, setter or None)`` for torch's C-level global state."""
    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    C = torch._C
    out = [
        ("grad mode", C.is_grad_enabled, C._set_grad_enabled),
        ("default dtype", torch.get_default_dtype, torch.set_default_dtype),
        ("torch function modes", C._len_torch_function_stack, None),
        ("torch dispatch modes", C._len_torch_dispatch_stack, None),
        ("torch function enabled", C._is_torch_function_enabled, None),
        ("saved tensors hooks", lambda: C._autograd._top_saved_tensors_default_hooks(False) is None, None),
        ("saved tensors hooks enabled", C._autograd._saved_tensors_hooks_is_enabled, None),
        ("dispatch exclude set", lambda: repr(C._dispatch_tls_local_exclude_set()), None),
        ("dispatch include set", lambda: repr(C._dispatch_tls_local_include_set()), None),
        ("default device", lambda: str(C._get_default_device()), None),
        ("inference mode", C.is_inference_mode_enabled, None),
        ("anomaly mode", torch.is_anomaly_enabled, torch.set_anomaly_enabled),
        ("autograd fallback", C._get_autograd_fallback_mode, C._set_autograd_fallback_mode),
    ]
    ef = getattr(getattr(C, "_dynamo", None), "eval_frame", None)
    if ef is not None:
        out.append(("frame evaluation callback", lambda: ef.get_eval_frame_callback() in (None, False), None))
    return tuple(out)


def reset_torch_modes():
    """Pop every torch function/dispatch mode and saved-tensor hook left on the stacks."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    C = torch._C
    for _ in range(1000):
        if not C._len_torch_function_stack():
            break
        C._pop_torch_function_stack()
    for _ in range(1000):
        if not C._len_torch_dispatch_stack():
            break
        C._pop_torch_dispatch_stack()
    for _ in range(1000):
        if C._autograd._top_saved_tensors_default_hooks(False) is None:
            break
        C._autograd._pop_saved_tensors_default_hooks()
    if not C._autograd._saved_tensors_hooks_is_enabled():
        C._autograd._saved_tensors_hooks_enable()
    ef = getattr(getattr(C, "_dynamo", None), "eval_frame", None)
    if ef is not None and ef.get_eval_frame_callback() not in (None, False):
        ef.set_eval_frame(None)


# --------------------------------------------------------------------------- guard


def version_reader():
    """``read(index_array) -> versions``: one numpy gather over the raw version tags.

    A read-only numpy view starting at address 8 and spanning the address space; indexing it
    with ``(id(d) + VERSION_OFFSET - 8) // 8`` reads the version tags of thousands of dicts
    in a few microseconds, without touching (and copy-on-write faulting) any object.
    """
    import numpy as np

    pointer = ctypes.cast(ctypes.c_void_p(8), ctypes.POINTER(ctypes.c_uint64))
    base = np.ctypeslib.as_array(pointer, shape=(1 << 44,))
    base.flags.writeable = False

    def index(dicts):
        return np.array([(id(d) + VERSION_OFFSET - 8) // 8 for d in dicts], dtype=np.intp)

    return base, index


def _guard_loop(snap, state, volatile=frozenset(), _type=type, _id=id, _str=str, _len=len, _list=list,
                _map=map, _zip=zip, _any=any, _getattr=getattr, _tuple=tuple, _isinstance=isinstance,
                _module=types.ModuleType, _exception=Exception, _int=int,
                _contents=operator.attrgetter("cell_contents"), _setattr=type.__setattr__,
                _delattr=type.__delattr__, _getframe=sys._getframe, _reset_modes=reset_torch_modes,
                _sys=sys, _missing=MISSING, _dict=dict, _benign=BENIGN):
    """Generator holding the snapshot. Commands (``send``):

    ``("check",)`` - verify everything against the snapshot, restore what changed, return
    the findings; ``("enter",)`` - control is entering student code: remember the state;
    ``("leave",)`` - control is back from student code: return what it changed (restored
    to how it was at "enter"); ``("std", out, err)`` - this test's stdout/stderr objects
    (test driver only); ``("allow", code)`` - once, from :func:`build`: the driver's code.
    """
    entries = snap.entries
    base, index = version_reader()
    vidx = index([e[2] for e in entries])
    versions = base[vidx]
    names, objects = snap.module_names, snap.module_objects
    object_ids = _list(_map(_id, objects))
    modules_dict = _sys.modules
    modules_idx = index([modules_dict])
    modules_version = base[modules_idx][0]
    cells = _tuple(c for c, _ in snap.cells)
    cell_values = _tuple(v for _, v in snap.cells)
    cell_ids = _list(_map(_id, cell_values))
    meta_path = _sys.meta_path
    sys_lists = (("sys.meta_path", meta_path, _list(meta_path)),
                 ("sys.path_hooks", _sys.path_hooks, _list(_sys.path_hooks)),
                 ("sys.path", _sys.path, _list(_sys.path)))
    meta_ids = _list(_map(_id, meta_path))
    expected_state = _tuple(getter() for _, getter, _ in state)
    sysdict = _sys.__dict__
    sys_index = -1
    for i, e in enumerate(entries):
        if e[2] is sysdict:
            sys_index = i
    driver_code = None

    def diff(i, copy, learn):
        """Compare entry i with ``copy``; restore; return findings."""
        kind, owner, d, _, _, label = entries[i]
        out = []
        if _any(_type(k) is not _str for k in d):
            out.append(f"{label}: attribute names that are not strings were inserted")
            if kind != "class":
                items = [(k, v) for k, v in d.items() if _type(k) is _str]
                d.clear()
                d.update(items)
        for k, v in copy.items():
            cur = d.get(k, _missing)
            if cur is v or (label, k) in _benign:
                continue
            if learn and (label, k) in volatile and cur is not _missing:
                copy[k] = cur  # rebound by the interpreter itself in every forked child
                continue
            out.append(f"{label}.{k} was {'deleted' if cur is _missing else 'replaced'}")
            if kind == "class":
                try:
                    _setattr(owner, k, v)
                except _exception:
                    d[k] = v
            else:
                d[k] = v
        for k in [k for k in d if k not in copy]:
            value = d[k]
            if (label, k) in _benign:
                continue
            if kind == "module" and (k == "__warningregistry__" or (
                    _isinstance(value, _module) and _getattr(value, "__name__", None) == f"{label}.{k}")):
                if learn:
                    copy[k] = value  # a submodule imported since, or the warnings registry
                continue
            out.append(f"{label}.{k} was added")
            if kind == "class":
                try:
                    _delattr(owner, k)
                except _exception:
                    d.pop(k, None)
            else:
                d.pop(k, None)
        return out

    def _safe(getter):
        try:
            return getter()
        except _exception:
            return _missing

    def check_state(expected):
        out = []
        for (name, getter, setter), value in _zip(state, expected):
            now = _safe(getter)
            if _type(now) is not _type(value) or now != value:
                out.append(f"torch state changed: {name}")
                if setter is not None:
                    try:
                        setter(value)
                    except _exception:
                        pass
        if out:
            _reset_modes()
        return out

    def check_cells():
        try:
            now = _list(_map(_id, _map(_contents, cells)))
        except ValueError:
            now = None
        if now == cell_ids:
            return []
        for cell, value in _zip(cells, cell_values):
            cell.cell_contents = value
        return ["a variable captured by an autograder function was replaced"]

    def check_modules():
        nonlocal modules_version
        out = []
        if base[modules_idx][0] == modules_version:
            return out
        now = _list(_map(_id, _map(modules_dict.get, names)))
        if now != object_ids:
            for name, obj, nid in _zip(names, objects, now):
                if nid != _id(obj):
                    out.append(f"sys.modules[{name!r}] was replaced")
                    modules_dict[name] = obj
        modules_version = base[modules_idx][0]
        return out

    def full():
        nonlocal versions
        out = check_modules()
        changed = (base[vidx] != versions).nonzero()[0]
        for i in changed.tolist():
            out.extend(diff(i, entries[i][4], True))
        if _len(changed):
            versions = base[vidx]
        for name, lst, copy in sys_lists:
            if _len(lst) != _len(copy) or _any(a is not b for a, b in _zip(lst, copy)):
                if name != "sys.path":
                    out.append(f"{name} was changed")
                lst[:] = copy
        out += check_cells()
        out += check_state(expected_state)
        return out

    # baseline for the checks around student calls: the state when control last entered
    # student code (trusted code - catch_warnings, redirect_stderr, no_grad - may change
    # protected state around a call; only what changes while student code runs counts)
    base_versions = versions.copy()
    base_copies = {}
    base_state = expected_state
    base_meta = meta_ids

    def enter():
        nonlocal base_versions, base_state, base_meta
        now = base[vidx]
        for i in (now != base_versions).nonzero()[0].tolist():
            base_copies[i] = _dict(entries[i][2])
        base_versions = now
        base_state = _tuple(_safe(getter) for _, getter, _ in state)
        base_meta = _list(_map(_id, meta_path))

    def leave():
        nonlocal base_versions
        out = check_modules()
        now = base[vidx]
        changed = (now != base_versions).nonzero()[0]
        for i in changed.tolist():
            out.extend(diff(i, base_copies.get(i, entries[i][4]), False))
        if _len(changed):
            base_versions = base[vidx]
        if _list(_map(_id, meta_path)) != base_meta:
            out.append("sys.meta_path was changed")
            meta_path[:] = sys_lists[0][2]
        out += check_cells()
        out += check_state(base_state)
        return out

    result = None
    while True:
        cmd = yield result
        result = None
        if _type(cmd) is not _tuple or not cmd:
            continue
        op = cmd[0]
        if op == "enter":
            enter()
        elif op == "leave":
            result = _tuple(leave())
        elif op == "check":
            result = _tuple(full())
        elif op == "allow" and driver_code is None:
            driver_code = _tuple(cmd[1])
        elif op == "std" and _getframe(1).f_code in driver_code and sys_index >= 0:
            copy = entries[sys_index][4]
            copy["stdout"], copy["stderr"] = cmd[1], cmd[2]
            sysdict["stdout"], sysdict["stderr"] = cmd[1], cmd[2]


# --------------------------------------------------------------------------- profiler


def _profile_loop(trusted_codes, trusted_globals, test_codes, namespace, bound, guard, findings,
                  _id=id, _type=type, _frame=types.FrameType, _tuple=tuple, _len=len, _missing=MISSING):
    """Generator behind a test's profile function (its state is out of reach: a generator frame).

    Tracks transitions between student code and trusted code (the test, autograder, torch,
    the standard library). On every transition out of student code it re-verifies the
    snapshot (against the state recorded on the way in), and checks that the names the test itself binds (its imports, variables,
    functions) were not rebound in the test's namespace while student code ran. Findings go
    to ``findings``, a list held only by the test driver's frame.
    """
    T, G, I = trusted_codes, trusted_globals, test_codes
    base, index = version_reader()
    ns_idx = index([namespace])
    ns_version = None
    saved = ()
    send = guard.send
    get = namespace.get

    def trusted(frame):
        c = _id(frame.f_code)
        return c in I or (c in T and _id(frame.f_globals) in G)

    result = None
    while True:
        item = yield result
        result = None
        if _type(item) is not _tuple or _len(item) != 2:
            continue
        frame, event = item
        if _type(frame) is not _frame:
            continue
        back = frame.f_back
        if back is None:
            continue
        inner = trusted(frame)
        if inner == trusted(back):
            continue
        if (event == "call") != inner:  # into student code (a call to it, or a return to it)
            send(("enter",))
            ns_version = base[ns_idx][0]
            saved = _tuple((name, get(name, _missing)) for name in bound)
            continue
        found = send(("leave",))
        if found:
            findings.extend(found)
        if ns_version is not None and base[ns_idx][0] != ns_version:
            for name, value in saved:
                if get(name, _missing) is not value:
                    findings.append(f"the test's variable {name!r} was rebound by student code")
                    if value is _missing:
                        namespace.pop(name, None)
                    else:
                        namespace[name] = value


def make_profiler(trusted_codes, trusted_globals, test_codes, namespace, bound, guard, findings):
    """The ``sys.setprofile`` function for one test (see :func:`_profile_loop`)."""
    loop = _profile_loop(trusted_codes, trusted_globals, test_codes, namespace, bound, guard, findings)
    next(loop)

    def profile(frame, event, arg, _send=loop.send):
        if event == "call" or event == "return":
            _send((frame, event))

    return profile


# --------------------------------------------------------------------------- vault


def _vault_loop(_urandom=os.urandom, _getframe=sys._getframe, _type=type, _tuple=tuple, _str=str,
                _int=int, _len=len, _bytes=bytes):
    """Generator holding the secret key and the hidden tests of the current submission.

    ``("allow", driver_code, zygote_code)`` once from :func:`build`; from the zygote:
    ``("begin", tests)``, ``("end",)``, ``("verify", k, payload, mac)``; from the test
    driver: ``("arm", k)`` -> test k (compiled), then ``("sign", k, payload)`` for that same
    k, once. A test process may run several tests, in increasing order: each is armed and
    signed once, and a test can be armed only when the one before it was signed.
    """
    import _hashlib

    digest = _hashlib.hmac_digest
    key = _urandom(32)
    driver_code = None
    zygote_codes = ()
    tests = ()
    nonce = b""
    current, last = None, -1
    result = None
    while True:
        cmd = yield result
        result = None
        if _type(cmd) is not _tuple or not cmd:
            continue
        op = cmd[0]
        caller = _getframe(1).f_code
        if op == "allow" and driver_code is None:
            driver_code, zygote_codes = cmd[1], cmd[2]
        elif caller in zygote_codes and op == "begin":
            tests, nonce = _tuple(cmd[1]), _urandom(16)
            current, last = None, -1
        elif caller in zygote_codes and op == "end":
            tests, nonce = (), b""
        elif caller in zygote_codes and op == "verify":
            k, payload, mac = cmd[1], cmd[2], cmd[3]
            ok = _type(payload) is _bytes and _type(mac) is _str and _type(k) is _int and 0 <= k < _len(tests)
            result = ok and digest(key, nonce + _str(k).encode() + b"\0" + payload, "sha256").hex() == mac
        elif caller is driver_code and op == "arm" and current is None:
            k = cmd[1]
            if _type(k) is _int and last < k < _len(tests):
                current = last = k
                result = tests[k]
        elif caller is driver_code and op == "sign" and current is not None:
            k, payload = cmd[1], cmd[2]
            if _type(payload) is _bytes and _type(k) is _int and k == current:
                current = None
                result = digest(key, nonce + _str(k).encode() + b"\0" + payload, "sha256").hex()


# --------------------------------------------------------------------------- sealed functions


def _sealed_loop(original, name):
    """Holds ``original``; each ``send((args, kwargs))`` returns a one-shot call generator."""
    request = yield None
    while True:
        request = yield _sealed_call(original, name, request)


def _sealed_call(original, name, request, _audit=sys.audit, _type=type, _tuple=tuple, _dict=dict,
                 _len=len):
    if _type(request) is not _tuple or _len(request) != 2:
        raise TypeError("bad call")
    args, kwargs = request
    if _type(args) is not _tuple or _type(kwargs) is not _dict:
        raise TypeError("bad call")
    _audit("autograder.sealed", name, args)  # the audit hook refuses what is not allowed now
    return original(*args, **kwargs)
    yield  # noqa - unreachable: makes this a generator, so its frame is sealed


def _make_wrapper(loop, original):
    def sealed(*args, _loop=loop, _next=next, _stop=StopIteration, **kwargs):
        call = _loop.send((args, kwargs))
        try:
            _next(call)
        except _stop as done:
            return done.value
        raise RuntimeError("sealed call did not finish")

    for attr in ("__name__", "__qualname__", "__doc__"):
        try:
            setattr(sealed, attr, getattr(original, attr))
        except (AttributeError, TypeError):
            pass
    return sealed


def _refuser(name):
    def refused(*args, **kwargs):
        raise PermissionError(f"{name} is not available while grading")

    refused.__name__ = name.rsplit(".", 1)[-1]
    return refused


def seal(targets):
    """Replace functions by wrappers that ask the audit hook first.

    ``targets``: ``{name: (module, attribute, keep)}``; with ``keep`` false the function is
    refused outright. Every dict entry and list item referring to the original (module
    namespaces, ``__wrapped__`` attributes, aliases such as ``threading._start_new_thread``)
    is pointed at the wrapper, so the original survives only in a generator frame.
    """
    done = []
    for name, (module, attribute, keep) in targets.items():
        original = getattr(module, attribute, None) if module is not None else None
        if original is None:
            continue
        if keep:
            loop = _sealed_loop(original, name)
            next(loop)
            wrapper = _make_wrapper(loop, original)
        else:
            wrapper = _refuser(name)
        for ref in gc.get_referrers(original):
            if type(ref) is dict:
                for k, v in list(ref.items()):
                    if v is original:
                        ref[k] = wrapper
            elif type(ref) is list:
                for i, v in enumerate(ref):
                    if v is original:
                        ref[i] = wrapper
        done.append((name, wrapper))
        del original
    return done


# --------------------------------------------------------------------------- audit hooks


def _audit_hooks(snap, control, _type=type, _str=str, _id=id, _len=len, _getframe=sys._getframe,
                 _read=os.read, _frozenset=frozenset, _permission=PermissionError, _os_error=OSError,
                 _realpath=os.path.realpath, _getattr=getattr, _tuple=tuple):
    """The two audit hooks; their state lives in this closure only (the interpreter's hook
    list is the only reference to the hooks, so student code cannot reach it)."""
    T, G = snap.trusted_codes, snap.trusted_globals
    handing = snap.frame_handing
    protected = snap.protected_ids
    roots = snap.trusted_roots
    known = snap.known_modules
    torch_ns = snap.torch_namespaces
    control = _frozenset(control)
    s = {"phase": "zygote", "tokens": -1, "test": _frozenset(), "busy": False}
    flags = []

    def untrusted(frame):
        c = _id(frame.f_code)
        return not (c in s["test"] or (c in T and _id(frame.f_globals) in G))

    def for_student(frame):
        """Whether ``frame``, which triggered an event, works for student code."""
        if untrusted(frame):
            return True
        if _id(frame.f_code) in handing:
            back = frame.f_back
            return back is not None and untrusted(back)
        return False

    def refuse(message, reason=None):
        if reason:
            flags.append(reason)
        raise _permission(message)

    def hook(event, args):
        if s["busy"]:
            return
        if s["phase"] == "zygote" and event[:11] != "autograder.":
            return
        s["busy"] = True
        try:
            decide(event, args, s["phase"])
        finally:
            s["busy"] = False

    def decide(event, args, phase):
        if event[:11] == "autograder.":
            caller = _getframe(2)
            if _id(caller.f_code) not in control:
                refuse("not allowed", f"student code raised the grader's event {event}")
            if event == "autograder.phase":
                s["phase"] = args[0]
                if _len(args) > 1:
                    s["tokens"] = args[1]
            elif event == "autograder.test":
                s["test"] = args[0]
            elif event == "autograder.flags":
                args[0].extend(flags)
            elif event == "autograder.sealed":
                sealed(args[0], args[1], phase)
            return
        if event in TRACE_EVENTS:
            if _id(_getframe(2).f_code) not in control:
                refuse(f"{event} is not available while grading", f"{event} called by student code")
        elif event in TAMPER_EVENTS:
            refuse(f"{event} is not available while grading", f"{event} called by student code")
        elif event[:7] == "ctypes.":
            if _id(_getframe(2).f_code) in control:
                return
            if event == "ctypes.dlopen":
                path = args[0] if args else None
                if path is None or (_type(path) is _str and path == _realpath(path) and path.startswith(roots)):
                    return
            refuse("ctypes is not available while grading", f"{event} used by student code")
        elif event in EXEC_EVENTS:
            refuse(f"running other programs is not available while grading ({event})")
        elif event in FORK_EVENTS:
            if _id(_getframe(2).f_code) in control:
                return
            got = b""
            if s["tokens"] >= 0:
                try:
                    got = _read(s["tokens"], 1)
                except _os_error:
                    got = b""
            if not got:
                refuse("too many processes for one submission")
        elif event == "object.__getattr__":
            name = args[1] if _len(args) > 1 else None
            if name in GENERATOR_FRAME_ATTRIBUTES or (name == "tb_frame" and phase == "test"):
                if for_student(_getframe(2)):
                    refuse(f"{name} is not available while grading", f"student code read {name}")
        elif event == "sys._getframe":
            if phase == "test" and for_student(_getframe(2)):
                refuse("frames are not available during a test", "student code called sys._getframe during a test")
        elif event == "object.__setattr__" or event == "object.__delattr__":
            obj = args[0]
            if _id(obj) in protected or (_len(args) > 1 and args[1] == "__class__" and _id(_type(obj)) in protected):
                refuse("protected object", f"student code tried to replace {args[1]} of a protected object")

    def sealed(name, call_args, phase):
        if phase == "test" and name in TEST_ONLY_SEALED:
            refuse(f"{name} is not available during a test")
        if name == "os.register_at_fork":
            refuse("os.register_at_fork is not available while grading")
        if name == "_posixsubprocess.fork_exec":
            refuse("running other programs is not available while grading")
        if name[:5] == "_imp.":
            spec = call_args[0] if call_args else None
            attr = "__name__" if name in ("_imp.exec_builtin", "_imp.exec_dynamic") else "name"
            mod = _getattr(spec, attr, None)
            if _type(mod) is not _str or mod in known:
                refuse("re-creating a loaded module is not available while grading",
                       f"student code tried to re-create the module {mod!r}")
            if mod in FFI_MODULES or mod.split(".")[-1] in FFI_MODULES:
                refuse(f"{mod} is not available while grading", f"student code tried to load {mod}")
            if name == "_imp.create_dynamic":
                origin = _getattr(spec, "origin", None)
                if _type(origin) is not _str or origin != _realpath(origin) or not origin.startswith(roots):
                    refuse("loading native code is not available while grading",
                           "student code tried to load native code from outside the installation")
        if name == "torch._C._dispatch_library":
            kind = call_args[0] if call_args else None
            ns = call_args[1] if _len(call_args) > 1 else None
            if kind != "DEF" and ns in torch_ns:
                refuse("registering kernels for torch operators is not available while grading",
                       f"student code tried to register kernels for torch operators ({ns})")

    return hook


# --------------------------------------------------------------------------- build


def _fork_volatile(snap):
    """Module attributes the interpreter rebinds in every forked child (threading's locks ...).

    Found by forking once: the child compares every protected dict with the snapshot and
    reports the changed ``(module, attribute)`` pairs, which the guard then accepts.
    """
    import json

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            changed = []
            for kind, owner, d, view, copy, label in snap.entries:
                if kind != "module":
                    continue
                for k, v in copy.items():
                    if d.get(k, MISSING) is not v:
                        changed.append([label, k])
            os.write(w, json.dumps(changed).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return frozenset(tuple(x) for x in json.loads(data or b"[]"))


class Protection(tuple):
    """Immutable handle for the harness: ``(guard, vault, trusted_codes, trusted_globals, signals, summary)``."""

    __slots__ = ()
    guard = property(operator.itemgetter(0))
    vault = property(operator.itemgetter(1))
    trusted_codes = property(operator.itemgetter(2))
    trusted_globals = property(operator.itemgetter(3))
    signals = property(operator.itemgetter(4))
    summary = property(operator.itemgetter(5))


def build(exclude=(), trusted_roots=(), control_codes=(), driver_code=None, zygote_codes=(), std_codes=()):
    """Seal functions, snapshot the interpreter, install the audit hooks.

    ``exclude``: modules not to protect (the IPython shell's, which only run student
    cells); ``trusted_roots``: read-only directories native code may be loaded from;
    ``control_codes``: code objects of the harness functions allowed to drive the hooks;
    ``driver_code`` / ``zygote_codes``: code objects the vault accepts commands from;
    ``std_codes``: code objects allowed to install the stdout/stderr capture.
    """
    import signal

    torch = sys.modules.get("torch")
    namespaces = set()
    if torch is not None:
        try:
            namespaces = {n.split("::")[0] for n in torch._C._dispatch_get_all_op_names()}
        except Exception:  # noqa: BLE001
            namespaces = {"aten", "prims", "prim", "quantized"}
    targets = {
        "signal.signal": (sys.modules.get("_signal"), "signal", True),
        "_thread.start_new_thread": (sys.modules.get("_thread"), "start_new_thread", True),
        "os.register_at_fork": (os, "register_at_fork", True),
        "_imp.create_dynamic": (sys.modules.get("_imp"), "create_dynamic", True),
        "_imp.exec_dynamic": (sys.modules.get("_imp"), "exec_dynamic", True),
        "_imp.create_builtin": (sys.modules.get("_imp"), "create_builtin", True),
        "_imp.exec_builtin": (sys.modules.get("_imp"), "exec_builtin", True),
        "_posixsubprocess.fork_exec": (sys.modules.get("_posixsubprocess"), "fork_exec", True),
    }
    if torch is not None:
        targets["torch._C._dispatch_library"] = (torch._C, "_dispatch_library", True)
    sealed = seal(targets)

    exclude = set(exclude)
    names = [n for n, m in list(sys.modules.items()) if isinstance(m, types.ModuleType) and n not in exclude]
    import warnings

    with warnings.catch_warnings():  # reading deprecated module attributes warns
        warnings.simplefilter("ignore")
        snap = Snapshot(names)
    snap.refresh()  # the copies must not see catch_warnings' temporary filters
    snap.trusted_roots = tuple(os.path.realpath(r).rstrip(os.sep) + os.sep for r in trusted_roots)
    snap.known_modules = frozenset(sys.modules)
    snap.torch_namespaces = frozenset(namespaces)

    volatile = _fork_volatile(snap)
    guard = _guard_loop(snap, torch_state(), volatile)
    next(guard)
    guard.send(("allow", std_codes or (driver_code,)))
    vault = _vault_loop()
    next(vault)
    vault.send(("allow", driver_code, tuple(zygote_codes)))
    control = {id(c) for c in control_codes} | {id(_sealed_call.__code__), id(_profile_loop.__code__)}
    hook = _audit_hooks(snap, control)
    signals = tuple((s, signal.getsignal(s)) for s in sorted(signal.valid_signals())
                    if s not in (signal.SIGKILL, signal.SIGSTOP) and signal.getsignal(s) is not None)
    summary = {
        "dicts": len(snap.entries),
        "modules": len(snap.module_names),
        "trusted code objects": len(snap.trusted_codes),
        "protected objects": len(snap.protected_ids),
        "closure cells": len(snap.cells),
        "sealed": [name for name, _ in sealed],
        "rebound after fork": sorted(".".join(v) for v in volatile),
    }
    sys.addaudithook(hook)
    return Protection((guard, vault, snap.trusted_codes, snap.trusted_globals, signals, summary))
