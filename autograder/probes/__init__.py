"""Building blocks a test cell passes into student code: functions as data, and small probes.

Public, like :mod:`autograder.checks`: nothing here is an expected value, a check or a message -
only neutral ways to *exercise* a student's code (a function to hand it, a tensor to make where it
runs, a step to run there). Under ``autograder grade`` a test cell runs in the judge, and a call
into student code carries its arguments to the student's process as data: a function or class
crosses only by reference to an importable module (this one, torch, the standard library), never
as code (:func:`autograder.remote.pickler.dumps`). A ``lambda t: t.add_(1)`` written in a test cell is
code; its equivalent here is data::

    from autograder.probes import T, fn, call

    modifies_in_place(fn(T.add_(1)), x)          # lambda t: t.add_(1)
    modifies_in_place(fn(T[0].mul_(2)), x)       # lambda t: t[0].mul_(2)
    inplace_relu_is_safe(fn(T @ w), x)           # lambda t: t @ w  (w travels as data)
    inplace_relu_is_safe(fn(call(torch.softmax, T, dim=0)), x)

In one kernel (JupyterLab, nbgrader) the same objects are ordinary callables.

The exercises' probes - functions a test hands to :func:`autograder.checks.observe` to run where
the student's code runs (``backward_with(data, g)``: ``MyReLU.apply(x).backward(g)``, returns
``x.grad``) - live in one submodule per exercise (:mod:`.custom_backward`, :mod:`.index_assignment`,
:mod:`.training_loops`, :mod:`.diagnosis`); they use the student's names through :func:`student`, looked up at call
time where they run, as a test cell's global would be.
"""

from __future__ import annotations

import operator

__all__ = [
    "T",
    "fn",
    "call",
    "seq",
    "const",
    "throw",
    "Fn",
    "Boom",
    "Stop",
    "student",
    "on_a_non_leaf",
    "leaf_error_passes_through",
    "inverse_sharing_memory",
    "inverse_private_copy",
]


# --------------------------------------------------------------------------- functions as data


class Expr:
    """An expression in the argument ``T`` of a one-argument function: built by attribute reads,
    indexing, calls and operators on :data:`T` (``T.add_(1)``, ``T[:, 1:].relu_()``, ``T * 2``),
    turned into a callable by :func:`fn`. Plain data: a tree of tuples."""

    __slots__ = ("_node",)

    def __init__(self, node):
        object.__setattr__(self, "_node", node)

    def __reduce__(self):
        return Expr, (self._node,)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Expr(("attr", self._node, name))

    def __setattr__(self, name, value):
        raise AttributeError("an expression is built, not assigned to: use call(setattr, ...)")

    def __getitem__(self, key):
        return Expr(("item", self._node, _node(key)))

    def __call__(self, *args, **kwargs):
        return Expr(
            (
                "call",
                self._node,
                tuple(_node(a) for a in args),
                {k: _node(v) for k, v in kwargs.items()},
            )
        )

    def __repr__(self):
        return _show(self._node)


def _binary(name, symbol, reflected=False):
    def op(self, other):
        a, b = (_node(other), self._node) if reflected else (self._node, _node(other))
        return Expr(("op", name, a, b))

    op.__name__ = f"__{'r' if reflected else ''}{name}__"
    return op


_SYMBOLS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "matmul": "@",
    "truediv": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "and_": "&",
    "or_": "|",
}
for _name, _symbol in _SYMBOLS.items():
    _dunder = _name.rstrip("_")
    setattr(Expr, f"__{_dunder}__", _binary(_name, _symbol))
    if _name not in ("lt", "le", "gt", "ge"):
        setattr(Expr, f"__r{_dunder}__", _binary(_name, _symbol, reflected=True))
Expr.__neg__ = lambda self: Expr(("neg", self._node))

T = Expr(("arg",))
"""The argument of the function :func:`fn` makes."""


def _node(value):
    if isinstance(value, Expr):
        return value._node
    if type(value) is tuple:
        return ("tuple", tuple(_node(v) for v in value))
    return ("const", value)


def _eval(node, t):
    kind = node[0]
    if kind == "arg":
        return t
    if kind == "const":
        return node[1]
    if kind == "tuple":
        return tuple(_eval(n, t) for n in node[1])
    if kind == "attr":
        return getattr(_eval(node[1], t), node[2])
    if kind == "item":
        return _eval(node[1], t)[_eval(node[2], t)]
    if kind == "call":
        f = _eval(node[1], t)
        return f(*(_eval(a, t) for a in node[2]), **{k: _eval(v, t) for k, v in node[3].items()})
    if kind == "op":
        return getattr(operator, node[1])(_eval(node[2], t), _eval(node[3], t))
    if kind == "neg":
        return -_eval(node[1], t)
    if kind == "seq":
        value = None
        for n in node[1]:
            value = _eval(n, t)
        return value
    raise ValueError(f"not an expression: {kind!r}")


