"""On the host, outside the sandbox: the judge, the only process that decides a verdict.

It never runs student code and never loads anything a student process sent except through
:mod:`autograder.wire.observation` (JSON, checked field by field). It runs the instructor's test
cells - taken from the course's source notebooks by the host, never from the sandbox - in a
namespace where each name the student's notebook defines is a :class:`~autograder.remote.Remote`
handle (a function or class: calling it is a request to the student's test process), a module
the judge had already loaded before any submission (its warm-up: the modules the course's source
notebooks import; nothing is ever imported, looked up or instantiated on a student's word), or a
small value decoded from the student's report. Every
verdict - pass or fail, partial credit, the message - is computed here.

Process structure: a warm parent (torch, the checks) forks one child per submission, so one
notebook's tests never see another's state. The warm parents of a grading run are themselves
forks of one warm *template* (:func:`template`; the host's
:class:`~autograder.grading.host.supervisor.JudgeTemplate`), so N sandboxes pay for one warm-up. Channel: frames (:mod:`autograder.wire.spec`) on the
descriptors given at start (moved off 0/1, which point at /dev/null and the log)::

    supervisor -> judge:   {"op": "begin", "tests": [{"id", "source", "points"}]}
                           {"op": "test", "k", "names", "restored"}     run test k
                           {"ev": "reply", "status"?} + body            the answer to a call
                           {"op": "end"}  /  {"op": "quit"}
    judge -> supervisor:   {"ev": "child", "pid"}, {"ev": "ready"}
                           {"op": "call", "quiet", "rng"} + pickled call
                           {"ev": "verdict", "k", ...}
                           {"ev": "child-exit", "status"}
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import io
import os
import sys
import time
import types

from autograder.wire.frames import read_frame, write_frame

PROTO_IN, PROTO_OUT = 1021, 1022
TEST_OUTPUT_KEEP = 50_000
MESSAGE_KEEP = 1_500
MEMORY_WORDS = (
    "can't allocate memory",
    "DefaultCPUAllocator",
    "out of memory",
    "Cannot allocate memory",
)


def _channel():
    """Frames on PROTO_IN/PROTO_OUT (from 0/1); 0 is /dev/null and 1 the log (2) after it."""
    os.dup2(0, PROTO_IN)
    os.dup2(1, PROTO_OUT)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # a print at the C level goes to the log, never into the channel
    os.close(devnull)
    for fd in (PROTO_IN, PROTO_OUT):
        os.set_inheritable(fd, False)


def main():
    _channel()
    config, _ = read_frame(PROTO_IN)
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", cwd)]
    from autograder.grading.warmup import without_gc

    with without_gc():
        warm_up(config.get("preload", ()))
    _serve()


def template():
    """A warm judge that starts judges: each a fork of it, so that N sandboxes pay for one judge
    warm-up (torch and what the tests use), not N. Its channel is a Unix socket on fd 0: the
    config frame, then one byte b"R" from it (warm), then per judge one byte from the host with
    three descriptors (the judge's channel in and out, its log) and the judge's pid (8 bytes)
    back. It never runs a test or reads a submission: it forks before any of that."""
    import select
    import socket
    import struct

    sock = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    sock.set_inheritable(False)
    config, _ = read_frame(sock.fileno())
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", cwd)]
    from autograder.grading.warmup import without_gc

    with without_gc():
        warm_up(config.get("preload", ()))
    sock.sendall(b"R")

    def reap(block=False):
        while True:
            try:
                pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    while True:
        ready, _, _ = select.select([sock], [], [], 1.0)
        reap()
        if not ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1, 3)
        except OSError:
            msg, fds = b"", []
        if not msg or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            break
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                for k, fd in enumerate(fds):
                    os.dup2(fd, k)
                    os.close(fd)
                _channel()
                _serve()
            finally:
                os._exit(70)
        for fd in fds:
            os.close(fd)
        sock.sendall(struct.pack("q", pid))
    reap(block=True)
    os._exit(0)


def _serve():
    """Ready, then one forked child per submission until the channel ends."""
    write_frame(PROTO_OUT, {"ready": True, "pid": os.getpid()})
    while True:
        try:
            msg, _ = read_frame(PROTO_IN)
        except EOFError:
            os._exit(0)
        op = msg.get("op")
        if op == "quit":
            os._exit(0)
        if op != "begin":
            continue
        # the child's first frame ("ready") must follow the parent's ("child"): both write to one
        # channel, so the child waits until the parent has written (a fast child, with no tests
        # to compile, otherwise answers first and the supervisor reads "ready" for "child")
        for test in msg.get("tests") or ():  # compiled here once, not in every child
            if isinstance(test, dict) and type(test.get("source")) is type(test.get("id")) is str:
                compile_test(test["source"], test["id"])
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(go_w)
                os.read(go_r, 1)  # b"" once the parent has written "child" and closed its end
                os.close(go_r)
                Submission(msg["tests"], msg.get("code")).run()
            except BaseException:  # noqa: BLE001
                import traceback

                traceback.print_exc()
                code = 70
            finally:
                os._exit(code)
        os.close(go_r)
        write_frame(PROTO_OUT, {"ev": "child", "pid": pid})
        os.close(go_w)
        _, status = os.waitpid(pid, 0)
        # the largest peak resident memory of any submission's child so far (kB): the bounds of
        # autograder.wire.observation keep it near the warm parent's whatever a student process sends
        import resource

        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        write_frame(PROTO_OUT, {"ev": "child-exit", "status": status, "peak_rss_kb": peak})


def warm_up(preload):
    from autograder import remote
    from autograder.wire import observation

    uses_torch = any(name.split(".")[0] in ("torch", "autograder") for name in preload)

    for name in preload:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001
            print(f"judge preload {name}: {exc!r}", file=sys.stderr)
    if not uses_torch:  # a course without torch: the judge never needs it
        observation.Decoder().decode(
            observation.loads(observation.dumps(observation.Encoder().encode([1.5, "s"])))
        )
        remote.dumps_call((len, [1]))
        return
    import torch

    import autograder.checks  # noqa: F401

    x = torch.randn(4, requires_grad=True)
    torch.relu(x).sum().backward()
    from autograder.grading.warmup import training, wants_training

    if wants_training(preload):
        training(torch)
    observation.Decoder().decode(
        observation.loads(observation.dumps(observation.Encoder().encode((x, [1.5]))))
    )
    from autograder import probes

    remote.dumps_call((probes.T + 1, x, torch.relu_))


class Channel:
    """The judge's end of calls into student code (the channel of its :class:`autograder.remote.Link`)."""

    def call(self, header: dict, payload: bytes) -> bytes:
        from autograder.remote import StudentProcessError

        write_frame(PROTO_OUT, dict(header, op="call"), payload)
        reply, body = read_frame(PROTO_IN)
        status = reply.get("status")
        if status:
            error = StudentProcessError(str(status), str(reply.get("message", status))[:500])
            PROBLEMS.append(error)
            raise error
        return body

    def report(self, error):
        """A reply that cannot be genuine (found while decoding it): the row's status."""
        if error not in PROBLEMS:
            PROBLEMS.append(error)

    def raised(self, error):
        """An exception a call into student code raised: the release stub's is counted."""
        from autograder.messages import is_stub

        if is_stub(error):
            STUBS.append(True)


PROBLEMS: list = []  # what went wrong with the student's process during the current test
STUBS: list = []  # the release stub's NotImplementedError, once per call that raised it (this test)


class _Capture(io.TextIOBase):
    """A test's stdout or stderr: kept up to a size, counted beyond."""

    def __init__(self):
        self.parts = []
        self.kept = 0
        self.size = 0

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            text = str(text)
        self.size += len(text)
        if self.kept < TEST_OUTPUT_KEEP:
            piece = text[: TEST_OUTPUT_KEEP - self.kept]
            self.parts.append(piece)
            self.kept += len(piece)
        return len(text)

    def text(self):
        out = "".join(self.parts)
        if self.size > self.kept:
            out += f"\n... [{self.size - self.kept} more characters not kept]"
        return out


BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("__"))
PLAIN = (int, float, str, bool, bytes, complex, tuple, list, dict, set, frozenset, type(None))
NEEDS_KERNEL = "needs-kernel"  # a verdict's status: the judge cannot carry this (not confirmed)


