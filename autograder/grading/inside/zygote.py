"""Inside the sandbox: the zygote, a warm Python that never runs student code.

Started by :mod:`autograder.grading.host.sandbox` as ``python -c ...zygote.main()`` inside bubblewrap. It imports
torch, IPython, matplotlib and the course's checks once and warms them up; then, for each
submission the host sends, it forks a *student process* (:mod:`.student`) in pid, IPC and mount
namespaces of its own (the IPC one bounded, the sandbox's procfs covered) and relays, frame by
frame, between the host's supervisor and that submission's test processes. It enforces the
per-cell time limit on its own clock at a quiet machine's pace (:mod:`autograder.wire.pace`): it
lets the main line go on to each step and starts the step's clock itself, takes a cell's end
only when it sees the main line waiting (:class:`Waits`), interrupts with SIGINT, then ends the
notebook. It kills every process of the submission when it is done, and empties every writable place
(the scratch tmpfs and ``/dev/shm``) before the next one. It holds no test and no secret.

Host channel (fds 0/1 at start, moved to ``PROTO_IN``/``PROTO_OUT``), frames of :mod:`.protocol`:

    host -> zygote:  {"op": "grade", "limits"} + body  a submission: the body (cells, test places,
                                                       files) is read by the submission's relay only
                     {"op": "begin"|"call", "seq", ...} + body   for the current test process
                     {"op": "kill-test"}               stop the current test process (a test's time is up)
                     {"op": "more-tests"} / {"op": "continue"}   after a test process ended / the tests are done
                     {"op": "abort"}                    the notebook's time is up
                     {"op": "quit"}
    zygote -> host:  {"ready"}, {"ev": "tests", "ks"}, {"ev": "reply", "seq", ...} + body,
                     {"ev": "test-exit", "status", "killed"}, {"ev": "done", "result"} + body
                     (the body: the files the notebook wrote, ``result["written"]`` their names and
                     sizes, as :func:`written_files` read them)
"""

from __future__ import annotations

import ast
import base64
import hashlib
import io
import json
import os
import selectors
import signal
import stat
import sys
import time
from typing import NamedTuple

from autograder.grading.inside import student
from autograder.wire.frames import (
    MAX_TASK,
    FrameReader,
    ProtocolError,
    read_body,
    read_frame,
    read_header,
    wait_readable,
    write_frame,
)
from autograder.wire.pace import Budget, Pace
from autograder.wire.types import FONT_LIST_NAME, MAX_WRITTEN_DEPTH, MAX_WRITTEN_FILES

PROTO_IN, PROTO_OUT = 1021, 1022
OUTPUT_KEEP = 20_000  # characters of a cell's output kept
NOTEBOOK_OUTPUT_KEEP = 200_000  # characters of output kept for all cells of a notebook together
MAX_REPLY = 100 << 20
SHM_SHARE = 4  # System V shared memory a submission may hold: this fraction of its memory limit


def main():
    _own_signals()
    os.dup2(0, PROTO_IN)
    os.dup2(1, PROTO_OUT)
    os.closerange(3, PROTO_IN)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # stray prints go to the log, never into the channel
    os.close(devnull)
    for fd in (PROTO_IN, PROTO_OUT):
        os.set_inheritable(fd, False)
    config, _ = read_frame(PROTO_IN)
    namespace = Namespace(config.get("sandboxed", True))
    namespace.take_proc(config.get("proc"))
    import gc

    from autograder.grading.warmup import without_gc

    with without_gc():
        shell = warm_up(config)
        restorer = student.Restorer()
    gc.freeze()
    write_frame(PROTO_OUT, {"ready": True, "pid": os.getpid()})
    while True:
        try:
            msg, blen = read_header(PROTO_IN, max_body=MAX_TASK)
        except EOFError:
            os._exit(0)
        op = msg.get("op")
        if op == "quit":
            os._exit(0)
        if op == "grade":
            # The zygote never holds anything of a submission: it reads only the header (limits,
            # counts) and forks a relay for the submission, which reads the task (cells, files)
            # from the channel itself, forks the student process, relays, and ends with it. Each
            # student process thus comes from a zygote that has seen no submission.
            relay = os.fork()
            if relay == 0:
                code = 0
                try:
                    task = json.loads(read_body(PROTO_IN, blen))
                    task["limits"] = msg["limits"]
                    result, body = grade(task, shell, restorer, namespace, config)
                except BaseException as exc:  # noqa: BLE001 - reported to the host as a grader error
                    import traceback

                    result = {"error": "".join(traceback.format_exception(exc))[-4000:]}
                    body, code = b"", 1
                try:
                    write_frame(PROTO_OUT, {"ev": "done", "result": result}, body)
                finally:
                    os._exit(code)
            status = os.waitpid(relay, 0)[1]
            _kill_all(
                config["sandboxed"], None, False
            )  # whatever the submission left, but the zygote
            if status != 0:  # the relay failed: the channel may hold part of a frame, start again
                os._exit(1)
        elif blen:
            os._exit(1)  # nothing else carries a body between submissions


