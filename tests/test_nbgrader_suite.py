"""nbgrader's own tests of `nbgrader autograde`, run against `autograder grade` (issue 36, item 4).

The pinned nbgrader ships its test suite; ``nbgrader/tests/apps/test_nbgrader_autograde.py`` is
what nbgrader itself means by "autograde works": 41 scenarios (``test_permissions`` runs twice:
42 runs; nbgrader skips 2 itself) that set up a course with real nbgrader commands (``db``,
``generate_assignment``), call ``autograde``, and check the gradebook, ``autograded/``, file
modes, exit statuses and log text.

This module runs **that file, unmodified**: each scenario is nbgrader's test class with that one
scenario left (:func:`_scenario_class`), and the suite module's ``run_nbgrader`` is replaced for
the duration of each test by :func:`routed`, which passes every command to nbgrader as before
*except* ``autograde``, which it runs as ``autograder grade`` (a real process, sandboxed, as an
instructor runs it) with the arguments translated by :func:`translate`. One more stand-in, for
speed only: :func:`_alembic_head` (nbgrader's alembic revision, asked once per process). So the
count of passing scenarios in ``make test`` is the count of nbgrader's autograde scenarios the
drop-in passes.
Stock passes every one (``pytest --pyargs nbgrader.tests.apps.test_nbgrader_autograde``:
40 passed, 2 skipped by nbgrader itself, on the pinned 0.9.6, 2026-11-29).

Where ``autograder grade`` deliberately differs, the scenario is an expected failure with the
reason (``strict``: it fails this module the day it starts passing), and docs/grading.md's
"nbgrader's own tests of `nbgrader autograde`" names the same differences.

Exit statuses: stock exits 1 on any failure; ``autograder grade`` uses 2, 3 and 4 to say which
(``--help``). :func:`routed` compares success with success and failure with failure, and says so.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from nbgrader import api as nbgrader_api
from nbgrader.tests import run_nbgrader as nbgrader_run
from nbgrader.tests.apps import test_nbgrader_autograde as suite
from nbgrader.tests.apps.conftest import course_dir, db, temp_cwd  # noqa: F401 - nbgrader's fixtures

from autograder.procs import explain, run

AUTOGRADER = str(Path(sys.executable).with_name("autograder"))

# nbgrader's value-taking options that `autograder grade` takes under the same name
SAME = {"--notebook", "--student"}


def translate(args: list[str], out: str) -> list[str]:
    """``nbgrader autograde`` arguments (after ``autograde``) as ``autograder grade`` arguments.

    * the assignment (nbgrader's one positional) -> ``--assignment NAME`` (``autograder grade``'s
      positional is the submissions folder; its default, the course's ``submitted/``, is nbgrader's)
    * ``--db URL`` / ``--db=URL`` (nbgrader's alias) -> ``--CourseDirectory.db_url=URL``
    * ``--help-all`` -> ``--help``
    * ``--force`` / ``-f``, ``--notebook``, ``--student``, ``--no-execute`` and every
      ``--Class.trait=value``: as they are (``autograder grade`` takes nbgrader's spelling)
    * added: ``--out`` (grades.csv and feedback pages, outside the course), ``--jobs 1`` (one
      sandbox: a scenario has one or two students) and ``--quiet``
    """
    if "--help-all" in args:
        return ["--help"]
    result: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--db":
            result.append(f"--CourseDirectory.db_url={rest.pop(0)}")
        elif arg.startswith("--db="):
            result.append("--CourseDirectory.db_url=" + arg.split("=", 1)[1])
        elif arg in SAME:
            result += [arg, rest.pop(0)]
        elif arg.startswith("-"):
            result.append(arg)
        else:
            result += ["--assignment", arg]
    return [*result, "--out", out, "--jobs", "1", "--quiet"]


def routed(args: list[str], retcode: int = 0, env: dict | None = None, stdout: bool = False) -> str:
    """nbgrader's ``run_nbgrader``, with ``autograde`` run as ``autograder grade`` from the
    current folder (the scenario's, whose ``nbgrader_config.py`` names the course), in the
    environment the scenario gives (``env``) or the test's. Returns the command's output (stdout
    and stderr), as ``run_nbgrader`` returns the log; raises AssertionError, as it does, when
    the outcome is not the expected one: ``retcode`` 0 is exit status 0, any other is a failure."""
    if args[0] != "autograde":
        return nbgrader_run(args, retcode=retcode, env=env, stdout=stdout)
    out = tempfile.mkdtemp(prefix="autograder-out-")
    try:
        environ = dict(env if env is not None else os.environ)
        proc = run(
            [AUTOGRADER, "grade", *translate(args[1:], out)],
            expect=None,
            cwd=os.getcwd(),
            env=environ,
            timeout=600,
        )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if (proc.returncode == 0) != (retcode == 0):
        raise AssertionError(
            f"`nbgrader {' '.join(args)}` expects "
            f"{'success' if retcode == 0 else 'failure (exit status ' + str(retcode) + ')'}:\n"
            + explain(proc, os.getcwd())
        )
    return proc.stdout + proc.stderr


@functools.cache
def _alembic_head() -> str:
    """nbgrader's ``get_alembic_version``, once per process: the head revision of the alembic
    scripts nbgrader ships (``e43177bfe90b`` in 0.9.6), a constant of the installed nbgrader. Each
    scenario's new gradebook asks for it, and stock asks ``alembic heads`` in a process of its own
    every time (1.2-1.9 CPU-s each, nbgrader imported there too; 42 scenarios: about 70 CPU-s of
    ``make test``, measured 2026-12-07). The gradebooks get the revision stock writes."""
    return _stock_alembic_version()


_stock_alembic_version = nbgrader_api.get_alembic_version


@pytest.fixture(autouse=True)
def _autograde_is_autograder_grade(monkeypatch, needs_bubblewrap):
    monkeypatch.setattr(suite, "run_nbgrader", routed)
    monkeypatch.setattr(nbgrader_api, "get_alembic_version", _alembic_head)
    # nbgrader's database commands run `alembic` from PATH, as in nbgrader's own CI
    bin_dir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join([bin_dir, os.environ.get("PATH", "")]))


# scenario -> why `autograder grade` differs there (docs/grading.md, "nbgrader's own tests", lists them)
DIFFERENCES: dict[str, str] = {
    "test_no_execute": (
        "--no-execute is refused (exit 2): scores taken from the outputs saved in a student's file "
        "would be whatever the file says"
    ),
    "test_handle_failure": (
        "a submitted notebook with nbgrader cells whose grade_id its source lacks: stock removes "
        "the id, then its metadata check fails the student's assignment (exit 1, nothing in "
        "autograded/); `autograder grade` grades the cells the source has and keeps the others "
        "as plain cells (exit 0)"
    ),
    "test_handle_failure_single_notebook": (
        "as test_handle_failure, one notebook selected with --notebook"
    ),
}


SCENARIOS = sorted(n for n in vars(suite.TestNbGraderAutograde) if n.startswith("test_"))


def _scenario_class(name: str) -> type:
    """nbgrader's test class with one scenario left (the others hidden), so that each scenario is
    a scope of its own for pytest-xdist (``--dist loadscope`` runs a class on one worker: one class
    of 41 would keep a worker for all of them). A scenario of DIFFERENCES is an expected failure
    (strict) with its reason, through a wrapper, so nbgrader's own function is left unmarked."""
    attrs: dict = {n: None for n in SCENARIOS if n != name}
    attrs["__doc__"] = f"nbgrader's {name}, with `autograde` run as `autograder grade`."
    if name in DIFFERENCES:
        test = getattr(suite.TestNbGraderAutograde, name)

        @functools.wraps(test)
        def wrapper(self, *args, __test=test, **kwargs):
            return __test(self, *args, **kwargs)

        attrs[name] = pytest.mark.xfail(reason=DIFFERENCES[name], strict=True)(wrapper)
    return type(f"Test_{name[len('test_') :]}", (suite.TestNbGraderAutograde,), attrs)


for _name in SCENARIOS:
    _cls = _scenario_class(_name)
    globals()[_cls.__name__] = _cls
del _name, _cls


def test_every_difference_names_a_scenario():
    """A difference listed for a scenario nbgrader no longer has would hide nothing: fail."""
    assert set(DIFFERENCES) <= set(SCENARIOS), set(DIFFERENCES) - set(SCENARIOS)
    assert len(SCENARIOS) == 41, SCENARIOS  # nbgrader 0.9.6's file: 41 test functions