class Submission:
    """The judge's view of one notebook: its tests, run in order in one namespace.

    The namespace contract (docs/grading.md, "How the judge keeps names"): every name has an owner. The
    **test** owns every builtin name and every name a test cell bound, imported or deleted; the
    **student** owns the names the student's process reports (its cells, and its code during a
    call). A report from the student's side binds, rebinds or deletes only student-owned names,
    and writes in place only into objects the judge decoded from the student; a write aimed at a
    test-owned name is dropped (the test keeps its own) and named in review.txt. Checked after
    every call (:meth:`rebind`: the test's bindings by identity). Where one kernel would let
    student code see a test's binding - a test rebinds a name the student's functions read and
    then calls student code, or a later student cell names what a test bound - and wherever a
    report cannot be complete, its verdicts from there on are "not confirmed" (status
    ``needs-kernel``: :mod:`autograder.grading.verdicts`; one kernel's verdict is there anyway)."""

    def __init__(self, tests, code=None):
        from autograder import remote

        remote.connect(remote.Link(Channel(), edits=self.edits, rebind=self.rebind))
        self.tests = tests
        self.compiled = [compile_test(t["source"], t["id"]) for t in tests]
        self.ns = {"__name__": "__main__", "__builtins__": builtins}
        self.bound = {}  # student-owned names -> the object the judge bound for each
        self.reported = {}  # names the student's process defines -> their report entry
        code = code if isinstance(code, dict) else {}
        self.functions = _names(code.get("functions"))
        later = code.get("later") if isinstance(code.get("later"), dict) else {}
        self.later = {k: _names(v) for k, v in later.items() if type(k) is str}
        self.cells_after = {k for k in code.get("cells_after") or () if type(k) is int}
        self.exports = _names(code.get("exports")) & BUILTIN_NAMES
        self.kernel = None  # why the judge cannot carry this notebook from here on (not confirmed)
        self.dropped: list = []  # student writes aimed at test-owned names (review.txt)
        self.decoded: dict = {}  # name -> the container the judge decoded from the student for it
        self.snapshot: dict = {}  # the test's bindings when the current call was sent
        self.checks = [0, 0.0]  # invariant checks made, seconds spent

    # -- ownership -------------------------------------------------------------------
    def test_owned(self, name) -> bool:
        """Does the test own ``name`` now? Builtins (save one the assignment's source asks the
        student to define) and every name not bound to what the judge bound from the student."""
        if name in self.bound:
            return self.ns.get(name, _GONE) is not self.bound[name]
        return name in self.ns or (name in BUILTIN_NAMES and name not in self.exports)

    def _test_bindings(self) -> dict:
        bound = self.bound
        return {
            n: v
            for n, v in self.ns.items()
            if n not in bound or bound[n] is not v
            if n not in ("__name__", "__builtins__")
        }

    def _differs(self, name) -> bool:
        """The test's binding of ``name`` is not what the student's process has under it."""
        now = self.ns.get(name, _GONE)
        entry = self.reported.get(name)
        if entry is None:
            return now is not _GONE
        old = self.bound.get(name, _GONE)
        if now is old:
            return False
        from autograder.remote import Remote

        if type(now) is Remote:  # another of the student's own objects (edits() sends it to calls)
            return now._path != (name,)
        if now is _GONE:  # deleted: edits() sends the deletion
            return False
        ref = entry.get("ref")
        if type(ref) is str and ref and _reference(now) == ref:
            return False  # the same library object (`from math import sqrt` on both sides)
        if type(old) is type(now) and type(now) in PLAIN:  # an equal value (`CAUSES = (...)`)
            try:
                return not bool(old == now)
            except Exception:  # noqa: BLE001
                return True
        if isinstance(now, types.ModuleType) and isinstance(old, types.ModuleType):
            return now is not old
        return True

    def _cannot_carry(self, why):
        from autograder.remote import StudentProcessError

        if self.kernel is None:
            self.kernel = why[:500]
        error = StudentProcessError(NEEDS_KERNEL, self.kernel)
        if error not in PROBLEMS:
            PROBLEMS.append(error)
        raise error

    def edits(self):
        """Sent with each call: student names the running test deleted, or rebound to another
        of the student's own objects (a handle). Nothing else crosses by a name: a test's object
        bound under a name stays here; where one kernel would let the student's code see it (a
        name the student defines and its functions read), the judge does not confirm it."""
        from autograder.remote import DELETED, Remote

        started = time.perf_counter()
        out = {}
        for name, value in self.bound.items():
            if name not in self.ns:
                out[name] = DELETED
                continue
            now = self.ns[name]
            if now is value:
                continue
            if type(now) is Remote and now._path != (name,) and now._path[0] != "$op":
                out[name] = now
        ns, bound = self.ns, self.bound
        for name in self.functions:
            if ns.get(name, _GONE) is bound.get(name, _GONE) or name not in self.reported:
                continue  # (the common case: the student's own binding, untouched)
            if self._differs(name) and name not in out:
                self._cannot_carry(
                    f"a test rebinds {name!r}, which the student's code reads, then calls student "
                    "code (in one kernel the student's code sees the test's binding)"
                )
        self.snapshot = self._test_bindings()
        self.checks[1] += time.perf_counter() - started
        return out

    def check_invariant(self):
        """After each call: every binding the test held when it called is still the test's."""
        started = time.perf_counter()
        ns = self.ns
        for name, value in self.snapshot.items():
            if ns.get(name, _GONE) is not value:  # a bug of the judge's: the row says so
                from autograder.remote import StudentProcessError

                error = StudentProcessError(
                    "grader-error", f"the judge let a student's report change the test's {name!r}"
                )
                PROBLEMS.append(error)
                raise error
        self.checks[0] += 1
        self.checks[1] += time.perf_counter() - started

    def run(self):
        write_frame(PROTO_OUT, {"ev": "ready"})
        while True:
            msg, _ = read_frame(PROTO_IN)
            op = msg.get("op")
            if op == "end":
                return
            if op == "test":
                k = msg.get("k")
                if type(k) is not int or not 0 <= k < len(self.tests):
                    continue
                _default_dtype(msg.get("dtype"))
                verdict = self.run_test(k, msg.get("names"), msg.get("complete", True))
                write_frame(PROTO_OUT, dict(verdict, ev="verdict", k=k))

    def _decode(self, info):
        from autograder.wire import observation

        return observation.Decoder().decode(info.get("value"))

    def _bind(self, name, value, decoded=False):
        """Bind a student-owned name; ``decoded``: an object the judge decoded from the student
        (the only kind a later report may change in place)."""
        self.ns[name] = value
        self.bound[name] = value
        if decoded and (type(value) in (list, dict, set) or type(value).__name__ == "ndarray"):
            self.decoded[name] = value
        else:
            self.decoded.pop(name, None)

    def _unbind(self, name):
        self.bound.pop(name, None)
        self.decoded.pop(name, None)

    def bind(self, names, complete=True):
        """Bind the student's names for the next test: student-owned names only (a name the
        test owns keeps the test's object, whatever the report says)."""
        from autograder.remote import Remote, StudentProcessError
        from autograder.wire import observation

        if names is None:
            names = {}
        if type(names) is not dict:
            raise StudentProcessError(
                "tampered", "the student's process sent a names report that is not genuine"
            )
        for name in set(self.bound) - set(names):
            if self.ns.get(name, _GONE) is self.bound[name]:
                self.ns.pop(name, None)
            self._unbind(name)
        for name, info in names.items():
            if (
                type(name) is not str
                or not name.isidentifier()
                or name.startswith("__")
                or type(info) is not dict
            ):
                raise StudentProcessError(
                    "tampered", "the student's process sent a names report that is not genuine"
                )
        self.reported = dict(names)
        if complete is not True:
            self._cannot_carry(
                "the student's notebook defines more names than a names report carries"
            )
        for name, info in names.items():
            if name in self.bound and name not in self.ns:
                pass  # a student name the last test deleted: back, as before (docs/grading.md, "Limits")
            elif self.test_owned(name):
                continue  # the test's (a builtin, or bound by a test cell): it keeps its own
            kind = info.get("kind")
            if kind == "module":  # the judge's own module, only if it is loaded already
                module = _loaded(info.get("module"))
                value = module if module is not None else Remote((name,), _handle_info(info))
            elif kind == "value":
                try:
                    value = self._decode(info)
                except observation.ObservationError as exc:
                    raise StudentProcessError(
                        "tampered", f"a value that is not genuine: {exc}"
                    ) from None
            elif kind == "callable":  # a handle (classes: the built-in classes it derives from)
                value = Remote((name,), _handle_info(info))
            else:
                raise StudentProcessError(
                    "tampered", "the student's process sent a names report that is not genuine"
                )
            self._bind(name, value, decoded=kind == "value")

    def rebind(self, names):
        """After each call: what it bound, rebound, deleted or changed in place among the
        student's names (a function that updates a global list) - student-owned names only; a
        value changed in place is changed in place here too, in the object the judge decoded
        from the student (a test's alias sees it). A write aimed at a test-owned name is
        dropped and recorded. Then the invariant is checked."""
        from autograder.remote import Remote
        from autograder.wire import observation

        if names is not None:
            if type(names) is not dict or len(names) > MAX_NAMES + 1:
                raise observation.ObservationError("bad names")
            if names.get("$incomplete") is True:
                names = {k: v for k, v in names.items() if k != "$incomplete"}
                self._bad_names(names)
                self._cannot_carry(
                    "a call changed more of the student's names than a names report carries"
                )
            self._bad_names(names)
            for name, info in names.items():
                kind = info.get("kind")
                if self.test_owned(name) or (
                    name not in self.bound and name in BUILTIN_NAMES and name not in self.exports
                ):
                    if name in self.reported or kind != "deleted":
                        self._drop(name)
                    if kind != "deleted":
                        self.reported[name] = info
                    continue
                if kind == "deleted":
                    self.ns.pop(name, None)
                    self._unbind(name)
                    self.reported.pop(name, None)
                    continue
                if kind == "value":
                    old = self.bound.get(name)
                    new = self._decode(info)
                    value = _in_place(old, new) if self.decoded.get(name) is old else new
                elif kind == "callable":
                    value = Remote((name,), _handle_info(info))
                else:
                    continue  # (a module a call imported: the next test's report binds it)
                self._bind(name, value, decoded=kind == "value")
                self.reported[name] = info
        self.check_invariant()

    def _bad_names(self, names):
        from autograder.wire import observation

        for name, info in names.items():
            if (
                type(name) is not str
                or not name.isidentifier()
                or name.startswith("__")
                or type(info) is not dict
            ):
                raise observation.ObservationError("bad names")

    def _drop(self, name):
        if name not in self.dropped and len(self.dropped) < 50:
            self.dropped.append(name)

    def _after_test(self, k):
        """At the end of test ``k``: would a later student cell see what the test bound?"""
        later = self.later.get(str(k), frozenset())
        reads = self.functions if k in self.cells_after else frozenset()
        for name in self._test_bindings():
            if name in later or (name in reads and name in self.reported):
                if self._differs(name):
                    self._cannot_carry(
                        f"a test binds {name!r}, which a later cell of the student's notebook "
                        "uses (in one kernel it sees the test's binding)"
                    )

    def run_test(self, k, names, complete=True):
        from autograder.messages import CheckFailure  # noqa: F401 - (imported for its side effects: none)
        from autograder.remote import StudentProcessError

        PROBLEMS.clear()
        STUBS.clear()
        started = time.perf_counter()
        if self.kernel is not None:  # decided at an earlier test: not confirmed from there on
            return {
                "passed": False,
                "status": NEEDS_KERNEL,
                "message": f"not run in the judge: an earlier test: {self.kernel}",
                "seconds": 0,
            }
        dropped_before = len(self.dropped)
        out, err = _Capture(), _Capture()
        passed, partial, name, message, failure = False, None, "", "", None
        compiled = self.compiled[k]
        real = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            self.bind(names, complete)
            if compiled is None:
                raise SyntaxError("the instructor's test cell does not compile")
            body, last = compiled
            exec(body, self.ns)
            value = eval(last, self.ns) if last is not None else None
            passed = True
            partial = partial_grade(value)
        except BaseException as exc:  # noqa: BLE001 - the test failed: whatever it raised
            name, message = describe(exc)
            failure = failure_parts(exc)
            if isinstance(exc, StudentProcessError) and exc not in PROBLEMS:
                PROBLEMS.append(exc)
            memory = isinstance(exc, MemoryError) or any(w in message for w in MEMORY_WORDS)
            if memory and not PROBLEMS:
                PROBLEMS.append(StudentProcessError("memory-limit", message))
            elif isinstance(exc, OSError) and "File too large" in message and not PROBLEMS:
                PROBLEMS.append(StudentProcessError("output-limit", message))
        finally:
            sys.stdout, sys.stderr = real
        for problem in PROBLEMS:
            if problem.status == NEEDS_KERNEL and self.kernel is None:
                self.kernel = str(problem)[:500]
        if self.kernel is None:
            try:
                self._after_test(k)
            except StudentProcessError:
                pass
        if self.kernel is not None:  # whatever else happened: not confirmed
            return {
                "passed": False,
                "status": NEEDS_KERNEL,
                "message": self.kernel,
                "seconds": round(time.perf_counter() - started, 4),
                "checks": self.checks,
            }
        status = PROBLEMS[0].status if PROBLEMS else None
        if status and passed:  # the test swallowed what went wrong: it cannot count
            passed, partial = False, None
            name, message = "StudentProcessError", str(PROBLEMS[0])
        if status:
            failure = None  # the row's status says why, not the check
        elif not passed and STUBS:  # the test called the release stub and failed: nothing else
            failure, message = not_implemented(failure, message)  # is known, nor guessed
        wrote_stderr = err.size > 0
        if wrote_stderr and passed:
            passed = False
            message = "the test wrote to stderr (nbgrader scores that as a failure)"
        output = out.text() + (err.text() if err.size else "")
        return {
            "passed": passed,
            "partial": partial,
            "error": name,
            "message": message[:MESSAGE_KEEP],
            "failure": failure,
            "status": status,
            "stderr": wrote_stderr,
            "output": output,
            "seconds": round(time.perf_counter() - started, 4),
            "dropped": self.dropped[dropped_before:],
            "checks": self.checks,
        }


