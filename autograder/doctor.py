"""The in-place doctor: which line wrote into a tensor that autograd saved.

Turn it on around the step that fails, or for a whole notebook::

    from autograder.doctor import inplace_doctor
    with inplace_doctor():
        loss = model(x).sum()
        loss.backward()          # "... modified by an inplace operation ..." -> a report, then the error

    %load_ext autograder.doctor  # (IPython/JupyterLab: every cell, until %unload_ext autograder.doctor)

When a backward fails with "one of the variables needed for gradient computation has been
modified by an inplace operation", or an in-place write into a leaf that requires grad is refused,
it prints a report - which tensor, which line saved it, which line(s) wrote into it afterwards and
the version each write moved it to, and the fix the course teaches for that kind of write - and
then the original error is raised, unchanged. It changes no result: every operation runs as it
would without it.

How (PyTorch's own extension points, no source parsing): a :class:`torch.overrides.TorchFunctionMode`
sees each torch call from Python (functions, tensor methods, ``t[i] = v``, ``nn.functional`` calls
that ``nn`` modules make, the optimizers' ``_foreach_*`` updates). For each call it notes the tensors
the new autograd node saved (its ``_saved_*`` attributes: storage, shape, version at that moment)
and every argument whose version counter went up (a write: before and after). The error message
names the saved tensor (shape, "output k of XBackward0", the version it is at and the one expected);
the report matches it to the notes. What it cannot see, it says: a write inside a compiled
(``torch.compile``) region or inside C++ code that no Python torch call reaches, and a write made
before the doctor was on.

Cost: each torch call does a little more bookkeeping (figures: docs/learner.md, "The in-place doctor").
Off, nothing is installed and nothing costs.
"""

from __future__ import annotations

import collections
import linecache
import os
import re
import sys
import types
import weakref
from dataclasses import dataclass, field

__all__ = ["inplace_doctor", "load_ipython_extension", "unload_ipython_extension"]

SAVED_ERROR = re.compile(
    r"modified by an inplace operation: \[(?P<type>[^\[\]]+?) \[(?P<shape>[\d, ]*)\]\]"
    r"(?:, which is output (?P<nr>\d+) of (?P<node>\w+),)?"
    r" is at version (?P<now>\d+); expected version (?P<expected>\d+) instead"
)
LEAF_ERROR = "leaf Variable that requires grad is being used in an in-place operation"
KEEP = 200_000  # notes kept (the most recent): a long loop does not grow without bound

# installed packages (torch, and any library reached from the learner's code): the folder torch is in
_TORCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(str(__import__("torch").__file__))))
_THIS = os.path.abspath(__file__)
SECTION = "lesson 3, section 5 (course/03_index_assignment.ipynb)"


@dataclass
class Site:
    """Where a torch call was made: the learner's line, and the library line when the call was made
    inside a library (nn, optim, ...) reached from it."""

    user: tuple[str, int] | None
    library: tuple[str, int] | None
    op: str

    def where(self) -> str:
        return _place(self.user) if self.user else "(no line of your code on the stack)"


@dataclass
class Saved:
    node: str  # the autograd node that saved it (ExpBackward0)
    attr: str  # what the node calls it (result, self, other)
    storage: int
    shape: tuple[int, ...]
    version: int
    of_node: str | None  # the saved tensor's own grad_fn then (output `of_nr` of it), if any
    of_nr: int
    site: Site


@dataclass
class Write:
    storage: int
    shape: tuple[int, ...]
    before: int
    after: int
    site: Site
    leaf: bool = False  # the tensor written was a leaf (a parameter, a buffer, an input)
    requires_grad: bool = False
    node_after: str | None = None  # its grad_fn after the write (what the error message names)


@dataclass
class Notes:
    saved: collections.deque = field(default_factory=lambda: collections.deque(maxlen=KEEP))
    made: collections.deque = field(default_factory=lambda: collections.deque(maxlen=KEEP))
    writes: collections.deque = field(default_factory=lambda: collections.deque(maxlen=KEEP))
    calls: int = 0
    compiled: bool = False


def _place(where: tuple[str, int]) -> str:
    filename, line = where
    text = linecache.getline(filename, line).strip()
    return f"{_pretty_file(filename)}, line {line}: {text}"


def _pretty_file(filename: str) -> str:
    """IPython's cell files as IPython names them ("Cell In[5]"), library files from site-packages."""
    try:
        ip = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
        count = ip and ip.compile._filename_map.get(filename)
        if count is not None:
            return f"Cell In[{count}]"
    except Exception:
        pass
    if filename.startswith(_TORCH_DIR):
        return os.path.relpath(filename, _TORCH_DIR)
    return filename