def _show(node) -> str:
    kind = node[0]
    if kind == "arg":
        return "t"
    if kind == "const":
        value = node[1]
        return getattr(value, "__name__", None) or repr(value) if callable(value) else repr(value)
    if kind == "tuple":
        return ", ".join(_show(n) for n in node[1])
    if kind == "attr":
        return f"{_show(node[1])}.{node[2]}"
    if kind == "item":
        return f"{_show(node[1])}[...]"
    if kind == "call":
        args = [_show(a) for a in node[2]] + [f"{k}={_show(v)}" for k, v in node[3].items()]
        return f"{_show(node[1])}({', '.join(args)})"
    if kind == "op":
        return f"({_show(node[2])} {_SYMBOLS.get(node[1], node[1])} {_show(node[3])})"
    if kind == "neg":
        return f"-{_show(node[1])}"
    if kind == "seq":
        return "; ".join(_show(n) for n in node[1])
    return "?"


class Fn:
    """A function of one argument ``t`` given as an :class:`Expr` (what :func:`fn` returns):
    ``Fn(T.add_(1))(x)`` is ``x.add_(1)``."""

    __slots__ = ("expr",)
    __name__ = "<lambda>"  # (an instance's name, as a lambda's: a test's message may show it)

    def __init__(self, expr):
        self.expr = expr if isinstance(expr, Expr) else Expr(_node(expr))

    def __reduce__(self):
        return Fn, (self.expr,)

    def __call__(self, t=None):
        return _eval(self.expr._node, t)

    def __repr__(self):
        return f"<function t: {self.expr!r}>"


def fn(expr) -> Fn:
    """``lambda t: <expr>`` as data: ``fn(T.mul_(2))``, ``fn(None)`` (returns None),
    ``fn(call(torch.ones, 3))`` (ignores t)."""
    return Fn(expr)


def call(f, *args, **kwargs) -> Expr:
    """``f(*args, **kwargs)`` inside an expression (``call(torch.softmax, T, dim=0)``,
    ``call(operator.setitem, T.data, 0, 5.0)``); ``f`` is a function by reference or an expression."""
    return Expr(
        ("call", _node(f), tuple(_node(a) for a in args), {k: _node(v) for k, v in kwargs.items()})
    )


def seq(*exprs) -> Expr:
    """Each expression in order; the value of the last (``seq(T[1].mul_(2), T.sum())``)."""
    return Expr(("seq", tuple(_node(e) for e in exprs)))


def const(value) -> Expr:
    return Expr(("const", value))


def throw(error):
    """Raise ``error`` (the very object: ``fn(call(throw, error))`` is a function that raises it)."""
    raise error


def student(name):
    """The object the student's notebook binds to ``name``, looked up now, where this runs: the
    student's process under the grader, the notebook's own namespace in one kernel."""
    from autograder import remote

    if remote.connected() is not None:
        raise RuntimeError(
            f"a probe that uses the student's {name!r} runs where the student's code runs: "
            "call it through observe(probe, ...)"
        )
    server = remote.Server.serving()
    ns = server.namespace if server is not None else None
    if ns is None:
        try:
            from IPython import get_ipython

            shell = get_ipython()
        except ImportError:
            shell = None
        if shell is not None:
            ns = shell.user_ns
        else:
            import __main__

            ns = vars(__main__)
    try:
        return ns[name]
    except KeyError:
        raise NameError(f"name {name!r} is not defined") from None


# --------------------------------------------------------------------------- exceptions


class Boom(Exception):
    """An exception of a class of its own, for a function handed to student code to raise."""


class Stop(BaseException):
    """A ``BaseException`` that is not an ``Exception``, for the same."""


# --------------------------------------------------------------------------- probes (run where student code runs)


def on_a_non_leaf(f, function, values, factor=2.0):
    """``f(function, x), x`` with ``x = torch.tensor(values, requires_grad=True) * factor`` made
    where the student's code runs: a non-leaf that requires grad."""
    import torch

    x = torch.tensor(values, requires_grad=True) * factor
    return f(function, x), x


def leaf_error_passes_through(f, values):
    """Call ``f(producer, torch.tensor(values))`` where ``producer(t)`` runs ``t.mul_(2)`` and
    re-raises the RuntimeError that raises on a leaf that requires grad. Returns what came out of
    ``f``: ``"the same RuntimeError"`` (the producer's own exception object), ``"another
    RuntimeError: ..."``, ``"<type>: ..."`` or ``"no exception"``."""
    import torch

    raised = []

    def writes_leaf(t):
        try:
            return t.mul_(2)
        except RuntimeError as exc:
            raised.append(exc)
            raise

    try:
        f(writes_leaf, torch.tensor(values))
    except RuntimeError as exc:
        return (
            "the same RuntimeError"
            if raised and exc is raised[-1]
            else f"another RuntimeError: {exc}"
        )
    except BaseException as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    return "no exception"


def inverse_sharing_memory(t):
    """y = inverse of t as a 2x2 matrix (its backward reads y); the result shares y's memory through
    .data, which moves no version counter (lesson 1, section 5.3): relu_ changes y with no error."""
    import torch

    y = torch.linalg.inv(t.view(2, 2))
    out = y * 1
    out.data = y.data
    return out


def inverse_private_copy(t):
    """The same, but the result's memory is a private copy: relu_ cannot change y."""
    import torch

    y = torch.linalg.inv(t.view(2, 2))
    out = y * 1
    out.data = y.data.clone()
    return out