_GONE = object()


MAX_NAMES = 2000  # names in one report (the student's side says when it has more)


def _names(value) -> frozenset:
    if type(value) is not list:
        return frozenset()
    return frozenset(n for n in value[:100_000] if type(n) is str and n.isidentifier())


def _reference(obj):
    """``module.qualname`` of a library function or class (how a student's handle names it)."""
    try:
        module, qualname = obj.__module__, obj.__qualname__
    except Exception:  # noqa: BLE001
        return None
    if type(module) is not str or type(qualname) is not str or module == "__main__":
        return None
    return f"{module}.{qualname}"


def _handle_info(info):
    """What a names report says of a handle: its type's name and the built-in classes it derives
    from (names only; the proxy maps them through a fixed table, nothing is looked up by them)."""
    classes, type_name = info.get("classes"), info.get("type")
    return {
        "classes": [c for c in classes if type(c) is str][:8] if type(classes) is list else [],
        "type": type_name[:200] if type(type_name) is str else "object",
    }


def _in_place(old, new):
    """``new``, written into ``old`` when both are the same type of container (aliases follow:
    :func:`autograder.remote.client.write_into`); a name whose type changed is rebound."""
    from autograder.remote.client import write_into

    return old if type(old) is type(new) and write_into(old, new) else new