def _library(filename: str) -> bool:
    return filename.startswith(_TORCH_DIR) or filename == _THIS or filename.startswith("<frozen")


def _site(op: str) -> Site:
    frame: types.FrameType | None = sys._getframe(2)
    library = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename == _THIS:
            frame = frame.f_back
            continue
        if _library(filename):
            if library is None and "/torch/overrides.py" not in filename:
                library = (filename, frame.f_lineno)
            frame = frame.f_back
            continue
        return Site((filename, frame.f_lineno), library, op)
    return Site(None, library, op)


def _tensors(obj, out):
    import torch

    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _tensors(item, out)
    elif isinstance(obj, dict):
        for item in obj.values():
            _tensors(item, out)
    return out


def _storage(t) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # (a tensor without storage: meta, sparse, a functional wrapper)
        return -id(t)


_SAVED_ATTRS: dict[str, list[str]] = {}


def _saved_of(node):
    name = type(node).__name__
    attrs = _SAVED_ATTRS.get(name)
    if attrs is None:
        attrs = _SAVED_ATTRS[name] = [
            a for a in dir(node) if a.startswith("_saved_") and not a.startswith("_saved_tensors")
        ]
    for attr in attrs:
        try:
            value = getattr(node, attr)
        except Exception:
            continue
        yield attr[len("_saved_") :], value


def _make_mode():
    from torch.overrides import TorchFunctionMode

    class InplaceDoctorMode(TorchFunctionMode):
        """Notes what each torch call saved for backward and wrote into (module docstring)."""

        def __init__(self, notes: Notes):
            super().__init__()
            self.notes = notes
            self.leaf_error: tuple[Site, object] | None = None
            self.seen: dict[int, None] = {}  # custom Function nodes already noted

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if getattr(func, "__name__", "") == "__get__":
                return func(*args, **kwargs)  # (attribute reads: t.shape, t.grad_fn)
            notes, seen = self.notes, self.seen
            notes.calls += 1
            inputs = _tensors((args, kwargs), [])
            before = [t._version for t in inputs]
            try:
                out = func(*args, **kwargs)
            except RuntimeError as err:
                if LEAF_ERROR in str(err):
                    self.leaf_error = (_site(_op_name(func)), inputs[0] if inputs else None)
                raise
            site = None
            for t, v in zip(inputs, before, strict=True):
                try:
                    after = t._version
                except Exception:
                    continue
                if after != v:
                    site = site or _site(_op_name(func))
                    fn = t.grad_fn
                    notes.writes.append(
                        Write(
                            _storage(t),
                            tuple(t.shape),
                            v,
                            after,
                            site,
                            t.is_leaf,
                            t.requires_grad,
                            fn.name() if fn is not None else None,
                        )
                    )
            for t in inputs:  # a custom autograd.Function's node, first seen through its output
                node = t.grad_fn
                if node is not None and hasattr(node, "saved_tensors") and id(node) not in seen:
                    seen[id(node)] = None
                    if len(seen) > KEEP:
                        seen.pop(next(iter(seen)))
                    try:
                        kept = node.saved_tensors
                    except RuntimeError:  # (already written into: the error comes in backward)
                        kept = ()
                    custom = Site(None, None, f"{type(node).__name__}: ctx.save_for_backward")
                    for k in _tensors(kept, []):
                        notes.saved.append(_note(type(node).__name__, "saved_tensors", k, custom))
            for o in _tensors(out, []):
                node = o.grad_fn
                if node is None:
                    continue
                site = site or _site(_op_name(func))
                notes.made.append(_note(node.name(), "output", o, site))
                for attr, value in _saved_of(node):
                    for k in _tensors(value, []):
                        notes.saved.append(_note(node.name(), attr, k, site))
            return out

    return InplaceDoctorMode


def _note(node: str, attr: str, t, site: Site) -> Saved:
    fn = t.grad_fn
    return Saved(
        node,
        attr,
        _storage(t),
        tuple(t.shape),
        t._version,
        fn.name() if fn is not None else None,
        t.output_nr,
        site,
    )


def _op_name(func) -> str:
    qual = str(getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or func)
    module = getattr(func, "__module__", "") or ""
    if qual.startswith("TensorBase.") or qual.startswith("Tensor."):
        return "Tensor." + qual.split(".", 1)[1]
    if qual.startswith("_VariableFunctionsClass."):
        return "torch." + qual.split(".", 1)[1]
    if module.startswith("torch"):
        return f"{module}.{qual}".replace("torch._C._VariableFunctions", "torch").replace(
            "torch._C._nn", "torch.nn.functional"
        )
    return qual


