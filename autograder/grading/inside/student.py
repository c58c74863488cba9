"""Inside the sandbox: the student process - the only place where student code runs.

Forked by the zygote once per submission (in a pid namespace of its own, with no
capabilities), the *main line* runs the student's code cells in notebook order through
IPython, going on after errors like nbgrader. At each run of consecutive test cells it forks
a *test process*, which holds the state the cells left and serves the judge's requests until
the zygote tells the main line to go on:

* ``begin`` - a test starts: restore what the cells replaced in torch and ``autograder``
  (never what they added), and report the names the notebook defines (:func:`names_report`);
* ``call`` - perform one call into student code (:meth:`autograder.remote.Server.serve_call`) and
  reply with the observation.

A notebook graded in one kernel (:mod:`.calibrate`) has no test processes: its test cells come as
cells (``["cell", i, source, "test"]``) and run in the main line like nbgrader's kernel runs them;
what they displayed, raised and wrote to stderr is reported on ``CTL_FD`` for the host to score.

Nothing here is trusted: the judge treats every reply as data to check. This module holds
no test, no expected value and no secret; the instructor's tests never enter the sandbox, except
those of a notebook graded in one kernel (:mod:`.calibrate`, status ``in-kernel``: as under stock nbgrader).

Descriptors of a student process: 0 /dev/null, 1 and 2 output files, ``CTL_FD`` events to the
zygote (JSON lines), ``CMD_FD`` one-byte commands from the zygote, ``REQ_FD`` / ``REP_FD``
request and reply frames (:mod:`.protocol`) of the test process, ``TOK_FD`` the process
ration (one byte per process the submission may still start).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import types

from autograder.wire.frames import (
    FrameReader,
    ProtocolError,
    flush_stdio,
    wait_readable,
    write_frame,
)

CTL_FD, CMD_FD, REQ_FD, REP_FD, TOK_FD = 3, 4, 5, 6, 7
MESSAGE_KEEP = 1_500
IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})
CHEAP_ELEMENTS = 4096

# namespaces whose entries a cell may not *replace* for the tests (additions are kept, and so
# is global state such as the default dtype or grad mode: nbgrader's kernel keeps them too)
PROTECTED = (
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.autograd",
    "torch.autograd.function",
    "torch.autograd.grad_mode",
    "torch.optim",
    "torch.func",
    "torch.utils.checkpoint",
    "autograder",
    "autograder.checks",
    "autograder.wire.observation",
    "autograder.messages",
    "builtins",
    "copy",
    "pickle",
    "math",
)
PROTECTED_CLASSES = (
    ("torch", "Tensor"),
    ("torch.nn", "Module"),
    ("torch.nn", "Parameter"),
    ("torch.autograd", "Function"),
    ("torch.optim", "Optimizer"),
    ("autograder.checks", "CallRecorder"),
)


class Restorer:
    """Entries of a few namespaces as they were in the warm zygote; ``restore()`` puts back
    every entry a cell replaced or deleted and returns their names."""

    def __init__(self):
        self.spaces = []
        for name in PROTECTED:
            module = sys.modules.get(name)
            if isinstance(module, types.ModuleType):
                self.spaces.append((name, module.__dict__, None, dict(module.__dict__)))
        for modname, clsname in PROTECTED_CLASSES:
            cls = getattr(sys.modules.get(modname), clsname, None)
            if isinstance(cls, type):
                self.spaces.append((f"{modname}.{clsname}", None, cls, dict(vars(cls))))

    def restore(self) -> list:
        changed = []
        for label, d, cls, saved in self.spaces:
            current = d if d is not None else vars(cls)
            for key, value in saved.items():
                now = current.get(key, _MISSING)
                if now is value:
                    continue
                if key in (
                    "__doc__",
                    "__annotations__",
                    "__weakref__",
                    "__dict__",
                ) or key.startswith("__pyx"):
                    continue
                try:
                    if d is not None:
                        d[key] = value
                    else:
                        setattr(cls, key, value)
                    changed.append(f"{label}.{key}")
                except (AttributeError, TypeError):
                    changed.append(f"{label}.{key} (could not be restored)")
        return changed


_MISSING = object()


# --------------------------------------------------------------------------- main line


def main_line(task, shell, restorer, config, namespace_helper):
    """One submission, in the forked student process (never returns)."""
    os.setsid()
    if not namespace_helper.drop_privileges() and config["sandboxed"]:
        os._exit(71)  # never run student code with capabilities
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.closerange(TOK_FD + 1, 65536)
    limits = task["limits"]
    _set_limits(limits)
    _ration_processes()
    outdir = config["outdir"]
    os.chdir(config["scratch"])
    os.environ["HOME"] = config["home"]
    sys.path.insert(0, "")
    me = os.getpid()

    def send(msg):
        os.write(CTL_FD, json.dumps(msg).encode() + b"\n")

    signal.signal(signal.SIGINT, _on_sigint)
    import threading

    _BASELINE_THREADS.update(t.ident for t in threading.enumerate())
    items = task["items"]
    i = 0
    while i < len(items):
        item = items[i]
        _go()
        if item[0] == "cell":
            i += 1
            index, source = item[1], item[2]
            in_kernel = (
                len(item) > 3
            )  # a test cell run in this process (calibrate.py: nbgrader's one kernel)
            _redirect(_fresh(os.path.join(outdir, f"cell-{index}.txt")))
            if in_kernel:  # its stderr apart: nbgrader scores a test cell that wrote to stderr 0
                err = _fresh(os.path.join(outdir, f"cell-{index}.err"), read=True)
                os.dup2(err, 2)
                os.close(err)
            error = kind = None
            exc = None
            outcome = {}
            try:
                _IN_CELL[0] = True
                try:
                    result = shell.run_cell(source, store_history=False)
                finally:
                    _IN_CELL[0] = False
                exc = result.error_before_exec or result.error_in_exec
                if in_kernel and exc is None:
                    outcome = kernel_outcome(shell, source, result)
            except KeyboardInterrupt:
                error, kind = "KeyboardInterrupt", "interrupted"
            except BaseException as caught:  # noqa: BLE001 - a student cell cannot stop the grading
                exc = caught
            if os.getpid() != me:  # a process the student's cell forked: it must not go on grading
                os._exit(0)
            if exc is not None:
                error, kind = describe_error(exc)
            flush_stdio()
            if in_kernel:
                outcome["stderr"] = _written(2)
            send(dict(outcome, c=index, e="end", error=error, kind=kind))
        else:
            ks = []
            while i < len(items) and items[i][0] == "test":
                ks.append(items[i][1])
                i += 1
            _tests(ks, shell, restorer, outdir, send, me)
    flush_stdio()
    _go()
    send({"done": True})
    os._exit(0)


_IN_CELL = [False]


def _on_sigint(signum, frame):
    """The cell clock's interrupt: a KeyboardInterrupt in the cell running, as Jupyter's; one that
    arrives between cells (a cell that ended just as its time ran out) is dropped."""
    if _IN_CELL[0]:
        raise KeyboardInterrupt


def _go():
    """Wait for the relay's go (``g`` on ``CMD_FD``) before each step of the notebook. The relay
    starts the step's clock as it sends it, and takes a cell's end as real only while this
    process waits here (zygote.Waits): no message of this process starts or stops a clock."""
    while True:
        try:
            byte = os.read(CMD_FD, 1)
        except (KeyboardInterrupt, InterruptedError):
            continue
        if byte == b"g":
            return
        if not byte:  # the relay is gone
            os._exit(0)


_BASELINE_THREADS: set = set()  # threads alive before the student's first cell
_STUDENT_THREADS: list = []  # threads the student's cells started, alive when the tests began
# library threads that start again by themselves in a forked process (tqdm's monitor)
FORK_SAFE_THREADS = frozenset({"tqdm._monitor.TMonitor"})


def _student_threads() -> list:
    """The threads the student's cells started that are alive now: a forked test process has
    none of them (a pool made in an earlier cell would hang there), so the judge sends the
    notebook to one kernel."""
    import threading

    out = []
    for t in threading.enumerate():
        cls = type(t)
        if t.ident in _BASELINE_THREADS or not t.is_alive():
            continue
        if f"{cls.__module__}.{cls.__qualname__}" in FORK_SAFE_THREADS:
            continue
        out.append(f"{t.name} ({cls.__qualname__})"[:100])
    return out[:20]


def _tests(ks, shell, restorer, outdir, send, me):
    """Fork test processes for the tests ``ks`` until the zygote says to go on."""
    send({"tests": ks})
    _STUDENT_THREADS[:] = _student_threads()
    n = 0
    while True:
        n += 1
        # stdout and stderr apart: a call's print is stdout, and only a write to stderr fails a
        # test (nbgrader's rule; one file for both made every debug print a stderr write)
        fd = _fresh(os.path.join(outdir, f"tests-{ks[0]}-{n}.txt"), read=True)
        efd = _fresh(os.path.join(outdir, f"tests-{ks[0]}-{n}.err.txt"), read=True)
        _GRADER_FORK[0] = True  # the grader's own fork: not one of the submission's processes
        try:
            pid = os.fork()
        finally:
            _GRADER_FORK[0] = False
        if pid == 0:
            try:
                os.dup2(efd, 2)
                os.close(efd)
                _redirect_stdout(fd)
                serve(shell, restorer)
            except BaseException as exc:  # noqa: BLE001
                import traceback

                _dbg("serve failed", "".join(traceback.format_exception(exc)))
            finally:
                os._exit(0)
        os.close(fd)
        os.close(efd)
        status, killed = _wait_child(pid)
        _dbg("child exit", status, killed)
        send({"test-exit": _exit_code(status), "killed": killed})
        command = _command()
        _dbg("command", command)
        if command != b"f":
            return


def _wait_child(pid):
    """Wait for the test process; kill it when the zygote sends ``k`` (read nothing more)."""
    killed = False
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        pidfd = None
    status = -1
    while True:
        try:
            waits = [CMD_FD] + ([pidfd] if pidfd is not None else [])
            ready = wait_readable(waits, 0.05 if pidfd is None else None)
            if CMD_FD in ready:
                byte = os.read(CMD_FD, 1)
                if byte in (b"k", b""):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    killed = True
                    status = os.waitpid(pid, 0)[1]
                    break
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        except (
            KeyboardInterrupt,
            InterruptedError,
        ):  # an interrupt meant for a cell, arriving late
            continue
        except ChildProcessError:
            break
    if pidfd is not None:
        os.close(pidfd)
    return status, killed


def _dbg(*a):
    if os.environ.get("AUTOGRADER_DEBUG"):
        with open(os.environ["AUTOGRADER_DEBUG"], "a") as fh:
            print(os.getpid(), *a, file=fh)


def _command():
    while True:
        try:
            byte = os.read(CMD_FD, 1)
        except KeyboardInterrupt:
            continue
        if byte in (b"f", b"c", b""):
            return byte


def _exit_code(status):
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return 70


# --------------------------------------------------------------------------- test process


def serve(shell, restorer):
    """The test process: answer the judge's requests, in order, until killed."""
    from autograder import remote

    server = remote.Server(shell.user_ns)
    reader = FrameReader()
    while True:
        try:  # (the descriptor is shared with the zygote, which keeps it non-blocking)
            wait_readable([REQ_FD])
            chunk = os.read(REQ_FD, 1 << 20)
        except (KeyboardInterrupt, BlockingIOError, InterruptedError):
            continue
        if not chunk:
            return
        try:
            frames = reader.feed(chunk)
        except ProtocolError as exc:
            _dbg("protocol", exc, chunk[:100])
            return
        for header, body in frames:
            seq = header.get("seq")
            op = header.get("op")
            if op == "begin":
                restored = restorer.restore()
                names = names_report(shell.user_ns)
                complete = names.pop(INCOMPLETE, None) is None
                server.names_changed = _Names(shell.user_ns, names).changed
                reply = {"seq": seq, "names": names, "restored": restored[:20]}
                if not complete:  # never silently partial: the judge grades it in one kernel
                    reply["complete"] = False
                if _STUDENT_THREADS:
                    reply["threads"] = list(_STUDENT_THREADS)
                torch = sys.modules.get("torch")
                if (
                    torch is not None
                ):  # a default dtype set in a cell: the test sees it too, as in one kernel
                    reply["dtype"] = str(torch.get_default_dtype()).replace("torch.", "")
                write_frame(REP_FD, reply)
            elif op == "call":
                try:
                    data = server.serve_call(header, body)
                except BaseException as exc:  # noqa: BLE001 - e.g. the arguments did not unpickle
                    from autograder.wire import observation

                    data = observation.dumps(
                        {"error": f"the call could not be made: {type(exc).__name__}: {exc}"[:500]}
                    )
                write_frame(REP_FD, {"seq": seq}, data)
            else:
                write_frame(REP_FD, {"seq": seq, "error": "unknown request"})