def _own_signals():
    """SIGINT interrupts a cell (the cell clock's interrupt, as Jupyter's): whatever the grader was
    started with. A process started in the background by a shell (``cmd &``), by nohup or by some
    CI runners inherits SIGINT *ignored*, and Python then installs no handler: every looping cell
    ran on to the notebook's end (issue 26 item 10, "not repeatable"). The zygote sets the handler
    and unblocks the signals it relies on, so every student process it forks has them."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGCHLD})


# --------------------------------------------------------------------------- warm-up


def warm_up(config):
    """Import and exercise what notebooks use, so that a forked student process starts warm."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.makedirs(config["home"], exist_ok=True)
    os.environ["HOME"] = config["home"]
    os.environ.setdefault("IPYTHONDIR", os.path.join(config["home"], ".ipython"))
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    _seed_font_cache(config)
    for name in config.get("preload", []):
        try:
            __import__(name)
        except Exception as exc:  # noqa: BLE001
            print(f"preload {name}: {exc!r}", file=sys.stderr)
    if any(n.split(".")[0] in ("torch", "autograder") for n in config.get("preload", [])):
        import autograder.checks  # noqa: F401 - what this course's tests import (and torch); probes use it
    import autograder.probes  # noqa: F401 - what the judge's calls name (by reference)
    import autograder.remote  # noqa: F401

    torch = sys.modules.get("torch")
    if torch is not None:
        from autograder.grading.warmup import wants_training

        _warm_up_torch(torch, wants_training(config.get("preload", ())))
    ast.parse("x = 1\nx")
    from IPython.core.interactiveshell import InteractiveShell

    class GradingShell(InteractiveShell):
        def enable_gui(self, gui=None):
            """No GUI event loop here; like ipykernel, ``%matplotlib inline`` needs none."""

    shell = GradingShell.instance(colors="NoColor", history_length=0)
    shell.history_manager.enabled = False
    real_stdout = sys.stdout
    sys.stdout = io.StringIO()
    try:
        shell.run_cell("def _f(a):\n    return a\n_f(2)\n1/0", store_history=False)
        shell.run_cell("%time 1", store_history=False)
        _warm_up_libraries()
    finally:
        sys.stdout = real_stdout
    shell.reset(new_session=False)
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        sys.__dict__.pop(name, None)
    return shell


def _seed_font_cache(config):
    """The host's matplotlib font list (``config["fonts"]``: :func:`..host.sandbox.font_cache`)
    in this home's cache folder, where matplotlib looks first: without it every zygote builds
    the list again. Names other than matplotlib's own are ignored."""
    fonts = config.get("fonts")
    if not isinstance(fonts, dict):
        return
    folder = os.path.join(config["home"], ".cache", "matplotlib")
    for name, text in fonts.items():
        if isinstance(text, str) and FONT_LIST_NAME.fullmatch(str(name)):
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, name), "w", encoding="utf-8") as fh:
                fh.write(text)


def _warm_up_torch(torch, train=True):
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(0)
    x = torch.randn(6, requires_grad=True)
    y = torch.sigmoid(x * 2).tanh().exp().softmax(0)
    torch.relu(y).sum().backward()
    x.detach().clone().relu_().add_(1).data.mul_(2)
    for layer, shape in (
        (torch.nn.Linear(5, 4), (2, 5)),
        (torch.nn.Conv1d(1, 3, 3), (2, 1, 8)),
        (torch.nn.BatchNorm1d(5), (6, 5)),
    ):
        layer(torch.randn(*shape)).relu_().sum().backward()
    torch.autograd.gradcheck(
        lambda t: t * 2, torch.randn(3, dtype=torch.float64, requires_grad=True)
    )
    if train:  # optimizers (torch._dynamo), 2-d layers, losses: what training loops use
        from autograder.grading.warmup import training

        opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
        opt.step()
        training(torch)
    import pickle

    from autograder import probes, remote
    from autograder.wire import observation

    pickle.loads(remote.dumps_call((probes.T + 1, x, torch.relu_)))
    observation.dumps(observation.Encoder().encode((x, {"a": [1, 2.5, "s"]}, ValueError("w"))))


def _warm_up_libraries():
    """Load what honest notebooks use (plotting, the course's self-check cell)."""
    for name in (
        "six",
        "importlib_metadata",
        "autograder.selfcheck",
        "tqdm",
        "tqdm.auto",
        "logging",
        "dataclasses",
        "functools",
        "inspect",
        "typing",
    ):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - optional
            pass
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib_inline.backend_inline  # noqa: F401 - what %matplotlib inline loads

        plt.plot([0, 1])
        plt.gcf().canvas.draw()  # builds the font cache
        plt.close("all")
    except Exception as exc:  # noqa: BLE001 - plotting is optional for grading
        print(f"matplotlib warm-up: {exc!r}", file=sys.stderr)