# -- the report ------------------------------------------------------------------------------------


ACTIVATIONS = {
    "relu",
    "relu6",
    "elu",
    "selu",
    "celu",
    "leaky_relu",
    "hardtanh",
    "threshold",
    "rrelu",
    "silu",
    "mish",
    "hardswish",
    "hardsigmoid",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "alpha_dropout",
    "feature_alpha_dropout",
    "clamp",
    "clip",
}  # (and their `_` forms: what nn modules with inplace=True call)
INDEX_WRITES = {
    "__setitem__",
    "index_put_",
    "masked_fill_",
    "masked_scatter_",
    "index_fill_",
    "index_copy_",
    "index_add_",
    "scatter_",
    "scatter_add_",
    "scatter_reduce_",
}


def _fix(write: Write) -> str:
    op = write.site.op
    short = op.rsplit(".", 1)[-1]
    lib = write.site.library[0] if write.site.library else ""
    if "/torch/optim/" in lib or short.startswith("_foreach"):
        return (
            "an optimizer step wrote into parameters that a graph still needs: call "
            "optimizer.step() only after every backward() that uses the old values, or run the "
            "forward again after the step (lesson 4, the GAN step)."
        )
    if short.rstrip("_") in ACTIVATIONS:
        return (
            "an in-place activation (inplace=True, or a method ending in _) overwrote a tensor "
            "that the op before it saved: use the out-of-place form here (nn.ReLU(), F.relu(x), "
            "x.relu()) (lesson 1)."
        )
    if short in INDEX_WRITES:
        return (
            "clone before the write (e = e.clone(); e[...] = ...), or build the new values out of "
            "place (torch.where(mask, value, e), torch.cat) (lesson 3, section 6)."
        )
    if write.leaf and write.requires_grad:
        return (
            "a parameter was updated between the forward and the backward that needs its old "
            "values: update it after backward(), under `with torch.no_grad():` (lesson 4)."
        )
    if write.leaf:
        return (
            "a tensor that was saved (a buffer, an input, a detached copy: they share the memory "
            "and the version counter) was written into before backward(): write after "
            "backward(), or let the graph use a copy (x.clone()) (lesson 3, section 6)."
        )
    return (
        "use the out-of-place form (y = x * 2, not x *= 2 / x.mul_(2)), or clone the tensor before "
        "writing into it (lesson 3, section 6)."
    )


def _base(node: str | None) -> str | None:
    """A node's name without its "Backward0" (torch 2.13's message says "output 0 of Exp")."""
    return re.sub(r"Backward\d*$", "", node) if node else node