MAX_NAMES = 2000  # names in one report (the judge's cap); more: the report says it is incomplete
INCOMPLETE = "$incomplete"  # the key that says so (never an identifier)
NAMES_BUDGET_BYTES = 2 << 20  # data sent by value in one names report (the frame header holds 4 MB)
NAMES_BUDGET_VALUES = 200_000  # JSON values in it (the host parses at most 1,000,000)


def names_report(ns) -> dict:
    """The names the notebook defines, as the judge binds them: modules by name, plain data by
    value (numbers, strings, containers of them, numpy arrays and scalars, small tensors) while
    the report's budget lasts, everything else a handle (``{"kind": "callable", "classes"}``:
    the judge makes it a :class:`~autograder.remote.Remote`, a faithful proxy). Over
    :data:`MAX_NAMES` names, ``out[INCOMPLETE] = True`` (the judge then needs one kernel)."""
    from autograder.wire import observation

    out: dict = {}
    left_bytes, left_values = NAMES_BUDGET_BYTES, NAMES_BUDGET_VALUES
    for name, value in list(ns.items()):
        if type(name) is not str or name.startswith("_") or name in IPYTHON_NAMES:
            continue
        if len(out) >= MAX_NAMES:
            out[INCOMPLETE] = True
            break
        if isinstance(value, types.ModuleType):
            modname = getattr(value, "__name__", None)
            out[name] = {"kind": "module", "module": modname if isinstance(modname, str) else ""}
        elif callable(value) or isinstance(value, type):
            out[name] = _handle_entry(value)
        else:
            enc = observation.Encoder(
                plain_only=True,
                max_bytes=left_bytes,
                max_nodes=left_values,
                max_tensor_elements=CHEAP_ELEMENTS,
            )
            try:
                out[name] = {"kind": "value", "value": enc.encode(value)}
                left_bytes -= enc.spent
                left_values -= enc.nodes
            except Exception:  # noqa: BLE001 - not plain data, over the budget, or it breaks when read
                out[name] = _handle_entry(value)
    return out