DTYPES = ("float32", "float64", "float16", "bfloat16")


def _default_dtype(name):
    """The student's process reports its default dtype (a cell may set it): the test runs with it,
    as it would in one kernel. Anything but a known floating dtype name means the usual float32."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_default_dtype(getattr(torch, name) if name in DTYPES else torch.float32)


def _loaded(name):
    """The module of that name if the judge has loaded it already (its warm-up imported what the
    course's source notebooks import), else None. A student's report is a name, never a reason to
    import: a module a student names that is not loaded stays in the student's process (a handle).
    ``__main__`` modules (``unittest.__main__`` runs discovery, ``IPython.__main__`` starts a
    shell) are never bound, loaded or not."""
    if type(name) is not str or not name or len(name) > 200:
        return None
    parts = name.split(".")
    if not all(part.isidentifier() and not part.startswith("__") for part in parts):
        return None
    module = sys.modules.get(name)
    return module if isinstance(module, types.ModuleType) else None


# --------------------------------------------------------------------------- tests


@functools.lru_cache(maxsize=1024)
def compile_test(source, grade_id):
    """``(body, last expression or None)``, or None when the cell does not compile. Code objects
    are immutable: the judge that forks a child per submission compiles an assignment's tests once
    (:func:`_serve`), and every child finds them here."""
    filename = f"<test {grade_id}>"
    try:
        tree = ast.parse(source, filename)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not source.rstrip().endswith(";"):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, filename, "exec", dont_inherit=True)
        last_code = compile(last, filename, "eval", dont_inherit=True) if last is not None else None
    except (SyntaxError, ValueError):
        return None
    return body, last_code


def partial_grade(value):
    """nbgrader's rule for a test cell's displayed result: a number is partial credit."""
    if value is None:
        return None
    try:
        grade = float(repr(value))  # values here are plain data or the grader's own objects
    except (ValueError, TypeError):
        return None
    if grade != grade or grade < 0:
        return None
    return grade


def failure_parts(exc):
    """The structured parts of a failed check (:meth:`autograder.messages.CheckFailure.parts`:
    kind, check, expected, found, cause), each bounded; for the release stub's bare
    ``NotImplementedError`` raised through the test, kind ``not-implemented``; else None (the
    row keeps the exception's type and message)."""
    from autograder.messages import STUB, CheckFailure, is_stub

    if is_stub(exc):
        return {"kind": "not-implemented", "check": STUB}
    if not isinstance(exc, CheckFailure):  # (a student's exception is a mirror, never this class)
        return None
    try:
        parts = exc.parts()
    except Exception:  # noqa: BLE001 - a test's own subclass of CheckFailure
        return None
    return {
        key: value[:MESSAGE_KEEP]
        for key, value in parts.items()
        if key in FAILURE_PARTS and type(value) is str
    }


FAILURE_PARTS = ("kind", "check", "expected", "found", "cause")


def not_implemented(failure, message):
    """A failed test that called a function still the release stub (``raise
    NotImplementedError()``): "not implemented yet", the check's first line kept, no expected,
    found or likely cause (they would be about code not written yet)."""
    from autograder.messages import STUB, STUB_HINT

    check = (failure or {}).get("check") or ""
    if check == STUB or (failure or {}).get("kind") == "not-implemented":
        check = ""
    return {"kind": "not-implemented", "check": check or STUB}, (
        f"{check}: {STUB_HINT}" if check else STUB_HINT
    )


def describe(exc):
    """``(exception name, message)`` for the feedback - never a traceback."""
    name = type(exc).__name__
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001
        text = ""
    return name[:200], text[:MESSAGE_KEEP]


if __name__ == "__main__":  # pragma: no cover
    main()