def report_saved(message: str, notes: Notes) -> str | None:
    """The report for a "modified by an inplace operation" error, or None if it is not one."""
    m = SAVED_ERROR.search(message)
    if not m:
        return None
    shape = tuple(int(s) for s in m["shape"].replace(" ", "").split(",") if s)
    now, expected = int(m["now"]), int(m["expected"])
    node, nr = m["node"], int(m["nr"]) if m["nr"] is not None else None

    def like(s: Saved, strict: bool) -> bool:
        # the message names the tensor's grad_fn as it is now: for a tensor a node saved as its
        # input, or a view of a tensor written since, that is the node of the write, or AsStrided
        return (
            s.shape == shape
            and s.version == expected
            and (not strict or node is None or (_base(s.of_node) == _base(node) and s.of_nr == nr))
        )

    def written(candidates):
        found = []
        for storage in dict.fromkeys(s.storage for s in candidates):
            writes = [
                w
                for w in notes.writes
                if w.storage == storage and w.before >= expected and w.after <= now
            ]
            if writes and max(w.after for w in writes) == now:
                found.append((storage, writes))
        return found

    # the tensors a node saved like this one; else (a node it could not see saved it) the tensors
    # a torch call made like this one
    found: list = []
    candidates: list[Saved] = []
    for strict in (True, False):
        for pool in (notes.saved, notes.made):
            some = [s for s in pool if like(s, strict)]
            candidates = candidates or some
            found = written(some)
            if found:
                candidates = some
                break
        if found:
            break
    what = f"the tensor [{m['type']} {list(shape)}]" + (
        f", output {nr} of {node}," if node else ","
    )
    lines = ["", f"in-place doctor: {what} saved at version {expected}, is at version {now}."]
    if not found:
        lines.append(
            "  It cannot name the write: "
            + (
                "no torch call it saw (since it was turned on) saved a tensor like this one."
                if not candidates
                else "no Python torch call it saw wrote into it. The write was made before it was "
                "turned on, in another thread, through .data, inside a compiled function, or in "
                "C++ code that no torch call from Python reaches."
            )
        )
        lines.append(f"  Find it by hand: print t._version after each line ({SECTION}).")
        return "\n".join(lines)
    storage, writes = found[0]
    savers = [s for s in candidates if s.storage == storage]
    groups: dict = {}  # one entry per (node, line): "MulBackward0 saved its self and other"
    for s in savers:
        groups.setdefault((s.node, s.site.user, s.attr == "output"), []).append(s)
    for group in groups.values():
        s = group[0]
        attrs = " and ".join(dict.fromkeys(g.attr for g in group))
        if s.site.user is None:  # a custom Function's save_for_backward: its line is not seen
            lines.append(
                f"  saved by   {s.node}'s forward (ctx.save_for_backward), version {s.version}"
            )
        elif s.attr == "output":
            lines.append(f"  made by    {s.site.where()}")
            lines.append(
                f"             ({s.site.op}, at version {s.version}; saved by a node it did not see)"
            )
        else:
            lines.append(f"  saved by   {s.site.where()}")
            lines.append(f"             ({s.node} saved its {attrs}, at version {s.version})")
    for w in writes:
        lines.append(f"  written by {w.site.where()}")
        mark = "  <- the write that broke it" if w.before == expected else ""
        lines.append(f"             ({w.site.op}: version {w.before} -> {w.after}){mark}")
        if w.site.library and w.site.user:
            lines.append(f"             inside {_place(w.site.library)}")
    first = next((w for w in writes if w.before == expected), writes[0])
    lines.append("  fix: " + _fix(first))
    if len(found) > 1:
        lines.append(f"  ({len(found) - 1} other tensor(s) match the message; the first is shown.)")
    return "\n".join(lines)


def report_leaf(site: Site, tensor) -> str:
    shape = list(tensor.shape) if tensor is not None else "?"
    lines = [
        "",
        f"in-place doctor: {site.op} wrote into a leaf that requires grad, shape {shape}",
        f"  at {site.where()}",
        "  fix: a parameter update goes under `with torch.no_grad():`; to change values that "
        "autograd should see, write into a copy (y = x.clone(); y[...] = ...) "
        f"({SECTION.replace('section 5', 'section 2')}).",
    ]
    return "\n".join(lines)


# -- turning it on ---------------------------------------------------------------------------------


class inplace_doctor:  # noqa: N801 (used like a function: `with inplace_doctor():`)
    """Context manager: notes saves and writes while on; on a saved-tensor or leaf in-place
    error inside it, prints the report (to ``file``, stdout by default) and lets the error go on."""

    def __init__(self, file=None):
        self.notes = Notes()
        self.file = file
        self.mode = None
        self.last_report: str | None = None

    def __enter__(self):
        self.mode = _make_mode()(self.notes)
        self.mode.__enter__()
        return self

    def __exit__(self, kind, err, tb):
        mode, self.mode = self.mode, None
        mode.__exit__(None, None, None)
        if err is not None:
            self.explain(err, mode)
        return False

    def explain(self, err, mode=None) -> str | None:
        mode = mode or self.mode
        text = None
        if isinstance(err, RuntimeError):
            text = report_saved(str(err), self.notes)
            if text is None and LEAF_ERROR in str(err) and mode and mode.leaf_error:
                text = report_leaf(*mode.leaf_error)
        if text:
            self.last_report = text
            print(text, file=self.file or sys.stdout, flush=True)
        return text


# -- IPython extension -----------------------------------------------------------------------------

_ACTIVE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def load_ipython_extension(ip) -> None:
    """``%load_ext autograder.doctor``: on for every cell; a failing cell shows its usual
    traceback, then the report."""
    if ip in _ACTIVE:
        return
    doctor = inplace_doctor().__enter__()
    _ACTIVE[ip] = doctor

    def handler(shell, etype, value, tb, tb_offset=None):
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        doctor.explain(value)
        return None

    ip.set_custom_exc((RuntimeError,), handler)
    print("in-place doctor: on (%unload_ext autograder.doctor turns it off)")


def unload_ipython_extension(ip) -> None:
    doctor = _ACTIVE.pop(ip, None)
    if doctor is not None:
        doctor.__exit__(None, None, None)
        ip.set_custom_exc((), None)
        print("in-place doctor: off")