class _Names:
    """What the judge was told about the namespace; :meth:`changed`: what a call has changed since
    (a name bound, rebound or deleted, a list or array the judge holds by value changed in place
    by the student's function), as entries of a names report (``{"kind": "deleted"}`` for a name
    that is gone)."""

    MUTABLE = (list, dict, set, bytearray)

    def __init__(self, ns, report):
        self.ns = ns
        self._remember(report)

    def _remember(self, report):
        self.ids = {name: id(self.ns.get(name)) for name in report}
        self.texts = {
            name: json.dumps(entry["value"])
            for name, entry in report.items()
            if entry.get("kind") == "value" and self._mutable(self.ns.get(name))
        }

    def _mutable(self, value):
        numpy = sys.modules.get("numpy")
        return isinstance(value, self.MUTABLE) or (
            numpy is not None and isinstance(value, numpy.ndarray)
        )

    def _names(self):
        return [
            n
            for n in list(self.ns)
            if type(n) is str and not n.startswith("_") and n not in IPYTHON_NAMES
        ]

    def changed(self) -> dict:
        from autograder.wire import observation

        current = self._names()
        changed = {
            n: self.ns[n] for n in current if n not in self.ids or id(self.ns[n]) != self.ids[n]
        }
        for name, text in self.texts.items():
            if name in changed or name not in self.ns:
                continue
            enc = observation.Encoder(
                plain_only=True,
                max_bytes=NAMES_BUDGET_BYTES,
                max_nodes=NAMES_BUDGET_VALUES,
                max_tensor_elements=CHEAP_ELEMENTS,
            )
            try:
                now = json.dumps(enc.encode(self.ns[name]))
            except Exception:  # noqa: BLE001
                now = None
            if now != text:
                changed[name] = self.ns[name]
        gone = set(self.ids) - set(current)
        if not changed and not gone:
            return {}
        report = names_report(changed)
        incomplete = report.pop(INCOMPLETE, None)
        if incomplete is None:
            for name in changed:
                report.setdefault(name, _handle_entry(changed[name]))
        for name in gone:
            report[name] = {"kind": "deleted"}
        self.ids.update({n: id(self.ns[n]) for n in changed})
        for name in gone:
            self.ids.pop(name, None)
            self.texts.pop(name, None)
        for name, entry in report.items():
            if entry.get("kind") == "value" and self._mutable(self.ns.get(name)):
                self.texts[name] = json.dumps(entry["value"])
            else:
                self.texts.pop(name, None)
        if incomplete is not None:
            report[INCOMPLETE] = True
        return report