class Namespace:
    """Linux calls prepared before any student code runs: a new pid namespace, dropping
    every capability (the student process calls :meth:`drop_privileges` first thing)."""

    CLONE_NEWPID = 0x20000000
    CLONE_NEWIPC = 0x08000000
    CLONE_NEWNS = 0x00020000
    MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
    PR_CAPBSET_DROP = 24
    PR_SET_NO_NEW_PRIVS = 38
    CAP_VERSION_3 = 0x20080522

    def __init__(self, sandboxed=True):
        import ctypes

        self.sandboxed = sandboxed

        self.ctypes = ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        self.unshare, self.prctl, self.capset, self.capget = (
            libc.unshare,
            libc.prctl,
            libc.capset,
            libc.capget,
        )
        self.mount = libc.mount
        self.proc = None  # the sandbox's procfs, as a descriptor (take_proc)
        self.proc_path = ""
        self.ipc_bounded = False

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [
                ("effective", ctypes.c_uint32),
                ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32),
            ]

        self.Header, self.Data = Header, Data

    def take_proc(self, path) -> None:
        """The sandbox's procfs, which bubblewrap mounted at ``path`` for the zygote alone: kept as
        a descriptor, through which :meth:`bound_ipc` writes each submission's IPC limits. No
        submission ever reaches it (:meth:`new_pid_namespace` covers it)."""
        if path:
            try:
                self.proc = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                self.proc_path = path
            except OSError as exc:
                print(f"no procfs at {path}: {exc!r}", file=sys.stderr)

    def new_pid_namespace(self, memory=None) -> bool:
        """A pid namespace for the submission's processes, an IPC namespace of its own (System V
        shared memory, semaphores and message queues die with the submission: nothing passes to the
        next one, and no memory stays held), bounded while it runs (:meth:`bound_ipc`), and a mount
        namespace of its own where the sandbox's procfs is covered by an empty, read-only tmpfs
        (the submission has no /proc: not the zygote's memory, environment or limits)."""
        if self.unshare(self.CLONE_NEWIPC) != 0 and self.sandboxed:
            os._exit(72)  # never run a submission in the IPC namespace of the one before
        self.ipc_bounded = self.bound_ipc(memory)
        if self.proc is not None:  # the submission's processes never hold it, nor see it
            os.close(self.proc)
            self.proc = None
            covered = self.unshare(self.CLONE_NEWNS) == 0 and (
                self.mount(
                    b"none",
                    os.fsencode(self.proc_path),
                    b"tmpfs",
                    self.MS_RDONLY | self.MS_NOSUID | self.MS_NODEV | self.MS_NOEXEC,
                    b"size=4k,mode=555",
                )
                == 0
            )
            if not covered:
                os._exit(73)  # never run a submission with the sandbox's procfs in its reach
        return self.unshare(self.CLONE_NEWPID) == 0

    def bound_ipc(self, memory) -> bool:
        """The kernel's own limits on the IPC objects of this (new) IPC namespace, written through
        the sandbox's procfs: System V shared memory holds at most a quarter of the memory limit
        in all (a segment detached is no longer in the address space that RLIMIT_AS bounds, but
        its pages stay in the host's RAM until the namespace ends), in at most 256 segments;
        a few message queues and
        semaphore sets, each of the kernel's default size; 32 POSIX message queues (their bytes
        are RLIMIT_MSGQUEUE's). True when every limit is in force."""
        if self.proc is None:
            return False
        page = os.sysconf("SC_PAGE_SIZE")
        shm = int(memory) // SHM_SHARE if memory else None
        limits = {
            "sys/kernel/shmmni": "256",
            "sys/kernel/msgmni": "32",
            "sys/kernel/msgmnb": "16384",
            "sys/kernel/sem": "250 8192 32 128",
            "sys/fs/mqueue/queues_max": "32",
        }
        if shm is not None:
            limits.update(
                {"sys/kernel/shmmax": str(shm), "sys/kernel/shmall": str(-(-shm // page))}
            )
        ok = True
        for name, value in limits.items():
            try:
                fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=self.proc)
                try:
                    os.write(fd, value.encode())
                finally:
                    os.close(fd)
            except OSError as exc:
                print(f"IPC limit {name}: {exc!r}", file=sys.stderr)
                ok = False
        return ok

    def drop_privileges(self) -> bool:
        """No capabilities, no way back (no_new_privs); True when none is left."""
        ct = self.ctypes
        self.prctl(self.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        for cap in range(64):
            self.prctl(self.PR_CAPBSET_DROP, cap, 0, 0, 0)
        header = self.Header(self.CAP_VERSION_3, 0)
        self.capset(ct.byref(header), (self.Data * 2)())
        now = (self.Data * 2)()
        self.capget(ct.byref(header), now)
        return all(d.effective == d.permitted == d.inheritable == 0 for d in now)


# --------------------------------------------------------------------------- one submission


def grade(task, shell, restorer, namespace, config):
    """Run one submission: fork its student process, relay, enforce limits, clean up."""
    start = time.monotonic()
    limits = task["limits"]
    _wipe(config)
    for d in (config["scratch"], config["outdir"], config["home"]):
        os.makedirs(d, exist_ok=True)
    notes, inputs = _write_files(config["scratch"], task.get("files", ()), limits)
    written = Written(task.get("written"), config["scratch"], inputs, limits["files"])
    ctl_r, ctl_w = os.pipe()
    cmd_r, cmd_w = os.pipe()
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    tok_r, tok_w = os.pipe()
    info_r, info_w = os.pipe()
    os.set_blocking(tok_r, False)
    os.write(tok_w, b"t" * max(0, int(limits["processes"])))
    os.close(tok_w)
    helper = os.fork()
    if helper == 0:
        # the helper puts the submission in a pid namespace of its own, where the student
        # process is pid 1: the zygote is out of its sight and reach, and when it ends the
        # kernel kills every process left in that namespace
        code = 70
        try:
            os.close(info_r)
            isolated = namespace.new_pid_namespace(limits.get("memory"))
            pid = os.fork()
            if pid == 0:
                try:
                    import fcntl

                    moved = [
                        fcntl.fcntl(fd, fcntl.F_DUPFD, 200)
                        for fd in (ctl_w, cmd_r, req_r, rep_w, tok_r)
                    ]
                    for src, dst in zip(
                        moved,
                        (
                            student.CTL_FD,
                            student.CMD_FD,
                            student.REQ_FD,
                            student.REP_FD,
                            student.TOK_FD,
                        ),
                        strict=True,
                    ):
                        os.dup2(src, dst)
                    student.main_line(task, shell, restorer, config, namespace)
                finally:
                    os._exit(code)
            os.write(info_w, f"{pid} {int(isolated)}".encode())
            code = student._exit_code(os.waitpid(pid, 0)[1])
        finally:
            os._exit(code)
    for fd in (ctl_w, cmd_r, rep_w, tok_r, info_w):
        os.close(fd)
    main_pid, isolated = _read_main_pid(info_r)
    os.close(info_r)
    session = Session(
        helper,
        main_pid,
        Pipes(ctl_r, cmd_w, req_r, req_w, rep_r),
        CellClock(task, limits, start),
        OutputMeter(config["outdir"], int(limits["output"])),
        Waits(namespace.proc, main_pid),
        written,
    )
    session.run()
    _kill_all(
        False, main_pid, isolated, helper
    )  # (the zygote sweeps the rest once this relay ended)
    session.reap()
    for fd in (ctl_r, cmd_w, req_r, req_w, rep_r):
        os.close(fd)
    written.at_end()
    result = session.result()
    result["notes"] = notes + written.notes
    result["written"] = [[name, len(data)] for name, data in written.files]
    result["seconds"] = round(time.monotonic() - start, 3)
    if not os.environ.get("AUTOGRADER_KEEP_SCRATCH"):
        _wipe(config)
    return result, b"".join(data for _, data in written.files)


class Written:
    """The files a notebook wrote while it ran, for ``autograded/`` (where stock nbgrader, which
    runs a notebook in that folder, leaves them), taken where no hidden test could have written
    into them: ``when`` is ``"end"`` (the judge's run: no test cell ever ran in the student's
    processes) or ``"before-tests"`` (one kernel's run: as the first test cell is about to start,
    with the student's main line waiting); None: not taken."""

    def __init__(self, when, scratch, inputs, limit):
        self.when = when if when in ("end", "before-tests") else None
        self.scratch, self.inputs, self.limit = scratch, inputs, int(limit)
        self.files: list = []
        self.notes: list = []
        self.taken = self.when is None

    def before_test(self):
        if not self.taken and self.when == "before-tests":
            self._take()

    def at_end(self):
        if not self.taken:
            self._take()

    def _take(self):
        self.taken = True
        self.files, self.notes = written_files(self.scratch, self.inputs, self.limit)


class Pipes(NamedTuple):
    """The relay's ends of the pipes to the student process (:mod:`.student` holds the others)."""

    ctl_r: int  # its events: a cell started or ended, tests reached, a test process exited
    cmd_w: int  # commands to it: fork a test process, kill it, go on with the cells
    req_r: int  # (the relay's copy of the request pipe's read end: drained after a test process)
    req_w: int  # the host's requests to the test process, as frames
    rep_r: int  # the test process's replies, as frames


class CellClock:
    """The cells' clock: one cell runs at a time, each starts once, in notebook order, under the
    time limit of a cell, and the notebook under its wall limit."""

    GRACE = 5.0  # after SIGINT, how long a cell gets to stop (a loaded machine is slow to deliver)

    def __init__(self, task, limits, start):
        self.n_cells = sum(1 for item in task["items"] if item[0] == "cell")
        # the order the cells run in (a notebook graded in one kernel runs its test cells, numbered
        # after the student's, in their places among them: calibrate.kernel_task)
        self.position = {
            item[1]: p for p, item in enumerate(i for i in task["items"] if i[0] == "cell")
        }
        # the notebook's steps in order: ("cell", index) and ("tests", [k, ...]) (student.main_line)
        self.plan = []
        for item in task["items"]:
            if item[0] == "cell":
                self.plan.append(("cell", item[1]))
            elif self.plan and self.plan[-1][0] == "tests":
                self.plan[-1][1].append(item[1])
            else:
                self.plan.append(("tests", [item[1]]))
        # the test cells of a notebook graded in one kernel (calibrate.kernel_task marks them)
        self.test_cells = {
            item[1] for item in task["items"] if item[0] == "cell" and item[3:4] == ["test"]
        }
        self.step = -1  # the plan's step the relay last let the student process go on to
        self.expect = None  # ("tests", ks) / ("done",): what the process must say next, and by when
        self.expect_by = None
        self.timeout = float(limits["timeout"])
        self.wall = start + float(limits["wall"])
        self.grace = self.GRACE
        # a cell's limit, and the grace after its interrupt, in seconds of a quiet machine
        self.pace = Pace(limits.get("pace_load"))
        self.budget = None
        self.cells = {}
        self.current = None  # index of the cell running
        self.last_started = (
            -1
        )  # cells start once each, in order: a cell cannot restart its own clock
        self.since = None
        self.interrupted = None

    def next_deadline(self, now):
        deadline = self.wall
        if self.current is not None and self.budget is not None:
            deadline = min(deadline, now + max(self.budget.left(now), 0.0))
        if self.expect_by is not None:
            deadline = min(deadline, self.expect_by)
        return deadline

    def next_is_test(self) -> bool:
        """Whether the plan's next step runs a test: a test cell in one kernel, or the judge's tests."""
        if self.step + 1 >= len(self.plan):
            return False
        kind, what = self.plan[self.step + 1]
        return kind == "tests" or what in self.test_cells

    def go(self, now):
        """The relay lets the student process go on to the plan's next step (it sends ``g``): a cell
        starts now, on the host's clock; tests or the notebook's end must be reported within a
        cell's time limit. Returns the step, or None past the end."""
        self.step += 1
        self.expect = self.expect_by = None
        if self.step < len(self.plan):
            kind, what = self.plan[self.step]
            if kind == "cell":
                self.start(what, now)
            else:
                self.expect, self.expect_by = ("tests", what), now + self.timeout
            return self.plan[self.step]
        self.expect, self.expect_by = ("done",), now + self.timeout
        return None

    def start(self, c, now) -> bool:
        """Cell ``c`` starts (:meth:`go`: the relay's decision, never the student process's word)."""
        if self.current is not None or self.position.get(c, -1) <= self.last_started:
            return False
        self.current, self.since, self.interrupted = c, now, None
        self.budget = Budget(self.timeout, self.pace, now)
        self.last_started = self.position.get(c, -1)
        self.cells.setdefault(c, {})["start"] = now
        return True

    def end(self, c, msg, now, over_output) -> bool:
        """Cell ``c`` ended, as ``msg`` says; False when it was not the cell running."""
        if c != self.current:
            return False
        cell = self.cells.setdefault(c, {})
        if isinstance(msg.get("error"), str):
            cell["error"] = msg["error"][: student.MESSAGE_KEEP]
        if msg.get("kind") in ("memory", "interrupted", "error"):
            cell["kind"] = msg["kind"]
        if isinstance(msg.get("value"), str):  # a test cell run in-kernel (calibrate.py): bounded
            cell["value"] = msg["value"][: student.VALUE_KEEP + 3]
        if msg.get("stderr") is True:
            cell["stderr"] = True
        cell["seconds"] = round(now - cell.get("start", now), 3)
        if "status" not in cell and over_output(c):
            cell["status"] = "output-limit"
        self.stop()
        return True

    def stop(self):
        self.current, self.since, self.interrupted = None, None, None
        self.budget = None

    def over(self, now) -> bool:
        """The running cell's limit (or, once interrupted, its grace) is spent."""
        return self.budget is not None and self.budget.over(now)

    def mark(self, status, now=None):
        """The running cell's status (it hit a limit); with ``now``: it is being interrupted."""
        self.cells.setdefault(self.current, {})["status"] = status
        if now is not None:
            self.interrupted = now
            self.budget = Budget(self.grace, self.pace, now)

    def result(self, outdir):
        cells = []
        budget = NOTEBOOK_OUTPUT_KEEP
        for i in range(self.n_cells):
            c = self.cells.get(i, {})
            out, size = _read_output(
                os.path.join(outdir, f"cell-{i}.txt"), min(OUTPUT_KEEP, budget)
            )
            budget = max(0, budget - len(out))
            status = c.get("status")
            if status is None:
                if "start" not in c:
                    status = "not-run"
                elif "seconds" not in c:
                    status = "died"
                elif c.get("kind") == "memory":
                    status = "memory-limit"
                elif c.get("error") and "File too large" in c["error"]:
                    status = "output-limit"
                elif c.get("error"):
                    status = "error"
                else:
                    status = "ok"
            cells.append(
                {
                    "index": i,
                    "status": status,
                    "error": c.get("error"),
                    "output": out,
                    "output_bytes": size,
                    "seconds": c.get("seconds"),
                    **{k: c[k] for k in ("value", "stderr") if k in c},
                }
            )
        return cells


class OutputMeter:
    """What a cell, or a test process, wrote to its captured output file, against the output
    limit; checked at every event and while it runs (the file-size limit, RLIMIT_FSIZE, is a
    separate, larger one)."""

    def __init__(self, outdir, limit):
        self.outdir = outdir
        self.limit = limit
        self.test_file = None
        self.tests_first = 0
        self.test_n = 0
        self.killed = False  # the test process was stopped for its output

    def over(self, name):
        """Whether the captured output file ``name`` holds more than the output limit."""
        if not name:
            return False
        try:
            return os.lstat(os.path.join(self.outdir, name)).st_size > self.limit
        except OSError:
            return False

    def cell_over(self, c):
        return self.over(f"cell-{c}.txt")

    def test_over(self):
        """Over the limit: the test process's stdout and stderr (two files) together."""
        if not self.test_file:
            return False
        total = 0
        for name in (self.test_file, self.test_file[: -len(".txt")] + ".err.txt"):
            try:
                total += os.lstat(os.path.join(self.outdir, name)).st_size
            except OSError:
                pass
        return total > self.limit

    def tests_started(self, first):
        self.tests_first, self.test_n = first, 1
        self.test_file = f"tests-{self.tests_first}-1.txt"

    def more_tests(self):
        self.test_n += 1
        self.test_file = f"tests-{self.tests_first}-{self.test_n}.txt"


class Relay:
    """Frames between the host and the student's test process: requests down (written as the
    pipe takes them), replies up (read incrementally, bounded)."""

    def __init__(self, pipes: Pipes):
        self.req_r, self.req_w, self.rep_r = pipes.req_r, pipes.req_w, pipes.rep_r
        self.replies = FrameReader(max_body=MAX_REPLY)
        self.outgoing = bytearray()  # frames for the test process not written yet

    def send(self, msg, body):
        from autograder.wire.frames import encode

        self.outgoing += encode(msg, body)
        self.flush()

    def flush(self):
        try:
            n = os.write(self.req_w, self.outgoing)
        except BlockingIOError:
            return
        except OSError:
            n = len(self.outgoing)
        del self.outgoing[:n]

    def read(self):
        """A chunk of replies, or None."""
        try:
            return os.read(self.rep_r, 1 << 20) or None
        except (BlockingIOError, InterruptedError):
            return None

    def feed(self, chunk):
        """The reply frames complete so far; raises ProtocolError (and starts afresh) on a bad one."""
        try:
            return self.replies.feed(chunk)
        except ProtocolError:
            self.reset()
            raise

    def reset(self):
        self.replies = FrameReader(max_body=MAX_REPLY)

    def drain(self, feed):
        """After a test process ended: ``feed`` what it replied last, forget the rest."""
        for _ in range(1000):
            before = len(self.replies.buf)
            try:
                chunk = os.read(self.rep_r, 1 << 20)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            feed(chunk)
            if len(self.replies.buf) == before and not chunk:
                break
        self.outgoing.clear()
        for _ in range(10000):
            try:
                if not os.read(self.req_r, 1 << 16):
                    break
            except (BlockingIOError, OSError):
                break
        self.reset()


class Waits:
    """Whether the student's main line is waiting for the relay's go - blocked in ``read`` on
    ``student.CMD_FD`` - seen from outside the process, in ``/proc/PID/syscall`` of the sandbox's
    procfs (which only the zygote and the relay hold). A cell's end counts only then: a message
    saying so is the student process's word, which code running in it can write at any time; a
    process blocked in that read is not running that code. Without the procfs (``--no-sandbox``)
    or on an architecture not listed, the message alone counts."""

    READ = {"x86_64": 0, "aarch64": 63, "arm64": 63}

    def __init__(self, proc, pid):
        import platform

        self.proc, self.pid = proc, pid
        self.nr = self.READ.get(platform.machine())

    def waiting(self) -> bool:
        if self.proc is None or self.nr is None or not self.pid:
            return True
        try:
            fd = os.open(f"{self.pid}/syscall", os.O_RDONLY | os.O_CLOEXEC, dir_fd=self.proc)
            try:
                parts = os.read(fd, 256).split()
            finally:
                os.close(fd)
        except FileNotFoundError:
            return False  # the process is gone: its exit says the rest
        except OSError as exc:  # not readable here: the message alone counts, as without a sandbox
            print(
                f"cannot see the main line's wait ({exc!r}): cell ends on its word", file=sys.stderr
            )
            self.proc = None
            return True
        try:
            return (
                len(parts) > 1 and int(parts[0]) == self.nr and int(parts[1], 16) == student.CMD_FD
            )
        except ValueError:  # "running", or not in a system call
            return False


class Session:
    """The zygote's side of one submission (the relay process): the event loop that carries the
    host's requests (:class:`Relay`), watches the cells (:class:`CellClock`) and their output
    (:class:`OutputMeter`), and answers the host."""

    def __init__(
        self,
        helper,
        pid,
        pipes: Pipes,
        clock: CellClock,
        meter: OutputMeter,
        waits=None,
        written: Written | None = None,
    ):
        self.helper, self.pid = helper, pid
        self.written = written
        self.waits = waits if waits is not None else Waits(None, pid)
        self.ending = None  # (cell, its end event) until the main line is seen waiting for a go
        self.ctl_r, self.cmd_w, self.rep_r, self.req_w = (
            pipes.ctl_r,
            pipes.cmd_w,
            pipes.rep_r,
            pipes.req_w,
        )
        self.clock = clock
        self.meter = meter
        self.relay = Relay(pipes)
        self.main = None
        self.exit_status = None
        self.reaped = False
        self.garbled = False
        self.done = False
        self.ctl_buf = b""
        self.test_alive = False
        self.tests_seen = []
        for fd in (pipes.ctl_r, pipes.rep_r, pipes.req_r, pipes.req_w):
            os.set_blocking(fd, False)

    # -- event loop ------------------------------------------------------------------
    def run(self):
        clock = self.clock
        with selectors.DefaultSelector() as sel:
            for fd in (PROTO_IN, self.ctl_r, self.rep_r):
                sel.register(fd, selectors.EVENT_READ)
            writing = False  # req_w registered: requests wait for the pipe
            self._go(time.monotonic())  # the first step starts on the host's clock
            while self.exit_status is None:
                now = time.monotonic()
                busy = clock.current is not None or self.test_alive
                tick = 0.002 if self.ending else 0.1 if busy else 0.5
                wait = max(min(clock.next_deadline(now) - now, tick), 0.0)
                if bool(self.relay.outgoing) != writing:
                    writing = not writing
                    (sel.register if writing else sel.unregister)(
                        self.req_w, *((selectors.EVENT_WRITE,) if writing else ())
                    )
                events = sel.select(wait)
                ready = {key.fd for key, mask in events if mask & selectors.EVENT_READ}
                if any(key.fd == self.req_w for key, _ in events):
                    self.relay.flush()
                if self.rep_r in ready:
                    self._replies()
                if self.ctl_r in ready:
                    self._control()
                if PROTO_IN in ready:
                    msg, body = read_frame(PROTO_IN)
                    self._host(msg, body)
                if self.ending:
                    self._confirm(time.monotonic())
                self._check_exit()
                if self.exit_status is None:
                    self._enforce(time.monotonic())

    def _go(self, now):
        """Let the main line go on to its next step (``g``), whose clock starts now."""
        if self.written is not None and self.clock.next_is_test():
            self.written.before_test()  # the main line waits: no test cell has run yet
            now = time.monotonic()
        self.clock.go(now)
        self._command(b"g")

    def _confirm(self, now):
        """A cell's end, once the main line is seen waiting for the next go: then, and only then,
        the cell's clock stops and the next step's starts."""
        if not self.waits.waiting():
            return
        c, msg = self.ending
        self.ending = None
        self.clock.end(c, msg, now, self.meter.cell_over)
        self._go(now)

    def _enforce(self, now):
        clock = self.clock
        if now >= clock.wall:
            self.main = "timeout"
            if clock.current is not None:
                clock.cells.setdefault(clock.current, {}).setdefault("status", "timeout")
            self.exit_status = "killed"
            return
        if clock.expect_by is not None and now >= clock.expect_by:
            # the main line said a cell ended, was seen waiting, and then did not report the
            # tests or the end it was let go on to: what a process does that is not the main line
            self.main = "timeout"
            self.garbled = True
            self.exit_status = "killed"
            return
        if self.test_alive and not self.meter.killed and self.meter.test_over():
            self._kill_for_output()
        if clock.current is None or clock.since is None:
            return
        if clock.interrupted is None and self.meter.cell_over(clock.current):
            clock.mark("output-limit", now)
            self._interrupt()  # as for a time limit: interrupt, then go on
        elif clock.interrupted is None and clock.over(now):
            if self.ending:  # an end that came just in time: seen before any interrupt
                self._confirm(now)
                if clock.current is None:
                    return
            clock.mark("timeout", now)
            self._interrupt()  # like nbgrader: interrupt, then go on
        elif clock.interrupted is not None and clock.over(now):
            self.main = "timeout"  # the cell ignored the interrupt
            self.exit_status = "killed"

    def _interrupt(self):
        try:
            if self.pid:
                os.kill(self.pid, signal.SIGINT)
        except (ProcessLookupError, PermissionError):
            pass

    def _kill_for_output(self):
        self.meter.killed = True
        self._command(b"k")

    def _check_exit(self):
        try:
            pid, status = os.waitpid(self.helper, os.WNOHANG)
        except ChildProcessError:
            self.exit_status = "gone"
            return
        if pid:
            self.exit_status = status
            self.reaped = True
            code = student._exit_code(status)
            if self.main is None:
                if code == 0 and self.done:
                    self.main = "completed"
                elif code == 128 + signal.SIGXCPU:
                    self.main = "timeout"
                else:
                    self.main = "kernel-died"

    def reap(self):
        if not self.reaped:
            try:
                os.waitpid(self.helper, 0)
            except ChildProcessError:
                pass
            self.reaped = True

    # -- host ------------------------------------------------------------------------
    def _host(self, msg, body):
        op = msg.get("op")
        if op in ("begin", "call"):
            if not self.test_alive:
                write_frame(
                    PROTO_OUT, {"ev": "reply", "seq": msg.get("seq"), "status": "no-process"}
                )
                return
            self.relay.send(msg, body)
        elif op == "kill-test":
            self._command(b"k")
        elif op == "more-tests":
            self.test_alive = True
            self.meter.more_tests()
            self._command(b"f")
        elif op == "continue":
            self.test_alive = False
            self._command(b"kc")  # stop the test process if it still runs, then go on
            self._go(time.monotonic())
        elif op == "abort":
            self.main = self.main or "timeout"
            self.exit_status = "killed"

    def _command(self, byte):
        try:
            os.write(self.cmd_w, byte)
        except OSError:
            pass

    # -- student process -------------------------------------------------------------
    def _replies(self):
        chunk = self.relay.read()
        if chunk:
            self._feed_replies(chunk)

    def _feed_replies(self, chunk):
        if self.meter.killed:
            return
        if self.meter.test_over():  # the call printed more than the limit: no answer counts
            self._kill_for_output()
            return
        try:
            frames = self.relay.feed(chunk)
        except ProtocolError as exc:
            self.garbled = True
            write_frame(PROTO_OUT, {"ev": "garbled", "why": str(exc)[:200]})
            return
        for header, body in frames:
            out = {"ev": "reply"}
            for key in ("seq", "names", "restored", "error", "dtype", "complete", "threads"):
                if key in header:
                    out[key] = header[key]
            write_frame(PROTO_OUT, out, body)

    def _control(self):
        try:
            chunk = os.read(self.ctl_r, 65536)
        except (BlockingIOError, InterruptedError):
            return
        if not chunk:
            return
        buf = self.ctl_buf + chunk
        *lines, rest = buf.split(b"\n")
        if len(rest) > 8192:
            rest = b""
            self.garbled = True
        self.ctl_buf = rest
        for line in lines:
            self._event(line)

    def _event(self, line):
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            self.garbled = True
            return
        if type(msg) is not dict:
            self.garbled = True
            return
        now = time.monotonic()
        if msg.get("done") is True:
            if self.clock.expect != ("done",):  # not where the plan ends
                self.garbled = True
                return
            self.clock.expect = self.clock.expect_by = None
            self.done = True
            return
        if "tests" in msg:
            ks = msg["tests"]
            if self.clock.expect != ("tests", ks):  # not the tests the main line was let go on to
                self.garbled = True
                return
            self.clock.expect = self.clock.expect_by = None
            self.tests_seen.extend(ks)
            self.test_alive = True
            self.meter.tests_started(ks[0] if ks else 0)
            write_frame(PROTO_OUT, {"ev": "tests", "ks": ks})
            return
        if "test-exit" in msg:
            self.test_alive = False
            self.relay.drain(self._feed_replies)
            status = msg["test-exit"]
            if self.meter.killed:  # stopped here for its output: reported as the file-size signal
                status, self.meter.killed = 128 + signal.SIGXFSZ, False
            write_frame(
                PROTO_OUT,
                {
                    "ev": "test-exit",
                    "status": status if type(status) is int else None,
                    "killed": msg.get("killed") is True,
                },
            )
            return
        c = msg.get("c")
        if msg.get("e") == "end" and type(c) is int and c == self.clock.current:
            # taken once the main line is seen waiting for its next go (_confirm); the last
            # end it sent before waiting is the one kept
            self.ending = (c, msg)
            self._confirm(now)
        else:  # a "start" (the relay starts cells), an end of another cell, anything else
            self.garbled = True

    # -- result ----------------------------------------------------------------------
    def result(self):
        return {
            "cells": self.clock.result(self.meter.outdir),
            "main": self.main or "completed",
            "garbled": self.garbled,
        }


def _read_output(path, keep):
    """``(text kept, size)`` of a captured output file, which the submission could have
    replaced by a FIFO or a link: opened without following links or blocking."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return "", 0
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "", 0
        data = os.read(fd, keep + 1) if keep > 0 else b""
        size = info.st_size
    except OSError:
        return "", 0
    finally:
        os.close(fd)
    text = data[:keep].decode("utf-8", "replace")
    if size > keep:
        text += f"\n... [{size - keep} more bytes not kept]"
    return text, size


def _read_main_pid(fd):
    data = os.read(fd, 100) if wait_readable([fd], 60) else b""
    try:
        pid, isolated = data.split()
        return int(pid), bool(int(isolated))
    except ValueError:
        return None, False


def _write_files(scratch, files, limits):
    """The task's files written into ``scratch``; ``(notes, {name: sha256 of what was written})``."""
    notes = []
    inputs = {}
    total = 0
    for name, data in files:
        raw = base64.b64decode(data)
        total += len(raw)
        if total > limits["files"]:
            notes.append(f"extra files beyond {limits['files'] >> 20} MB were not copied")
            break
        path = os.path.join(scratch, name)
        if os.path.commonpath(
            [os.path.realpath(path), os.path.realpath(scratch)]
        ) != os.path.realpath(scratch):
            continue
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(raw)
        except OSError:  # a name under another file's name: left out
            continue
        inputs[name] = hashlib.sha256(raw).digest()
    return notes, inputs


def written_files(scratch, inputs, limit):
    """``([(name, data), ...], notes)``: the regular files under ``scratch`` that are not the
    task's files unchanged (``inputs``: name -> sha256), in sorted order, read without following a
    link or blocking on a special file, at most :data:`MAX_WRITTEN_FILES` files of ``limit`` bytes
    together, :data:`MAX_WRITTEN_DEPTH` folders deep; names that are not UTF-8 are left out."""
    out, notes, total, seen = [], [], 0, 0
    stack = [("", 0)]
    while stack:
        rel_dir, depth = stack.pop()
        try:
            with os.scandir(os.path.join(scratch, rel_dir) if rel_dir else scratch) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for e in entries:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            try:
                rel.encode("utf-8")
                info = e.stat(follow_symlinks=False)
            except (UnicodeEncodeError, OSError):
                continue
            if stat.S_ISDIR(info.st_mode):
                if depth + 1 < MAX_WRITTEN_DEPTH:
                    subdirs.append((rel, depth + 1))
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            seen += 1  # every regular file looked at (the task's own included): bounded work
            if len(out) >= MAX_WRITTEN_FILES or seen > MAX_WRITTEN_FILES + len(inputs):
                notes.append(f"files the notebook wrote beyond {MAX_WRITTEN_FILES} were not copied")
                return out, notes
            data = _read_regular(e.path, limit - total)
            if data is None:
                if total + info.st_size > limit:
                    notes.append(
                        f"files the notebook wrote beyond {limit >> 20} MB were not copied"
                    )
                    return out, notes
                continue
            if inputs.get(rel) == hashlib.sha256(data).digest():
                continue
            total += len(data)
            out.append((rel, data))
        stack.extend(reversed(subdirs))  # a folder's files, then its folders, in name order
    out.sort()
    return out, notes


def _read_regular(path, most):
    """A regular file's bytes (at most ``most``: None when it holds more, or is not one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > most:
            return None
        chunks, n = [], 0
        while n <= info.st_size:
            chunk = os.read(fd, min(1 << 20, info.st_size + 1 - n))
            if not chunk:
                break
            chunks.append(chunk)
            n += len(chunk)
        return b"".join(chunks) if n <= most else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _wipe(config):
    """Empty every place a submission can write: the scratch tmpfs and /dev/shm (without
    recursion: a submission may leave a tree thousands of folders deep)."""
    places = [config["scratch"], config["outdir"], config["home"]]
    if config["sandboxed"]:
        places = [
            os.path.join(d, n)
            for d in (config["tmp"], "/dev/shm")
            if os.path.isdir(d)
            for n in os.listdir(d)
        ]
    for path in places:
        student.remove_tree(path)


def _kill_all(sandboxed, pid, isolated, helper=None):
    """SIGKILL every process of the submission: its pid namespace's init (the kernel then kills
    the rest), its process group, and in a sandbox everything left but the zygote."""
    if pid:
        for target, kill in ((pid, os.kill), (pid, os.killpg), (helper, os.kill)):
            if not target:
                continue
            try:
                kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    if not sandboxed:
        return
    for _ in range(500):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        try:
            os.kill(-1, 0)
        except ProcessLookupError:
            return
        time.sleep(0.002)
