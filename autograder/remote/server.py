"""The student's side of calls into student code: performs the judge's calls where the
student's code runs and answers each with an observation (plain data, never a pickle).

Runs in the test process inside the sandbox; imports nothing of the judge's side."""

from __future__ import annotations

import base64
import io
import os
import pickle
import sys

from autograder.wire import observation
from autograder.wire.frames import flush_stdio
from autograder.wire.spec import OP_BINARY, OP_COMPARISONS, OP_INPLACE, OP_UNARY, OPERATIONS

from .pickler import DELETED, has_state
from .silence import quiet


def _operations():
    """What a :class:`Remote` asks of the object where it lives, by name (a fixed table): every
    name of :data:`autograder.wire.spec.OPERATIONS`, and nothing else."""
    import copy
    import math
    import operator

    def _array(obj):
        import numpy

        return numpy.asarray(obj)

    def _iter(obj):
        it = iter(obj)
        return it

    def _op(name):  # operator's function of that name: and -> and_, iand -> iand
        return getattr(operator, name + "_" if name in ("and", "or") else name)

    ops = {
        "getattr": getattr,
        "setattr": setattr,
        "delattr": delattr,
        "dir": lambda o: sorted(dir(o)),
        "isinstance": isinstance,
        "issubclass": issubclass,
        "copy": copy.copy,
        "deepcopy": copy.deepcopy,
        "repr": repr,
        "str": str,
        "format": format,
        "len": len,
        "bool": bool,
        "iter": _iter,
        "next": next,
        "reversed": reversed,
        "contains": operator.contains,
        "getitem": operator.getitem,
        "setitem": operator.setitem,
        "delitem": operator.delitem,
        "hash": hash,
        "array": _array,
        "int": int,
        "float": float,
        "complex": complex,
        "index": operator.index,
        "round": round,
        "enter": lambda o: o.__enter__(),
        "exit": lambda o, *exc: o.__exit__(*exc),
        "divmod": divmod,
        "pow": pow,
        "abs": abs,
        "trunc": math.trunc,
        "floor": math.floor,
        "ceil": math.ceil,
    }
    for name in OP_COMPARISONS + OP_BINARY + OP_INPLACE + OP_UNARY:
        if name not in ops:
            ops[name] = _op(name)
    if set(ops) != OPERATIONS:  # checked at import: the two sides never disagree on a name
        raise ImportError(f"remote operations differ from the spec: {set(ops) ^ OPERATIONS}")
    return ops


OPS = _operations()