def _handle_entry(value):
    from autograder.wire import observation

    entry = {
        "kind": "callable",
        "classes": observation.builtin_classes(type(value)),
        "type": observation._qualname(type(value))[:200],
    }
    try:  # a library function or class: what it is (the judge compares a test's binding with it)
        module, qualname = value.__module__, value.__qualname__
        if type(module) is str and type(qualname) is str and module != "__main__":
            entry["ref"] = f"{module}.{qualname}"[:300]
    except Exception:  # noqa: BLE001
        pass
    return entry


# --------------------------------------------------------------------------- in-kernel tests

VALUE_KEEP = 1_000


def kernel_outcome(shell, source, result) -> dict:
    """What nbgrader reads from a test cell run in the kernel: the ``text/plain`` of its
    ``execute_result`` (its partial credit), if the cell displayed one. Untrusted data for the host."""
    value = getattr(result, "result", None)
    if value is None:
        return {}
    try:
        from IPython.core.displayhook import DisplayHook

        if DisplayHook.semicolon_at_end_of_expression(shell.transform_cell(source)):
            return {}
        text = shell.display_formatter.format(value, include=("text/plain",))[0].get("text/plain")
    except BaseException:  # noqa: BLE001 - the cell's value could not be shown: the kernel shows no result
        return {}
    if not isinstance(text, str):
        return {}
    return {"value": text[:VALUE_KEEP] + ("..." if len(text) > VALUE_KEEP else "")}


