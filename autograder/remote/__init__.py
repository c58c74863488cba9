"""Calls into student code, and what comes back: the one seam between a test and a submission.

A test cell of this course is a stock nbgrader test cell. In one kernel (nbgrader, the
self-check, JupyterLab) it calls the student's functions directly. Under ``autograder grade``
the same cell runs in the *judge*, a process that never runs student code: there every name
the student's notebook defines is plain data by value or a :class:`Remote` handle, a faithful
proxy of the object where it lives. Calling one sends the call - the callable's name and a
copy of the arguments - to the process that ran the student's cells; so does every other
operation on a handle (an attribute, an index, ``next``, ``==``, ``len``, ``isinstance``: one
of :data:`~autograder.remote.server.OPS`, by name). That process performs it and sends back an *observation*
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

The package, by side of the process boundary:

* :mod:`.client`  - the judge's side (and one kernel's): :class:`Remote`, :func:`observe`,
  :class:`Outcome`, the :class:`Link` a judge connects;
* :mod:`.server`  - the student's side: a :class:`Server` performs the calls on the student's
  namespace and answers with observations;
* :mod:`.pickler` - the restricted pickler: what a call carries (data, and names), never code;
* :mod:`.errors`, :mod:`.silence` - what goes wrong with a call; quiet calls.
"""

from __future__ import annotations

from .client import Link, Outcome, Remote, connect, connected, dumps_call, observe
from .errors import StudentProcessError, UnsupportedTest
from .pickler import DELETED
from .server import Server
from .silence import quiet, quiet_depth

__all__ = [
    "DELETED",
    "Link",
    "Outcome",
    "Remote",
    "Server",
    "StudentProcessError",
    "UnsupportedTest",
    "connect",
    "connected",
    "dumps_call",
    "observe",
    "quiet",
    "quiet_depth",
]