class Server:
    """Where student code runs under the grader: the student's namespace, the objects student
    code returned that the judge holds handles to, and what a call changed of the namespace.

    The test process makes one (``Server(shell.user_ns)``) and answers each call the judge
    sends with :meth:`serve_call`; a handle's path in the call is resolved here, against this
    server's namespace, never looked up by a name anywhere else."""

    _serving: Server | None = (
        None  # the server performing a call in this process (a probe's student() reads it)
    )

    def __init__(self, namespace: dict):
        self.namespace = namespace
        self.kept: list = []  # objects returned by student code that stay callable (handles)
        self.names_changed = (
            None  # () -> names report of what a call bound, rebound, deleted or changed
        )

    @classmethod
    def serving(cls):
        """The server performing a call in this process now, or None."""
        return cls._serving

    def value(self, path):
        """The object a handle's path names: ``("name", attr...)`` in the student's namespace,
        ``("$kept", i, attr...)`` an object student code returned, ``("$op", name)`` an operation."""
        if path[0] == "$op":
            return OPS[path[1]]
        if path[0] == "$kept":
            obj = self.kept[path[1]]
            rest = path[2:]
        else:
            if path[0] not in self.namespace:
                raise NameError(f"name {path[0]!r} is not defined")
            obj = self.namespace[path[0]]
            rest = path[1:]
        for name in rest:
            obj = getattr(obj, name)
        return obj

    def keep(self, obj) -> int:
        """Keep an object student code returned (the judge gets a handle to it): its index."""
        self.kept.append(obj)
        return len(self.kept) - 1

    def serve_call(self, header: dict, payload: bytes, out_fd: int = 1, err_fd: int = 2) -> bytes:
        """Perform one call sent by the judge; return the observation."""
        previous, Server._serving = Server._serving, self
        try:
            return self._serve_call(header, payload, out_fd, err_fd)
        finally:
            Server._serving = previous

    def _serve_call(self, header, payload, out_fd, err_fd):
        rng = header.get("rng")
        # the judge's call, as pickler.dumps made it (the supervisor relays only what the judge sent): data, and
        # functions and classes by reference - never a test's code, constants or docstrings
        tracked, fn, args, kwargs, edits = _Unpickler(self, io.BytesIO(payload)).load()
        torch = sys.modules.get("torch")
        arrival = {
            id(o): o._version for o in tracked if torch is not None and isinstance(o, torch.Tensor)
        }
        if isinstance(rng, str) and torch is not None:
            try:
                torch.set_rng_state(
                    torch.frombuffer(bytearray(base64.b64decode(rng)), dtype=torch.uint8)
                )
            except Exception:  # noqa: BLE001
                pass
        sizes = [_size(out_fd), _size(err_fd)]
        warnings_seen: list = []
        doc: dict = {}
        outcome = None
        containers = _containers(args, kwargs, tracked)  # before the call: the test's data as sent
        saved = self._apply_edits(edits)
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
            self._undo_edits(saved)
        flush_stdio()
        if self.names_changed is not None:
            try:
                changed = self.names_changed()
                if changed:
                    doc["names"] = changed
            except Exception:  # noqa: BLE001 - a global that breaks when read: the judge keeps what it has
                pass
        enc = observation.Encoder(tracked, keep=self.keep, arrival=arrival)
        try:
            doc[outcome[0]] = enc.encode(outcome[1])
            doc["after"] = [
                enc.encode(o, top_tracked=True) if has_state(o) else None for o in tracked
            ]
            moved, same = _moved(containers, tracked)
            if moved:
                doc["moved"] = moved
            if same:
                doc["same"] = same
        except observation.ObservationTooLarge as exc:
            doc = {"error": f"what the call returned is too large to grade: {exc}"}
        except Exception as exc:  # noqa: BLE001 - an object that breaks when read
            doc = {
                "error": f"what the call returned could not be read: {type(exc).__name__}: {exc}"[
                    :500
                ]
            }
        doc["stdout"] = _read_from(out_fd, sizes[0])
        doc["stderr"] = _read_from(err_fd, sizes[1])
        doc["warnings"] = [str(w)[:500] for w in warnings_seen][:50]
        try:
            return observation.dumps(doc)
        except observation.ObservationTooLarge as exc:
            return observation.dumps(
                {"error": f"what the call returned is too large to grade: {exc}"}
            )

    def _apply_edits(self, edits):
        """A test cell's ``del name`` / ``name = other`` of the student's names, for one call (nbgrader
        runs tests in the student's namespace, where such a statement changes what student code sees:
        e.g. ``del squares`` to check that ``sum_of_squares`` calls ``squares``)."""
        saved = {}
        if not edits or self.namespace is None:
            return saved
        missing = object()
        for name, value in edits.items():
            saved[name] = self.namespace.get(name, missing)
            if (
                type(value) is tuple
                and len(value) == 1
                and type(value[0]) is str
                and value[0] == DELETED[0]
            ):
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = value
        saved["$missing"] = missing
        return saved

    def _undo_edits(self, saved):
        if not saved:
            return
        missing = saved.pop("$missing")
        for name, value in saved.items():
            if value is missing:
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = value