def _written(fd) -> bool:
    try:
        return os.fstat(fd).st_size > 0
    except OSError:
        return False


# --------------------------------------------------------------------------- helpers


def _redirect(fd):
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _redirect_stdout(fd):
    os.dup2(fd, 1)
    os.close(fd)


def _fresh(path, read=False):
    """A new, empty regular file at ``path`` (whatever the student may have put there)."""
    remove_tree(path)
    mode = os.O_RDWR if read else os.O_WRONLY
    return os.open(path, mode | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)


def remove_tree(path):
    """Remove ``path`` (a file, a link, or a folder with everything in it) without recursion and
    without ever building a long path: a tree thousands of folders deep is walked one folder at a
    time from the current directory (restored after). Never follows a link; errors are skipped."""
    import stat

    try:
        info = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode):
        try:
            os.unlink(path)
        except OSError:
            pass
        return
    try:
        home = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        home = None
    parent, name = os.path.split(os.path.abspath(path))
    try:
        os.chdir(parent)
        stack = [[name, None]]  # folders entered, each with the sub-folders still to remove
        while stack:
            top = stack[-1]
            if top[1] is None:
                try:
                    if not stat.S_ISDIR(os.lstat(top[0]).st_mode):
                        raise NotADirectoryError(top[0])
                    os.chmod(top[0], 0o700)
                    os.chdir(top[0])
                except OSError:
                    try:
                        os.unlink(top[0])
                    except OSError:
                        pass
                    stack.pop()
                    continue
                pending = []
                try:
                    with os.scandir(".") as entries:
                        for entry in entries:
                            try:
                                if entry.is_dir(follow_symlinks=False):
                                    pending.append(entry.name)
                                else:
                                    os.unlink(entry.name)
                            except OSError:
                                pass
                except OSError:
                    pass
                top[1] = pending
            if top[1]:
                stack.append([top[1].pop(), None])
                continue
            os.chdir("..")
            try:
                os.rmdir(top[0])
            except OSError:
                pass
            stack.pop()
    except OSError:
        pass
    finally:
        if home is not None:
            os.fchdir(home)
            os.close(home)


def describe_error(exc):
    try:
        name = type(exc).__name__
        text = BaseException.__str__(exc)
    except BaseException:  # noqa: BLE001
        name, text = "Exception", ""
    kind = "error"
    if isinstance(exc, MemoryError) or is_memory_message(text):
        kind = "memory"
    elif isinstance(exc, KeyboardInterrupt):
        kind = "interrupted"
    return f"{name}: {text}"[:MESSAGE_KEEP], kind


def is_memory_message(text):
    return any(
        s in text
        for s in (
            "can't allocate memory",
            "DefaultCPUAllocator",
            "out of memory",
            "Cannot allocate memory",
        )
    )


def _set_limits(limits):
    def cap(res, value):
        try:
            soft, hard = resource.getrlimit(res)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):
            pass

    if limits.get("address_space"):
        cap(resource.RLIMIT_AS, int(limits["address_space"]))
    # any file written (a compiler's temporary files, a saved model): generous; the captured
    # output has its own limit, which the zygote enforces
    cap(resource.RLIMIT_FSIZE, int(limits["file_size"]))
    cap(resource.RLIMIT_CPU, int(float(limits["wall"])) + 5)
    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_NOFILE, 256)


_GRADER_FORK = [False]


def _ration_processes():
    """At most as many new processes as the zygote put tokens in ``TOK_FD`` (shared by every
    process of the submission). A guard against runaway forks, not a security boundary: the
    pid namespace and the final kill are (native code can fork without asking)."""

    def hook(event, args):
        if event in ("os.fork", "os.forkpty", "os.posix_spawn", "subprocess.Popen", "os.system"):
            if _GRADER_FORK[0] and event == "os.fork":
                return
            try:
                if os.read(TOK_FD, 1):
                    return
            except (BlockingIOError, OSError):
                pass
            raise OSError(
                11,
                "Resource temporarily unavailable: the grader allows a submission only a few "
                "processes",
            )

    sys.addaudithook(hook)