class _Unpickler(pickle.Unpickler):
    """The judge's call, as :func:`autograder.remote.pickler.dumps` made it: a handle's path
    (a persistent id) becomes the object it names in this server's namespace."""

    def __init__(self, server, file):
        super().__init__(file)
        self.server = server

    def persistent_load(self, pid):
        if type(pid) is not tuple or not pid:
            raise pickle.UnpicklingError("not a handle's path")
        return self.server.value(pid)


# What a call did to the plain containers it was given (issue 35 item 2): a test that reads its own
# list, dict, set, bytearray or numpy array after the call sees in one kernel what the call wrote
# into it; the judge's copy is another object. Only arguments given directly (not nested), of exactly
# those types, encoded as plain data within a budget (no student code runs to read them); one that
# does not fit is not carried (the judge's verdict may then differ from one kernel's, and says so).
CARRIED = ("list", "dict", "set", "bytearray", "ndarray")
MOVED_BUDGET = {"max_nodes": 20_000, "max_bytes": 8 << 20}


def _containers(args, kwargs, tracked) -> list:
    """``[(where, object, its plain encoding, its nested containers)]`` for the arguments a call
    may change in place (nested: :func:`_nested`, kept alive so that no id is reused)."""
    out = []
    items = [(str(i), a) for i, a in enumerate(args)] if type(args) is tuple else []
    if type(kwargs) is dict:
        items += [(f"={k}", v) for k, v in kwargs.items() if type(k) is str]
    for where, obj in items:
        if not _carried(obj):
            continue
        plain = _plain(obj, tracked)
        if plain is not None:
            out.append((where, obj, plain, _nested(obj)))
    return out


def _carried(obj) -> bool:
    return type(obj).__name__ in CARRIED and type(obj).__module__ in ("builtins", "numpy")


def _nested(root) -> dict:
    """``{id: (container, path)}``: the containers inside ``root`` (not ``root``), each with the
    first path of list indices and dict keys (str or int) that reaches it - what identifies an
    inner list the test may hold an alias of. Bounded: observation.MAX_KEPT, MAX_DEPTH."""
    out: dict = {}
    stack: list = [(root, [])]
    while stack and len(out) < observation.MAX_KEPT:
        current, path = stack.pop()
        if len(path) >= observation.MAX_DEPTH:
            continue
        if type(current) is list:
            items = list(enumerate(current))
        elif type(current) is dict:
            items = [(k, v) for k, v in current.items() if type(k) in (str, int)]
        else:
            continue
        for key, value in items:
            if _carried(value) and value is not root and id(value) not in out:
                out[id(value)] = (value, [*path, key])
                stack.append((value, [*path, key]))
    return out


def _plain(obj, tracked):
    try:
        node = observation.Encoder(tracked, plain_only=True, **MOVED_BUDGET).encode(obj)
        return node, observation.dumps(node)
    except Exception:  # noqa: BLE001 - not plain, or over the budget: not carried
        return None


def _moved(containers, tracked) -> tuple[dict, dict]:
    """``({where: node}, {where: [[new path, old path], ...]})``: the containers whose contents the
    call changed, as they are now, and which containers inside each are the very objects that
    were inside it before the call (an inner list sorted in place is still the test's inner list,
    as in one kernel; one built by the call is new)."""
    out, same = {}, {}
    for where, obj, (_, before), inner in containers:
        now = _plain(obj, tracked)
        if now is None:
            continue
        after = _nested(obj)
        kept = [
            [path, inner[key][1]]
            for key, (value, path) in after.items()
            if key in inner and inner[key][0] is value
        ]
        # changed: other contents, or the same contents in other objects (an inner list replaced
        # by an equal copy, two equal inner lists swapped), which a test's alias would tell apart
        moved_inside = len(kept) != len(inner) or any(new != old for new, old in kept)
        if now[1] != before or moved_inside or len(after) != len(inner):
            out[where] = now[0]
            if kept:
                same[where] = kept
    return out, same


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
